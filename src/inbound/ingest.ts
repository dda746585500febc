// The one ingestion path of inbound mail, used by the SMTP listener and the operator row
// (POST /admin/api/organizations/{orgId}/inbound-messages): parse the raw MIME, route it
// (src/inbound/route.ts), authenticate it (src/inbound/authentication.ts: the operator row is
// trusted; over SMTP a token or a thread to the sender's own address proves it, else the DNS
// checks, run after the routing read and before the write, in no transaction, and run for a message
// routed nowhere too, so how long the answer takes does not tell whether the sender is a contact),
// and store it (INBOUND, status `received`, raw MIME kept so it can be
// reprocessed) with reply.received, in one transaction bound to its organization (over SMTP the
// routing reads across organizations first, in a transaction of the cross-organization role that
// only reads). In the same transaction it is classified and its effects applied when no model is
// configured (the rules decide at once; no job, no second parse); with a model, a classification
// job does that later (the model may be slow). Idempotent on
// the Message-ID (a message without one gets a stable id from a hash of its bytes): a duplicate
// delivery stores nothing new, emits nothing and enqueues nothing.
// A message from an erased contact is not linked to the erased record and keeps neither its text
// nor its raw MIME nor its addresses: a redacted row (so a redelivery is still recognised) and a
// reply.received without personal data; it is not classified and has no effects.
import crypto from 'node:crypto';
import { sql } from 'kysely';
import { type Tx, withOrg, withSystem } from '../../db/database.js';
import { emit } from '../platform/events.js';
import { newId } from '../platform/ids.js';
import type { Deps, SystemDeps } from '../platform/services.js';
import type { ParsedMail } from './analysis.js';
import { classify, parseMail } from './analyze/index.js';
import {
  type Authentication,
  authenticatedByRoute,
  authenticationOf,
  checkSender,
  type SenderChecks,
  type SmtpSession,
} from './authentication.js';
import { recordClassification } from './classify-reply.js';
import { provableByRoute, type Route, routeMessage } from './route.js';

export interface Delivery {
  /** The whole message as received (RFC 5322). */
  raw: Buffer;
  /** Envelope recipients (RCPT TO), lowercased; none for the operator row. */
  recipients: string[];
  /** The operator row's organization (routing stays inside it; the message is trusted); null over SMTP. */
  organizationId: string | null;
  channel: string;
  /** Over SMTP: the session's client address, HELO and MAIL FROM (the SPF inputs). */
  smtp?: SmtpSession;
}

export type Ingested = { stored: true; organizationId: string; id: string; duplicate: boolean } | { stored: false; reason: 'unroutable' };

/** Text kept per message at most (the raw MIME is kept whole): a preview and a classification need far less. */
const MAX_TEXT = 1_000_000;
const MAX_IDS = 50;

/** Text Postgres can store (no U+0000), bounded. */
const clean = (s: string | null | undefined, max: number): string | null =>
  s === null || s === undefined ? null : s.replace(/\u0000/g, '').slice(0, max);
const cleanJson = (v: unknown): string | null =>
  v === null || v === undefined ? null : JSON.stringify(v, (_k, x: unknown) => (typeof x === 'string' ? x.replace(/\u0000/g, '') : x));
const usableId = (id: string | null | undefined): string | null => (id && id.length <= 500 && !id.includes('\u0000') ? id : null);

/** The Message-ID, or for a message without a usable one, a stable id from a hash of its bytes. */
export function messageIdOf(mail: ParsedMail, raw: Buffer): string {
  return usableId(mail.messageId) ?? `<${crypto.createHash('sha256').update(raw).digest('hex').slice(0, 40)}@synthesized.invalid>`;
}

/** Stores the routed message and, when it is new, its reply.received and its classification (now, or a job). */
async function store(
  deps: Deps,
  trx: Tx,
  d: Delivery,
  mail: ParsedMail,
  route: Route,
  messageId: string,
  auth: Authentication,
): Promise<Ingested> {
  const org = route.organizationId;
  const id = newId('msg');
  const keep = !route.erased;
  const now = keep && !deps.services.model.enabled;
  const r = await sql<{ id: string }>`
    WITH ins AS (
      INSERT INTO messages (organization_id, id, contact_id, direction, channel, from_email, to_email, subject, body, stripped_text,
        message_id, in_reply_to, references_ids, send_record_id, sequence_id, thread_method, status, automatic, report, classified_at,
        authenticated, authentication)
      VALUES (${org}, ${id}, ${route.contactId}, 'INBOUND', ${d.channel}, ${keep ? clean(mail.from?.address, 320) : null},
        ${keep ? clean(route.recipient ?? mail.to[0], 320) : null}, ${keep ? clean(mail.subject, 1000) : null}, ${keep ? clean(mail.text, MAX_TEXT) : ''},
        ${keep ? clean(mail.strippedText, MAX_TEXT) : null}, ${messageId}, ${keep ? usableId(mail.inReplyTo) : null},
        ${
          keep
            ? mail.references
                .map(usableId)
                .filter((x): x is string => x !== null)
                .slice(-MAX_IDS)
            : []
        }::text[],
        ${route.record?.id ?? null}, ${route.record?.sequenceId ?? null}, ${route.threadMethod}, ${keep ? 'received' : 'redacted'},
        ${mail.automatic.automatic}, ${keep ? cleanJson(mail.report) : null}::jsonb, ${keep ? null : sql`now_ms()`},
        ${auth.authenticated}, ${JSON.stringify({ by: auth.by, ...auth.checks })}::jsonb)
      ON CONFLICT (organization_id, message_id) WHERE direction = 'INBOUND' AND message_id IS NOT NULL DO NOTHING
      RETURNING id
    ), raw AS (
      -- The raw MIME goes to its own table, which ages out by month (src/platform/retention.ts).
      INSERT INTO inbound_raw_messages (organization_id, message_id, raw_mime)
      SELECT ${org}, ins.id, ${keep ? d.raw : null}::bytea FROM ins WHERE ${keep}::boolean
    )
    -- The classification job is enqueued by the same statement, only for a new message that has something to classify later.
    SELECT ins.id, (SELECT enqueue_job('classify_reply', json_build_object('organizationId', ${org}::text, 'messageId', ins.id), NULL, 'classify_reply:' || ins.id)
                    WHERE ${keep && !now}::boolean) AS job
    FROM ins`.execute(trx);
  if (r.rows.length === 0) {
    const existing = await trx
      .selectFrom('messages')
      .select('id')
      .where('organization_id', '=', org)
      .where('direction', '=', 'INBOUND')
      .where('message_id', '=', messageId)
      .executeTakeFirstOrThrow();
    return { stored: true, organizationId: org, id: existing.id, duplicate: true };
  }
  await emit(trx, org, {
    type: 'reply.received',
    resource: { type: 'Message', id },
    data: keep
      ? {
          messageId: id,
          contactId: route.contactId,
          sendRecordId: route.record?.id ?? null,
          sequenceId: route.record?.sequenceId ?? null,
          threadMethod: route.threadMethod,
          channel: d.channel,
          automatic: mail.automatic.automatic,
          report: mail.report?.kind ?? null,
        }
      : { messageId: id, contactId: null, redacted: true },
  });
  if (now) await recordClassification(trx, org, id, mail, await classify(mail, { model: deps.services.model }), deps.services.clock);
  return { stored: true, organizationId: org, id, duplicate: false };
}

/** A message over SMTP made ready to store: parsed, routed and authenticated (outside any transaction of its organization). */
export interface Prepared {
  d: Delivery;
  mail: ParsedMail;
  messageId: string;
  route: Route;
  auth: Authentication;
}

const routeDepsOf = (deps: SystemDeps) => ({ signer: deps.services.signer, erasureSecret: deps.config.erasureHashSecret });

/** Parses a message received over SMTP (parseMail never throws: a message it cannot read at all is still kept, empty). */
export async function parseDelivery(d: Delivery): Promise<{ d: Delivery; mail: ParsedMail; messageId: string }> {
  const mail = await parseMail(d.raw);
  return { d, mail, messageId: messageIdOf(mail, d.raw) };
}

/** The route of a parsed SMTP message, read in the caller's cross-organization transaction; null when it names no organization. */
export const routeParsed = (deps: SystemDeps, trx: Tx, p: { d: Delivery; mail: ParsedMail }): Promise<Route | null> =>
  routeMessage(trx, routeDepsOf(deps), { mail: p.mail, recipients: p.d.recipients, organizationId: null });

/** The DNS checks of a message received over SMTP (src/inbound/authentication.ts checkSender). */
export const checksOf = (deps: SystemDeps, d: Delivery): Promise<SenderChecks> =>
  checkSender(d.raw, d.smtp!, { servers: deps.config.inboundDnsServers, mta: deps.config.inboundReplyDomain ?? undefined });

/**
 * Whether a parsed SMTP message needs the DNS checks whatever its route: nothing in it can prove
 * its sender by routing (no reply token, no Message-ID it answers), so they may start at once,
 * beside the routing read.
 */
export const needsChecks = (deps: SystemDeps, p: { d: Delivery; mail: ParsedMail }): boolean =>
  p.d.smtp !== undefined && !provableByRoute(deps.services.signer, { mail: p.mail, recipients: p.d.recipients, organizationId: null });

/**
 * The authentication of a routed (or unroutable) SMTP message: by its route, else the DNS checks
 * (`early`: already started), which run for a message routed nowhere too (how long the answer
 * takes must not tell whether the sender is a contact). Never in a transaction: the checks wait
 * on the outside world.
 */
export async function authenticateRouted(
  deps: SystemDeps,
  p: { d: Delivery; mail: ParsedMail; messageId: string },
  route: Route | null,
  early: Promise<SenderChecks> | null = null,
): Promise<Prepared | null> {
  const byRoute = route ? authenticatedByRoute(route, p.mail) : null;
  const checks = byRoute === null && p.d.smtp ? await (early ?? checksOf(deps, p.d)) : null;
  if (route === null) return null;
  return { ...p, route, auth: authenticationOf(byRoute, checks) };
}

/**
 * Stores a prepared message in the caller's transaction, which must be bound to its organization
 * (withOrg, or a savepoint of a group commit that bound it). Fault point for tests:
 * `inbound:store:<Message-ID>` fails this one message after its row was written.
 */
export async function storePrepared(deps: Deps, trx: Tx, p: Prepared): Promise<Ingested> {
  const r = await store(deps, trx, p.d, p.mail, p.route, p.messageId, p.auth);
  if (deps.services.faults.has(`inbound:store:${p.messageId}`)) throw new Error(`injected fault: inbound:store:${p.messageId}`);
  return r;
}

/** Fault point for tests: a failure before the commit stores nothing (the listener then answers 451). */
export function beforeCommit(deps: Deps): void {
  if (deps.services.faults.has('inbound:before-commit')) throw new Error('injected fault: inbound:before-commit');
}

/**
 * Ingests one message in a transaction of its own: routed, stored, announced; `unroutable` (over
 * SMTP only) when nothing names an organization. The operator row's path; the SMTP listener
 * stores the messages that arrive together in one transaction instead (src/inbound/group-commit.ts).
 */
export async function ingestMessage(deps: SystemDeps, d: Delivery): Promise<Ingested> {
  const parsed = await parseDelivery(d);
  const { mail, messageId } = parsed;
  if (d.organizationId !== null) {
    const org = d.organizationId;
    const trusted = authenticationOf('operator', null);
    const input = { mail, recipients: d.recipients, organizationId: org };
    return withOrg(deps.db, org, async (trx) => {
      const route = (await routeMessage(trx, routeDepsOf(deps), input))!;
      const r = await storePrepared(deps, trx, { d, mail, messageId, route, auth: trusted });
      beforeCommit(deps);
      return r;
    });
  }
  // Over SMTP the organization is not known until routed: the routing reads across organizations
  // (only outbound_system may), then the message is written in a transaction bound to the one found.
  const route = await withSystem(deps.systemDb, (trx) => routeParsed(deps, trx, parsed));
  const prepared = await authenticateRouted(deps, parsed, route);
  if (prepared === null) return { stored: false as const, reason: 'unroutable' as const };
  return withOrg(deps.db, prepared.route.organizationId, async (trx) => {
    const r = await storePrepared(deps, trx, prepared);
    beforeCommit(deps);
    return r;
  });
}
