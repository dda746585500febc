// Conversation messages (tag messages): the keyset list of inbound and outbound messages
// (src/inbound/messages.ts).
import type { Handler, Handlers } from '../src/http/handler.js';
import { messagesPage } from '../src/inbound/messages.js';

const listMessages: Handler<'listMessages'> = async ({ trx, auth, query }) => ({
  status: 200,
  body: await messagesPage(trx, auth.organizationId, query),
});

export const messageHandlers = { listMessages } satisfies Partial<Handlers>;
