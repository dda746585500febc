// Whether one contact may be emailed now: the checks draft approval and POST /drafts/{id}/send
// make, written once and in one order: the contact is live (neither deleted nor erased), its
// address is not suppressed (src/compliance/suppression-match.ts), it is not tagged do-not-contact.
// The dispatcher's gates (src/dispatch/gates.ts) apply the same three rules set-based to a batch.
import type { Tx } from '../../db/database.js';
import { isLiveContactRow } from '../crm/live-contacts.js';
import { isDoNotContact } from './do-not-contact.js';
import { matchSuppression, type SuppressionRow } from './suppression-match.js';

/** Why a contact may not be emailed, the first rule it fails. */
export type ContactBlock =
  | { reason: 'contact_removed' }
  | { reason: 'suppressed'; entry: SuppressionRow | null }
  | { reason: 'do_not_contact' };

/** The first rule the contact fails, or null when it may be emailed. The contact must exist. */
export async function contactBlock(
  trx: Tx,
  org: string,
  contactId: string,
  erasureHashSecret: string | null,
): Promise<ContactBlock | null> {
  const contact = await trx
    .selectFrom('contacts')
    .select(['email_normalized', 'deleted_at', 'erased_at', 'tags'])
    .where('organization_id', '=', org)
    .where('id', '=', contactId)
    .executeTakeFirstOrThrow();
  if (!isLiveContactRow(contact)) return { reason: 'contact_removed' };
  const suppression = await matchSuppression(trx, org, contact.email_normalized, erasureHashSecret);
  if (suppression.suppressed) return { reason: 'suppressed', entry: suppression.entry };
  if (isDoNotContact(contact.tags)) return { reason: 'do_not_contact' };
  return null;
}
