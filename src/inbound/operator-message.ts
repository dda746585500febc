// The operator row that ingests an inbound message through the listener's path
// (src/inbound/ingest.ts): a raw RFC 5322 message as given, or one composed from its fields with
// nodemailer's MailComposer, so both ways a real message with its raw MIME is stored.
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { requireOrgExists } from '../account/organizations.js';
import type { SystemDeps } from '../platform/services.js';
import { ingestMessage } from './ingest.js';

export type OperatorMessageFields = {
  fromEmail?: string;
  subject?: string;
  body?: string;
  inReplyTo?: string;
  raw?: string;
  channel?: string;
};

/** A plain-text message from the fields (MailComposer writes its Message-ID and Date). */
function compose(f: OperatorMessageFields): Promise<Buffer> {
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

/** Ingests the message into the organization (404 when there is none); `duplicate` when it was stored already. */
export async function ingestOperatorMessage(
  deps: SystemDeps,
  organizationId: string,
  b: OperatorMessageFields,
): Promise<{ id: string; duplicate: boolean }> {
  await requireOrgExists(deps.db, organizationId);
  const raw = b.raw !== undefined ? Buffer.from(b.raw, 'utf8') : await compose(b);
  const r = await ingestMessage(deps, { raw, recipients: [], organizationId, channel: b.channel ?? 'email' });
  if (!r.stored) throw new Error('the operator row always routes to its organization');
  return { id: r.id, duplicate: r.duplicate };
}
