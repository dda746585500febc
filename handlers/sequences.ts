// Sequences: creation (asynchronous draft generation follows), listing and reading. The life of a
// sequence is in src/sequences/lifecycle.ts.
import type { Handler } from '../src/http/handler.js';
import { keyset, page } from '../src/http/paging.js';
import { notFound } from '../src/http/problems.js';
import { createSequence as create, SEQUENCE_COLUMNS, toSequence } from '../src/sequences/lifecycle.js';

const createSequence: Handler<'createSequence'> = async ({ trx, auth, body }) => {
  const { row } = await create(trx, auth.organizationId, body);
  return { status: 200, body: toSequence(row) };
};

const listSequences: Handler<'listSequences'> = async ({ trx, auth, query }) => {
  const limit = query.limit ?? 50;
  let q = trx.selectFrom('contact_sequences').select(SEQUENCE_COLUMNS).where('organization_id', '=', auth.organizationId);
  if (query.contactId !== undefined) q = q.where('contact_id', '=', query.contactId);
  if (query.status !== undefined) q = q.where('status', '=', query.status);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return { status: 200, body: page(rows, limit, (r) => ({ at: r.created_at, id: r.id }), toSequence) };
};

const getSequence: Handler<'getSequence'> = async ({ trx, auth, params }) => {
  const row = await trx
    .selectFrom('contact_sequences')
    .select(SEQUENCE_COLUMNS)
    .where('organization_id', '=', auth.organizationId)
    .where('id', '=', params.id)
    .executeTakeFirst();
  if (!row) throw notFound('sequence');
  return { status: 200, body: toSequence(row) };
};

export const sequenceHandlers = { createSequence, listSequences, getSequence };
