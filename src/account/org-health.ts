// Organization health: one state per organization (healthy, degraded, blocked) with its reasons,
// computed from what the service knows (mailboxes, bounce and complaint rates, webhook endpoints,
// the research budget, the bound on suppressions from unauthenticated mail). The state is stored on the organization; a change of the state or of its
// set of reasons emits org.health_changed. It is recomputed in the transaction of each change that
// can move it (recheckOrgHealth) and by the periodic sweep (src/account/org-health-sweep.ts).
// Health is a report: the gates (a paused mailbox, the kill switch) are what stop mail.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { UNVERIFIED_SUPPRESSION_SOURCE, UNVERIFIED_SUPPRESSIONS_PER_HOUR } from '../compliance/unverified-unsubscribes.js';
import { notFound } from '../http/problems.js';
import type { Clock } from '../platform/clock.js';
import { type EmitInput, emitMany } from '../platform/events.js';
import { usagePeriod } from './usage.js';

export type HealthState = 'healthy' | 'degraded' | 'blocked';
export type Severity = 'degraded' | 'blocked';

export interface HealthReason {
  code:
    | 'mailbox_paused'
    | 'mailbox_unverified'
    | 'no_sender'
    | 'bounce_rate'
    | 'complaint_rate'
    | 'webhook_endpoint_disabled'
    | 'research_budget_exhausted'
    | 'unverified_unsubscribe_limit';
  severity: Severity;
  [detail: string]: unknown;
}

/** Bounce-rate protection: a sender whose hard bounces over the window reach the rate, once it has sent the minimum, is paused (src/dispatch/health.ts). */
export const BOUNCE_WINDOW_DAYS = 28;
export const BOUNCE_MIN_SENDS = 20;
export const BOUNCE_MAX_RATE = 0.02;
/** Spam complaints (Gmail and Yahoo bulk-sender rules): aim under 0.1%, never reach 0.3%. */
export const COMPLAINT_DEGRADED_RATE = 0.001;
export const COMPLAINT_BLOCKED_RATE = 0.003;

interface Signals {
  id: string;
  health: HealthState;
  health_reasons: HealthReason[];
  sending: Record<string, unknown>;
  research_budget: number;
  has_verified: boolean;
  bad_mailboxes: { id: string; email: string; status: string; reason: string | null }[];
  sends: number;
  bounces: number;
  complaints: number;
  disabled_endpoints: { id: string; url: string }[];
  research_used: number;
  unverified_suppressions: number;
}

/**
 * One set-based read of every signal of some organizations (each subquery walks an index of one
 * organization), at `now` (the clock's): the windows end and the research budget's period is there.
 */
async function readSignals(trx: Tx, orgIds: string[], now: Date): Promise<Signals[]> {
  const window = sql`${now}::timestamptz - ${sql.lit(BOUNCE_WINDOW_DAYS)} * interval '1 day'`;
  const r = await sql<Signals>`
    SELECT o.id, o.health, o.health_reasons, o.sending, o.research_budget,
      EXISTS (SELECT 1 FROM mailboxes m WHERE m.organization_id = o.id AND m.status = 'verified') AS has_verified,
      (SELECT coalesce(json_agg(json_build_object('id', m.id, 'email', m.email, 'status', m.status, 'reason', m.status_reason) ORDER BY m.id), '[]')
         FROM mailboxes m WHERE m.organization_id = o.id AND m.status IN ('paused', 'failed')) AS bad_mailboxes,
      s.sends, s.bounces,
      (SELECT count(*)::int FROM events e WHERE e.organization_id = o.id AND e.type = 'email.complained' AND e.created_at > ${window}) AS complaints,
      (SELECT coalesce(json_agg(json_build_object('id', w.id, 'url', w.url) ORDER BY w.id), '[]')
         FROM webhook_endpoints w WHERE w.organization_id = o.id AND w.status = 'disabled') AS disabled_endpoints,
      (SELECT count(*)::int FROM research_runs r WHERE r.organization_id = o.id AND r.started_at >= ${usagePeriod(now).start}) AS research_used,
      -- A rate limit's window: the last hour of the real clock (src/compliance/unverified-unsubscribes.ts).
      (SELECT count(*)::int FROM suppression_entries se WHERE se.organization_id = o.id AND se.source = ${UNVERIFIED_SUPPRESSION_SOURCE}
         AND se.created_at > now() - interval '1 hour') AS unverified_suppressions
    FROM organizations o
    CROSS JOIN LATERAL (
      -- Hard bounces only (the recipient class, or a bounce of before the classes): a refusal of the
      -- sender counts against its mailbox (src/dispatch/health.ts), a soft failure against nothing.
      SELECT count(*)::int AS sends,
        count(*) FILTER (WHERE sr.status = 'bounced' AND coalesce(sr.bounce_class, 'recipient') = 'recipient')::int AS bounces
      FROM send_records sr WHERE sr.organization_id = o.id AND sr.sent_at > ${window} AND sr.status IN ('sent', 'possibly_sent', 'bounced')
    ) s
    WHERE o.id = ANY(${orgIds}::text[])
    ORDER BY o.id`.execute(trx);
  return r.rows;
}

const pct = (n: number, d: number) => Math.round((10_000 * n) / d) / 100;

/** The reasons the signals read at `now` give, in a stable order. */
export function reasonsOf(s: Signals, now: Date): HealthReason[] {
  const out: HealthReason[] = [];
  const allowDeployment = s.sending.allowDeploymentSender !== false;
  const deploymentPaused = s.sending.deploymentPaused === true;
  for (const m of s.bad_mailboxes) {
    out.push({
      code: m.status === 'paused' ? 'mailbox_paused' : 'mailbox_unverified',
      severity: 'degraded',
      mailboxId: m.id,
      email: m.email,
      reason: m.reason,
    });
  }
  if (allowDeployment && deploymentPaused)
    out.push({ code: 'mailbox_paused', severity: 'degraded', mailboxId: 'deployment', reason: null });
  if (!s.has_verified && !(allowDeployment && !deploymentPaused)) out.push({ code: 'no_sender', severity: 'blocked' });
  const window = { windowDays: BOUNCE_WINDOW_DAYS };
  if (s.sends >= BOUNCE_MIN_SENDS && s.bounces / s.sends >= BOUNCE_MAX_RATE) {
    out.push({
      code: 'bounce_rate',
      severity: 'degraded',
      bounces: s.bounces,
      sends: s.sends,
      ratePct: pct(s.bounces, s.sends),
      thresholdPct: BOUNCE_MAX_RATE * 100,
      ...window,
    });
  }
  if (s.sends >= BOUNCE_MIN_SENDS && s.complaints / s.sends >= COMPLAINT_DEGRADED_RATE) {
    const blocked = s.complaints / s.sends >= COMPLAINT_BLOCKED_RATE;
    out.push({
      code: 'complaint_rate',
      severity: blocked ? 'blocked' : 'degraded',
      complaints: s.complaints,
      sends: s.sends,
      ratePct: pct(s.complaints, s.sends),
      thresholdPct: (blocked ? COMPLAINT_BLOCKED_RATE : COMPLAINT_DEGRADED_RATE) * 100,
      ...window,
    });
  }
  for (const w of s.disabled_endpoints) out.push({ code: 'webhook_endpoint_disabled', severity: 'degraded', endpointId: w.id, url: w.url });
  if (s.research_budget > 0 && s.research_used >= s.research_budget) {
    out.push({
      code: 'research_budget_exhausted',
      severity: 'degraded',
      used: s.research_used,
      budget: s.research_budget,
      periodEnd: usagePeriod(now).end.toISOString(),
    });
  }
  if (s.unverified_suppressions >= UNVERIFIED_SUPPRESSIONS_PER_HOUR) {
    // Further unsubscribe requests from unauthenticated mail are held for a person to check.
    out.push({
      code: 'unverified_unsubscribe_limit',
      severity: 'degraded',
      suppressions: s.unverified_suppressions,
      limit: UNVERIFIED_SUPPRESSIONS_PER_HOUR,
      windowMinutes: 60,
    });
  }
  return out;
}

export function stateOf(reasons: HealthReason[]): HealthState {
  if (reasons.some((r) => r.severity === 'blocked')) return 'blocked';
  return reasons.length > 0 ? 'degraded' : 'healthy';
}

/** What a reason is about (its code and subject): figures that move within it are not a change. */
const identity = (reasons: HealthReason[]) =>
  reasons
    .map((r) => `${r.code}:${String(r.mailboxId ?? r.endpointId ?? '')}:${r.severity}`)
    .sort()
    .join('|');

/**
 * Recomputes and stores the health of some organizations; returns, per organization whose state
 * or set of reasons changed, its org.health_changed event (to emit in the same transaction). The
 * store is a compare-and-set against what was read, so two concurrent recomputations of the same
 * change emit it once.
 */
export async function refreshOrgHealth(trx: Tx, orgIds: string[], clock: Clock): Promise<Map<string, EmitInput>> {
  const changes = new Map<string, EmitInput>();
  if (orgIds.length === 0) return changes;
  const now = clock.now();
  const rows = await readSignals(trx, orgIds, now);
  const writes: { id: string; state: HealthState; reasons: string; was: string; wasReasons: string; changed: boolean }[] = [];
  for (const s of rows) {
    const reasons = reasonsOf(s, now);
    const state = stateOf(reasons);
    const changed = state !== s.health || identity(reasons) !== identity(s.health_reasons);
    writes.push({
      id: s.id,
      state,
      reasons: JSON.stringify(reasons),
      was: s.health,
      wasReasons: JSON.stringify(s.health_reasons),
      changed,
    });
    if (changed) {
      changes.set(s.id, {
        type: 'org.health_changed',
        resource: { type: 'Organization', id: s.id },
        data: { organizationId: s.id, from: s.health, to: state, reasons },
      });
    }
  }
  const stored = await sql<{ id: string }>`
    UPDATE organizations o SET health = v.state, health_reasons = v.reasons, health_checked_at = now_ms(),
      health_changed_at = CASE WHEN v.changed THEN now_ms() ELSE o.health_changed_at END
    FROM unnest(${writes.map((w) => w.id)}::text[], ${writes.map((w) => w.state)}::text[], ${writes.map((w) => w.reasons)}::jsonb[],
                ${writes.map((w) => w.was)}::text[], ${writes.map((w) => w.wasReasons)}::jsonb[], ${writes.map((w) => w.changed)}::boolean[])
         AS v(id, state, reasons, was, was_reasons, changed)
    WHERE o.id = v.id AND o.health = v.was AND o.health_reasons = v.was_reasons
    RETURNING o.id`.execute(trx);
  const won = new Set(stored.rows.map((r) => r.id));
  for (const id of [...changes.keys()]) if (!won.has(id)) changes.delete(id);
  return changes;
}

/** Recomputes one organization's health in the caller's transaction and emits the change, if any. */
export async function recheckOrgHealth(trx: Tx, org: string, clock: Clock): Promise<void> {
  const change = (await refreshOrgHealth(trx, [org], clock)).get(org);
  if (change) await emitMany(trx, org, [change]);
}

/** The health as the operator API shows it. */
export function healthBody(o: { health: string; health_reasons: unknown; health_changed_at: Date | null; health_checked_at: Date | null }) {
  return {
    state: o.health as HealthState,
    reasons: o.health_reasons as (HealthReason & { code: HealthReason['code'] })[],
    changedAt: o.health_changed_at ? o.health_changed_at.toISOString() : null,
    checkedAt: o.health_checked_at ? o.health_checked_at.toISOString() : null,
  };
}

/** The organization's stored health as the operator API shows it; 404 when there is no such organization. */
export async function organizationHealth(trx: Tx, orgId: string) {
  const o = await trx
    .selectFrom('organizations')
    .select(['health', 'health_reasons', 'health_changed_at', 'health_checked_at'])
    .where('id', '=', orgId)
    .executeTakeFirst();
  if (!o) throw notFound('organization');
  return healthBody(o);
}
