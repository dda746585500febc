// Conversation messages (tag messages): the keyset list of inbound and outbound messages, and one
// by id (src/inbound/messages.ts).
import type { Handler, Handlers } from '../src/http/handler.js';
import { messageById, messagesPage } from '../src/inbound/messages.js';

const listMessages: Handler<'listMessages'> = async ({ trx, auth, query }) => ({
  status: 200,
  body: await messagesPage(trx, auth.organizationId, query),
});

const getMessage: Handler<'getMessage'> = async ({ trx, auth, params }) => ({
  status: 200,
  body: await messageById(trx, auth.organizationId, params.id),
});

export const messageHandlers = { listMessages, getMessage } satisfies Partial<Handlers>;
