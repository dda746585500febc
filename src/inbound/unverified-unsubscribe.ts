// Unsubscribe wording in a message that could not be authenticated (src/inbound/authentication.ts):
// the person may have written it (a reply from another client, a forward) or anyone may have, so it
// is honoured as far as a forgery can do little harm. The contact's sequences are paused (reason
// `unsubscribed`) and an action item asks a person to check it; the address is suppressed only when
// it is a contact we have mailed, and only while the organization's unverified suppressions of the
// last hour are under UNVERIFIED_SUPPRESSIONS_PER_HOUR (beyond it the request is held for that
// person, and the organization's health says why). A message naming no contact does nothing.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { assigneeFor } from '../account/people.js';
import { suppressAddress } from '../compliance/suppression-add.js';
import { UNVERIFIED_SUPPRESSION_SOURCE, UNVERIFIED_SUPPRESSIONS_PER_HOUR } from '../compliance/unverified-unsubscribes.js';
import type { EmitInput } from '../platform/events.js';
import { pauseSequences } from '../sequences/lifecycle.js';
import { openActionItem } from '../work/action-items.js';

export interface UnverifiedRequest {
  messageId: string;
  contactId: string | null;
  /** The contact's address (the one that would be suppressed). */
  contactEmail: string | null;
  sendRecordId: string | null;
  sequenceId: string | null;
  draftId: string | null;
  step: number | null;
}

/** Why the address was not suppressed: not a contact we mailed, or the hourly bound reached. */
export type Held = 'not_mailed' | 'limit' | null;

/** Applies an unauthenticated unsubscribe request; returns the events to emit and the effects done. */
export async function unverifiedUnsubscribe(trx: Tx, org: string, r: UnverifiedRequest): Promise<{ events: EmitInput[]; done: string[] }> {
  const events: EmitInput[] = [];
  const done: string[] = [];
  if (r.contactId === null) return { events, done };
  if ((await pauseSequences(trx, org, [r.contactId], 'unsubscribed')) > 0) done.push('paused');
  const mailed =
    r.contactEmail !== null &&
    (
      await sql<{ mailed: boolean }>`
        SELECT EXISTS (SELECT 1 FROM send_records WHERE organization_id = ${org} AND contact_id = ${r.contactId}
          AND status IN ('sent', 'possibly_sent', 'bounced')) AS mailed`.execute(trx)
    ).rows[0].mailed;
  let held: Held = mailed ? null : 'not_mailed';
  if (mailed && r.contactEmail !== null) {
    // One organization's requests are counted one at a time, so concurrent ones cannot pass the bound together.
    await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`unverified-unsubscribe:${org}`}, 0))`.execute(trx);
    const recent = (
      await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM suppression_entries
        WHERE organization_id = ${org} AND source = ${UNVERIFIED_SUPPRESSION_SOURCE} AND created_at > now() - interval '1 hour'`.execute(
        trx,
      )
    ).rows[0].n;
    if (recent >= UNVERIFIED_SUPPRESSIONS_PER_HOUR) {
      held = 'limit';
      done.push('suppression_held');
    } else {
      const added = await suppressAddress(trx, org, {
        email: r.contactEmail,
        reason: 'UNSUBSCRIBE',
        source: UNVERIFIED_SUPPRESSION_SOURCE,
      });
      if (added) {
        done.push('suppressed');
        events.push(added.event, {
          type: 'email.unsubscribed',
          resource: r.draftId ? { type: 'Draft', id: r.draftId } : { type: 'Contact', id: r.contactId },
          data: {
            messageId: r.messageId,
            contactId: r.contactId,
            sendRecordId: r.sendRecordId,
            sequenceId: r.sequenceId,
            draftId: r.draftId,
            step: r.step,
            source: UNVERIFIED_SUPPRESSION_SOURCE,
          },
        });
      }
    }
  }
  const outcome =
    held === 'limit'
      ? `The address was not suppressed: the organization reached ${UNVERIFIED_SUPPRESSIONS_PER_HOUR} suppressions from unverified requests in the last hour.`
      : held === 'not_mailed'
        ? 'The address was not suppressed: no message of ours went to this contact.'
        : 'The address was suppressed (source "unverified reply").';
  const item = await openActionItem(trx, org, {
    actionType: 'reply_unverified_unsubscribe',
    title: 'Check an unsubscribe request whose sender could not be verified',
    description: `A message asking to unsubscribe could not be authenticated (no reply token, no thread to our message, no aligned DMARC pass). The contact's sequences were paused. ${outcome} Read it with GET /messages?contactId=${r.contactId}; if the person wrote it, suppress the address, else resume the sequences.`,
    priority: 'high',
    salesPersonId: await assigneeFor(trx, org, r.contactId),
    aiGenerated: true,
    entityType: 'Contact',
    entityId: r.contactId,
    sourceKey: `reply:${r.messageId}`,
    details: { messageId: r.messageId, contactId: r.contactId, suppressed: done.includes('suppressed'), held },
  });
  if (item) done.push('action_item');
  return { events, done };
}
