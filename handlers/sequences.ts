// Sequences: creation (asynchronous draft generation follows), listing and reading. The life of a
// sequence is in src/sequences/lifecycle.ts, the reads in src/sequences/sequence-reads.ts.
import type { Handler, Handlers } from '../src/http/handler.js';
import { createSequence as create, toSequence } from '../src/sequences/lifecycle.js';
import { getSequence as readSequence, listSequences as readSequences } from '../src/sequences/sequence-reads.js';

const createSequence: Handler<'createSequence'> = async ({ trx, auth, body }) => {
  const { row, created } = await create(trx, auth.organizationId, body);
  // The sequence already there (same contact and template) is answered as a read answers it, with its hold.
  return { status: 200, body: created ? toSequence(row) : await readSequence(trx, auth.organizationId, row.id) };
};

const listSequences: Handler<'listSequences'> = async ({ trx, auth, query }) => {
  return { status: 200, body: await readSequences(trx, auth.organizationId, query) };
};

const getSequence: Handler<'getSequence'> = async ({ trx, auth, params }) => {
  return { status: 200, body: await readSequence(trx, auth.organizationId, params.id) };
};

export const sequenceHandlers = { createSequence, listSequences, getSequence } satisfies Partial<Handlers>;
