// Sequences as the API reads them: a page of the organization's sequences (newest first) and one
// sequence by id, each with its next step's hold (why it has not gone out, and when it is tried).
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { operations } from '../http/handler.js';
import { keyset, page } from '../http/paging.js';
import { notFound } from '../http/problems.js';
import { SEQUENCE_COLUMNS, toSequence } from './lifecycle.js';

export type SequenceFilter = NonNullable<operations['listSequences']['parameters']['query']>;

/**
 * The sequences with their next step's hold, in the same read: the lowest step waiting in the send
 * queue (queued or deferred), else a possibly sent one (never tried again: no next attempt). One
 * index probe per sequence (send_queue_step_idx).
 */
function withHold(trx: Tx) {
  return trx
    .selectFrom('contact_sequences as s')
    .leftJoinLateral(
      (eb) =>
        eb
          .selectFrom('send_queue as q')
          .select([
            'q.held_by as hold_reason',
            sql<Date | null>`CASE WHEN q.state = 'possibly_sent' THEN NULL ELSE q.next_attempt_at END`.as('next_attempt_at'),
          ])
          .whereRef('q.organization_id', '=', 's.organization_id')
          .whereRef('q.sequence_id', '=', 's.id')
          .where('q.state', 'in', ['queued', 'deferred', 'possibly_sent'])
          .orderBy(sql`q.state = 'possibly_sent'`)
          .orderBy('q.step')
          .limit(1)
          .as('h'),
      (j) => j.onTrue(),
    )
    .select(SEQUENCE_COLUMNS.map((c) => `s.${c}` as const))
    .select(['h.hold_reason', 'h.next_attempt_at']);
}

export async function listSequences(trx: Tx, organizationId: string, filter: SequenceFilter) {
  const limit = filter.limit ?? 50;
  let q = withHold(trx).where('s.organization_id', '=', organizationId);
  if (filter.contactId !== undefined) q = q.where('s.contact_id', '=', filter.contactId);
  if (filter.status !== undefined) q = q.where('s.status', '=', filter.status);
  const rows = await keyset(q, { cursor: filter.cursor, limit, createdCol: 's.created_at', idCol: 's.id' }).execute();
  return page(rows, limit, (r) => ({ at: r.created_at, id: r.id }), toSequence);
}

/** The sequence; 404 when unknown or foreign. */
export async function getSequence(trx: Tx, organizationId: string, id: string) {
  const row = await withHold(trx).where('s.organization_id', '=', organizationId).where('s.id', '=', id).executeTakeFirst();
  if (!row) throw notFound('sequence');
  return toSequence(row);
}
