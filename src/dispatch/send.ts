// The send job of one queued step. Three phases, so a step is never sent twice:
//   1. claim (one transaction, the queue row locked): the gates, in order; a gate that defers moves
//      the job to when it can pass, one that forbids skips the step with its reason. A step that
//      passes is claimed: its Message-ID minted, its send record written as `sending` (the caps'
//      ledger, counted under the mailbox's and the recipient domain's locks, so no number of
//      workers overshoots), the attempt counted in usage;
//   2. the SMTP transaction, outside any transaction;
//   3. the outcome (one transaction): sent, bounced (5xx: suppression, events, the sequence paused),
//      or tried again later (4xx, connection trouble).
// A job that finds its row claimed already (a worker died between 1 and 3) does nothing: the
// recovery sweep marks such a step possibly sent, and it is never sent again automatically.
import { sql } from 'kysely';
import type { Logger } from 'pino';
import { withOrg, type Db, type Tx } from '../../db/database.js';
import type { Config } from '../config.js';
import type { Services } from '../services.js';
import { emitMany, type EmitInput } from '../events.js';
import { newId } from '../ids.js';
import { domainOfEmail } from '../domains.js';
import { matchSuppression } from '../suppression-match.js';
import { composeMessage, mintMessageId } from '../mail/message.js';
import type { Transport } from '../mail/transport.js';
import { DO_NOT_CONTACT_TAG } from '../drafting/generate.js';
import { usagePeriod } from '../usage.js';
import { sendingSettings, windowOpensAt, type SendingSettings } from './settings.js';
import { cancelQueued, scheduleSend } from './queue.js';
import { checkMailboxHealth } from './health.js';

export interface DispatchDeps { db: Db; config: Config; log: Logger; services: Services }

/** The deployment sender's mailbox id in the ledger and on sequences. */
export const DEPLOYMENT_MAILBOX = 'deployment';
const DAY_MS = 86_400_000;
/** Delays before attempts 2..5 of a step whose SMTP answer was temporary. */
export const RETRY_DELAYS_MS = [60_000, 5 * 60_000, 15 * 60_000, 60 * 60_000];
/** How long a step waits before looking again when its gate has no known end. */
const RECHECK_MS = 15 * 60_000;
/** Ledger statuses that count against caps (a message that reached, or may have reached, a server). */
const COUNTED = ['sending', 'sent', 'possibly_sent', 'bounced'];

type Gate = { skip: string; detail: string } | { defer: string; until: Date; detail: string };

interface Mailbox { id: string; email: string; name: string | null; dailyCap: number; smtpUrlSealed: string | null; dkim: { domainName: string; keySelector: string; keySealed: string } | null; status: string }

interface Claim {
  recordId: string; queueId: string; sequenceId: string; step: number; stepCount: number; contactId: string; draftId: string;
  mailbox: Mailbox; message: ReturnType<typeof composeMessage>;
}

async function loadQueue(trx: Tx, org: string, queueId: string) {
  return trx.selectFrom('send_queue').selectAll().where('organization_id', '=', org).where('id', '=', queueId).forUpdate().executeTakeFirst();
}

async function defer(trx: Tx, org: string, queueId: string, code: string, until: Date, detail: string): Promise<void> {
  await trx.updateTable('send_queue').set({ state: 'deferred', held_by: code, held_detail: detail, next_attempt_at: until, updated_at: sql`now_ms()` } as never)
    .where('organization_id', '=', org).where('id', '=', queueId).execute();
  await scheduleSend(trx, org, queueId, until);
}

async function skip(trx: Tx, org: string, queueId: string, code: string, detail: string): Promise<void> {
  await trx.updateTable('send_queue').set({ state: 'skipped', held_by: code, held_detail: detail, updated_at: sql`now_ms()` } as never)
    .where('organization_id', '=', org).where('id', '=', queueId).execute();
}

/** The organization's mailboxes (verified or paused), and the deployment sender when it is allowed. */
async function candidates(trx: Tx, org: string, settings: SendingSettings, config: Config): Promise<Mailbox[]> {
  const rows = await trx.selectFrom('mailboxes').selectAll().where('organization_id', '=', org).where('status', 'in', ['verified', 'paused']).orderBy('id').execute();
  const own = rows.map((m) => ({
    id: m.id, email: m.email, name: m.name, dailyCap: m.daily_cap, smtpUrlSealed: m.smtp_url_sealed, status: m.status,
    dkim: m.dkim_domain && m.dkim_selector && m.dkim_key_sealed ? { domainName: m.dkim_domain, keySelector: m.dkim_selector, keySealed: m.dkim_key_sealed } : null,
  }));
  if (!settings.allowDeploymentSender) return own;
  return [...own, {
    id: DEPLOYMENT_MAILBOX, email: config.mailFrom.address, name: config.mailFrom.name, dailyCap: settings.deploymentDailyCap,
    smtpUrlSealed: null, dkim: null, status: (settings as { deploymentPaused?: boolean }).deploymentPaused ? 'paused' : 'verified',
  }];
}

/** Sends of a mailbox in the last 24 hours, oldest first (the ledger is the send records). */
async function sentIn24h(trx: Tx, org: string, mailboxIds: string[]) {
  if (mailboxIds.length === 0) return new Map<string, Date[]>();
  const rows = await trx.selectFrom('send_records').select(['mailbox_id', 'sent_at']).where('organization_id', '=', org)
    .where('mailbox_id', 'in', mailboxIds).where('status', 'in', COUNTED).where('sent_at', '>', new Date(Date.now() - DAY_MS))
    .orderBy('sent_at').execute();
  const out = new Map<string, Date[]>(mailboxIds.map((id) => [id, []]));
  for (const r of rows) out.get(r.mailbox_id!)!.push(r.sent_at!);
  return out;
}

/** Phase 1: the gates, then the claim. Null when the step was deferred, skipped, or is not the job's to send. */
async function claim(deps: DispatchDeps, trx: Tx, org: string, queueId: string): Promise<Claim | null> {
  const q = await loadQueue(trx, org, queueId);
  if (!q || (q.state !== 'queued' && q.state !== 'deferred')) return null;
  const now = new Date();
  const gate = async (): Promise<Gate | Mailbox> => {
    if (q.scheduled_at > now) return { defer: 'not_yet_due', until: q.scheduled_at, detail: 'the step is due later' };
    const kill = await trx.selectFrom('platform_settings').select('email_kill_switch').executeTakeFirst();
    if (kill?.email_kill_switch) return { defer: 'kill_switch', until: new Date(now.getTime() + 60_000), detail: 'the operator stopped all sending' };
    const c = await trx.selectFrom('contacts').select(['email_normalized', 'deleted_at', 'erased_at', 'tags', 'snoozed_until'])
      .where('organization_id', '=', org).where('id', '=', q.contact_id).executeTakeFirst();
    if (!c || c.deleted_at !== null || c.erased_at !== null) return { skip: 'contact_removed', detail: 'the contact was deleted or erased' };
    const s = await trx.selectFrom('contact_sequences').select(['status', 'steps']).where('organization_id', '=', org).where('id', '=', q.sequence_id).executeTakeFirst();
    if (!s || !['QUEUED', 'ACTIVE'].includes(s.status)) return { skip: 'sequence_not_active', detail: `the sequence is ${s?.status ?? 'gone'}` };
    const d = await trx.selectFrom('drafts').select(['id', 'status', 'sent_at']).where('organization_id', '=', org)
      .where('sequence_id', '=', q.sequence_id).where('step', '=', q.step).where('superseded_at', 'is', null).executeTakeFirst();
    if (!d || d.status !== 'APPROVED' || d.sent_at !== null) return { skip: 'draft_not_approved', detail: 'the step\'s live draft is not an approved, unsent one' };
    if (d.id !== q.draft_id) await trx.updateTable('send_queue').set({ draft_id: d.id } as never).where('organization_id', '=', org).where('id', '=', q.id).execute();
    if (q.step > 1) {
      const prev = await trx.selectFrom('send_queue').select('state').where('organization_id', '=', org).where('sequence_id', '=', q.sequence_id)
        .where('step', '=', q.step - 1).where('state', 'not in', ['skipped', 'failed']).executeTakeFirst();
      if (!prev || !['sent', 'possibly_sent'].includes(prev.state)) {
        return { defer: 'previous_step_pending', until: new Date(now.getTime() + RECHECK_MS), detail: `step ${q.step - 1} has not gone out yet` };
      }
    }
    const suppression = await matchSuppression(trx, org, c.email_normalized, deps.config.erasureHashSecret);
    if (suppression.suppressed) return { skip: 'suppressed', detail: `the address is suppressed${suppression.entry ? ` (${suppression.entry.reason})` : ''}` };
    if (c.tags.some((t) => t.toLowerCase() === DO_NOT_CONTACT_TAG)) return { skip: 'do_not_contact', detail: 'the contact is tagged do-not-contact' };
    if (c.snoozed_until && c.snoozed_until > now) return { defer: 'contact_snoozed', until: c.snoozed_until, detail: 'the contact is snoozed or out of office' };
    const org_ = await trx.selectFrom('organizations').select('sending').where('id', '=', org).executeTakeFirstOrThrow();
    const settings = sendingSettings(org_.sending);
    const opens = windowOpensAt(settings, now);
    if (opens > now) return { defer: 'sending_window', until: opens, detail: `the sending window opens at ${opens.toISOString()}` };
    // The mailbox: the sequence's own (every later step goes from the first step's), else the one with most cap left.
    const seq = await trx.selectFrom('contact_sequences').select('mailbox_id').where('organization_id', '=', org).where('id', '=', q.sequence_id).executeTakeFirstOrThrow();
    const all = await candidates(trx, org, settings, deps.config);
    // The deployment sender serves only organizations without a verified mailbox of their own.
    const fresh = all.some((m) => m.id !== DEPLOYMENT_MAILBOX && m.status === 'verified')
      ? all.filter((m) => m.id !== DEPLOYMENT_MAILBOX && m.status === 'verified') : all.filter((m) => m.id === DEPLOYMENT_MAILBOX);
    const pool = seq.mailbox_id ? all.filter((m) => m.id === seq.mailbox_id) : fresh;
    if (pool.length === 0) {
      return seq.mailbox_id
        ? { defer: 'mailbox_unavailable', until: new Date(now.getTime() + RECHECK_MS), detail: 'the sequence\'s mailbox is no longer verified' }
        : { defer: 'no_verified_mailbox', until: new Date(now.getTime() + RECHECK_MS), detail: 'no verified mailbox, and the deployment sender is not allowed' };
    }
    if (pool[0].status === 'paused') return { defer: 'mailbox_paused', until: new Date(now.getTime() + RECHECK_MS), detail: `${pool[0].email} is paused` };
    // The pool's ledgers, counted under their locks (taken in id order, so workers never deadlock):
    // the claim below is the only writer, so no number of workers overshoots a cap or the gap.
    for (const m of [...pool].sort((a, b) => (a.id < b.id ? -1 : 1))) {
      await sql`SELECT pg_advisory_xact_lock(hashtextextended('mailbox:' || ${org} || ':' || ${m.id}, 0))`.execute(trx);
    }
    const counts = await sentIn24h(trx, org, pool.map((m) => m.id));
    // When each mailbox may send next: after its cap frees a slot, and after the minimum gap.
    const ready = pool.map((m) => {
      const sent = counts.get(m.id)!;
      if (sent.length >= m.dailyCap) {
        const until = new Date((sent[sent.length - m.dailyCap]?.getTime() ?? now.getTime()) + DAY_MS);
        return { m, until, code: 'mailbox_daily_cap', detail: `${m.email} sent its ${m.dailyCap} messages of the last 24 hours` };
      }
      const last = sent[sent.length - 1];
      if (last && settings.minGapSeconds > 0 && last.getTime() + settings.minGapSeconds * 1000 > now.getTime()) {
        // A fixed gap plus a random extra of up to a fifth, so sends do not fall on a beat.
        const until = new Date(last.getTime() + settings.minGapSeconds * 1000 * (1 + Math.random() * 0.2));
        return { m, until, code: 'min_gap', detail: `${m.email} sent ${Math.round((now.getTime() - last.getTime()) / 1000)} s ago` };
      }
      return { m, until: null, code: null, detail: '' };
    });
    const open = ready.filter((r) => r.until === null).sort((a, b) => (b.m.dailyCap - counts.get(b.m.id)!.length) - (a.m.dailyCap - counts.get(a.m.id)!.length));
    if (open.length === 0) {
      const soonest = ready.sort((a, b) => a.until!.getTime() - b.until!.getTime())[0];
      return { defer: soonest.code!, until: soonest.until!, detail: soonest.detail };
    }
    const best = open[0].m;
    const domain = domainOfEmail(c.email_normalized);
    await sql`SELECT pg_advisory_xact_lock(hashtextextended('domain:' || ${org} || ':' || ${domain}, 0))`.execute(trx);
    const toDomain = await trx.selectFrom('send_records').select(['sent_at']).where('organization_id', '=', org).where('recipient_domain', '=', domain)
      .where('status', 'in', COUNTED).where('sent_at', '>', new Date(now.getTime() - DAY_MS)).orderBy('sent_at').execute();
    if (toDomain.length >= settings.recipientDomainDailyCap) {
      const until = new Date(toDomain[toDomain.length - settings.recipientDomainDailyCap].sent_at!.getTime() + DAY_MS);
      return { defer: 'recipient_domain_daily_cap', until, detail: `${settings.recipientDomainDailyCap} messages went to ${domain} in the last 24 hours` };
    }
    return best;
  };
  const g = await gate();
  if ('defer' in g) { await defer(trx, org, q.id, g.defer, g.until, g.detail); return null; }
  if ('skip' in g) { await skip(trx, org, q.id, g.skip, g.detail); return null; }
  return claimStep(deps, trx, org, q, g);
}

/** Writes the claim: the send record (`sending`, with the message as it will go), the queue row, the mailbox, usage. */
async function claimStep(deps: DispatchDeps, trx: Tx, org: string, q: NonNullable<Awaited<ReturnType<typeof loadQueue>>>, mailbox: Mailbox): Promise<Claim> {
  const contact = await trx.selectFrom('contacts').select(['name', 'email_normalized']).where('organization_id', '=', org).where('id', '=', q.contact_id).executeTakeFirstOrThrow();
  const draft = await trx.selectFrom('drafts').select(['id', 'subject', 'body']).where('organization_id', '=', org).where('sequence_id', '=', q.sequence_id)
    .where('step', '=', q.step).where('superseded_at', 'is', null).executeTakeFirstOrThrow();
  const seq = await trx.selectFrom('contact_sequences').select(['steps']).where('organization_id', '=', org).where('id', '=', q.sequence_id).executeTakeFirstOrThrow();
  const earlier = await trx.selectFrom('send_records').select(['message_id', 'subject', 'step']).where('organization_id', '=', org)
    .where('sequence_id', '=', q.sequence_id).where('status', 'in', ['sent', 'possibly_sent']).orderBy('step').execute();
  const org_ = await trx.selectFrom('organizations').select('sending').where('id', '=', org).executeTakeFirstOrThrow();
  const settings = sendingSettings(org_.sending);
  const recordId = newId('snd');
  const messageId = mintMessageId(mailbox.email);
  const base = deps.config.publicBaseUrl;
  const signer = deps.services.signer;
  const dkimKey = mailbox.dkim ? deps.services.secretBox.open(mailbox.dkim.keySealed) : null;
  const message = composeMessage({
    from: { name: mailbox.name, address: mailbox.email },
    to: { name: contact.name || null, address: contact.email_normalized },
    // A later step keeps the first step's subject, as a reply to it.
    subject: earlier.find((e) => e.step === 1)?.subject?.replace(/^re:\s*/i, '') ?? draft.subject,
    body: draft.body,
    messageId,
    thread: earlier.map((e) => e.message_id!).filter(Boolean),
    unsubscribeUrl: `${base}/unsubscribe/${signer.sign('unsubscribe', { o: org, r: recordId })}`,
    dkim: mailbox.dkim && dkimKey ? { domainName: mailbox.dkim.domainName, keySelector: mailbox.dkim.keySelector, privateKey: dkimKey } : null,
    tracking: settings.tracking ? {
      pixel: `${base}/t/o/${signer.sign('open', { o: org, r: recordId })}`,
      click: (url) => `${base}/t/c/${signer.sign('click', { o: org, r: recordId, u: url })}`,
    } : null,
  });
  const headers = { ...(message.headers as Record<string, string>), 'Message-ID': messageId,
    ...(message.inReplyTo ? { 'In-Reply-To': String(message.inReplyTo), References: (message.references as string[]).join(' ') } : {}) };
  await trx.insertInto('send_records').values({
    organization_id: org, id: recordId, contact_id: q.contact_id, draft_id: draft.id, to_email: contact.email_normalized,
    from_email: mailbox.email, subject: String(message.subject), text_body: String(message.text), html_body: String(message.html),
    headers: JSON.stringify(headers), status: 'sending', sent_at: sql`now_ms()`, queue_id: q.id, sequence_id: q.sequence_id, step: q.step,
    mailbox_id: mailbox.id, recipient_domain: domainOfEmail(contact.email_normalized), message_id: messageId,
  } as never).execute();
  await trx.updateTable('send_queue').set({
    state: 'sending', held_by: null, held_detail: null, attempts: sql`attempts + 1`, send_record_id: recordId, draft_id: draft.id, updated_at: sql`now_ms()`,
  } as never).where('organization_id', '=', org).where('id', '=', q.id).execute();
  await trx.updateTable('contact_sequences').set({ mailbox_id: mailbox.id } as never)
    .where('organization_id', '=', org).where('id', '=', q.sequence_id).where('mailbox_id', 'is', null).execute();
  await sql`
    INSERT INTO usage_counters (organization_id, period_start, sends_attempted) VALUES (${org}, ${usagePeriod().start.toISOString().slice(0, 10)}, 1)
    ON CONFLICT (organization_id, period_start) DO UPDATE SET sends_attempted = usage_counters.sends_attempted + 1`.execute(trx);
  return {
    recordId, queueId: q.id, sequenceId: q.sequence_id, step: q.step, stepCount: (seq.steps as unknown[]).length,
    contactId: q.contact_id, draftId: draft.id, mailbox, message,
  };
}

/** Lets the step after this one go now, or at its own time. */
async function releaseNext(trx: Tx, org: string, sequenceId: string, step: number): Promise<void> {
  const next = await trx.selectFrom('send_queue').select(['id', 'scheduled_at']).where('organization_id', '=', org).where('sequence_id', '=', sequenceId)
    .where('step', '=', step + 1).where('state', 'in', ['queued', 'deferred']).executeTakeFirst();
  if (next) await scheduleSend(trx, org, next.id, next.scheduled_at > new Date() ? next.scheduled_at : null);
}

/**
 * A claimed step whose outcome cannot be known (no answer after the message went over, or its
 * worker died): possibly sent, shown so in the outbox and the send queue, never sent again
 * automatically (sending twice does more harm than not knowing), and the sequence goes on.
 */
export async function markPossiblySent(trx: Tx, org: string, recordId: string, detail: string): Promise<boolean> {
  const r = await trx.updateTable('send_records').set({ status: 'possibly_sent', smtp_response: detail.slice(0, 1000) } as never)
    .where('organization_id', '=', org).where('id', '=', recordId).where('status', '=', 'sending')
    .returning(['queue_id', 'sequence_id', 'step']).executeTakeFirst();
  if (!r) return false;
  await trx.updateTable('send_queue').set({ state: 'possibly_sent', held_by: 'possibly_sent', held_detail: detail.slice(0, 500), updated_at: sql`now_ms()` } as never)
    .where('organization_id', '=', org).where('id', '=', r.queue_id!).where('state', '=', 'sending').execute();
  await releaseNext(trx, org, r.sequence_id!, r.step!);
  return true;
}

/** Phase 3: what the SMTP answer means for the step, the sequence, the contact and the mailbox. */
async function record(deps: DispatchDeps, trx: Tx, org: string, c: Claim, outcome: Awaited<ReturnType<Transport['send']>>): Promise<void> {
  const events: EmitInput[] = [];
  const ref = { sequenceId: c.sequenceId, contactId: c.contactId, draftId: c.draftId, step: c.step };
  if (outcome.kind === 'accepted') {
    // A record the recovery sweep marked possibly sent while the server was slow is sent after all.
    const r = await trx.updateTable('send_records').set({ status: 'sent', smtp_response: outcome.response, provider_message_id: outcome.providerMessageId } as never)
      .where('organization_id', '=', org).where('id', '=', c.recordId).where('status', 'in', ['sending', 'possibly_sent']).returning('id').execute();
    if (r.length === 0) return;
    await trx.updateTable('send_queue').set({ state: 'sent', updated_at: sql`now_ms()` } as never).where('organization_id', '=', org).where('id', '=', c.queueId).execute();
    await trx.updateTable('drafts').set({ sent_at: sql`now_ms()`, updated_at: sql`now_ms()` } as never).where('organization_id', '=', org).where('id', '=', c.draftId).execute();
    const seq = await trx.selectFrom('contact_sequences').select(['status', 'current_step']).where('organization_id', '=', org).where('id', '=', c.sequenceId).forUpdate().executeTakeFirstOrThrow();
    const last = c.step >= c.stepCount;
    const status = last ? 'COMPLETED' : seq.status === 'QUEUED' ? 'ACTIVE' : seq.status;
    await trx.updateTable('contact_sequences').set({ status, current_step: Math.max(seq.current_step, c.step), updated_at: sql`now_ms()` } as never)
      .where('organization_id', '=', org).where('id', '=', c.sequenceId).execute();
    events.push({ type: 'draft.sent', resource: { type: 'Draft', id: c.draftId }, data: { ...ref, mailboxId: c.mailbox.id, messageId: c.message.messageId } });
    if (seq.status === 'QUEUED') events.push({ type: 'sequence.started', resource: { type: 'Sequence', id: c.sequenceId }, data: { sequenceId: c.sequenceId, contactId: c.contactId } });
    if (last) events.push({ type: 'sequence.completed', resource: { type: 'Sequence', id: c.sequenceId }, data: { sequenceId: c.sequenceId, contactId: c.contactId, steps: c.stepCount } });
    // The next step waits for this one: it may go now, or at its own time.
    await releaseNext(trx, org, c.sequenceId, c.step);
  } else if (outcome.kind === 'unknown') {
    await markPossiblySent(trx, org, c.recordId, outcome.response);
  } else if (outcome.kind === 'permanent') {
    await trx.updateTable('send_records').set({ status: 'bounced', smtp_response: outcome.response } as never).where('organization_id', '=', org).where('id', '=', c.recordId).execute();
    await trx.updateTable('send_queue').set({ state: 'failed', held_by: 'hard_bounce', held_detail: outcome.response, updated_at: sql`now_ms()` } as never)
      .where('organization_id', '=', org).where('id', '=', c.queueId).execute();
    const to = String((c.message.to as { address: string }).address);
    const added = await sql<{ id: string }>`
      INSERT INTO suppression_entries (organization_id, id, level, email, reason, source, notes)
      VALUES (${org}, ${newId('sup')}, 'ADDRESS', ${to}, 'HARD_BOUNCE', 'dispatcher', ${outcome.response.slice(0, 1000)})
      ON CONFLICT (organization_id, level, email) WHERE email IS NOT NULL DO NOTHING RETURNING id`.execute(trx);
    if (added.rows[0]) {
      events.push({ type: 'suppression.added', resource: { type: 'SuppressionEntry', id: added.rows[0].id }, data: { email: to, level: 'ADDRESS', reason: 'HARD_BOUNCE', source: 'dispatcher' } });
    }
    const paused = await trx.updateTable('contact_sequences')
      .set({ status: 'PAUSED', paused_from: sql`status`, paused_at: sql`now_ms()`, updated_at: sql`now_ms()` } as never)
      .where('organization_id', '=', org).where('id', '=', c.sequenceId).where('status', 'in', ['QUEUED', 'ACTIVE']).returning('paused_from').execute();
    await cancelQueued(trx, org, { sequenceIds: [c.sequenceId] }, 'sequence_not_active');
    const failure = { ...ref, code: outcome.code, response: outcome.response };
    events.push(
      { type: 'email.bounced', resource: { type: 'Draft', id: c.draftId }, data: { ...ref, kind: 'hard', code: outcome.code, diagnostic: outcome.response } },
      { type: 'send.failed', resource: { type: 'Draft', id: c.draftId }, data: { ...failure, permanent: true } },
      { type: 'sequence.step_failed', resource: { type: 'Sequence', id: c.sequenceId }, data: { ...failure, reason: 'hard_bounce' } },
    );
    if (paused[0]) {
      events.push({ type: 'sequence.paused', resource: { type: 'Sequence', id: c.sequenceId }, data: { sequenceId: c.sequenceId, contactId: c.contactId, reason: 'hard_bounce', pausedFrom: paused[0].paused_from } });
    }
    events.push(...await checkMailboxHealth(trx, org, c.mailbox.id));
  } else {
    await trx.updateTable('send_records').set({ status: 'failed', smtp_response: outcome.response } as never).where('organization_id', '=', org).where('id', '=', c.recordId).execute();
    const q = await trx.selectFrom('send_queue').select('attempts').where('organization_id', '=', org).where('id', '=', c.queueId).executeTakeFirstOrThrow();
    const delay = RETRY_DELAYS_MS[q.attempts - 1];
    if (delay !== undefined) {
      const until = new Date(Date.now() + delay);
      await defer(trx, org, c.queueId, 'transport_retry', until, `attempt ${q.attempts} answered: ${outcome.response}`.slice(0, 500));
    } else {
      await trx.updateTable('send_queue').set({ state: 'failed', held_by: 'transport_failed', held_detail: outcome.response.slice(0, 500), updated_at: sql`now_ms()` } as never)
        .where('organization_id', '=', org).where('id', '=', c.queueId).execute();
      const failure = { ...ref, code: outcome.code, response: outcome.response, attempts: q.attempts };
      events.push(
        { type: 'send.failed', resource: { type: 'Draft', id: c.draftId }, data: { ...failure, permanent: false } },
        { type: 'sequence.step_failed', resource: { type: 'Sequence', id: c.sequenceId }, data: { ...failure, reason: 'transport_failed' } },
      );
    }
  }
  await emitMany(trx, org, events);
}

/** The send job of one queue row. */
export async function sendStep(deps: DispatchDeps, org: string, queueId: string): Promise<void> {
  const c = await withOrg(deps.db, org, (trx) => claim(deps, trx, org, queueId));
  if (!c) return;
  const transport = deps.services.mail.forMailbox(c.mailbox.id === DEPLOYMENT_MAILBOX ? null : c.mailbox.smtpUrlSealed);
  const outcome = transport
    ? await transport.send(c.message)
    : { kind: 'temporary' as const, response: 'the mailbox\'s SMTP credentials cannot be read (the secret key changed): set the mailbox up again', code: null, providerMessageId: null };
  if (deps.services.faults.has('send:after-smtp')) throw new Error('injected fault: send:after-smtp');
  await withOrg(deps.db, org, (trx) => record(deps, trx, org, c, outcome));
}
