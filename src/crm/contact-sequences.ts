// POST /contacts/{id}/pause-sequence: pausing a live contact's sequences (src/sequences/lifecycle.ts).
import type { Tx } from '../../db/database.js';
import { notFound } from '../http/problems.js';
import { pauseSequences } from '../sequences/lifecycle.js';
import { isLiveContact } from './live-contacts.js';

/** Pauses the live contact's sequences in flight; 404 for a contact deleted, erased or unknown. */
export async function pauseContactSequences(trx: Tx, organizationId: string, id: string, reason: string | null) {
  const org = organizationId;
  const contact = await trx
    .selectFrom('contacts')
    .select('id')
    .where('organization_id', '=', org)
    .where('id', '=', id)
    .where(isLiveContact())
    .executeTakeFirst();
  if (!contact) throw notFound('contact');
  const pausedCount = await pauseSequences(trx, org, [contact.id], reason);
  return { contactId: contact.id, pausedCount };
}
