// Operator rows of the dispatcher: organizations' sending settings, mailboxes (verified by an SMTP
// handshake), the deployment's kill switch, the send queue and the outbox.
import { sql } from 'kysely';
import { type Tx, withSystem } from '../../db/database.js';
import { recheckOrgHealth } from '../../src/account/org-health.js';
import { requireOrg, requireOrgExists } from '../../src/account/organizations.js';
import { DEFAULT_MAILBOX_DAILY_CAP } from '../../src/dispatch/settings.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { invalid, notFound } from '../../src/http/problems.js';
import { smtpTransport } from '../../src/mail/transport.js';
import { iso, isoNN, newId } from '../../src/platform/ids.js';
import type { Services } from '../../src/platform/services.js';

type MailboxRow = Awaited<ReturnType<typeof mailboxRow>>;
async function mailboxRow(trx: Tx, orgId: string, id: string) {
  const m = await trx.selectFrom('mailboxes').selectAll().where('organization_id', '=', orgId).where('id', '=', id).executeTakeFirst();
  if (!m) throw notFound('mailbox');
  return m;
}

const toMailbox = (m: MailboxRow) => ({
  id: m.id,
  email: m.email,
  name: m.name,
  dailyCap: m.daily_cap,
  status: m.status as 'verified' | 'failed' | 'paused',
  statusReason: m.status_reason,
  ownSmtp: m.smtp_url_sealed !== null,
  dkim: m.dkim_domain && m.dkim_selector ? { domainName: m.dkim_domain, keySelector: m.dkim_selector } : null,
  createdAt: isoNN(m.created_at),
});

/** An SMTP handshake through the mailbox's transport: null when it succeeded, else why not. */
async function handshake(services: Services, smtpUrl: string | null): Promise<string | null> {
  if (smtpUrl === null) return services.mail.deployment.verify();
  const t = smtpTransport(smtpUrl, { timeoutMs: 10_000 });
  try {
    return await t.verify();
  } finally {
    t.close();
  }
}

const adminCreateMailbox: AdminHandler<'adminCreateMailbox'> = async ({ db, params, body, services }) => {
  await requireOrgExists(db, params.orgId);
  // The handshake runs outside any transaction (it waits on the network).
  const failure = await handshake(services, body.smtpUrl ?? null);
  return withSystem(db, async (trx) => {
    const email = body.email.trim().toLowerCase();
    const dup = await trx
      .selectFrom('mailboxes')
      .select('id')
      .where('organization_id', '=', params.orgId)
      .where('email', '=', email)
      .executeTakeFirst();
    if (dup) throw invalid(`The organization already has a mailbox for ${email} (${dup.id}).`, 'body.email');
    const row = await trx
      .insertInto('mailboxes')
      .values({
        organization_id: params.orgId,
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
        verified_at: failure === null ? sql`now_ms()` : null,
      } as never)
      .returningAll()
      .executeTakeFirstOrThrow();
    await recheckOrgHealth(trx, params.orgId);
    return { status: 201 as const, body: toMailbox(row) };
  });
};

const adminListMailboxes: AdminHandler<'adminListMailboxes'> = async ({ db, params }) =>
  withSystem(db, async (trx) => {
    await requireOrg(trx, params.orgId);
    const rows = await trx
      .selectFrom('mailboxes')
      .selectAll()
      .where('organization_id', '=', params.orgId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return { status: 200 as const, body: { data: rows.map(toMailbox) } };
  });

const adminUpdateMailbox: AdminHandler<'adminUpdateMailbox'> = async ({ db, params, body, services }) => {
  const current = await withSystem(db, (trx) => mailboxRow(trx, params.orgId, params.mailboxId));
  const url = current.smtp_url_sealed === null ? null : services.secretBox.open(current.smtp_url_sealed);
  const failure = !body.verify
    ? undefined
    : current.smtp_url_sealed !== null && url === null
      ? 'the SMTP URL cannot be read (the secret key changed): add the mailbox again'
      : await handshake(services, url);
  return withSystem(db, async (trx) => {
    const set: Record<string, unknown> = { updated_at: sql`now_ms()` };
    if (body.name !== undefined) set.name = body.name;
    if (body.dailyCap !== undefined) set.daily_cap = body.dailyCap;
    if (failure !== undefined) {
      Object.assign(
        set,
        failure === null
          ? { status: 'verified', status_reason: null, verified_at: sql`now_ms()`, paused_at: null }
          : { status: 'failed', status_reason: failure },
      );
    }
    const row = await trx
      .updateTable('mailboxes')
      .set(set as never)
      .where('organization_id', '=', params.orgId)
      .where('id', '=', params.mailboxId)
      .returningAll()
      .executeTakeFirstOrThrow();
    if (failure !== undefined) await recheckOrgHealth(trx, params.orgId);
    return { status: 200 as const, body: toMailbox(row) };
  });
};

const adminGetSettings: AdminHandler<'adminGetSettings'> = async ({ db }) => {
  const r = await db.selectFrom('platform_settings').select('email_kill_switch').executeTakeFirstOrThrow();
  return { status: 200 as const, body: { emailKillSwitch: r.email_kill_switch } };
};

const adminUpdateSettings: AdminHandler<'adminUpdateSettings'> = async ({ db, body }) => {
  const r = await db
    .updateTable('platform_settings')
    .set({ email_kill_switch: body.emailKillSwitch, updated_at: sql`now_ms()` } as never)
    .returning('email_kill_switch')
    .executeTakeFirstOrThrow();
  return { status: 200 as const, body: { emailKillSwitch: r.email_kill_switch } };
};

const adminListSendQueue: AdminHandler<'adminListSendQueue'> = async ({ db, query }) =>
  withSystem(db, async (trx) => {
    if (query.organizationId !== undefined) await requireOrg(trx, query.organizationId);
    let q = trx.selectFrom('send_queue').selectAll().where('state', '<>', 'sent');
    if (query.organizationId !== undefined) q = q.where('organization_id', '=', query.organizationId);
    const rows = await q.orderBy('scheduled_at').orderBy('step').orderBy('id').execute();
    return {
      status: 200 as const,
      body: {
        data: rows.map((r) => ({
          id: r.id,
          sequenceId: r.sequence_id,
          draftId: r.draft_id,
          contactId: r.contact_id,
          step: r.step,
          scheduledAt: isoNN(r.scheduled_at),
          state: r.state as 'queued',
          heldBy: r.held_by,
          heldDetail: r.held_detail,
          nextAttemptAt: isoNN(r.next_attempt_at),
          attempts: r.attempts,
        })),
      },
    };
  });

const adminListOutbox: AdminHandler<'adminListOutbox'> = async ({ db, query }) =>
  withSystem(db, async (trx) => {
    if (query.organizationId !== undefined) await requireOrg(trx, query.organizationId);
    let q = trx.selectFrom('send_records').selectAll().where('sent_at', 'is not', null);
    if (query.organizationId !== undefined) q = q.where('organization_id', '=', query.organizationId);
    const rows = await q.orderBy('sent_at').orderBy('id').execute();
    return {
      status: 200 as const,
      body: {
        data: rows.map((r) => ({
          id: r.id,
          to: r.to_email,
          from: r.from_email ?? '',
          subject: r.subject,
          text: r.text_body,
          html: r.html_body,
          headers: (r.headers ?? {}) as Record<string, string>,
          draftId: r.draft_id,
          contactId: r.contact_id,
          sentAt: iso(r.sent_at)!,
          status: r.status as 'sent',
          messageId: r.message_id,
          mailboxId: r.mailbox_id,
          step: r.step,
        })),
      },
    };
  });

export const sendingHandlers: AdminHandlers = {
  adminCreateMailbox,
  adminListMailboxes,
  adminUpdateMailbox,
  adminGetSettings,
  adminUpdateSettings,
  adminListSendQueue,
  adminListOutbox,
};
