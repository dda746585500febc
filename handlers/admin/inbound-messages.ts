// The operator row that ingests an inbound message through the listener's path: a raw RFC 5322
// message as given, or one composed from its fields (src/inbound/operator-message.ts).
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { ingestOperatorMessage, type OperatorMessageFields } from '../../src/inbound/operator-message.js';

const adminCreateInboundMessage: AdminHandler<'adminCreateInboundMessage'> = async ({
  db,
  systemDb,
  config,
  services,
  log,
  params,
  body,
}) => {
  const b = body as OperatorMessageFields; // the schema's anyOf (raw, or fromEmail and body) types as unknown
  const r = await ingestOperatorMessage({ db, systemDb, config, services, log }, params.orgId, b);
  return r.duplicate ? { status: 200 as const, body: { id: r.id } } : { status: 201 as const, body: { id: r.id } };
};

export const inboundMessageHandlers = { adminCreateInboundMessage } satisfies Partial<AdminHandlers>;
