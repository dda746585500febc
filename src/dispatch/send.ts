// The send job. Every queued step has a job of its own, due at the step's time (src/dispatch/
// queue.ts); a job that runs dispatches a batch: its own step and up to BATCH - 1 other due steps
// of the organization, in three phases, so a step is never sent twice:
//   1. claim (one transaction, the batch's queue rows locked): the gates, in order, set-based; a
//      gate that defers moves the step's job to when it can pass, one that forbids skips the step
//      with its reason. The steps that pass are claimed: each gets its mailbox, its Message-ID, and
//      its send record written as `sending` (the caps' ledger, counted under the mailboxes' and the
//      recipient domains' locks, so no number of workers overshoots), the attempt counted in usage,
//      and the jobs of the other claimed steps removed;
//   2. the SMTP transactions, outside any transaction, concurrently over the transports' pools;
//   3. the outcomes (one transaction): sent, bounced (5xx: suppression, events, the sequence
//      paused), tried again later (4xx, connection trouble), or possibly sent (no answer after the
//      whole message went over).
// A worker that dies between 1 and 3 leaves records `sending`: the recovery sweep marks them
// possibly sent, and they are never sent again automatically.
// Batching is what makes it fast: a step costs a share of some twenty statements, not thirty.
import { sql } from 'kysely';
import pLimit from 'p-limit';
import { type Tx, withOrg } from '../../db/database.js';
import { usagePeriod } from '../account/usage.js';
import { DO_NOT_CONTACT_TAG } from '../compliance/do-not-contact.js';
import { suppressedAmong } from '../compliance/suppression-match.js';
import { domainOfEmail } from '../crm/domains.js';
import { composeMessage, mintMessageId } from '../mail/message.js';
import { replyAddress } from '../mail/tokens.js';
import type { SendOutcome } from '../mail/transport.js';
import type { Config } from '../platform/config.js';
import { type EmitInput, emitMany } from '../platform/events.js';
import { newId } from '../platform/ids.js';
import type { Deps } from '../platform/services.js';
import { recordHardBounce } from './bounce.js';
import { scheduleSends } from './queue.js';
import { type SendingSettings, sendingSettings, windowOpensAt } from './settings.js';

/** The deployment sender's mailbox id in the ledger and on sequences. */
export const DEPLOYMENT_MAILBOX = 'deployment';
/** Steps one job dispatches at most: enough to amortize its statements, few enough that a worker killed mid-batch leaves little possibly sent. */
export const BATCH = 50;
const DAY_MS = 86_400_000;
/** Delays before attempts 2..5 of a step whose SMTP answer was temporary. */
export const RETRY_DELAYS_MS = [60_000, 5 * 60_000, 15 * 60_000, 60 * 60_000];
/** How long a step waits before looking again when its gate has no known end. */
const RECHECK_MS = 15 * 60_000;
/** Ledger statuses that count against caps (a message that reached, or may have reached, a server). */
export const COUNTED = ['sending', 'sent', 'possibly_sent', 'bounced'];

interface Mailbox {
  id: string;
  email: string;
  name: string | null;
  dailyCap: number;
  smtpUrlSealed: string | null;
  dkim: { domainName: string; keySelector: string; keySealed: string } | null;
  status: string;
}

interface Row {
  id: string;
  sequence_id: string;
  step: number;
  contact_id: string;
  draft_id: string;
  scheduled_at: Date;
  attempts: number;
  email: string;
  name: string | null;
  draftId: string;
  subject: string;
  body: string;
  stepCount: number;
  seqMailbox: string | null;
  seqStatus: string;
}

type Decision = { skip: string; detail: string } | { defer: string; until: Date; detail: string };

interface Claim {
  recordId: string;
  queueId: string;
  sequenceId: string;
  step: number;
  stepCount: number;
  contactId: string;
  draftId: string;
  mailbox: Mailbox;
  message: ReturnType<typeof composeMessage>;
}

/** The organization's mailboxes (verified or paused), and the deployment sender when it is allowed. */
async function candidates(trx: Tx, org: string, settings: SendingSettings, config: Config): Promise<Mailbox[]> {
  const rows = await trx
    .selectFrom('mailboxes')
    .selectAll()
    .where('organization_id', '=', org)
    .where('status', 'in', ['verified', 'paused'])
    .orderBy('id')
    .execute();
  const own = rows.map((m) => ({
    id: m.id,
    email: m.email,
    name: m.name,
    dailyCap: m.daily_cap,
    smtpUrlSealed: m.smtp_url_sealed,
    status: m.status,
    dkim:
      m.dkim_domain && m.dkim_selector && m.dkim_key_sealed
        ? { domainName: m.dkim_domain, keySelector: m.dkim_selector, keySealed: m.dkim_key_sealed }
        : null,
  }));
  if (!settings.allowDeploymentSender) return own;
  return [
    ...own,
    {
      id: DEPLOYMENT_MAILBOX,
      email: config.mailFrom.address,
      name: config.mailFrom.name,
      dailyCap: settings.deploymentDailyCap,
      smtpUrlSealed: null,
      dkim: null,
      status: (settings as { deploymentPaused?: boolean }).deploymentPaused ? 'paused' : 'verified',
    },
  ];
}

/** Takes transaction-scoped advisory locks on the keys, in sorted order, so two batches never deadlock. */
async function lockAll(trx: Tx, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  await sql`SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) FROM (SELECT k FROM unnest(${[...new Set(keys)].sort()}::text[]) k ORDER BY k) s`.execute(
    trx,
  );
}

interface Ledger {
  count: number;
  oldest: Date | null;
  newest: Date | null;
}

/**
 * The rolling 24-hour ledger of some mailboxes or recipient domains, for caps of `cap(key)` and a
 * batch of up to BATCH claims. The hourly buckets give an upper bound of each count in a few rows;
 * a key whose bound could reach its cap within the batch (or whose last send time is wanted, for
 * the minimum gap) is counted exactly from the send records. An upper bound never lets a cap be
 * overshot; counting exactly near the cap keeps a step from waiting while there is room.
 */
async function ledger(
  trx: Tx,
  org: string,
  kind: 'mailbox' | 'domain',
  keys: string[],
  cap: (key: string) => number,
  exactAlways: boolean,
) {
  const out = new Map<string, Ledger>();
  if (keys.length === 0) return out;
  const bounds = await sql<{ k: string; sends: number }>`
    SELECT substr(scope, ${kind.length + 2}) AS k, sum(sends)::int AS sends FROM send_ledger_hours
    WHERE organization_id = ${org} AND scope = ANY(${keys.map((k) => `${kind}:${k}`)}::text[]) AND hour > now() - interval '25 hours'
    GROUP BY scope`.execute(trx);
  const bound = new Map(bounds.rows.map((r) => [r.k, r.sends]));
  const exact = keys.filter((k) => exactAlways || (bound.get(k) ?? 0) + BATCH > cap(k));
  for (const k of keys) out.set(k, { count: bound.get(k) ?? 0, oldest: null, newest: null });
  if (exact.length === 0) return out;
  const column = kind === 'mailbox' ? 'mailbox_id' : 'recipient_domain';
  const rows = await sql<{ k: string; count: number; oldest: Date; newest: Date }>`
    SELECT ${sql.ref(column)} AS k, count(*)::int AS count, min(sent_at) AS oldest, max(sent_at) AS newest FROM send_records
    WHERE organization_id = ${org} AND ${sql.ref(column)} = ANY(${exact}::text[]) AND status = ANY(${COUNTED}::text[])
      AND sent_at > now() - interval '24 hours'
    GROUP BY 1`.execute(trx);
  for (const k of exact) out.set(k, { count: 0, oldest: null, newest: null });
  for (const r of rows.rows) out.set(r.k, r);
  return out;
}

/** The batch: the job's own step first (when it is still open), then other due steps nobody holds. */
export async function lockBatch(trx: Tx, org: string, ownId: string | null) {
  type Locked = {
    id: string;
    sequence_id: string;
    step: number;
    contact_id: string;
    draft_id: string;
    scheduled_at: Date;
    attempts: number;
  };
  // Two statements, each on an index (the primary key; state and due time), not one that scans every open step.
  const own =
    ownId === null
      ? []
      : (
          await sql<Locked>`
    SELECT id, sequence_id, step, contact_id, draft_id, scheduled_at, attempts FROM send_queue
    WHERE organization_id = ${org} AND id = ${ownId} AND state IN ('queued', 'deferred')
    FOR UPDATE SKIP LOCKED`.execute(trx)
        ).rows;
  const others = await sql<Locked>`
    SELECT id, sequence_id, step, contact_id, draft_id, scheduled_at, attempts FROM send_queue
    WHERE organization_id = ${org} AND state IN ('queued', 'deferred') AND next_attempt_at <= now() AND id <> ${ownId ?? ''}
    ORDER BY next_attempt_at LIMIT ${BATCH - own.length}
    FOR UPDATE SKIP LOCKED`.execute(trx);
  return [...own, ...others.rows];
}

/** Phase 1: the gates, then the claims. */
async function claimBatch(deps: Deps, trx: Tx, org: string, ownId: string | null): Promise<Claim[]> {
  const locked = await lockBatch(trx, org, ownId);
  if (locked.length === 0) return [];
  const now = new Date();
  const decided = new Map<string, Decision>();
  let pending = locked.map((r) => r as Row);
  const decide = (keep: (r: Row) => Decision | null) => {
    pending = pending.filter((r) => {
      const d = keep(r);
      if (d) decided.set(r.id, d);
      return !d;
    });
  };
  const deferAll = (code: string, until: Date, detail: string) => decide(() => ({ defer: code, until, detail }));

  decide((r) => (r.scheduled_at > now ? { defer: 'not_yet_due', until: r.scheduled_at, detail: 'the step is due later' } : null));
  const kill = await trx.selectFrom('platform_settings').select('email_kill_switch').executeTakeFirst();
  if (kill?.email_kill_switch) deferAll('kill_switch', new Date(now.getTime() + 60_000), 'the operator stopped all sending');
  if (pending.length > 0) {
    const contacts = new Map(
      (
        await trx
          .selectFrom('contacts')
          .select(['id', 'name', 'email_normalized', 'deleted_at', 'erased_at', 'tags', 'snoozed_until', 'out_of_office_until'])
          .where('organization_id', '=', org)
          .where(
            'id',
            'in',
            pending.map((r) => r.contact_id),
          )
          .execute()
      ).map((c) => [c.id, c]),
    );
    const seqs = new Map(
      (
        await trx
          .selectFrom('contact_sequences')
          .select(['id', 'status', 'steps', 'mailbox_id'])
          .where('organization_id', '=', org)
          .where(
            'id',
            'in',
            pending.map((r) => r.sequence_id),
          )
          .execute()
      ).map((s) => [s.id, s]),
    );
    const drafts = new Map(
      (
        await trx
          .selectFrom('drafts')
          .select(['id', 'sequence_id', 'step', 'status', 'sent_at', 'subject', 'body'])
          .where('organization_id', '=', org)
          .where(
            'sequence_id',
            'in',
            pending.map((r) => r.sequence_id),
          )
          .where('superseded_at', 'is', null)
          .execute()
      ).map((d) => [`${d.sequence_id}:${d.step}`, d]),
    );
    const later = pending.filter((r) => r.step > 1);
    const before = new Map(
      later.length === 0
        ? []
        : (
            await trx
              .selectFrom('send_queue')
              .select(['sequence_id', 'step', 'state'])
              .where('organization_id', '=', org)
              .where(
                'sequence_id',
                'in',
                later.map((r) => r.sequence_id),
              )
              .where('state', 'not in', ['skipped', 'failed'])
              .execute()
          ).map((q) => [`${q.sequence_id}:${q.step}`, q.state]),
    );
    decide((r) => {
      const c = contacts.get(r.contact_id);
      if (!c || c.deleted_at !== null || c.erased_at !== null)
        return { skip: 'contact_removed', detail: 'the contact was deleted or erased' };
      const s = seqs.get(r.sequence_id);
      if (!s || !['QUEUED', 'ACTIVE'].includes(s.status))
        return { skip: 'sequence_not_active', detail: `the sequence is ${s?.status ?? 'gone'}` };
      const d = drafts.get(`${r.sequence_id}:${r.step}`);
      if (d?.status !== 'APPROVED' || d.sent_at !== null)
        return { skip: 'draft_not_approved', detail: "the step's live draft is not an approved, unsent one" };
      if (r.step > 1 && !['sent', 'possibly_sent'].includes(before.get(`${r.sequence_id}:${r.step - 1}`) ?? '')) {
        return {
          defer: 'previous_step_pending',
          until: new Date(now.getTime() + RECHECK_MS),
          detail: `step ${r.step - 1} has not gone out yet`,
        };
      }
      Object.assign(r, {
        email: c.email_normalized,
        name: c.name,
        draftId: d.id,
        subject: d.subject,
        body: d.body,
        stepCount: (s.steps as unknown[]).length,
        seqMailbox: s.mailbox_id,
        seqStatus: s.status,
      });
      return null;
    });
    const suppressed = pending.length
      ? await suppressedAmong(
          trx,
          org,
          pending.map((r) => r.email),
          deps.config.erasureHashSecret,
        )
      : new Set<string>();
    decide((r) => {
      if (suppressed.has(r.email)) return { skip: 'suppressed', detail: 'the address is suppressed' };
      const c = contacts.get(r.contact_id)!;
      if (c.tags.some((t) => t.toLowerCase() === DO_NOT_CONTACT_TAG))
        return { skip: 'do_not_contact', detail: 'the contact is tagged do-not-contact' };
      if (c.snoozed_until && c.snoozed_until > now)
        return { defer: 'contact_snoozed', until: c.snoozed_until, detail: 'the contact is snoozed' };
      if (c.out_of_office_until && c.out_of_office_until > now) {
        return { defer: 'contact_out_of_office', until: c.out_of_office_until, detail: 'the contact answered with an out-of-office reply' };
      }
      return null;
    });
  }
  let claims: Claim[] = [];
  // The window, the mailboxes and the claims only for steps still passing (not, say, under the kill switch).
  if (pending.length > 0) {
    const orgRow = await trx.selectFrom('organizations').select('sending').where('id', '=', org).executeTakeFirstOrThrow();
    const settings = sendingSettings(orgRow.sending);
    const opens = windowOpensAt(settings, now);
    if (opens > now) deferAll('sending_window', opens, `the sending window opens at ${opens.toISOString()}`);
    const chosen = pending.length ? await chooseMailboxes(deps, trx, org, pending, settings, now, decide) : new Map<string, Mailbox>();
    if (pending.length > 0) claims = await writeClaims(deps, trx, org, pending, chosen, settings);
  }
  await writeDecisions(trx, org, decided);
  // The other steps now decided have their jobs moved (deferred) or gone (skipped, claimed).
  const done = [...claims.map((c) => c.queueId), ...[...decided].filter(([, d]) => 'skip' in d).map(([id]) => id)].filter(
    (id) => id !== ownId,
  );
  if (done.length) await sql`SELECT remove_jobs(${done}::text[])`.execute(trx);
  return claims;
}

/**
 * Rotation and caps: each step goes from its sequence's mailbox (every later step from the first
 * step's), else from the mailbox with most cap left; within the mailbox's daily cap, its minimum
 * gap, and the recipient domain's daily cap, counted under their locks.
 */
async function chooseMailboxes(
  deps: Deps,
  trx: Tx,
  org: string,
  rows: Row[],
  settings: SendingSettings,
  now: Date,
  decide: (keep: (r: Row) => Decision | null) => void,
): Promise<Map<string, Mailbox>> {
  const all = await candidates(trx, org, settings, deps.config);
  // The deployment sender serves only organizations without a verified mailbox of their own.
  const own = all.filter((m) => m.id !== DEPLOYMENT_MAILBOX && m.status === 'verified');
  const fresh = own.length ? own : all.filter((m) => m.id === DEPLOYMENT_MAILBOX);
  const poolOf = (r: Row) => (r.seqMailbox ? all.filter((m) => m.id === r.seqMailbox) : fresh);
  const used = [...new Set(rows.flatMap((r) => poolOf(r).map((m) => m.id)))];
  await lockAll(
    trx,
    used.map((id) => `mailbox:${org}:${id}`),
  );
  const gapMs = settings.minGapSeconds * 1000;
  const caps = new Map(all.map((m) => [m.id, m.dailyCap]));
  const counts = await ledger(trx, org, 'mailbox', used, (id) => caps.get(id)!, gapMs > 0);
  const state = new Map(
    all.map((m) => {
      const l = counts.get(m.id);
      return [m.id, { left: m.dailyCap - (l?.count ?? 0), oldest: l?.oldest ?? null, last: l?.newest ?? null }];
    }),
  );
  const chosen = new Map<string, Mailbox>();
  decide((r) => {
    const pool = poolOf(r);
    if (pool.length === 0) {
      return r.seqMailbox
        ? {
            defer: 'mailbox_unavailable',
            until: new Date(now.getTime() + RECHECK_MS),
            detail: "the sequence's mailbox is no longer verified",
          }
        : {
            defer: 'no_verified_mailbox',
            until: new Date(now.getTime() + RECHECK_MS),
            detail: 'no verified mailbox, and the deployment sender is not allowed',
          };
    }
    if (pool[0].status === 'paused')
      return { defer: 'mailbox_paused', until: new Date(now.getTime() + RECHECK_MS), detail: `${pool[0].email} is paused` };
    // When each mailbox of the pool may send next: once its cap frees a slot, and after the gap.
    const ready = pool.map((m) => {
      const s = state.get(m.id)!;
      if (s.left <= 0) {
        return {
          m,
          until: new Date((s.oldest?.getTime() ?? now.getTime()) + DAY_MS),
          code: 'mailbox_daily_cap',
          detail: `${m.email} sent its ${m.dailyCap} messages of the last 24 hours`,
        };
      }
      if (s.last && gapMs > 0 && s.last.getTime() + gapMs > now.getTime()) {
        // A fixed gap plus a random extra of up to a fifth, so sends do not fall on a beat.
        const until = new Date(s.last.getTime() + gapMs * (1 + Math.random() * 0.2));
        return { m, until, code: 'min_gap', detail: `${m.email} sent ${Math.round((now.getTime() - s.last.getTime()) / 1000)} s ago` };
      }
      return { m, until: null, code: '', detail: '' };
    });
    const open = ready.filter((x) => x.until === null).sort((a, b) => state.get(b.m.id)!.left - state.get(a.m.id)!.left);
    if (open.length === 0) {
      const soonest = ready.sort((a, b) => a.until!.getTime() - b.until!.getTime())[0];
      return { defer: soonest.code, until: soonest.until!, detail: soonest.detail };
    }
    const best = open[0].m;
    const s = state.get(best.id)!;
    s.left -= 1;
    s.last = now;
    chosen.set(r.id, best);
    return null;
  });
  const domains = [...new Set(rows.filter((r) => chosen.has(r.id)).map((r) => domainOfEmail(r.email)))];
  await lockAll(
    trx,
    domains.map((d) => `domain:${org}:${d}`),
  );
  const cap = settings.recipientDomainDailyCap;
  const toDomain = await ledger(trx, org, 'domain', domains, () => cap, false);
  decide((r) => {
    if (!chosen.has(r.id)) return null;
    const d = domainOfEmail(r.email);
    const l = toDomain.get(d)!;
    if (l.count >= cap) {
      chosen.delete(r.id);
      return {
        defer: 'recipient_domain_daily_cap',
        until: new Date((l.oldest?.getTime() ?? now.getTime()) + DAY_MS),
        detail: `${cap} messages went to ${d} in the last 24 hours`,
      };
    }
    toDomain.set(d, { ...l, count: l.count + 1 });
    return null;
  });
  return chosen;
}

/** Writes the claims: each step's send record (`sending`, with the message as it will go), its queue row, its sequence's mailbox, usage. */
async function writeClaims(
  deps: Deps,
  trx: Tx,
  org: string,
  rows: Row[],
  chosen: Map<string, Mailbox>,
  settings: SendingSettings,
): Promise<Claim[]> {
  const later = rows.filter((r) => r.step > 1);
  const earlier =
    later.length === 0
      ? []
      : await trx
          .selectFrom('send_records')
          .select(['sequence_id', 'message_id', 'subject', 'step'])
          .where('organization_id', '=', org)
          .where(
            'sequence_id',
            'in',
            later.map((r) => r.sequence_id),
          )
          .where('status', 'in', ['sent', 'possibly_sent'])
          .orderBy('step')
          .execute();
  const base = deps.config.publicBaseUrl;
  const { signer, secretBox } = deps.services;
  const claims: Claim[] = [];
  for (const r of rows) {
    const mailbox = chosen.get(r.id)!;
    const thread = earlier.filter((e) => e.sequence_id === r.sequence_id);
    const recordId = newId('snd');
    const replyTo = deps.config.inboundReplyDomain ? replyAddress(signer, deps.config.inboundReplyDomain, org, recordId) : null;
    const dkimKey = mailbox.dkim ? secretBox.open(mailbox.dkim.keySealed) : null;
    const message = composeMessage({
      from: { name: mailbox.name, address: mailbox.email },
      to: { name: r.name || null, address: r.email },
      // A later step keeps the first step's subject, as a reply to it.
      subject: thread.find((e) => e.step === 1)?.subject?.replace(/^re:\s*/i, '') ?? r.subject,
      body: r.body,
      messageId: mintMessageId(mailbox.email),
      thread: thread.map((e) => e.message_id!).filter(Boolean),
      unsubscribeUrl: `${base}/unsubscribe/${signer.sign('unsubscribe', { o: org, r: recordId })}`,
      dkim:
        mailbox.dkim && dkimKey
          ? { domainName: mailbox.dkim.domainName, keySelector: mailbox.dkim.keySelector, privateKey: dkimKey }
          : null,
      tracking: settings.tracking
        ? {
            pixel: `${base}/t/o/${signer.sign('open', { o: org, r: recordId })}`,
            click: (url) => `${base}/t/c/${signer.sign('click', { o: org, r: recordId, u: url })}`,
          }
        : null,
      replyTo,
    });
    claims.push({
      recordId,
      queueId: r.id,
      sequenceId: r.sequence_id,
      step: r.step,
      stepCount: r.stepCount,
      contactId: r.contact_id,
      draftId: r.draftId,
      mailbox,
      message,
    });
  }
  if (claims.length === 0) return claims;
  await trx
    .insertInto('send_records')
    .values(
      claims.map((c) => {
        const m = c.message;
        const headers = {
          ...(m.headers as Record<string, string>),
          'Message-ID': String(m.messageId),
          ...(m.replyTo ? { 'Reply-To': String(m.replyTo) } : {}),
          ...(m.inReplyTo ? { 'In-Reply-To': String(m.inReplyTo), References: (m.references as string[]).join(' ') } : {}),
        };
        const to = (m.to as { address: string }).address;
        return {
          organization_id: org,
          id: c.recordId,
          contact_id: c.contactId,
          draft_id: c.draftId,
          to_email: to,
          from_email: c.mailbox.email,
          subject: String(m.subject),
          text_body: String(m.text),
          html_body: String(m.html),
          headers: JSON.stringify(headers),
          status: 'sending',
          sent_at: sql`now_ms()`,
          queue_id: c.queueId,
          sequence_id: c.sequenceId,
          step: c.step,
          mailbox_id: c.mailbox.id,
          recipient_domain: domainOfEmail(to),
          message_id: String(m.messageId),
        };
      }) as never,
    )
    .execute();
  await sql`
    UPDATE send_queue q SET state = 'sending', held_by = NULL, held_detail = NULL, attempts = q.attempts + 1, send_record_id = v.record_id,
      draft_id = v.draft_id, updated_at = now_ms()
    FROM unnest(${claims.map((c) => c.queueId)}::text[], ${claims.map((c) => c.recordId)}::text[], ${claims.map((c) => c.draftId)}::text[]) AS v(id, record_id, draft_id)
    WHERE q.organization_id = ${org} AND q.id = v.id`.execute(trx);
  const firstSteps = new Set(rows.filter((r) => r.seqMailbox === null).map((r) => r.id));
  const firsts = claims.filter((c) => firstSteps.has(c.queueId));
  if (firsts.length) {
    await sql`
      UPDATE contact_sequences s SET mailbox_id = v.mailbox_id
      FROM unnest(${firsts.map((c) => c.sequenceId)}::text[], ${firsts.map((c) => c.mailbox.id)}::text[]) AS v(id, mailbox_id)
      WHERE s.organization_id = ${org} AND s.id = v.id AND s.mailbox_id IS NULL`.execute(trx);
  }
  // The hourly buckets of the caps' ledger (see ledger()).
  const scopes = claims.flatMap((c) => [
    `mailbox:${c.mailbox.id}`,
    `domain:${domainOfEmail(String((c.message.to as { address: string }).address))}`,
  ]);
  await sql`
    INSERT INTO send_ledger_hours (organization_id, scope, hour, sends)
    SELECT ${org}, scope, date_trunc('hour', now()), count(*) FROM unnest(${scopes}::text[]) AS scope GROUP BY scope
    ON CONFLICT (organization_id, scope, hour) DO UPDATE SET sends = send_ledger_hours.sends + EXCLUDED.sends`.execute(trx);
  await sql`
    INSERT INTO usage_counters (organization_id, period_start, sends_attempted) VALUES (${org}, ${usagePeriod().start.toISOString().slice(0, 10)}, ${claims.length})
    ON CONFLICT (organization_id, period_start) DO UPDATE SET sends_attempted = usage_counters.sends_attempted + EXCLUDED.sends_attempted`.execute(
    trx,
  );
  return claims;
}

/** The batch's deferred and skipped steps: their state and reason; a deferred step's job moves to when it may pass. */
async function writeDecisions(trx: Tx, org: string, decided: Map<string, Decision>): Promise<void> {
  if (decided.size === 0) return;
  const ids = [...decided.keys()];
  const ds = [...decided.values()];
  await sql`
    UPDATE send_queue q SET state = v.state, held_by = v.code, held_detail = v.detail,
      next_attempt_at = coalesce(v.until, q.next_attempt_at), updated_at = now_ms()
    FROM unnest(${ids}::text[], ${ds.map((d) => ('skip' in d ? 'skipped' : 'deferred'))}::text[], ${ds.map((d) => ('skip' in d ? d.skip : d.defer))}::text[],
                ${ds.map((d) => d.detail)}::text[], ${ds.map((d) => ('defer' in d ? d.until : null))}::timestamptz[]) AS v(id, state, code, detail, until)
    WHERE q.organization_id = ${org} AND q.id = v.id`.execute(trx);
  const deferred = [...decided].filter(([, d]) => 'defer' in d) as [string, { until: Date }][];
  await scheduleSends(
    trx,
    org,
    deferred.map(([id, d]) => ({ queueId: id, runAt: d.until })),
  );
}

/** Lets the steps after these go now, or at their own time. */
async function releaseNext(trx: Tx, org: string, after: { sequenceId: string; step: number }[]): Promise<void> {
  if (after.length === 0) return;
  const next = await sql<{ id: string; next_attempt_at: Date }>`
    UPDATE send_queue q SET next_attempt_at = greatest(q.scheduled_at, now_ms()), updated_at = now_ms()
    FROM unnest(${after.map((a) => a.sequenceId)}::text[], ${after.map((a) => a.step + 1)}::int[]) AS v(sequence_id, step)
    WHERE q.organization_id = ${org} AND q.sequence_id = v.sequence_id AND q.step = v.step AND q.state IN ('queued', 'deferred')
    RETURNING q.id, q.next_attempt_at`.execute(trx);
  await scheduleSends(
    trx,
    org,
    next.rows.map((n) => ({ queueId: n.id, runAt: n.next_attempt_at })),
  );
}

/**
 * A claimed step whose outcome cannot be known (no answer after the message went over, or its
 * worker died): possibly sent, shown so in the outbox and the send queue, never sent again
 * automatically (sending twice does more harm than not knowing), and the sequence goes on.
 */
export async function markPossiblySent(trx: Tx, org: string, recordId: string, detail: string): Promise<boolean> {
  const r = await trx
    .updateTable('send_records')
    .set({ status: 'possibly_sent', smtp_response: detail.slice(0, 1000) } as never)
    .where('organization_id', '=', org)
    .where('id', '=', recordId)
    .where('status', '=', 'sending')
    .returning(['queue_id', 'sequence_id', 'step'])
    .executeTakeFirst();
  if (!r) return false;
  await trx
    .updateTable('send_queue')
    .set({ state: 'possibly_sent', held_by: 'possibly_sent', held_detail: detail.slice(0, 500), updated_at: sql`now_ms()` } as never)
    .where('organization_id', '=', org)
    .where('id', '=', r.queue_id!)
    .where('state', '=', 'sending')
    .execute();
  await releaseNext(trx, org, [{ sequenceId: r.sequence_id!, step: r.step! }]);
  return true;
}

/** Phase 3 for the accepted steps, set-based: the ledger, the queue, the drafts, the sequences, the events, the next steps. */
async function recordAccepted(trx: Tx, org: string, done: { c: Claim; outcome: SendOutcome }[]): Promise<EmitInput[]> {
  if (done.length === 0) return [];
  // A record the recovery sweep marked possibly sent while the server was slow is sent after all.
  // Each sent message joins the conversation (GET /messages) as OUTBOUND, in the same statement.
  const updated = await sql<{ id: string }>`
    WITH sent AS (
      UPDATE send_records r SET status = 'sent', smtp_response = v.response, provider_message_id = v.provider
      FROM unnest(${done.map((d) => d.c.recordId)}::text[], ${done.map((d) => d.outcome.response)}::text[], ${done.map((d) => d.outcome.providerMessageId)}::text[],
                  ${done.map(() => newId('msg'))}::text[])
        AS v(id, response, provider, message_row)
      WHERE r.organization_id = ${org} AND r.id = v.id AND r.status IN ('sending', 'possibly_sent')
      RETURNING r.*, v.message_row
    ), written AS (
      INSERT INTO messages (organization_id, id, contact_id, direction, channel, from_email, to_email, subject, body, message_id,
        send_record_id, sequence_id, status)
      SELECT s.organization_id, s.message_row, s.contact_id, 'OUTBOUND', 'email', s.from_email, s.to_email, s.subject, coalesce(d.body, s.text_body, ''),
        s.message_id, s.id, s.sequence_id, 'sent'
      FROM sent s LEFT JOIN drafts d ON d.organization_id = s.organization_id AND d.id = s.draft_id
    )
    SELECT id FROM sent`.execute(trx);
  const live = new Set(updated.rows.map((r) => r.id));
  const sent = done.map((d) => d.c).filter((c) => live.has(c.recordId));
  if (sent.length === 0) return [];
  await sql`UPDATE send_queue SET state = 'sent', updated_at = now_ms() WHERE organization_id = ${org} AND id = ANY(${sent.map((c) => c.queueId)}::text[])`.execute(
    trx,
  );
  await sql`UPDATE drafts SET sent_at = now_ms(), updated_at = now_ms() WHERE organization_id = ${org} AND id = ANY(${sent.map((c) => c.draftId)}::text[])`.execute(
    trx,
  );
  // QUEUED -> ACTIVE at the first send, COMPLETED after the last step; the old status says which events.
  const seqs = await sql<{ id: string; old: string }>`
    UPDATE contact_sequences s SET
      status = CASE WHEN v.last THEN 'COMPLETED' WHEN s.status = 'QUEUED' THEN 'ACTIVE' ELSE s.status END,
      current_step = greatest(s.current_step, v.step), updated_at = now_ms()
    FROM (SELECT s0.id, s0.status AS old FROM contact_sequences s0 WHERE s0.organization_id = ${org} AND s0.id = ANY(${sent.map((c) => c.sequenceId)}::text[]) FOR UPDATE) o,
         unnest(${sent.map((c) => c.sequenceId)}::text[], ${sent.map((c) => c.step)}::int[], ${sent.map((c) => c.step >= c.stepCount)}::boolean[]) AS v(id, step, last)
    WHERE s.organization_id = ${org} AND s.id = v.id AND o.id = v.id
    RETURNING s.id, o.old`.execute(trx);
  const old = new Map(seqs.rows.map((s) => [s.id, s.old]));
  const events: EmitInput[] = [];
  for (const c of sent) {
    const ref = { sequenceId: c.sequenceId, contactId: c.contactId, draftId: c.draftId, step: c.step };
    events.push({
      type: 'draft.sent',
      resource: { type: 'Draft', id: c.draftId },
      data: { ...ref, mailboxId: c.mailbox.id, messageId: String(c.message.messageId) },
    });
    if (old.get(c.sequenceId) === 'QUEUED')
      events.push({
        type: 'sequence.started',
        resource: { type: 'Sequence', id: c.sequenceId },
        data: { sequenceId: c.sequenceId, contactId: c.contactId },
      });
    if (c.step >= c.stepCount)
      events.push({
        type: 'sequence.completed',
        resource: { type: 'Sequence', id: c.sequenceId },
        data: { sequenceId: c.sequenceId, contactId: c.contactId, steps: c.stepCount },
      });
  }
  // The next step waits for this one: it may go now, or at its own time.
  await releaseNext(
    trx,
    org,
    sent.filter((c) => c.step < c.stepCount),
  );
  return events;
}

/** Phase 3 for a step the server refused for good (a hard bounce): the shared bounce, and the step failed. */
async function recordBounce(trx: Tx, org: string, c: Claim, outcome: SendOutcome): Promise<EmitInput[]> {
  const ref = { sequenceId: c.sequenceId, contactId: c.contactId, draftId: c.draftId, step: c.step };
  await trx
    .updateTable('send_queue')
    .set({ state: 'failed', held_by: 'hard_bounce', held_detail: outcome.response.slice(0, 500), updated_at: sql`now_ms()` } as never)
    .where('organization_id', '=', org)
    .where('id', '=', c.queueId)
    .execute();
  const events = await recordHardBounce(trx, org, {
    ...ref,
    recordId: c.recordId,
    email: String((c.message.to as { address: string }).address),
    mailboxId: c.mailbox.id,
    code: outcome.code,
    diagnostic: outcome.response,
    source: 'dispatcher',
  });
  const failure = { ...ref, code: outcome.code, response: outcome.response };
  events.push(
    { type: 'send.failed', resource: { type: 'Draft', id: c.draftId }, data: { ...failure, permanent: true } },
    { type: 'sequence.step_failed', resource: { type: 'Sequence', id: c.sequenceId }, data: { ...failure, reason: 'hard_bounce' } },
  );
  return events;
}

/** Phase 3 for a temporary failure: tried again after a growing delay, then given up with send.failed. */
async function recordRetry(trx: Tx, org: string, c: Claim, outcome: SendOutcome): Promise<EmitInput[]> {
  await trx
    .updateTable('send_records')
    .set({ status: 'failed', smtp_response: outcome.response } as never)
    .where('organization_id', '=', org)
    .where('id', '=', c.recordId)
    .execute();
  const q = await trx
    .selectFrom('send_queue')
    .select('attempts')
    .where('organization_id', '=', org)
    .where('id', '=', c.queueId)
    .executeTakeFirstOrThrow();
  const delay = RETRY_DELAYS_MS[q.attempts - 1];
  if (delay !== undefined) {
    const until = new Date(Date.now() + delay);
    await writeDecisions(
      trx,
      org,
      new Map([
        [c.queueId, { defer: 'transport_retry', until, detail: `attempt ${q.attempts} answered: ${outcome.response}`.slice(0, 500) }],
      ]),
    );
    return [];
  }
  await trx
    .updateTable('send_queue')
    .set({ state: 'failed', held_by: 'transport_failed', held_detail: outcome.response.slice(0, 500), updated_at: sql`now_ms()` } as never)
    .where('organization_id', '=', org)
    .where('id', '=', c.queueId)
    .execute();
  const failure = {
    sequenceId: c.sequenceId,
    contactId: c.contactId,
    draftId: c.draftId,
    step: c.step,
    code: outcome.code,
    response: outcome.response,
    attempts: q.attempts,
  };
  return [
    { type: 'send.failed', resource: { type: 'Draft', id: c.draftId }, data: { ...failure, permanent: false } },
    { type: 'sequence.step_failed', resource: { type: 'Sequence', id: c.sequenceId }, data: { ...failure, reason: 'transport_failed' } },
  ];
}

/** Phase 3: what the SMTP answers mean for the steps, the sequences, the contacts and the mailboxes. */
async function recordOutcomes(trx: Tx, org: string, done: { c: Claim; outcome: SendOutcome }[]): Promise<void> {
  const events = await recordAccepted(
    trx,
    org,
    done.filter((d) => d.outcome.kind === 'accepted'),
  );
  for (const { c, outcome } of done) {
    if (outcome.kind === 'permanent') events.push(...(await recordBounce(trx, org, c, outcome)));
    else if (outcome.kind === 'temporary') events.push(...(await recordRetry(trx, org, c, outcome)));
    else if (outcome.kind === 'unknown') await markPossiblySent(trx, org, c.recordId, outcome.response);
  }
  await emitMany(trx, org, events);
}

/**
 * Batches in flight in this process: enough to keep every pooled SMTP connection busy; more would
 * only claim steps early (and leave more possibly sent if the process dies) and add to the memory
 * and the bookkeeping of messages waiting for a connection.
 */
const inFlight = pLimit(4);

/** The send job of a queue row: dispatches a batch with that row in it (or without, when it is held elsewhere or gone). */
export function sendStep(deps: Deps, org: string, queueId: string | null): Promise<void> {
  return inFlight(() => dispatchBatch(deps, org, queueId));
}

async function dispatchBatch(deps: Deps, org: string, queueId: string | null): Promise<void> {
  const claims = await withOrg(deps.db, org, (trx) => claimBatch(deps, trx, org, queueId));
  if (claims.length === 0) return;
  const done = await Promise.all(
    claims.map(async (c) => {
      const transport = deps.services.mail.forMailbox(c.mailbox.id === DEPLOYMENT_MAILBOX ? null : c.mailbox.smtpUrlSealed);
      const outcome: SendOutcome = transport
        ? await transport.send(c.message)
        : {
            kind: 'temporary',
            response: "the mailbox's SMTP credentials cannot be read (the secret key changed): set the mailbox up again",
            code: null,
            providerMessageId: null,
          };
      return { c, outcome };
    }),
  );
  if (deps.services.faults.has('send:after-smtp')) throw new Error('injected fault: send:after-smtp');
  await withOrg(deps.db, org, (trx) => recordOutcomes(trx, org, done));
}
