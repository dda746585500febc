// The funnel computed from the raw rows (sends, replies, sequences, deals): the statement the
// service ran before the rollups of db/migrations/0033_funnel_rollups.sql, kept as the reference
// the rollup-based answer must equal (test/funnel-rollups.test.ts compares the two on random
// histories; the analytics bench prints both). Never served: its cost grows with the history.
import { CompiledQuery } from 'kysely';
import { type Db, type Tx, transactionOn } from '../../db/database.js';
import { COUNTED } from '../dispatch/ledger.js';
import { attributionCtes, type FunnelRow, NOT_REPLY_INTENTS, shapeFunnel, WINDOW_END, WINDOW_START } from './funnel.js';

/**
 * The reference statement: one row per grouping set (the totals, each product, each list), each with
 * every count and sum, plus the window's deals of all sources. `$1` organization, `$2` from, `$3`
 * to (dates, UTC, inclusive), `$4` NOT_REPLY_INTENTS.
 */
export function referenceFunnelQuery(organizationId: string, from: string, to: string): { text: string; values: unknown[] } {
  const t0 = WINDOW_START;
  const t1 = WINDOW_END;
  // The ledger's counted statuses as literals, so the partial index send_records_sequence_idx
  // (0015_analytics.sql, the same list) is provably usable in any plan.
  const counted = COUNTED.map((st) => `'${st}'`).join(', ');
  const text = `
WITH ${attributionCtes()}, sent AS (
  -- The cohort's sequences with a counted send: a semi-join, so the planner may hash the
  -- organization's sends (a long window) or probe the partial index per sequence (a short one).
  SELECT cs.id FROM contact_sequences cs
  WHERE cs.organization_id = $1 AND cs.created_at >= ${t0} AND cs.created_at < ${t1}
    AND EXISTS (
      SELECT 1 FROM send_records sr
      WHERE sr.organization_id = $1 AND sr.sequence_id = cs.id AND sr.sequence_id IS NOT NULL AND sr.status IN (${counted}))
), cohort AS (
  SELECT cs.id, cs.product_id, coalesce(cs.list_id, c.list_id) AS list_id, sent.id IS NOT NULL AS sent,
    EXISTS (
      SELECT 1 FROM messages m
      WHERE m.organization_id = $1 AND m.sequence_id = cs.id AND m.sequence_id IS NOT NULL AND m.direction = 'INBOUND' AND NOT m.automatic AND m.authenticated
        AND (m.intent IS NULL OR m.intent <> ALL($4::text[]))) AS replied,
    EXISTS (
      SELECT 1 FROM messages m
      WHERE m.organization_id = $1 AND m.sequence_id = cs.id AND m.sequence_id IS NOT NULL AND m.direction = 'INBOUND' AND NOT m.automatic AND m.authenticated
        AND m.intent = 'meeting_request') AS meeting_reply
  FROM contact_sequences cs
  LEFT JOIN contacts c ON c.organization_id = cs.organization_id AND c.id = cs.contact_id
  LEFT JOIN sent ON sent.id = cs.id
  WHERE cs.organization_id = $1 AND cs.created_at >= ${t0} AND cs.created_at < ${t1}
), grouped AS (
  SELECT GROUPING(co.product_id) AS by_product, GROUPING(co.list_id) AS by_list, co.product_id, co.list_id,
    count(*)::int AS started,
    count(*) FILTER (WHERE co.sent)::int AS sent,
    count(*) FILTER (WHERE co.sent AND co.replied)::int AS replied,
    count(*) FILTER (WHERE co.sent AND (co.meeting_reply OR coalesce(ds.meeting, false)))::int AS meeting,
    coalesce(sum(ds.deals), 0)::int AS deals,
    coalesce(sum(ds.won), 0)::int AS won,
    coalesce(sum(ds.won_cents), 0)::int8 AS won_cents,
    coalesce(sum(ds.open_cents), 0)::int8 AS open_cents
  FROM cohort co
  LEFT JOIN deal_sums ds ON ds.sequence_id = co.id
  GROUP BY GROUPING SETS ((), (co.product_id), (co.list_id))
)
SELECT g.by_product, g.by_list, g.product_id, g.list_id, p.name AS product_name, l.name AS list_name,
  g.started, g.sent, g.replied, g.meeting, g.deals, g.won, g.won_cents, g.open_cents,
  (SELECT count(*)::int FROM deals d WHERE d.organization_id = $1 AND d.created_at >= ${t0} AND d.created_at < ${t1}) AS all_deals
FROM grouped g
LEFT JOIN products p ON g.by_product = 0 AND p.organization_id = $1 AND p.id = g.product_id
LEFT JOIN contact_lists l ON g.by_list = 0 AND l.organization_id = $1 AND l.id = g.list_id AND l.deleted_at IS NULL`;
  return { text, values: [organizationId, from, to, NOT_REPLY_INTENTS] };
}

/** The funnel of the window from the raw rows, shaped exactly as computeFunnel shapes its answer. */
export async function computeFunnelReference(conn: Tx, organizationId: string, from: string, to: string) {
  const q = referenceFunnelQuery(organizationId, from, to);
  const result = await transactionOn(
    conn as Db,
    () => conn.executeQuery<FunnelRow>(CompiledQuery.raw(q.text, q.values)),
    'SET LOCAL plan_cache_mode = force_custom_plan',
  );
  return shapeFunnel(result.rows, from, to);
}
