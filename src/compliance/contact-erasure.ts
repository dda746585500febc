// POST /contacts/{id}/erase up to the work itself (src/compliance/erasure.ts): who may erase, the
// erasure secret, the address lock, and the answer for a record erased already.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { lockAddress } from '../crm/contact-locks.js';
import type { AuthInfo } from '../http/handler.js';
import { notFound, ProblemError } from '../http/problems.js';
import { isoNN } from '../platform/ids.js';
import type { Services } from '../platform/services.js';
import { eraseAddress } from './erasure.js';
import { usableErasureSecret } from './suppression-match.js';

const ERASE_ROLES = ['MANAGER', 'ADMIN', 'OWNER'];
const ERASE_NOTE =
  'Every record of this organization with the same address was erased and the address is suppressed for good. ' +
  'Plus-tag variants of the address (name+tag@domain) are separate records and were not erased (they stay suppressed); erase each by its own id. ' +
  "Events already delivered to webhook subscribers are outside the service's reach.";

export interface EraseContactRequest {
  auth: Pick<AuthInfo, 'organizationId' | 'keyId' | 'userId' | 'userRole'>;
  requesterRef: string;
  reason: string;
  /** The deployment's ERASURE_HASH_SECRET. */
  erasureHashSecret: string | null;
  services: Services;
}

/**
 * Erases the contact and every record of the organization with its address (idempotent: an erased
 * record answers alreadyErased). 403 without a MANAGER, ADMIN or OWNER behind the key, 503 without
 * a usable secret, 404 unknown.
 */
export async function eraseContactRecords(trx: Tx, req: EraseContactRequest, id: string) {
  const { auth } = req;
  if (auth.userId === null || !ERASE_ROLES.includes(auth.userRole ?? '')) {
    throw new ProblemError(
      'role-required',
      'Erasing a contact needs an API key attributed to a person with role MANAGER, ADMIN or OWNER; the scope alone is not enough.',
    );
  }
  const secret = usableErasureSecret(req.erasureHashSecret);
  if (!secret) throw new ProblemError('erasure-not-configured');
  const org = auth.organizationId;
  const find = () =>
    trx
      .selectFrom('contacts')
      .select(['id', 'email_normalized', 'erased_at'])
      .where('organization_id', '=', org)
      .where('id', '=', id)
      .executeTakeFirst();
  const seen = await find();
  if (!seen) throw notFound('contact');
  // Erasures of one address queue on it before locking any record, so two erasures naming
  // different records of that address cannot deadlock; the second then finds it erased.
  await lockAddress(trx, org, seen.email_normalized);
  const contact = (await find())!;
  if (contact.erased_at !== null) {
    return {
      id: contact.id,
      erased: true,
      erasedAt: isoNN(contact.erased_at),
      alreadyErased: true,
      erasedContactIds: [],
      note: ERASE_NOTE,
    };
  }
  const at = (await sql<{ at: Date }>`select now_ms() as at`.execute(trx)).rows[0].at;
  const erasedContactIds = await eraseAddress(
    trx,
    {
      organizationId: org,
      requesterRef: req.requesterRef.trim(),
      reason: req.reason.trim(),
      keyId: auth.keyId,
      userId: auth.userId,
      secret,
      services: req.services,
    },
    contact.id,
    contact.email_normalized,
    at,
  );
  return { id: contact.id, erased: true, erasedAt: isoNN(at), alreadyErased: false, erasedContactIds, note: ERASE_NOTE };
}
