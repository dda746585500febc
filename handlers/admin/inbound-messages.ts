// The operator row that ingests an inbound message through the listener's path
// (src/inbound/ingest.ts): a raw RFC 5322 message as given, or one composed from its fields with
// nodemailer's MailComposer, so both ways a real message with its raw MIME is stored.
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { requireOrgExists } from '../../src/account/organizations.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { ingestMessage } from '../../src/inbound/ingest.js';

type Fields = { fromEmail?: string; subject?: string; body?: string; inReplyTo?: string; raw?: string; channel?: string };

/** A plain-text message from the fields (MailComposer writes its Message-ID and Date). */
function compose(f: Fields): Promise<Buffer> {
  const inReplyTo = f.inReplyTo ? (f.inReplyTo.startsWith('<') ? f.inReplyTo : `<${f.inReplyTo}>`) : undefined;
  return new MailComposer({
    from: f.fromEmail,
    subject: f.subject ?? '',
    text: f.body ?? '',
    date: new Date(),
    ...(inReplyTo ? { inReplyTo, references: [inReplyTo] } : {}),
  })
    .compile()
    .build();
}

const adminCreateInboundMessage: AdminHandler<'adminCreateInboundMessage'> = async ({ db, config, services, log, params, body }) => {
  await requireOrgExists(db, params.orgId);
  const b = body as Fields; // the schema's anyOf (raw, or fromEmail and body) types as unknown
  const raw = b.raw !== undefined ? Buffer.from(b.raw, 'utf8') : await compose(b);
  const r = await ingestMessage(
    { db, config, services, log },
    { raw, recipients: [], organizationId: params.orgId, channel: b.channel ?? 'email' },
  );
  if (!r.stored) throw new Error('the operator row always routes to its organization');
  return r.duplicate ? { status: 200 as const, body: { id: r.id } } : { status: 201 as const, body: { id: r.id } };
};

export const inboundMessageHandlers: AdminHandlers = { adminCreateInboundMessage };
