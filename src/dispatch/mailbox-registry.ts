// An organization's mailboxes as the operator registers them: added (verified by an SMTP handshake
// through the mailbox's own server, or the deployment's), changed and verified again, listed. The
// SMTP URL and the DKIM key are stored sealed. A mailbox's state is a signal of the
// organization's health; each answer carries what its sends met lately (hard bounces, refusals
// by reason), the DNS records its domains should publish and what DNS held for them when it was
// last verified (src/dispatch/sender-dns.ts; findings never change the status).
import { sql, type UpdateObject } from 'kysely';
import { type Database, type Db, type Tx, withOrg } from '../../db/database.js';
import { recheckOrgHealth } from '../account/org-health.js';
import { domainOfEmail } from '../crm/domains.js';
import type { adminOperations } from '../http/handler.js';
import { invalid, notFound } from '../http/problems.js';
import { smtpTransport, type Transport } from '../mail/transport.js';
import type { Config } from '../platform/config.js';
import { isoNN, newId } from '../platform/ids.js';
import type { Services } from '../platform/services.js';
import { type Deliverability, mailboxDeliverability } from './health.js';
import { effectiveDailyCap, type RampUp } from './ramp-up.js';
import { reevaluateHeld } from './reevaluate.js';
import { checkSenderDns, type DnsFindings, dkimPublicKey, dnsRecords, type SenderIdentity, spfMechanism } from './sender-dns.js';
import { DEFAULT_MAILBOX_DAILY_CAP, sendingSettings } from './settings.js';

type NewMailbox = adminOperations['adminCreateMailbox']['requestBody']['content']['application/json'];
type MailboxChanges = adminOperations['adminUpdateMailbox']['requestBody']['content']['application/json'];

/** What a mailbox's answer and its DNS check are derived from besides its row. */
export interface MailboxContext {
  services: Services;
  config: Pick<Config, 'smtpUrl' | 'inboundReplyDomain' | 'inboundDnsServers'>;
}

type MailboxRow = Awaited<ReturnType<typeof mailboxRow>>;
async function mailboxRow(trx: Tx, orgId: string, id: string) {
  const m = await trx.selectFrom('mailboxes').selectAll().where('organization_id', '=', orgId).where('id', '=', id).executeTakeFirst();
  if (!m) throw notFound('mailbox');
  return m;
}

/** What a mailbox's DNS records are derived from, its secrets in the clear (null when absent or sealed with another key). */
interface SenderSettings {
  email: string;
  dkimDomain: string | null;
  dkimSelector: string | null;
  dkimKey: string | null;
  spfInclude: string | null;
  /** Its own SMTP URL; null: the deployment's transport. */
  smtpUrl: string | null;
  ownSmtp: boolean;
}

function settingsOf(m: MailboxRow, ctx: MailboxContext): SenderSettings {
  return {
    email: m.email,
    dkimDomain: m.dkim_domain,
    dkimSelector: m.dkim_selector,
    dkimKey: m.dkim_key_sealed === null ? null : ctx.services.secretBox.open(m.dkim_key_sealed),
    spfInclude: m.spf_include,
    smtpUrl: m.smtp_url_sealed === null ? null : ctx.services.secretBox.open(m.smtp_url_sealed),
    ownSmtp: m.smtp_url_sealed !== null,
  };
}

function senderIdentity(s: SenderSettings, config: MailboxContext['config']): SenderIdentity {
  return {
    email: s.email,
    dkim:
      s.dkimDomain && s.dkimSelector
        ? { domainName: s.dkimDomain, keySelector: s.dkimSelector, key: s.dkimKey ? dkimPublicKey(s.dkimKey) : null }
        : null,
    spfMechanism: spfMechanism(s.spfInclude, s.ownSmtp ? s.smtpUrl : config.smtpUrl),
    envelopeDomain: config.inboundReplyDomain ?? domainOfEmail(s.email),
  };
}

/** The DNS check of a mailbox's records (outside any transaction: it waits on DNS). */
const checkDns = (s: SenderSettings, config: MailboxContext['config']): Promise<DnsFindings> =>
  checkSenderDns(senderIdentity(s, config), s.dkimKey, config.inboundDnsServers);

const toMailbox = (m: MailboxRow, deliverability: Deliverability, ctx: MailboxContext, ramp: RampUp, now: Date) => {
  const id = senderIdentity(settingsOf(m, ctx), ctx.config);
  return {
    id: m.id,
    email: m.email,
    name: m.name,
    dailyCap: m.daily_cap,
    effectiveDailyCap: effectiveDailyCap(
      { dailyCap: m.daily_cap, ownSmtp: m.smtp_url_sealed !== null, createdAt: m.created_at },
      ramp,
      now,
    ),
    status: m.status as 'verified' | 'failed' | 'paused',
    statusReason: m.status_reason,
    ownSmtp: m.smtp_url_sealed !== null,
    dkim: id.dkim ? { domainName: id.dkim.domainName, keySelector: id.dkim.keySelector, publicKey: id.dkim.key?.publicKey ?? null } : null,
    deliverability,
    createdAt: isoNN(m.created_at),
    spfInclude: m.spf_include,
    dnsRecords: dnsRecords(id),
    dns: (m.dns_findings as DnsFindings | null) ?? null,
  };
};

/** Mailboxes as the operator reads them, each with what its sends met lately (src/dispatch/health.ts) and the cap it sends under now (ramp-up). */
async function withDeliverability(trx: Tx, orgId: string, rows: MailboxRow[], ctx: MailboxContext) {
  const d = await mailboxDeliverability(
    trx,
    orgId,
    rows.map((r) => r.id),
  );
  const org = await trx.selectFrom('organizations').select('sending').where('id', '=', orgId).executeTakeFirst();
  const ramp = sendingSettings(org?.sending).rampUp;
  const now = new Date();
  return rows.map((r) => toMailbox(r, d.get(r.id)!, ctx, ramp, now));
}

/** How long a handshake waits on the mailbox's server. */
const HANDSHAKE_TIMEOUT_MS = 10_000;

class UnreadableSmtpUrl extends Error {}

/**
 * The transport of a mailbox's own SMTP URL, made for one handshake. nodemailer parses the URL
 * as it makes the transport and throws on one it cannot read (`smtp://[`: "Invalid URL").
 */
function ownTransport(smtpUrl: string): Transport {
  try {
    return smtpTransport(smtpUrl, { timeoutMs: HANDSHAKE_TIMEOUT_MS });
  } catch (e) {
    throw new UnreadableSmtpUrl((e as Error).message);
  }
}

/** An SMTP handshake through the mailbox's transport: null when it succeeded, else why not. */
async function handshake(services: Services, smtpUrl: string | null): Promise<string | null> {
  if (smtpUrl === null) return services.mail.deployment.verify();
  let t: Transport;
  try {
    t = ownTransport(smtpUrl);
  } catch (e) {
    // Only a URL stored before it was checked at creation: the mailbox cannot be verified.
    if (e instanceof UnreadableSmtpUrl) return `the SMTP URL cannot be parsed (${e.message}): add the mailbox again`;
    throw e;
  }
  try {
    return await t.verify();
  } finally {
    t.close();
  }
}

/**
 * Adds a mailbox, verified or failed by the handshake; 400 when the organization has one for the
 * address. The caller has checked that the organization exists.
 */
export async function createMailbox(db: Db, ctx: MailboxContext, orgId: string, body: NewMailbox) {
  const { services } = ctx;
  if (body.smtpUrl !== undefined) {
    try {
      ownTransport(body.smtpUrl).close();
    } catch (e) {
      if (e instanceof UnreadableSmtpUrl) throw invalid(`smtpUrl cannot be parsed as a URL (${e.message}).`, 'body.smtpUrl');
      throw e;
    }
  }
  const email = body.email.trim().toLowerCase();
  // The handshake and the DNS check run outside any transaction (they wait on the network).
  const [failure, dns] = await Promise.all([
    handshake(services, body.smtpUrl ?? null),
    checkDns(
      {
        email,
        dkimDomain: body.dkim?.domainName ?? null,
        dkimSelector: body.dkim?.keySelector ?? null,
        dkimKey: body.dkim?.privateKey ?? null,
        spfInclude: body.spfInclude ?? null,
        smtpUrl: body.smtpUrl ?? null,
        ownSmtp: body.smtpUrl !== undefined,
      },
      ctx.config,
    ),
  ]);
  return withOrg(db, orgId, async (trx) => {
    const dup = await trx
      .selectFrom('mailboxes')
      .select('id')
      .where('organization_id', '=', orgId)
      .where('email', '=', email)
      .executeTakeFirst();
    if (dup) throw invalid(`The organization already has a mailbox for ${email} (${dup.id}).`, 'body.email');
    const row = await trx
      .insertInto('mailboxes')
      .values({
        organization_id: orgId,
        id: newId('mbx'),
        email,
        name: body.name ?? null,
        daily_cap: body.dailyCap ?? DEFAULT_MAILBOX_DAILY_CAP,
        smtp_url_sealed: body.smtpUrl ? services.secretBox.seal(body.smtpUrl) : null,
        dkim_domain: body.dkim?.domainName ?? null,
        dkim_selector: body.dkim?.keySelector ?? null,
        dkim_key_sealed: body.dkim ? services.secretBox.seal(body.dkim.privateKey) : null,
        status: failure === null ? 'verified' : 'failed',
        status_reason: failure,
        verified_at: failure === null ? sql<Date>`now_ms()` : null,
        spf_include: body.spfInclude ?? null,
        dns_findings: JSON.stringify(dns),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await recheckOrgHealth(trx, orgId, services.clock);
    // Sequences that waited for any verified mailbox may take this one now.
    if (failure === null) await reevaluateHeld(trx, { organizationId: orgId, codes: ['no_verified_mailbox'] });
    return (await withDeliverability(trx, orgId, [row], ctx))[0];
  });
}

/** The organization's mailboxes, oldest first. */
export async function listMailboxes(trx: Tx, ctx: MailboxContext, orgId: string) {
  const rows = await trx
    .selectFrom('mailboxes')
    .selectAll()
    .where('organization_id', '=', orgId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return { data: await withDeliverability(trx, orgId, rows, ctx) };
}

/**
 * Changes a mailbox's name or cap and, with `verify`, shakes hands again (a verified mailbox is
 * resumed, a failed one says why); 404 when there is no such mailbox.
 */
export async function updateMailbox(db: Db, ctx: MailboxContext, orgId: string, mailboxId: string, body: MailboxChanges) {
  const { services } = ctx;
  const current = await withOrg(db, orgId, (trx) => mailboxRow(trx, orgId, mailboxId));
  const settings = settingsOf(current, ctx);
  if (body.spfInclude !== undefined) settings.spfInclude = body.spfInclude;
  const url = settings.smtpUrl;
  const [failure, dns] = !body.verify
    ? [undefined, undefined]
    : await Promise.all([
        current.smtp_url_sealed !== null && url === null
          ? 'the SMTP URL cannot be read (the secret key changed): add the mailbox again'
          : handshake(services, url),
        checkDns(settings, ctx.config),
      ]);
  return withOrg(db, orgId, async (trx) => {
    const set: UpdateObject<Database, 'mailboxes'> = { updated_at: sql<Date>`now_ms()` };
    if (body.name !== undefined) set.name = body.name;
    if (body.dailyCap !== undefined) set.daily_cap = body.dailyCap;
    if (body.spfInclude !== undefined) set.spf_include = body.spfInclude;
    if (dns !== undefined) set.dns_findings = JSON.stringify(dns);
    if (failure !== undefined) {
      Object.assign(
        set,
        failure === null
          ? { status: 'verified', status_reason: null, verified_at: sql<Date>`now_ms()`, paused_at: null }
          : { status: 'failed', status_reason: failure },
      );
    }
    const row = await trx
      .updateTable('mailboxes')
      .set(set)
      .where('organization_id', '=', orgId)
      .where('id', '=', mailboxId)
      .returningAll()
      .executeTakeFirstOrThrow();
    if (failure !== undefined) await recheckOrgHealth(trx, orgId, services.clock);
    await reevaluateMailboxHolds(trx, orgId, mailboxId, {
      capChanged: body.dailyCap !== undefined && body.dailyCap !== current.daily_cap,
      verified: failure === null && current.status !== 'verified',
    });
    return (await withDeliverability(trx, orgId, [row], ctx))[0];
  });
}

/**
 * The holds a mailbox's change may lift or move (src/dispatch/reevaluate.ts): its sequences' steps
 * held by its cap when the cap changed; when it became verified (resumed, or verified after a
 * failure), those held because it was paused or unverified, and the organization's steps waiting
 * for any verified mailbox.
 */
async function reevaluateMailboxHolds(trx: Tx, orgId: string, mailboxId: string, change: { capChanged: boolean; verified: boolean }) {
  const own = [...(change.capChanged ? ['mailbox_daily_cap'] : []), ...(change.verified ? ['mailbox_paused', 'mailbox_unavailable'] : [])];
  await reevaluateHeld(trx, { organizationId: orgId, mailboxId, codes: own });
  if (change.verified) await reevaluateHeld(trx, { organizationId: orgId, codes: ['no_verified_mailbox'] });
}
