// A hard bounce, wherever it is learnt: a 5xx to the dispatcher's RCPT TO or DATA, or a delivery
// report (RFC 3464) that comes back later to the reply address. Either way: the send record is
// bounced (counted by the mailbox's bounce rate), the address gets a HARD_BOUNCE suppression, the
// sequence stops (PAUSED, reason hard_bounce, its queued steps cancelled), email.bounced is
// emitted, and the mailbox's health is checked. In the caller's transaction; returns the events.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { suppressAddress } from '../compliance/suppression-add.js';
import type { Clock } from '../platform/clock.js';
import type { EmitInput } from '../platform/events.js';
import { checkMailboxHealth } from './health.js';
import { cancelQueued } from './queue.js';

export interface HardBounce {
  /** The bounced send record, when known. */
  recordId: string | null;
  /** The address that bounced (a send record's recipient). */
  email: string;
  /** The contact; with no draft, the resource of email.bounced (one of the two is always known). */
  contactId: string | null;
  /** The sequence to stop; without one, the contact's sequences in sending (QUEUED, ACTIVE). */
  sequenceId: string | null;
  draftId: string | null;
  step: number | null;
  mailboxId: string | null;
  /** The SMTP reply code (dispatcher) or the DSN status (`5.1.1`). */
  code: number | string | null;
  /** What the server said, as stored on the record and the suppression entry. */
  diagnostic: string;
  /** Suppression entry source: `dispatcher`, `delivery report`. */
  source: string;
  /** Extra facts for the email.bounced payload (e.g. the inbound message id of a report). */
  extra?: Record<string, unknown>;
}

/** Applies a hard bounce; returns its events (none when the record was bounced already). */
export async function recordHardBounce(trx: Tx, org: string, b: HardBounce, clock: Clock): Promise<EmitInput[]> {
  if (b.recordId !== null) {
    const r = await sql<{ id: string }>`
      UPDATE send_records SET status = 'bounced', smtp_response = ${b.diagnostic.slice(0, 1000)}
      WHERE organization_id = ${org} AND id = ${b.recordId} AND status IN ('sending', 'sent', 'possibly_sent') RETURNING id`.execute(trx);
    if (r.rows.length === 0) return []; // a second report of the same bounce
  }
  const events: EmitInput[] = [];
  const added = await suppressAddress(trx, org, {
    email: b.email,
    reason: 'HARD_BOUNCE',
    source: b.source,
    notes: b.diagnostic.slice(0, 1000),
  });
  if (added) events.push(added.event);
  let pause = trx
    .updateTable('contact_sequences')
    .set({ status: 'PAUSED', paused_from: sql`status`, paused_at: sql<Date>`now_ms()`, updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', org)
    .where('status', 'in', ['QUEUED', 'ACTIVE']);
  if (b.sequenceId !== null) pause = pause.where('id', '=', b.sequenceId);
  else pause = pause.where('contact_id', '=', b.contactId ?? '');
  const paused = await pause.returning(['id', 'contact_id', 'paused_from']).execute();
  const stopped = b.sequenceId !== null ? [b.sequenceId] : paused.map((p) => p.id);
  if (stopped.length) await cancelQueued(trx, org, { sequenceIds: stopped }, 'sequence_not_active');
  const ref = { sequenceId: b.sequenceId, contactId: b.contactId, draftId: b.draftId, step: b.step };
  events.push({
    type: 'email.bounced',
    resource: b.draftId ? { type: 'Draft', id: b.draftId } : { type: 'Contact', id: b.contactId ?? '' },
    data: { ...ref, kind: 'hard', code: b.code, diagnostic: b.diagnostic, ...b.extra },
  });
  for (const p of paused) {
    events.push({
      type: 'sequence.paused',
      resource: { type: 'Sequence', id: p.id },
      data: { sequenceId: p.id, contactId: p.contact_id, reason: 'hard_bounce', pausedFrom: p.paused_from },
    });
  }
  if (b.mailboxId !== null) events.push(...(await checkMailboxHealth(trx, org, b.mailboxId, clock)));
  return events;
}
