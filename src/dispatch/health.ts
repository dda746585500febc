// Bounce-rate protection (Woodpecker's published default): a mailbox whose hard bounces (failures
// of the recipient class) over the last 28 days reach 2% of its sends, once it has sent at least
// 20, is paused (reason bounce_rate); so is one whose refusals (failures of the sender class:
// blocks, reputation, spam, policy, authentication, rate limits) reach the same share (reason
// refusal_rate): a receiving side that keeps refusing the sender is harmed by more of its mail.
// The organization's health is then recomputed (src/account/org-health.ts: org.health_changed
// when it changes, with the paused mailbox among its reasons). An operator resumes it (PATCH
// .../mailboxes/{id}); the deployment sender of an organization is paused through its sending
// settings (deploymentPaused). The operator reads the counts and the refusals by reason on the
// mailbox (mailboxDeliverability).
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { BOUNCE_MAX_RATE, BOUNCE_MIN_SENDS, BOUNCE_WINDOW_DAYS, refreshOrgHealth } from '../account/org-health.js';
import { THROTTLE_REASONS } from '../mail/throttle.js';
import type { Clock } from '../platform/clock.js';
import type { EmitInput } from '../platform/events.js';

/** The sends a mailbox's rates count: those that went out, and those refused for good with a reason. */
const COUNTED_SEND = sql`(status IN ('sent', 'possibly_sent', 'bounced') OR bounce_class IS NOT NULL)`;
/** A hard bounce: a bounced send of the recipient class (or of before the classes, when every bounce was hard). */
const HARD_BOUNCE = sql`(status = 'bounced' AND coalesce(bounce_class, 'recipient') = 'recipient')`;

/** Pauses the mailbox when its bounce or refusal rate says so; returns the organization's health change (read at the clock's now), if any. */
export async function checkMailboxHealth(trx: Tx, org: string, mailboxId: string, clock: Clock): Promise<EmitInput[]> {
  // A throttle (a rate limit: src/mail/throttle.ts) is the receiving side's pace, not a refusal of the sender: never counted to pause.
  const r = await sql<{ sends: number; bounces: number; refusals: number }>`
    SELECT count(*)::int AS sends, count(*) FILTER (WHERE ${HARD_BOUNCE})::int AS bounces,
      count(*) FILTER (WHERE bounce_class = 'sender' AND coalesce(bounce_reason, '') <> ALL(${[...THROTTLE_REASONS]}::text[]))::int AS refusals
    FROM send_records WHERE organization_id = ${org} AND mailbox_id = ${mailboxId} AND ${COUNTED_SEND}
      AND sent_at > now() - make_interval(days => ${BOUNCE_WINDOW_DAYS})`.execute(trx);
  const { sends, bounces, refusals } = r.rows[0];
  const reason =
    sends < BOUNCE_MIN_SENDS
      ? null
      : bounces / sends >= BOUNCE_MAX_RATE
        ? 'bounce_rate'
        : refusals / sends >= BOUNCE_MAX_RATE
          ? 'refusal_rate'
          : null;
  if (reason !== null) {
    if (mailboxId === 'deployment') {
      await sql`UPDATE organizations SET sending = sending || '{"deploymentPaused": true}'::jsonb
        WHERE id = ${org} AND coalesce((sending->>'deploymentPaused')::boolean, false) = false`.execute(trx);
    } else {
      await sql`UPDATE mailboxes SET status = 'paused', status_reason = ${reason}, paused_at = now_ms(), updated_at = now_ms()
        WHERE organization_id = ${org} AND id = ${mailboxId} AND status = 'verified'`.execute(trx);
    }
  }
  // A bounce moves the organization's bounce rate whether or not it paused anything.
  return [...(await refreshOrgHealth(trx, [org], clock)).values()];
}

export interface Deliverability {
  windowDays: number;
  sends: number;
  hardBounces: number;
  refusals: number;
  refusalsByReason: { reason: string; count: number; lastAt: string }[];
}

/** What some mailboxes' sends met over the bounce-protection window, by mailbox id: the counts the rates read, and the refusals by reason. */
export async function mailboxDeliverability(trx: Tx, org: string, mailboxIds: string[]): Promise<Map<string, Deliverability>> {
  const out = new Map<string, Deliverability>(
    mailboxIds.map((id) => [id, { windowDays: BOUNCE_WINDOW_DAYS, sends: 0, hardBounces: 0, refusals: 0, refusalsByReason: [] }]),
  );
  if (mailboxIds.length === 0) return out;
  const r = await sql<{
    mailbox_id: string;
    reason: string | null;
    sends: number;
    bounces: number;
    refusals: number;
    last_at: Date | null;
  }>`
    SELECT mailbox_id, CASE WHEN bounce_class = 'sender' THEN coalesce(bounce_reason, 'undefined') END AS reason,
      count(*)::int AS sends, count(*) FILTER (WHERE ${HARD_BOUNCE})::int AS bounces,
      count(*) FILTER (WHERE bounce_class = 'sender')::int AS refusals, max(bounced_at) AS last_at
    FROM send_records WHERE organization_id = ${org} AND mailbox_id = ANY(${mailboxIds}::text[]) AND ${COUNTED_SEND}
      AND sent_at > now() - make_interval(days => ${BOUNCE_WINDOW_DAYS})
    GROUP BY 1, 2`.execute(trx);
  for (const row of r.rows) {
    const d = out.get(row.mailbox_id)!;
    d.sends += row.sends;
    d.hardBounces += row.bounces;
    d.refusals += row.refusals;
    if (row.reason !== null)
      d.refusalsByReason.push({ reason: row.reason, count: row.refusals, lastAt: (row.last_at ?? new Date(0)).toISOString() });
  }
  for (const d of out.values()) d.refusalsByReason.sort((a, b) => b.count - a.count || (a.reason < b.reason ? -1 : 1));
  return out;
}
