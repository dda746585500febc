// Bounce-rate protection (Woodpecker's published default): a mailbox whose hard bounces over the
// last 28 days reach 2% of its sends, once it has sent at least 20, is paused, and
// org.health_changed says so. An operator resumes it (PATCH .../mailboxes/{id}); the deployment
// sender of an organization is paused through its sending settings (deploymentPaused).
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { EmitInput } from '../events.js';

export const BOUNCE_WINDOW_DAYS = 28;
export const BOUNCE_MIN_SENDS = 20;
export const BOUNCE_MAX_RATE = 0.02;

export async function checkMailboxHealth(trx: Tx, org: string, mailboxId: string): Promise<EmitInput[]> {
  const r = await sql<{ sends: number; bounces: number }>`
    SELECT count(*)::int AS sends, count(*) FILTER (WHERE status = 'bounced')::int AS bounces
    FROM send_records WHERE organization_id = ${org} AND mailbox_id = ${mailboxId} AND status IN ('sent', 'possibly_sent', 'bounced')
      AND sent_at > now() - make_interval(days => ${BOUNCE_WINDOW_DAYS})`.execute(trx);
  const { sends, bounces } = r.rows[0];
  if (sends < BOUNCE_MIN_SENDS || bounces / sends < BOUNCE_MAX_RATE) return [];
  const paused = mailboxId === 'deployment'
    ? await sql<{ id: string }>`UPDATE organizations SET sending = sending || '{"deploymentPaused": true}'::jsonb
        WHERE id = ${org} AND coalesce((sending->>'deploymentPaused')::boolean, false) = false RETURNING id`.execute(trx)
    : await sql<{ id: string }>`UPDATE mailboxes SET status = 'paused', status_reason = 'bounce_rate', paused_at = now_ms(), updated_at = now_ms()
        WHERE organization_id = ${org} AND id = ${mailboxId} AND status = 'verified' RETURNING id`.execute(trx);
  if (paused.rows.length === 0) return [];
  return [{
    type: 'org.health_changed', resource: { type: 'Organization', id: org },
    data: {
      organizationId: org, mailboxId, status: 'paused', reason: 'bounce_rate', bounces, sends,
      bounceRatePct: Math.round((10_000 * bounces) / sends) / 100, windowDays: BOUNCE_WINDOW_DAYS, thresholdPct: BOUNCE_MAX_RATE * 100,
    },
  }];
}
