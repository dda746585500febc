// An organization's mailboxes as the operator registers them: added (verified by an SMTP handshake
// through the mailbox's own server, or the deployment's), changed and verified again, listed. The
// SMTP URL and the DKIM key are stored sealed. A mailbox's state is a signal of the
// organization's health; each answer carries what its sends met lately (hard bounces, refusals
// by reason).
import { sql, type UpdateObject } from 'kysely';
import { type Database, type Db, type Tx, withOrg } from '../../db/database.js';
import { recheckOrgHealth } from '../account/org-health.js';
import type { adminOperations } from '../http/handler.js';
import { invalid, notFound } from '../http/problems.js';
import { smtpTransport, type Transport } from '../mail/transport.js';
import { isoNN, newId } from '../platform/ids.js';
import type { Services } from '../platform/services.js';
import { type Deliverability, mailboxDeliverability } from './health.js';
import { reevaluateHeld } from './reevaluate.js';
import { DEFAULT_MAILBOX_DAILY_CAP } from './settings.js';

type NewMailbox = adminOperations['adminCreateMailbox']['requestBody']['content']['application/json'];
type MailboxChanges = adminOperations['adminUpdateMailbox']['requestBody']['content']['application/json'];

type MailboxRow = Awaited<ReturnType<typeof mailboxRow>>;
async function mailboxRow(trx: Tx, orgId: string, id: string) {
  const m = await trx.selectFrom('mailboxes').selectAll().where('organization_id', '=', orgId).where('id', '=', id).executeTakeFirst();
  if (!m) throw notFound('mailbox');
  return m;
}

const toMailbox = (m: MailboxRow, deliverability: Deliverability) => ({
  id: m.id,
  email: m.email,
  name: m.name,
  dailyCap: m.daily_cap,
  status: m.status as 'verified' | 'failed' | 'paused',
  statusReason: m.status_reason,
  ownSmtp: m.smtp_url_sealed !== null,
  dkim: m.dkim_domain && m.dkim_selector ? { domainName: m.dkim_domain, keySelector: m.dkim_selector } : null,
  deliverability,
  createdAt: isoNN(m.created_at),
});

/** Mailboxes as the operator reads them, each with what its sends met lately (src/dispatch/health.ts). */
async function withDeliverability(trx: Tx, orgId: string, rows: MailboxRow[]) {
  const d = await mailboxDeliverability(
    trx,
    orgId,
    rows.map((r) => r.id),
  );
  return rows.map((r) => toMailbox(r, d.get(r.id)!));
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
export async function createMailbox(db: Db, services: Services, orgId: string, body: NewMailbox) {
  if (body.smtpUrl !== undefined) {
    try {
      ownTransport(body.smtpUrl).close();
    } catch (e) {
      if (e instanceof UnreadableSmtpUrl) throw invalid(`smtpUrl cannot be parsed as a URL (${e.message}).`, 'body.smtpUrl');
      throw e;
    }
  }
  // The handshake runs outside any transaction (it waits on the network).
  const failure = await handshake(services, body.smtpUrl ?? null);
  return withOrg(db, orgId, async (trx) => {
    const email = body.email.trim().toLowerCase();
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
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await recheckOrgHealth(trx, orgId, services.clock);
    // Sequences that waited for any verified mailbox may take this one now.
    if (failure === null) await reevaluateHeld(trx, { organizationId: orgId, codes: ['no_verified_mailbox'] });
    return (await withDeliverability(trx, orgId, [row]))[0];
  });
}

/** The organization's mailboxes, oldest first. */
export async function listMailboxes(trx: Tx, orgId: string) {
  const rows = await trx
    .selectFrom('mailboxes')
    .selectAll()
    .where('organization_id', '=', orgId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return { data: await withDeliverability(trx, orgId, rows) };
}

/**
 * Changes a mailbox's name or cap and, with `verify`, shakes hands again (a verified mailbox is
 * resumed, a failed one says why); 404 when there is no such mailbox.
 */
export async function updateMailbox(db: Db, services: Services, orgId: string, mailboxId: string, body: MailboxChanges) {
  const current = await withOrg(db, orgId, (trx) => mailboxRow(trx, orgId, mailboxId));
  const url = current.smtp_url_sealed === null ? null : services.secretBox.open(current.smtp_url_sealed);
  const failure = !body.verify
    ? undefined
    : current.smtp_url_sealed !== null && url === null
      ? 'the SMTP URL cannot be read (the secret key changed): add the mailbox again'
      : await handshake(services, url);
  return withOrg(db, orgId, async (trx) => {
    const set: UpdateObject<Database, 'mailboxes'> = { updated_at: sql<Date>`now_ms()` };
    if (body.name !== undefined) set.name = body.name;
    if (body.dailyCap !== undefined) set.daily_cap = body.dailyCap;
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
    return (await withDeliverability(trx, orgId, [row]))[0];
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
