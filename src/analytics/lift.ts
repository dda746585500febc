// Lift of the two holdout experiments (src/analytics/holdout.ts): per arm, the units whose horizon
// has passed and how many reached each endpoint within it; the primary endpoint's difference,
// treatment minus control, with its Newcombe hybrid score 95% interval. One statement per
// experiment, over experiment_assignments and lift_outcomes (a row per unit that reached an
// endpoint, recomputed as each writing transaction commits: db/migrations/0036_lift_outcomes.sql), so its cost
// follows the assignments, not the messages, activities and stage moves behind them.
// src/analytics/lift-reference.ts computes the same answer from the raw rows (the tests' oracle).
// Endpoints:
// - ai_email_lift (unit: account): `meeting`, a human, authenticated inbound meeting_request from
//   one of the account's contacts or a meeting logged with one; `positive`, such a reply that is
//   interested or a meeting_request; each within [assigned_at, assigned_at + horizon);
// - ai_actions (unit: deal): `won`, a move to a closed_won stage; `advanced`, that or a move to an
//   active stage later than the one at assignment; each after assigned_at, before the horizon.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { Experiment } from './holdout.js';
import { newcombeDifference, pct, round1 } from './stats.js';

/** Days (of 24 hours, whatever the session's time zone) after assignment in which an outcome counts (and after which a unit counts at all). */
export const HORIZON_DAYS: Record<Experiment, number> = { ai_email_lift: 30, ai_actions: 90 };

type Arm = 'control' | 'treatment';
export interface ArmRow {
  arm: Arm;
  assigned: number;
  hits1: number;
  hits2: number;
}

/**
 * Per arm of the experiment: the units assigned at least a horizon before `at`, and how many of
 * them reached each endpoint (a row of lift_outcomes with that instant set).
 */
async function arms(trx: Tx, org: string, experimentName: Experiment, at: Date): Promise<ArmRow[]> {
  const r = await sql<ArmRow>`
    SELECT a.arm, count(*)::int AS assigned, count(o.primary_at)::int AS hits1, count(o.secondary_at)::int AS hits2
    FROM experiment_assignments a
    LEFT JOIN lift_outcomes o ON o.organization_id = a.organization_id AND o.experiment = a.experiment AND o.unit_id = a.unit_id
    WHERE a.organization_id = ${org} AND a.experiment = ${experimentName}
      AND a.assigned_at <= ${at}::timestamptz - make_interval(hours => ${24 * HORIZON_DAYS[experimentName]})
    GROUP BY a.arm`.execute(trx);
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

/** Both experiments' answer from their arms' counts (the served and the reference computation share it). */
export function shapeLift(email: ArmRow[], actions: ArmRow[], at: Date) {
  return {
    experiments: {
      ai_email_lift: experiment('account', 'ai_email_lift', ['meeting', 'positive'], email, at),
      ai_actions: experiment('deal', 'ai_actions', ['won', 'advanced'], actions, at),
    },
  };
}

/** Both experiments as GET /analytics/lift answers them, computed at `at` (the clock's now). */
export async function computeLift(trx: Tx, organizationId: string, at: Date) {
  return shapeLift(await arms(trx, organizationId, 'ai_email_lift', at), await arms(trx, organizationId, 'ai_actions', at), at);
}
