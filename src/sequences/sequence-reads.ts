// Sequences as the API reads them: a page of the organization's sequences (newest first) and one
// sequence by id.
import type { Tx } from '../../db/database.js';
import type { operations } from '../http/handler.js';
import { keyset, page } from '../http/paging.js';
import { notFound } from '../http/problems.js';
import { SEQUENCE_COLUMNS, toSequence } from './lifecycle.js';

export type SequenceFilter = NonNullable<operations['listSequences']['parameters']['query']>;

export async function listSequences(trx: Tx, organizationId: string, filter: SequenceFilter) {
  const limit = filter.limit ?? 50;
  let q = trx.selectFrom('contact_sequences').select(SEQUENCE_COLUMNS).where('organization_id', '=', organizationId);
  if (filter.contactId !== undefined) q = q.where('contact_id', '=', filter.contactId);
  if (filter.status !== undefined) q = q.where('status', '=', filter.status);
  const rows = await keyset(q, { cursor: filter.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return page(rows, limit, (r) => ({ at: r.created_at, id: r.id }), toSequence);
}

/** The sequence; 404 when unknown or foreign. */
export async function getSequence(trx: Tx, organizationId: string, id: string) {
  const row = await trx
    .selectFrom('contact_sequences')
    .select(SEQUENCE_COLUMNS)
    .where('organization_id', '=', organizationId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!row) throw notFound('sequence');
  return toSequence(row);
}
