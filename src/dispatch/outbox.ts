// The dispatcher's work as the operator reads it, over every organization or one: the send queue
// (steps not sent yet, in the order they are due) and the outbox (messages sent, oldest first).
import { type Db, type Tx, withOrg, withSystem } from '../../db/database.js';
import { requireOrg } from '../account/organizations.js';
import { iso, isoNN } from '../platform/ids.js';

/**
 * Runs a read of one organization's rows bound to it on the API's role (`db`; 404 for an unknown
 * organization), or of every organization's on the cross-organization role (`systemDb`).
 */
export function readOrganizations<T>(db: Db, systemDb: Db, orgId: string | undefined, fn: (trx: Tx) => Promise<T>): Promise<T> {
  if (orgId === undefined) return withSystem(systemDb, fn);
  return withOrg(db, orgId, async (trx) => {
    await requireOrg(trx, orgId);
    return fn(trx);
  });
}

/** Queue rows not sent, by due time, step and id; of one organization when `organizationId` is given. */
export async function sendQueueRows(trx: Tx, organizationId: string | undefined) {
  let q = trx.selectFrom('send_queue').selectAll().where('state', '<>', 'sent');
  if (organizationId !== undefined) q = q.where('organization_id', '=', organizationId);
  const rows = await q.orderBy('scheduled_at').orderBy('step').orderBy('id').execute();
  return {
    data: rows.map((r) => ({
      id: r.id,
      sequenceId: r.sequence_id,
      draftId: r.draft_id,
      contactId: r.contact_id,
      step: r.step,
      scheduledAt: isoNN(r.scheduled_at),
      state: r.state as 'queued',
      heldBy: r.held_by,
      heldDetail: r.held_detail,
      nextAttemptAt: isoNN(r.next_attempt_at),
      attempts: r.attempts,
    })),
  };
}

/** Messages sent, by send time and id; of one organization when `organizationId` is given. */
export async function outboxMessages(trx: Tx, organizationId: string | undefined) {
  // The bodies are null once aged out (src/platform/retention.ts) or erased.
  let q = trx
    .selectFrom('send_records as r')
    .leftJoin('send_bodies as b', (j) => j.onRef('b.organization_id', '=', 'r.organization_id').onRef('b.send_record_id', '=', 'r.id'))
    .selectAll('r')
    .select(['b.text_body', 'b.html_body'])
    .where('r.sent_at', 'is not', null);
  if (organizationId !== undefined) q = q.where('r.organization_id', '=', organizationId);
  const rows = await q.orderBy('r.sent_at').orderBy('r.id').execute();
  return {
    data: rows.map((r) => ({
      id: r.id,
      to: r.to_email,
      from: r.from_email ?? '',
      subject: r.subject,
      text: r.text_body,
      html: r.html_body,
      headers: (r.headers ?? {}) as Record<string, string>,
      draftId: r.draft_id,
      contactId: r.contact_id,
      sentAt: iso(r.sent_at)!,
      status: r.status as 'sent',
      messageId: r.message_id,
      mailboxId: r.mailbox_id,
      step: r.step,
      bounceReason: r.bounce_reason,
      bounceClass: r.bounce_class as 'recipient' | null,
    })),
  };
}
