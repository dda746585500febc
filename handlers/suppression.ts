// The suppression list: addresses and domains that must never be contacted. Whether an address
// is suppressed is decided by the one matching rule of src/compliance/suppression-match.ts.
import { sql } from 'kysely';
import { toSuppressionEntry } from '../src/compliance/suppression-entries.js';
import { matchSuppression } from '../src/compliance/suppression-match.js';
import { normalizeEmail } from '../src/crm/domains.js';
import type { Handler } from '../src/http/handler.js';
import { keyset, page } from '../src/http/paging.js';
import { emit } from '../src/platform/events.js';
import { newId } from '../src/platform/ids.js';

const getSuppression: Handler<'getSuppression'> = async ({ trx, auth, query, config }) => {
  const org = auth.organizationId;
  if (query.email !== undefined) {
    const email = normalizeEmail(query.email);
    const m = await matchSuppression(trx, org, email, config.erasureHashSecret);
    return { status: 200, body: { email, suppressed: m.suppressed, entry: m.entry ? toSuppressionEntry(m.entry) : null } };
  }
  const limit = query.limit ?? 50;
  const q = trx.selectFrom('suppression_entries').selectAll().where('organization_id', '=', org);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return { status: 200, body: page(rows, limit, (r) => ({ at: r.created_at, id: r.id }), toSuppressionEntry) };
};

/**
 * Adds the address's own MANUAL_BLOCK entry; an existing live entry is left as it is. An erased
 * address is already suppressed for good by its hash and is never written down in clear again.
 */
const addSuppression: Handler<'addSuppression'> = async ({ trx, auth, body, config }) => {
  const org = auth.organizationId;
  const email = normalizeEmail(body.email);
  const current = await matchSuppression(trx, org, email, config.erasureHashSecret);
  if (current.suppressed && current.entry === null) return { status: 200, body: { email, suppressed: true } };
  const values = { reason: 'MANUAL_BLOCK', source: body.reason, notes: body.notes ?? null, expires_at: null };
  // An expired entry of the address is renewed in place; a live one stays untouched (no event).
  const added = await trx
    .insertInto('suppression_entries')
    .values({ organization_id: org, id: newId('sup'), level: 'ADDRESS', email, ...values })
    .onConflict((oc) =>
      oc
        .columns(['organization_id', 'level', 'email'])
        .where('email', 'is not', null)
        .doUpdateSet({ ...values, created_at: sql<Date>`now_ms()` })
        .where('suppression_entries.expires_at', '<=', sql<Date>`now()`),
    )
    .returning('id')
    .executeTakeFirst();
  if (added) {
    await emit(trx, org, {
      type: 'suppression.added',
      resource: { type: 'SuppressionEntry', id: added.id },
      data: { email, level: 'ADDRESS', reason: 'MANUAL_BLOCK', source: body.reason },
    });
  }
  return { status: 200, body: { email, suppressed: true } };
};

/**
 * Lifts the address's own entry only: DOMAIN entries and erasure hashes stay in force, and the
 * answer's `suppressed` says whether one of them still holds.
 */
const removeSuppression: Handler<'removeSuppression'> = async ({ trx, auth, query, config }) => {
  const org = auth.organizationId;
  const email = normalizeEmail(query.email);
  const removed = await trx
    .deleteFrom('suppression_entries')
    .where('organization_id', '=', org)
    .where('level', '=', 'ADDRESS')
    .where('email', '=', email)
    .returning('id')
    .executeTakeFirst();
  if (removed) {
    await emit(trx, org, {
      type: 'suppression.removed',
      resource: { type: 'SuppressionEntry', id: removed.id },
      data: { email, level: 'ADDRESS' },
    });
  }
  const after = await matchSuppression(trx, org, email, config.erasureHashSecret);
  return { status: 200, body: { email, suppressed: after.suppressed } };
};

export const suppressionHandlers = { getSuppression, addSuppression, removeSuppression };
