// The suppression list as the API reads and edits it: an address's status, the page of entries,
// the MANUAL_BLOCK of an address (POST /suppression), the lifting of an address's own entry
// (DELETE /suppression) and the operator's DOMAIN entry. Whether an address is suppressed is
// decided by the one matching rule (suppression-match.ts); every entry is added by suppressAddress.
import type { Tx } from '../../db/database.js';
import { normalizeEmail } from '../crm/domains.js';
import { keyset, page } from '../http/paging.js';
import { emit } from '../platform/events.js';
import { suppressAddress } from './suppression-add.js';
import { toSuppressionEntry } from './suppression-entries.js';
import { matchSuppression } from './suppression-match.js';

/** Whether the address is suppressed, with the entry that suppresses it (none for a hash-only match). */
export async function suppressionOf(trx: Tx, organizationId: string, email: string, secret: string | null) {
  const normalized = normalizeEmail(email);
  const m = await matchSuppression(trx, organizationId, normalized, secret);
  return { email: normalized, suppressed: m.suppressed, entry: m.entry ? toSuppressionEntry(m.entry) : null };
}

/** A page of the organization's entries, newest first. */
export async function suppressionPage(trx: Tx, organizationId: string, query: { cursor?: string; limit?: number }) {
  const limit = query.limit ?? 50;
  const q = trx.selectFrom('suppression_entries').selectAll().where('organization_id', '=', organizationId);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return page(rows, limit, (r) => ({ at: r.created_at, id: r.id }), toSuppressionEntry);
}

/**
 * Adds the address's own MANUAL_BLOCK entry; an existing live entry is left as it is. An erased
 * address is already suppressed for good by its hash and is never written down in clear again.
 */
export async function blockAddress(
  trx: Tx,
  organizationId: string,
  input: { email: string; reason: string; notes?: string | null },
  secret: string | null,
) {
  const email = normalizeEmail(input.email);
  const current = await matchSuppression(trx, organizationId, email, secret);
  if (current.suppressed && current.entry === null) return { email, suppressed: true };
  // An expired entry of the address is renewed in place; a live one stays untouched (no event).
  const added = await suppressAddress(trx, organizationId, {
    email,
    reason: 'MANUAL_BLOCK',
    source: input.reason,
    notes: input.notes ?? null,
  });
  if (added) await emit(trx, organizationId, added.event);
  return { email, suppressed: true };
}

/**
 * Lifts the address's own entry only: DOMAIN entries and erasure hashes stay in force, and the
 * answer's `suppressed` says whether one of them still holds.
 */
export async function liftAddress(trx: Tx, organizationId: string, email: string, secret: string | null) {
  const normalized = normalizeEmail(email);
  const removed = await trx
    .deleteFrom('suppression_entries')
    .where('organization_id', '=', organizationId)
    .where('level', '=', 'ADDRESS')
    .where('email', '=', normalized)
    .returning('id')
    .executeTakeFirst();
  if (removed) {
    await emit(trx, organizationId, {
      type: 'suppression.removed',
      resource: { type: 'SuppressionEntry', id: removed.id },
      data: { email: normalized, level: 'ADDRESS' },
    });
  }
  const after = await matchSuppression(trx, organizationId, normalized, secret);
  return { email: normalized, suppressed: after.suppressed };
}

/** The operator's DOMAIN entry (MANUAL_BLOCK) for a normalized domain: the entry, new or as it was. */
export async function blockDomain(trx: Tx, organizationId: string, domain: string, source: string | null) {
  const added = await suppressAddress(trx, organizationId, { domain, reason: 'MANUAL_BLOCK', source });
  if (added) await emit(trx, organizationId, added.event);
  const entry = await trx
    .selectFrom('suppression_entries')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('level', '=', 'DOMAIN')
    .where('email', '=', domain)
    .executeTakeFirstOrThrow();
  return toSuppressionEntry(entry);
}
