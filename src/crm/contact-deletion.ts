// Soft delete of a contact (DELETE /contacts/{id}) and its undo within the window (the operator's
// restore). Erasure, which is irreversible, is src/compliance/erasure.ts.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { cancelQueued } from '../dispatch/queue.js';
import { notFound, ProblemError } from '../http/problems.js';
import { emit } from '../platform/events.js';
import { isoNN } from '../platform/ids.js';
import { lockAddress } from './contact-locks.js';
import { contactById } from './contact-view.js';
import { isLiveContact } from './live-contacts.js';

/** How long a soft delete can be undone (DELETE's undoAvailableUntil; the operator's restore). */
export const UNDO_WINDOW_MS = 30 * 86_400_000;

/** Soft-deletes the contact (idempotent: a repeat answers the first deletion's time); 404 unknown. */
export async function softDeleteContact(trx: Tx, organizationId: string, id: string) {
  const org = organizationId;
  const first = await trx
    .updateTable('contacts')
    .set({ deleted_at: sql<Date>`now_ms()`, updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', org)
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .returning('deleted_at')
    .executeTakeFirst();
  let deletedAt = first?.deleted_at ?? null;
  if (first) {
    await emit(trx, org, { type: 'contact.deleted', resource: { type: 'Contact', id }, data: { contactId: id } });
    // A removed contact is out of the send queue at once (and out of it for good).
    await cancelQueued(trx, org, { contactId: id }, 'contact_removed');
  } else {
    const prior = await trx
      .selectFrom('contacts')
      .select('deleted_at')
      .where('organization_id', '=', org)
      .where('id', '=', id)
      .executeTakeFirst();
    if (!prior) throw notFound('contact');
    deletedAt = prior.deleted_at;
  }
  const at = deletedAt!;
  return { id, deleted: true, deletedAt: isoNN(at), undoAvailableUntil: isoNN(new Date(at.getTime() + UNDO_WINDOW_MS)) };
}

/**
 * Restores a soft-deleted contact within its undo window (the operator row); a live contact
 * answers restored: false. 409 for an erased contact, an expired window, or a live record of the
 * same person filed since.
 */
export async function restoreContact(trx: Tx, organizationId: string, contactId: string) {
  const org = organizationId;
  const find = () =>
    trx
      .selectFrom('contacts')
      .select(['id', 'email_normalized', 'deleted_at', 'erased_at'])
      .where('organization_id', '=', org)
      .where('id', '=', contactId)
      .executeTakeFirst();
  const seen = await find();
  if (!seen) throw notFound('contact');
  // The address lock orders this against POST /contacts filing the same person again, and against erasure.
  await lockAddress(trx, org, seen.email_normalized);
  const c = (await find())!;
  if (c.erased_at !== null)
    throw new ProblemError('contact-erased', 'The contact was erased; erasure is irreversible, so it cannot be restored.');
  if (c.deleted_at === null) return { restored: false, contact: await contactById(trx, org, c.id) };
  const now = (await sql<{ now: Date }>`select now_ms() as now`.execute(trx)).rows[0].now;
  const until = new Date(c.deleted_at.getTime() + UNDO_WINDOW_MS);
  if (now.getTime() >= until.getTime()) {
    throw new ProblemError(
      'undo-window-expired',
      `The contact was deleted at ${isoNN(c.deleted_at)}; its undo window ended at ${isoNN(until)}.`,
      { undoAvailableUntil: isoNN(until) },
    );
  }
  // One live record per person: a record filed after the delete (any list) would be a second one.
  const live = await trx
    .selectFrom('contacts')
    .select('id')
    .where('organization_id', '=', org)
    .where('email_normalized', '=', c.email_normalized)
    .where('id', '<>', c.id)
    .where(isLiveContact())
    .orderBy('created_at')
    .limit(1)
    .executeTakeFirst();
  if (live) {
    throw new ProblemError(
      'contact-restore-conflict',
      `The same person has a live contact again (${live.id}), filed after this one was deleted; delete it first to restore this one.`,
      { conflictingContactId: live.id },
    );
  }
  await trx
    .updateTable('contacts')
    .set({ deleted_at: null, updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', org)
    .where('id', '=', c.id)
    .execute();
  await emit(trx, org, {
    type: 'contact.restored',
    resource: { type: 'Contact', id: c.id },
    data: { contactId: c.id, deletedAt: isoNN(c.deleted_at) },
  });
  return { restored: true, contact: await contactById(trx, org, c.id) };
}
