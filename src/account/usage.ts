// Usage of an organization per period (a calendar month, UTC): one counter row, updated inside
// the transaction that uses what it counts, with the row locked, so a quota check and the use it
// allows commit together and no number of workers can overshoot the plan.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { Clock } from '../platform/clock.js';
import { emit } from '../platform/events.js';
import { draftsPerMonth } from './plans.js';

/** The usage period containing `now` (the clock's, src/platform/clock.ts): the calendar month in UTC. */
export function usagePeriod(now: Date): { start: Date; end: Date } {
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  return { start, end: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)) };
}

const periodKey = (p: { start: Date }) => p.start.toISOString().slice(0, 10);
/** The share of the monthly draft allowance at which quota.warning is emitted (once per period). */
export const QUOTA_WARNING_SHARE = 0.8;

export interface UsageRow {
  drafts_created: number;
  drafts_regenerated: number;
  sends_attempted: number;
  llm_tokens: number;
  llm_cost_millicents: number;
}

/** The period's counters (zero when nothing was used yet) and the organization's plan and draft allowance. */
export async function readUsage(trx: Tx, organizationId: string, now: Date): Promise<UsageRow & { plan: string; limit: number }> {
  const r = await sql<UsageRow & { plan: string; drafts_per_month: number | null }>`
    SELECT o.plan, o.drafts_per_month, coalesce(u.drafts_created, 0) AS drafts_created, coalesce(u.drafts_regenerated, 0) AS drafts_regenerated,
           coalesce(u.sends_attempted, 0) AS sends_attempted, coalesce(u.llm_tokens, 0)::int8 AS llm_tokens,
           coalesce(u.llm_cost_millicents, 0)::int8 AS llm_cost_millicents
    FROM organizations o
    LEFT JOIN usage_counters u ON u.organization_id = o.id AND u.period_start = ${periodKey(usagePeriod(now))}::date
    WHERE o.id = ${organizationId}`.execute(trx);
  const row = r.rows[0];
  return { ...row, limit: row.drafts_per_month ?? draftsPerMonth(row.plan) };
}

/** What the period's counters leave of the draft allowance. */
const remainingOf = (u: UsageRow & { limit: number }): number => Math.max(0, u.limit - u.drafts_created - u.drafts_regenerated);

/** Drafts the allowance still allows this period (a read, not a reservation). */
export async function draftsRemaining(trx: Tx, organizationId: string, clock: Clock): Promise<number> {
  return remainingOf(await readUsage(trx, organizationId, clock.now()));
}

/** GET /usage: the current period's use against the plan. */
export async function usageReport(trx: Tx, organizationId: string, clock: Clock) {
  const now = clock.now();
  const period = usagePeriod(now);
  const u = await readUsage(trx, organizationId, now);
  const limit = u.limit;
  return {
    periodStart: period.start.toISOString(),
    periodEnd: period.end.toISOString(),
    plan: { id: u.plan, draftsPerMonth: limit },
    drafts: {
      created: u.drafts_created,
      regenerated: u.drafts_regenerated,
      limit,
      remaining: remainingOf(u),
    },
    sends: { attempted: u.sends_attempted },
    // Cost is kept in thousandths of a cent; the contract reports whole cents.
    llm: { tokensUsed: u.llm_tokens, costCents: Math.round(u.llm_cost_millicents / 1000) },
  };
}

/**
 * Takes up to `wanted.created + wanted.regenerated` draft generations from the period's
 * allowance, first generations first, and records the model use. Returns how many of each may go
 * ahead. Emits quota.warning when this use crosses the warning share for the first time this period.
 */
export async function takeDrafts(
  trx: Tx,
  organizationId: string,
  wanted: { created: number; regenerated: number; llmTokens: number; llmCostMillicents: number },
  clock: Clock,
): Promise<{ created: number; regenerated: number }> {
  const period = usagePeriod(clock.now());
  const key = periodKey(period);
  await sql`INSERT INTO usage_counters (organization_id, period_start) VALUES (${organizationId}, ${key}) ON CONFLICT DO NOTHING`.execute(
    trx,
  );
  const cur = await trx
    .selectFrom('usage_counters')
    .select(['drafts_created', 'drafts_regenerated', 'quota_warned_at'])
    .where('organization_id', '=', organizationId)
    .where('period_start', '=', key)
    .forUpdate()
    .executeTakeFirstOrThrow();
  const o = await trx
    .selectFrom('organizations')
    .select(['plan', 'drafts_per_month'])
    .where('id', '=', organizationId)
    .executeTakeFirstOrThrow();
  const limit = o.drafts_per_month ?? draftsPerMonth(o.plan);
  const before = cur.drafts_created + cur.drafts_regenerated;
  let left = Math.max(0, limit - before);
  const created = Math.min(wanted.created, left);
  left -= created;
  const regenerated = Math.min(wanted.regenerated, left);
  const after = before + created + regenerated;
  const warn = cur.quota_warned_at === null && limit > 0 && after >= QUOTA_WARNING_SHARE * limit;
  await trx
    .updateTable('usage_counters')
    .set({
      drafts_created: sql`drafts_created + ${created}`,
      drafts_regenerated: sql`drafts_regenerated + ${regenerated}`,
      llm_tokens: sql`llm_tokens + ${wanted.llmTokens}`,
      llm_cost_millicents: sql`llm_cost_millicents + ${Math.round(wanted.llmCostMillicents)}`,
      ...(warn ? { quota_warned_at: sql<Date>`now_ms()` } : {}),
    })
    .where('organization_id', '=', organizationId)
    .where('period_start', '=', key)
    .execute();
  if (warn) {
    await emit(trx, organizationId, {
      type: 'quota.warning',
      resource: { type: 'Organization', id: organizationId },
      data: {
        quota: 'drafts_per_month',
        limit,
        used: after,
        remaining: Math.max(0, limit - after),
        percentUsed: Math.floor((100 * after) / limit),
        periodStart: period.start.toISOString(),
        periodEnd: period.end.toISOString(),
      },
    });
  }
  return { created, regenerated };
}
