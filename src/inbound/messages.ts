// Conversation messages: inbound replies (src/inbound/) and the dispatcher's outbound messages,
// newest first, keyset-paged, and one by id, with what the sender wrote (a reply's quotes and
// signature taken off when it was stored: src/inbound/analyze/strip.ts) and a preview of it.
import { sql } from 'kysely';
import { epochMs, type Tx } from '../../db/database.js';
import type { operations } from '../http/handler.js';
import { keyset, page } from '../http/paging.js';
import { notFound } from '../http/problems.js';
import { msIso } from '../platform/ids.js';
import { previewSql } from '../platform/text.js';

export type MessageFilter = NonNullable<operations['listMessages']['parameters']['query']>;

// What the sender wrote: a reply without its quotes and signature, else the whole text (a reply
// that is only a signature, an outbound message).
const writtenText = sql<string>`coalesce(nullif(btrim(m.stripped_text), ''), m.body)`;
// The text previewed: its head, whitespace collapsed.
const previewText = sql<string>`btrim(regexp_replace(left(${writtenText}, 1000), '\\s+', ' ', 'g'))`;

/** The columns of a Message (GET /messages, GET /messages/{id}). */
const messageColumns = [
  'm.id',
  'm.contact_id',
  'm.direction',
  'm.channel',
  'm.intent',
  'm.intent_confidence',
  'm.intent_reason',
  'm.sequence_id',
  'm.authenticated',
  'm.subject',
  'm.from_email',
  previewSql(previewText).as('body_preview'),
  writtenText.as('text'),
  epochMs('m.created_at').as('created_ms'),
] as const;

type MessageRow = {
  id: string;
  contact_id: string | null;
  direction: string;
  channel: string;
  intent: string | null;
  intent_confidence: number | null;
  intent_reason: string | null;
  sequence_id: string | null;
  authenticated: boolean;
  subject: string | null;
  from_email: string | null;
  body_preview: string;
  text: string;
  created_ms: number;
};

function messageOf(r: MessageRow) {
  const createdAt = msIso(r.created_ms)!;
  return {
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
    createdAt,
    subject: r.subject,
    from: r.from_email,
    // An inbound message is stored when it is received (by the listener or the operator row).
    receivedAt: r.direction === 'INBOUND' ? createdAt : null,
    text: r.text,
  };
}

/** A page of GET /messages. */
export async function messagesPage(trx: Tx, organizationId: string, query: MessageFilter) {
  const limit = query.limit ?? 50;
  let q = trx
    .selectFrom('messages as m')
    .select([...messageColumns])
    .where('m.organization_id', '=', organizationId);
  if (query.contactId !== undefined) q = q.where('m.contact_id', '=', query.contactId);
  if (query.direction !== undefined) q = q.where('m.direction', '=', query.direction);
  if (query.intent !== undefined) q = q.where('m.intent', '=', query.intent);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'm.created_at', idCol: 'm.id' }).execute();
  return page(rows, limit, (r) => ({ at: r.created_ms, id: r.id }), messageOf);
}

/** GET /messages/{id}: the message with its text as received; 404 unknown or another organization's. */
export async function messageById(trx: Tx, organizationId: string, id: string) {
  const r = await trx
    .selectFrom('messages as m')
    .select([...messageColumns, 'm.body', 'm.to_email'])
    .where('m.organization_id', '=', organizationId)
    .where('m.id', '=', id)
    .executeTakeFirst();
  if (!r) throw notFound('message');
  return { ...messageOf(r), body: r.body, to: r.to_email };
}
