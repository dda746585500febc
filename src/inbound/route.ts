// Routing an inbound message: the organization it belongs to, the message of ours it answers (the
// send record), and the contact who wrote it. In order:
//   1. a genuine reply token among the envelope recipients and the To/Cc addresses (the Reply-To
//      and envelope sender of every message we send); a forged or altered token is ignored;
//   2. In-Reply-To, then References (closest first), and for a delivery or complaint report the
//      returned message's Message-ID, against the Message-IDs we minted or the provider reported;
//   3. otherwise the organization is the operator row's; over SMTP, the one whose mailbox is a
//      recipient, else the only one that has the sender as a live contact.
// The contact is the send record's, else the organization's live contact with the sender's
// address. A delivery or complaint report counts only when matched to a send of ours (1 or 2);
// matched, it reaches that send's contact; unmatched, it is stored in the organization step 3
// finds (by its failed or complaining recipient: its sender is a mailer-daemon) with no contact.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { erasureHmac, usableErasureSecret } from '../compliance/suppression-match.js';
import { normalizeEmail } from '../crm/domains.js';
import { isLiveContact } from '../crm/live-contacts.js';
import { openReplyAddress, type Signer } from '../mail/tokens.js';
import type { ParsedMail } from './analysis.js';

export type ThreadMethod = 'token' | 'header' | 'sender' | 'none';

export interface SentRef {
  id: string;
  organizationId: string;
  contactId: string | null;
  sequenceId: string | null;
  draftId: string | null;
  step: number | null;
  toEmail: string | null;
  mailboxId: string | null;
}

export interface Route {
  organizationId: string;
  /** Our message it answers (or reports on). */
  record: SentRef | null;
  contactId: string | null;
  /** The person is an erased contact of the organization: nothing of the message is kept or linked. */
  erased: boolean;
  threadMethod: ThreadMethod;
  /** The recipient address it came in on (the reply address, a mailbox), when known. */
  recipient: string | null;
}

export interface RouteInput {
  mail: ParsedMail;
  /** Envelope recipients (RCPT TO); none for the operator row. */
  recipients: string[];
  /** The operator row's organization: routing never leaves it. */
  organizationId: string | null;
}

/** Message-IDs looked up at most: a crafted References header cannot make the lookup large. */
const MAX_IDS = 20;

/** The address a message speaks for: a report's failed or complaining recipient, else the sender. */
export function personOf(mail: ParsedMail): string | null {
  const r = mail.report;
  const address =
    r?.kind === 'dsn'
      ? (r.recipients.find((x) => x.permanent) ?? r.recipients[0])?.recipient
      : r?.kind === 'arf'
        ? r.recipient
        : mail.from?.address;
  return address ? normalizeEmail(address) : null;
}

/** Message-IDs that may name our message, most telling first, each also without its brackets (providers report either). */
function threadIds(mail: ParsedMail): string[] {
  const ids = [mail.report?.originalMessageId, mail.inReplyTo, ...[...mail.references].reverse()].filter(
    (x): x is string => typeof x === 'string' && x.length > 2 && x.length <= 500,
  );
  return [...new Set(ids.flatMap((id) => [id, id.replace(/^<|>$/g, '')]))].slice(0, 2 * MAX_IDS);
}

type ThreadRow = {
  organization_id: string;
  id: string;
  contact_id: string | null;
  sequence_id: string | null;
  draft_id: string | null;
  step: number | null;
  to_email: string | null;
  mailbox_id: string | null;
  how: number;
  erased: boolean;
};

/** The send record the message answers: by token first, then by the best-placed Message-ID; one statement. */
async function threadOf(trx: Tx, tokens: { organizationId: string; sendRecordId: string }[], ids: string[], org: string | null) {
  if (tokens.length === 0 && ids.length === 0) return null;
  const cols = sql`r.organization_id, r.id, r.contact_id, r.sequence_id, r.draft_id, r.step, r.to_email, r.mailbox_id`;
  const r = await sql<ThreadRow>`
    SELECT t.organization_id, t.id, t.contact_id, t.sequence_id, t.draft_id, t.step, t.to_email, t.mailbox_id, t.how,
      coalesce(c.erased_at IS NOT NULL, false) AS erased
    FROM (
      SELECT ${cols}, 0 AS how, 0 AS pos FROM send_records r
        JOIN unnest(${tokens.map((t) => t.organizationId)}::text[], ${tokens.map((t) => t.sendRecordId)}::text[]) AS k(o, id)
          ON r.organization_id = k.o AND r.id = k.id
      UNION ALL
      SELECT ${cols}, 1, array_position(${ids}::text[], r.message_id) FROM send_records r WHERE r.message_id = ANY(${ids}::text[])
      UNION ALL
      SELECT ${cols}, 1, array_position(${ids}::text[], r.provider_message_id) FROM send_records r WHERE r.provider_message_id = ANY(${ids}::text[])
    ) t LEFT JOIN contacts c ON c.organization_id = t.organization_id AND c.id = t.contact_id
    WHERE ${org}::text IS NULL OR t.organization_id = ${org}::text
    ORDER BY t.how, t.pos LIMIT 1`.execute(trx);
  return r.rows[0] ?? null;
}

/** The organization's oldest live contact with the address, and whether the address is one erased there. */
async function personIn(trx: Tx, org: string, address: string, erasureSecret: string | null) {
  const secret = usableErasureSecret(erasureSecret);
  const hmac = secret ? erasureHmac(secret, address) : null;
  const r = await sql<{ contact_id: string | null; erased: boolean }>`
    SELECT (SELECT id FROM contacts WHERE organization_id = ${org} AND email_normalized = ${address} AND ${isLiveContact()}
              ORDER BY created_at, id LIMIT 1) AS contact_id,
           ${hmac}::text IS NOT NULL AND EXISTS (SELECT 1 FROM suppression_entries WHERE organization_id = ${org} AND email_hmac = ${hmac}::text) AS erased`.execute(
    trx,
  );
  return { contactId: r.rows[0]?.contact_id ?? null, erased: r.rows[0]?.contact_id == null && r.rows[0]?.erased === true };
}

/**
 * Over SMTP, with no thread: the organization whose mailbox is a recipient, else the only one with
 * the sender as a live contact (that contact comes with it, the oldest of its records).
 */
async function organizationOf(
  trx: Tx,
  recipients: string[],
  person: string | null,
): Promise<{ org: string; recipient: string | null; contactId?: string } | null> {
  const boxes =
    recipients.length === 0
      ? []
      : await trx.selectFrom('mailboxes').select(['organization_id', 'email']).where('email', 'in', recipients).execute();
  const boxOrgs = [...new Set(boxes.map((b) => b.organization_id))];
  if (boxOrgs.length === 1) return { org: boxOrgs[0], recipient: boxes[0].email };
  if (person === null) return null;
  const found = (
    await sql<{ organization_id: string; id: string }>`
    SELECT DISTINCT ON (organization_id) organization_id, id FROM contacts
    WHERE email_normalized = ${person} AND ${isLiveContact()}
      AND (cardinality(${boxOrgs}::text[]) = 0 OR organization_id = ANY(${boxOrgs}::text[]))
    ORDER BY organization_id, created_at, id LIMIT 2`.execute(trx)
  ).rows;
  if (found.length !== 1) return null;
  return {
    org: found[0].organization_id,
    recipient: boxes.find((b) => b.organization_id === found[0].organization_id)?.email ?? null,
    contactId: found[0].id,
  };
}

/**
 * Whether routing may prove who sent the message (src/inbound/authentication.ts
 * authenticatedByRoute): only a genuine reply token among its addresses or a Message-ID it
 * answers can. Decided from the message alone, before any read.
 */
export function provableByRoute(signer: Signer, input: RouteInput): boolean {
  if (threadIds(input.mail).length > 0) return true;
  return [...input.recipients, ...input.mail.to].some((a) => openReplyAddress(signer, normalizeEmail(a)) !== null);
}

/** Where the message belongs; null when over SMTP nothing names an organization. */
export async function routeMessage(
  trx: Tx,
  deps: { signer: Signer; erasureSecret: string | null },
  input: RouteInput,
): Promise<Route | null> {
  const { mail } = input;
  const addresses = [...new Set([...input.recipients, ...mail.to].map(normalizeEmail))];
  const tokened = addresses
    .map((a) => ({ a, t: openReplyAddress(deps.signer, a) }))
    .filter(
      (x): x is { a: string; t: NonNullable<typeof x.t> } =>
        x.t !== null && (input.organizationId === null || x.t.organizationId === input.organizationId),
    );
  const thread = await threadOf(
    trx,
    tokened.map((x) => x.t),
    threadIds(mail),
    input.organizationId,
  );
  const person = personOf(mail);
  if (thread) {
    const record: SentRef = {
      id: thread.id,
      organizationId: thread.organization_id,
      contactId: thread.contact_id,
      sequenceId: thread.sequence_id,
      draftId: thread.draft_id,
      step: thread.step,
      toEmail: thread.to_email,
      mailboxId: thread.mailbox_id,
    };
    const recipient = thread.how === 0 ? (tokened.find((x) => x.t.sendRecordId === thread.id)?.a ?? null) : (input.recipients[0] ?? null);
    if (thread.erased)
      return { organizationId: thread.organization_id, record: null, contactId: null, erased: true, threadMethod: 'none', recipient: null };
    let contactId = thread.contact_id;
    // A record whose contact is gone (no contact id) still names the organization; the person may be another contact.
    if (contactId === null && person !== null)
      contactId = (await personIn(trx, thread.organization_id, person, deps.erasureSecret)).contactId;
    return {
      organizationId: thread.organization_id,
      record,
      contactId,
      erased: false,
      threadMethod: thread.how === 0 ? 'token' : 'header',
      recipient,
    };
  }
  const home =
    input.organizationId !== null
      ? { org: input.organizationId, recipient: null }
      : await organizationOf(
          trx,
          addresses.filter((a) => input.recipients.includes(a)),
          person,
        );
  if (home === null) return null;
  const who =
    'contactId' in home && home.contactId
      ? { contactId: home.contactId, erased: false }
      : person === null
        ? { contactId: null, erased: false }
        : await personIn(trx, home.org, person, deps.erasureSecret);
  // A report that names no message of ours is stored for the operator and reaches no contact: who
  // it names may not be anyone we wrote to (a forged or misdirected report changes nothing).
  const contactId = mail.report ? null : who.contactId;
  return {
    organizationId: home.org,
    record: null,
    contactId,
    erased: who.erased,
    threadMethod: contactId !== null ? 'sender' : 'none',
    recipient: home.recipient ?? input.recipients[0] ?? null,
  };
}
