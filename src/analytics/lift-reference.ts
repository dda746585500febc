// The lift computed from the raw rows (assignments; contacts by company; inbound replies; meetings
// logged on deals; stage history and stages): the statements the service ran before the outcome
// rows of db/migrations/0036_lift_outcomes.sql, kept as the reference the served answer must equal
// (test/lift-rollups.test.ts compares the two on random histories). Never served: its cost grows
// with the organization's messages, activities and stage moves.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { type ArmRow, HORIZON_DAYS, shapeLift } from './lift.js';

/** Accounts: `meeting` (primary) and `positive` replies or meetings of their contacts within the horizon. */
async function emailArms(trx: Tx, org: string, at: Date): Promise<ArmRow[]> {
  const r = await sql<ArmRow>`
    WITH units AS (
      SELECT a.unit_id, a.arm, a.assigned_at, a.assigned_at + make_interval(hours => ${24 * HORIZON_DAYS.ai_email_lift}) AS until
      FROM experiment_assignments a
      WHERE a.organization_id = ${org} AND a.experiment = 'ai_email_lift'
        AND a.assigned_at <= ${at}::timestamptz - make_interval(hours => ${24 * HORIZON_DAYS.ai_email_lift})
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
      SELECT a.unit_id, a.arm, a.assigned_at, a.assigned_at + make_interval(hours => ${24 * HORIZON_DAYS.ai_actions}) AS until,
        coalesce((
          SELECT st.sort_order FROM deal_stage_history h
          JOIN deal_stages st ON st.organization_id = h.organization_id AND st.id = h.to_stage_id
          WHERE h.organization_id = ${org} AND h.deal_id = a.unit_id AND h.created_at <= a.assigned_at
          ORDER BY h.created_at DESC, h.id DESC LIMIT 1), 0) AS base_order
      FROM experiment_assignments a
      WHERE a.organization_id = ${org} AND a.experiment = 'ai_actions'
        AND a.assigned_at <= ${at}::timestamptz - make_interval(hours => ${24 * HORIZON_DAYS.ai_actions})
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

/** Both experiments from the raw rows, shaped exactly as computeLift shapes its answer. */
export async function computeLiftReference(trx: Tx, organizationId: string, at: Date) {
  return shapeLift(await emailArms(trx, organizationId, at), await actionArms(trx, organizationId, at), at);
}
