// The outbound funnel of a window: one set-based statement over the day rollups the triggers of
// 0033_funnel_rollups.sql keep exact (docs/analytics.md), and over at most DEAL_SCAN_LIMIT deals
// through indexes that lead with the organization (0015_analytics.sql). src/analytics/
// funnel-reference.ts computes the same answer from the raw rows (the tests' oracle). The rules, which spec/paths/analytics_funnel.yaml and
// spec/DECISIONS.md state for users:
// - cohort: the sequences created in the window; their sends, human replies (authenticated ones,
//   src/inbound/authentication.ts) and meetings count whenever they happened (a reply or meeting
//   only on a sequence that also counts as sent);
// - attribution: each deal created in the window (the first DEAL_SCAN_LIMIT, oldest first) is
//   credited to at most one sequence, the latest one started within ATTRIBUTION_LOOKBACK_DAYS
//   before the deal, among its contacts' sequences that had sent before the deal (ties: smaller
//   id); the cohort's buckets count the deals credited to their sequences.
import { CompiledQuery } from 'kysely';
import { type Db, type Tx, transactionOn } from '../../db/database.js';
import { COUNTED } from '../dispatch/ledger.js';
import { invalid } from '../http/problems.js';
import { pct } from './stats.js';

export const MAX_WINDOW_DAYS = 366;
export const DEAL_SCAN_LIMIT = 5000;
export const ATTRIBUTION_LOOKBACK_DAYS = 90;
/** ratesTrusted needs this many replied sequences and this many sent sequences without a reply. */
export const MIN_TRUSTED_OUTCOMES = 10;
/** Intents of inbound mail that is never a reply, even when a person's address sent it. */
export const NOT_REPLY_INTENTS = ['out_of_office', 'bounce', 'complaint'];

const DAY_MS = 86_400_000;

/** The window's size in inclusive days; 400 (with the max-window header) when `from` is after `to` or it is too long. */
export function checkWindow(from: string, to: string): number {
  const days = (Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`)) / DAY_MS + 1;
  if (days < 1) throw invalid(`from (${from}) is after to (${to}).`, 'from');
  if (days > MAX_WINDOW_DAYS) {
    throw invalid(`The window spans ${days} days; at most ${MAX_WINDOW_DAYS} (both dates inclusive).`, 'to');
  }
  return days;
}

/** The window's instants as expressions of the parameters `$2` and `$3` (not a CTE), so the planner sees them. */
export const WINDOW_START = `(($2::date)::timestamp AT TIME ZONE 'UTC')`;
export const WINDOW_END = `(($3::date + 1)::timestamp AT TIME ZONE 'UTC')`;

/**
 * The attribution, read from the raw rows and bounded by DEAL_SCAN_LIMIT: the window's first deals
 * (`scanned`), the sequence each is credited to (`credit`), and per credited sequence its deals,
 * won deals, won and open values and whether one of them has a meeting (`deal_sums`). `$1`
 * organization, `$2` from, `$3` to. Shared by the served statement and the reference one.
 */
export function attributionCtes(): string {
  // The ledger's counted statuses as literals, so the partial index send_records_sequence_idx
  // (0015_analytics.sql, the same list) is provably usable in any plan.
  const counted = COUNTED.map((st) => `'${st}'`).join(', ');
  return `scanned AS (
  SELECT d.id, d.created_at, d.primary_contact_id, d.value_cents, st.category
  FROM deals d
  LEFT JOIN deal_stages st ON st.organization_id = d.organization_id AND st.id = d.stage_id
  WHERE d.organization_id = $1 AND d.created_at >= ${WINDOW_START} AND d.created_at < ${WINDOW_END}
  ORDER BY d.created_at, d.id
  LIMIT ${DEAL_SCAN_LIMIT}
), credit AS (
  SELECT DISTINCT ON (s.id) s.id AS deal_id, cs.id AS sequence_id, s.value_cents, s.category
  FROM scanned s
  CROSS JOIN LATERAL (
    SELECT dc.contact_id FROM deal_contacts dc WHERE dc.organization_id = $1 AND dc.deal_id = s.id
    UNION
    SELECT s.primary_contact_id WHERE s.primary_contact_id IS NOT NULL
  ) k
  JOIN contact_sequences cs ON cs.organization_id = $1 AND cs.contact_id = k.contact_id
    AND cs.created_at <= s.created_at AND cs.created_at >= s.created_at - interval '${ATTRIBUTION_LOOKBACK_DAYS} days'
  WHERE EXISTS (
    SELECT 1 FROM send_records sr
    WHERE sr.organization_id = $1 AND sr.sequence_id = cs.id AND sr.sequence_id IS NOT NULL
      AND sr.status IN (${counted}) AND sr.sent_at <= s.created_at)
  ORDER BY s.id, cs.created_at DESC, cs.id
), deal_sums AS (
  SELECT c.sequence_id,
    count(*) AS deals,
    count(*) FILTER (WHERE c.category = 'closed_won') AS won,
    coalesce(sum(c.value_cents) FILTER (WHERE c.category = 'closed_won'), 0) AS won_cents,
    coalesce(sum(c.value_cents) FILTER (WHERE c.category IS DISTINCT FROM 'closed_won' AND c.category IS DISTINCT FROM 'closed_lost'), 0) AS open_cents,
    bool_or(EXISTS (
      SELECT 1 FROM deal_activities da WHERE da.organization_id = $1 AND da.deal_id = c.deal_id AND da.kind = 'meeting')) AS meeting
  FROM credit c
  GROUP BY c.sequence_id
)`;
}

/**
 * The funnel statement: one row per grouping set (the totals, each product, each list), each with
 * every count and sum, plus the window's deals of all sources. `$1` organization, `$2` from, `$3`
 * to (dates, UTC, inclusive). The cohort's counts come from the day rollups (funnel_days, one row
 * per day, product and list: their number follows the window, not the sends behind it, plus the
 * deltas of the last minute funnel_day_deltas holds until the fold job moves them), the
 * attribution from at most DEAL_SCAN_LIMIT deals, whose credited sequences add their deals and,
 * when no meeting reply already counted them, a meeting from a deal (funnel_sequences holds each
 * sequence's flags). Exported so the bench runs the very same SQL bare.
 */
export function funnelQuery(organizationId: string, from: string, to: string): { text: string; values: unknown[] } {
  const text = `
WITH ${attributionCtes()}, credited AS (
  SELECT f.product_key, f.list_key, ds.deals, ds.won, ds.won_cents, ds.open_cents,
    (f.sends > 0 AND f.meeting_replies = 0 AND ds.meeting) AS meeting_by_deal
  FROM deal_sums ds
  JOIN funnel_sequences f ON f.organization_id = $1 AND f.sequence_id = ds.sequence_id
  WHERE f.day >= $2::date AND f.day <= $3::date
), parts AS (
  SELECT r.product_key, r.list_key, r.started, r.sent, r.replied, r.meeting_replied AS meeting,
    0 AS deals, 0 AS won, 0::int8 AS won_cents, 0::int8 AS open_cents
  FROM funnel_days r
  WHERE r.organization_id = $1 AND r.day >= $2::date AND r.day <= $3::date
  UNION ALL
  SELECT r.product_key, r.list_key, r.started, r.sent, r.replied, r.meeting_replied, 0, 0, 0, 0
  FROM funnel_day_deltas r
  WHERE r.organization_id = $1 AND r.day >= $2::date AND r.day <= $3::date
  UNION ALL
  SELECT c.product_key, c.list_key, 0, 0, 0, c.meeting_by_deal::int, c.deals, c.won, c.won_cents, c.open_cents
  FROM credited c
), grouped AS (
  SELECT GROUPING(p.product_key) AS by_product, GROUPING(p.list_key) AS by_list,
    nullif(p.product_key, '') AS product_id, nullif(p.list_key, '') AS list_id,
    coalesce(sum(p.started), 0)::int AS started,
    coalesce(sum(p.sent), 0)::int AS sent,
    coalesce(sum(p.replied), 0)::int AS replied,
    coalesce(sum(p.meeting), 0)::int AS meeting,
    coalesce(sum(p.deals), 0)::int AS deals,
    coalesce(sum(p.won), 0)::int AS won,
    coalesce(sum(p.won_cents), 0)::int8 AS won_cents,
    coalesce(sum(p.open_cents), 0)::int8 AS open_cents
  FROM parts p
  GROUP BY GROUPING SETS ((), (p.product_key), (p.list_key))
  -- A product or list is a row when a cohort sequence has it (the totals always are).
  HAVING sum(p.started) > 0 OR (GROUPING(p.product_key) = 1 AND GROUPING(p.list_key) = 1)
)
SELECT g.by_product, g.by_list, g.product_id, g.list_id, pr.name AS product_name, l.name AS list_name,
  g.started, g.sent, g.replied, g.meeting, g.deals, g.won, g.won_cents, g.open_cents,
  (SELECT coalesce(sum(dd.created), 0)::int FROM deal_days dd WHERE dd.organization_id = $1 AND dd.day >= $2::date AND dd.day <= $3::date) AS all_deals
FROM grouped g
LEFT JOIN products pr ON g.by_product = 0 AND pr.organization_id = $1 AND pr.id = g.product_id
LEFT JOIN contact_lists l ON g.by_list = 0 AND l.organization_id = $1 AND l.id = g.list_id AND l.deleted_at IS NULL`;
  return { text, values: [organizationId, from, to] };
}

export interface FunnelRow {
  by_product: number;
  by_list: number;
  product_id: string | null;
  list_id: string | null;
  product_name: string | null;
  list_name: string | null;
  started: number;
  sent: number;
  replied: number;
  meeting: number;
  deals: number;
  won: number;
  won_cents: number;
  open_cents: number;
  all_deals: number;
}

function bucket(r: FunnelRow, key: string | null, label: string | null) {
  return {
    key,
    label,
    sequencesStarted_count: r.started,
    sequencesSent_count: r.sent,
    sequencesReplied_count: r.replied,
    sequencesWithMeeting_count: r.meeting,
    dealsAttributed_count: r.deals,
    dealsWon_count: r.won,
    wonValue_cents: r.won_cents,
    openValue_cents: r.open_cents,
    sentPerSequenceStarted_pct: pct(r.sent, r.started),
    repliedPerSequenceSent_pct: pct(r.replied, r.sent),
    meetingPerSequenceSent_pct: pct(r.meeting, r.sent),
    dealsPerSequenceStarted_pct: pct(r.deals, r.started),
    wonPerDealAttributed_pct: pct(r.won, r.deals),
    ratesTrusted: r.replied >= MIN_TRUSTED_OUTCOMES && r.sent - r.replied >= MIN_TRUSTED_OUTCOMES,
  };
}

export type FunnelBucket = ReturnType<typeof bucket>;

/** Rows by sequences started, most first, then key (the null key last). */
function ordered(rows: FunnelBucket[]): FunnelBucket[] {
  return rows.sort(
    (a, b) =>
      b.sequencesStarted_count - a.sequencesStarted_count ||
      (a.key === null ? 1 : 0) - (b.key === null ? 1 : 0) ||
      (a.key !== null && b.key !== null ? (a.key < b.key ? -1 : a.key > b.key ? 1 : 0) : 0),
  );
}

/** The answer from the statement's rows (this one's or the reference's: the same shape). */
export function shapeFunnel(rows: FunnelRow[], from: string, to: string) {
  const total = rows.find((r) => r.by_product === 1 && r.by_list === 1)!;
  return {
    from,
    to,
    totals: bucket(total, null, null),
    byProduct: ordered(rows.filter((r) => r.by_product === 0).map((r) => bucket(r, r.product_id, r.product_name))),
    byList: ordered(rows.filter((r) => r.by_list === 0).map((r) => bucket(r, r.list_id, r.list_name))),
    attribution: { dealsCreatedAllSources_count: total.all_deals },
    truncation: { dealScanTruncated: total.all_deals > DEAL_SCAN_LIMIT },
  };
}

/**
 * The funnel of the window. Runs on the request's connection in a transaction of its own with
 * custom plans: a generic plan cannot know how much of the organization a window covers.
 */
export async function computeFunnel(conn: Tx, organizationId: string, from: string, to: string) {
  const q = funnelQuery(organizationId, from, to);
  const result = await transactionOn(
    conn as Db,
    () => conn.executeQuery<FunnelRow>(CompiledQuery.raw(q.text, q.values)),
    'SET LOCAL plan_cache_mode = force_custom_plan',
  );
  return shapeFunnel(result.rows, from, to);
}
