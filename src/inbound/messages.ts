// Conversation messages: inbound replies (src/inbound/) and the dispatcher's outbound messages,
// newest first, keyset-paged, with a preview of the text that a reply's quotes do not crowd out.
import { sql } from 'kysely';
import { epochMs, type Tx } from '../../db/database.js';
import type { operations } from '../http/handler.js';
import { keyset, page } from '../http/paging.js';
import { msIso } from '../platform/ids.js';
import { previewSql } from '../platform/text.js';

export type MessageFilter = NonNullable<operations['listMessages']['parameters']['query']>;

// The text previewed: a reply without its quotes and signature, else the whole text (a reply that
// is only a signature, an outbound message), its whitespace collapsed. Only its head is read.
const previewText = sql<string>`btrim(regexp_replace(left(coalesce(nullif(btrim(m.stripped_text), ''), m.body), 1000), '\\s+', ' ', 'g'))`;

/** A page of GET /messages. */
export async function messagesPage(trx: Tx, organizationId: string, query: MessageFilter) {
  const limit = query.limit ?? 50;
  let q = trx
    .selectFrom('messages as m')
    .select([
      'm.id',
      'm.contact_id',
      'm.direction',
      'm.channel',
      'm.intent',
      'm.intent_confidence',
      'm.intent_reason',
      'm.sequence_id',
      'm.authenticated',
      previewSql(previewText).as('body_preview'),
      epochMs('m.created_at').as('created_ms'),
    ])
    .where('m.organization_id', '=', organizationId);
  if (query.contactId !== undefined) q = q.where('m.contact_id', '=', query.contactId);
  if (query.direction !== undefined) q = q.where('m.direction', '=', query.direction);
  if (query.intent !== undefined) q = q.where('m.intent', '=', query.intent);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'm.created_at', idCol: 'm.id' }).execute();
  return page(
    rows,
    limit,
    (r) => ({ at: r.created_ms, id: r.id }),
    (r) => ({
      id: r.id,
      contactId: r.contact_id,
      direction: r.direction as 'INBOUND' | 'OUTBOUND',
      channel: r.channel,
      intent: r.intent,
      intentConfidence: r.intent_confidence,
      intentReason: r.intent_reason,
      sequenceId: r.sequence_id,
      authenticated: r.authenticated,
      bodyPreview: r.body_preview,
      createdAt: msIso(r.created_ms)!,
    }),
  );
}
