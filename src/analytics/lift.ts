// Lift of the two holdout experiments (src/analytics/holdout.ts): per arm, the units whose horizon
// has passed and how many reached each endpoint within it; the primary endpoint's difference,
// treatment minus control, with its Newcombe hybrid score 95% interval. One statement per
// experiment, over experiment_assignments and the outcome tables' organization-led indexes.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { Experiment } from './holdout.js';
import { newcombeDifference, pct, round1 } from './stats.js';

/** Days after assignment in which an outcome counts (and after which a unit counts at all). */
export const HORIZON_DAYS: Record<Experiment, number> = { ai_email_lift: 30, ai_actions: 90 };

type Arm = 'control' | 'treatment';
interface ArmRow {
  arm: Arm;
  assigned: number;
  hits1: number;
  hits2: number;
}

/** Accounts: `meeting` (primary) and `positive` replies or meetings of their contacts within the horizon. */
async function emailArms(trx: Tx, org: string, at: Date): Promise<ArmRow[]> {
  const r = await sql<ArmRow>`
    WITH units AS (
      SELECT a.unit_id, a.arm, a.assigned_at, a.assigned_at + make_interval(days => ${HORIZON_DAYS.ai_email_lift}) AS until
      FROM experiment_assignments a
      WHERE a.organization_id = ${org} AND a.experiment = 'ai_email_lift'
        AND a.assigned_at <= ${at}::timestamptz - make_interval(days => ${HORIZON_DAYS.ai_email_lift})
    ), outcomes AS (
      SELECT u.arm,
        EXISTS (
          SELECT 1 FROM contacts c
          JOIN messages m ON m.organization_id = c.organization_id AND m.contact_id = c.id
          WHERE c.organization_id = ${org} AND c.company_id = u.unit_id AND m.direction = 'INBOUND' AND NOT m.automatic AND m.authenticated
            AND m.intent = 'meeting_request' AND m.created_at >= u.assigned_at AND m.created_at < u.until)
        OR EXISTS (
          SELECT 1 FROM contacts c
          JOIN deal_activities da ON da.organization_id = c.organization_id AND da.contact_id = c.id AND da.kind = 'meeting'
          WHERE c.organization_id = ${org} AND c.company_id = u.unit_id AND da.occurred_at >= u.assigned_at AND da.occurred_at < u.until) AS meeting,
        EXISTS (
          SELECT 1 FROM contacts c
          JOIN messages m ON m.organization_id = c.organization_id AND m.contact_id = c.id
          WHERE c.organization_id = ${org} AND c.company_id = u.unit_id AND m.direction = 'INBOUND' AND NOT m.automatic AND m.authenticated
            AND m.intent IN ('interested', 'meeting_request') AND m.created_at >= u.assigned_at AND m.created_at < u.until) AS positive
      FROM units u
    )
    SELECT arm, count(*)::int AS assigned, (count(*) FILTER (WHERE meeting))::int AS hits1, (count(*) FILTER (WHERE positive))::int AS hits2
    FROM outcomes GROUP BY arm`.execute(trx);
  return r.rows;
}

/** Deals: `won` (primary) and `advanced` (to won, or to a later active stage than the one at assignment) within the horizon. */
async function actionArms(trx: Tx, org: string, at: Date): Promise<ArmRow[]> {
  const r = await sql<ArmRow>`
    WITH units AS (
      SELECT a.unit_id, a.arm, a.assigned_at, a.assigned_at + make_interval(days => ${HORIZON_DAYS.ai_actions}) AS until,
        coalesce((
          SELECT st.sort_order FROM deal_stage_history h
          JOIN deal_stages st ON st.organization_id = h.organization_id AND st.id = h.to_stage_id
          WHERE h.organization_id = ${org} AND h.deal_id = a.unit_id AND h.created_at <= a.assigned_at
          ORDER BY h.created_at DESC, h.id DESC LIMIT 1), 0) AS base_order
      FROM experiment_assignments a
      WHERE a.organization_id = ${org} AND a.experiment = 'ai_actions'
        AND a.assigned_at <= ${at}::timestamptz - make_interval(days => ${HORIZON_DAYS.ai_actions})
    ), moves AS (
      SELECT u.unit_id, u.arm, st.category, st.sort_order, u.base_order
      FROM units u
      JOIN deal_stage_history h ON h.organization_id = ${org} AND h.deal_id = u.unit_id AND h.created_at > u.assigned_at AND h.created_at < u.until
      JOIN deal_stages st ON st.organization_id = h.organization_id AND st.id = h.to_stage_id
    ), outcomes AS (
      SELECT u.arm,
        EXISTS (SELECT 1 FROM moves m WHERE m.unit_id = u.unit_id AND m.category = 'closed_won') AS won,
        EXISTS (SELECT 1 FROM moves m WHERE m.unit_id = u.unit_id
          AND (m.category = 'closed_won' OR (m.category = 'active' AND m.sort_order > m.base_order))) AS advanced
      FROM units u
    )
    SELECT arm, count(*)::int AS assigned, (count(*) FILTER (WHERE won))::int AS hits1, (count(*) FILTER (WHERE advanced))::int AS hits2
    FROM outcomes GROUP BY arm`.execute(trx);
  return r.rows;
}

type EndpointKey = 'meeting' | 'positive' | 'won' | 'advanced';

function experiment<U extends 'account' | 'deal'>(
  unit: U,
  experimentName: Experiment,
  keys: readonly [EndpointKey, EndpointKey],
  rows: ArmRow[],
  at: Date,
) {
  const arm = (name: Arm) => {
    const r = rows.find((x) => x.arm === name) ?? { assigned: 0, hits1: 0, hits2: 0 };
    return {
      row: r,
      bucket: {
        assigned_count: r.assigned,
        endpoints: [
          { key: keys[0], hits_count: r.hits1, perAssigned_pct: pct(r.hits1, r.assigned) },
          { key: keys[1], hits_count: r.hits2, perAssigned_pct: pct(r.hits2, r.assigned) },
        ],
      },
    };
  };
  const control = arm('control');
  const treatment = arm('treatment');
  const diff = newcombeDifference(treatment.row.hits1, treatment.row.assigned, control.row.hits1, control.row.assigned);
  return {
    unit,
    control: control.bucket,
    treatment: treatment.bucket,
    horizonDays_count: HORIZON_DAYS[experimentName],
    horizonAt: at.toISOString(),
    lift_pp: diff ? round1(100 * diff.d) : null,
    ci95Low_pp: diff ? round1(100 * diff.low) : null,
    ci95High_pp: diff ? round1(100 * diff.high) : null,
  };
}

/** Both experiments as GET /analytics/lift answers them, computed at `at` (the clock's now). */
export async function computeLift(trx: Tx, organizationId: string, at: Date) {
  const [email, actions] = [await emailArms(trx, organizationId, at), await actionArms(trx, organizationId, at)];
  return {
    experiments: {
      ai_email_lift: experiment('account', 'ai_email_lift', ['meeting', 'positive'], email, at),
      ai_actions: experiment('deal', 'ai_actions', ['won', 'advanced'], actions, at),
    },
  };
}
