// Bounce-rate protection (Woodpecker's published default): a mailbox whose hard bounces over the
// last 28 days reach 2% of its sends, once it has sent at least 20, is paused, and the
// organization's health is recomputed (src/account/org-health.ts: org.health_changed when it changes, with
// the paused mailbox among its reasons). An operator resumes it (PATCH .../mailboxes/{id}); the
// deployment sender of an organization is paused through its sending settings (deploymentPaused).
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { BOUNCE_MAX_RATE, BOUNCE_MIN_SENDS, BOUNCE_WINDOW_DAYS, refreshOrgHealth } from '../account/org-health.js';
import type { Clock } from '../platform/clock.js';
import type { EmitInput } from '../platform/events.js';

/** Pauses the mailbox when its bounce rate says so; returns the organization's health change (read at the clock's now), if any. */
export async function checkMailboxHealth(trx: Tx, org: string, mailboxId: string, clock: Clock): Promise<EmitInput[]> {
  const r = await sql<{ sends: number; bounces: number }>`
    SELECT count(*)::int AS sends, count(*) FILTER (WHERE status = 'bounced')::int AS bounces
    FROM send_records WHERE organization_id = ${org} AND mailbox_id = ${mailboxId} AND status IN ('sent', 'possibly_sent', 'bounced')
      AND sent_at > now() - make_interval(days => ${BOUNCE_WINDOW_DAYS})`.execute(trx);
  const { sends, bounces } = r.rows[0];
  if (sends >= BOUNCE_MIN_SENDS && bounces / sends >= BOUNCE_MAX_RATE) {
    if (mailboxId === 'deployment') {
      await sql`UPDATE organizations SET sending = sending || '{"deploymentPaused": true}'::jsonb
        WHERE id = ${org} AND coalesce((sending->>'deploymentPaused')::boolean, false) = false`.execute(trx);
    } else {
      await sql`UPDATE mailboxes SET status = 'paused', status_reason = 'bounce_rate', paused_at = now_ms(), updated_at = now_ms()
        WHERE organization_id = ${org} AND id = ${mailboxId} AND status = 'verified'`.execute(trx);
    }
  }
  // A bounce moves the organization's bounce rate whether or not it paused anything.
  return [...(await refreshOrgHealth(trx, [org], clock)).values()];
}
