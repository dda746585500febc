// The gates a due step passes before it is claimed, in their order (runGates), set-based over the
// batch. A gate that forbids skips the step with its reason; one that defers moves the step's job to
// when it can pass (src/dispatch/outcomes.ts writeDecisions). Each gate sees only the steps the gates
// before it let through; each is named for its reason code.

import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { isDoNotContact } from '../compliance/do-not-contact.js';
import { suppressedAmong } from '../compliance/suppression-match.js';
import { isLiveContactRow } from '../crm/live-contacts.js';
import { deploymentSendsForReal, insecureLinksReason, mailboxSendsForReal } from '../mail/link-safety.js';
import type { Deps } from '../platform/services.js';
import { throttleGates } from './backoff.js';
import { type Batch, type Decision, type Mailbox, RECHECK_MS, type Row } from './batch.js';
import { loadStepData, type StepData, takeStepData } from './claim.js';
import { chooseMailboxes } from './mailbox.js';
import { localDayStart, nextLocalDay, type SendingSettings, sendingSettings, windowOpensAt } from './settings.js';

/** What the steps that passed every gate go out with. */
export interface Passed {
  settings: SendingSettings;
  /** Each passing step's mailbox, by queue row id. */
  chosen: Map<string, Mailbox>;
}

/**
 * The gates, in their order; null when no step passes them all. The data of the later gates is
 * read only for steps still passing (not, say, under the kill switch).
 */
export async function runGates(deps: Deps, trx: Tx, org: string, batch: Batch): Promise<Passed | null> {
  const { now } = batch;
  batch.decide((r) => notYetDue(r, now));
  const read = await switchAndSettings(trx, org);
  killSwitch(read.kill, batch);
  insecureLinks(deps, batch, null);
  if (batch.pending.length === 0) return null;
  const data = await loadStepData(trx, org, batch.pending);
  batch.decide(
    (r) => contactRemoved(r, data) ?? sequenceNotActive(r, data) ?? draftNotApproved(r, data) ?? previousStepPending(r, data, now),
  );
  takeStepData(batch.pending, data);
  const suppressed = await suppressedRecipients(deps, trx, org, batch.pending);
  batch.decide(
    (r) => isSuppressed(r, suppressed) ?? doNotContact(r, data) ?? contactSnoozed(r, data, now) ?? contactOutOfOffice(r, data, now),
  );
  if (batch.pending.length === 0) return null;
  if (read.sending === null) throw new Error(`organization ${org} not found`);
  const settings = sendingSettings(read.sending);
  sendingWindow(batch, settings);
  if (batch.pending.length === 0) return null;
  // mailbox_unavailable, no_verified_mailbox, mailbox_paused, mailbox_daily_cap, min_gap, recipient_domain_daily_cap.
  const chosen = await chooseMailboxes(deps, trx, org, batch, settings);
  insecureLinks(deps, batch, chosen);
  await contactDailyLimit(trx, org, batch, chosen, settings);
  await throttled(deps, trx, org, batch, chosen);
  if (batch.pending.length === 0) return null;
  return { settings, chosen };
}

/** server_throttled, recipient_domain_throttled: a server or recipient domain that said "slow down" is backed off, then resumes slowly. */
async function throttled(deps: Deps, trx: Tx, org: string, batch: Batch, chosen: Map<string, Mailbox>): Promise<void> {
  await throttleGates(deps, trx, org, batch, chosen);
}

function notYetDue(r: Row, now: Date): Decision | null {
  return r.scheduled_at > now ? { defer: 'not_yet_due', until: r.scheduled_at, detail: 'the step is due later' } : null;
}

/** The operator's kill switch and the organization's sending settings, read together (one round trip per batch). */
async function switchAndSettings(trx: Tx, org: string) {
  const r = await sql<{ kill: boolean | null; sending: Parameters<typeof sendingSettings>[0] | null }>`
    SELECT (SELECT email_kill_switch FROM platform_settings LIMIT 1) AS kill, (SELECT sending FROM organizations WHERE id = ${org}) AS sending`.execute(
    trx,
  );
  return r.rows[0];
}

function killSwitch(kill: boolean | null, batch: Batch): void {
  if (kill) batch.deferAll('kill_switch', new Date(batch.now.getTime() + 60_000), 'the operator stopped all sending');
}

/**
 * insecure_links: a step that would go over a real SMTP server while PUBLIC_BASE_URL is unfit for
 * its links (src/mail/link-safety.ts) waits, rechecked every RECHECK_MS. With SMTP_URL every step
 * goes over SMTP and waits here, early (`chosen` null); without it only the steps whose mailbox has
 * its own server do, judged once their mailbox is chosen (a step held by it gives its mailbox up).
 */
function insecureLinks(deps: Deps, batch: Batch, chosen: Map<string, Mailbox> | null): void {
  const reason = insecureLinksReason(deps.config);
  if (!reason) return;
  const until = new Date(batch.now.getTime() + RECHECK_MS);
  if (!chosen) {
    if (deploymentSendsForReal(deps.services.mail)) batch.deferAll('insecure_links', until, reason);
    return;
  }
  batch.decide((r) => {
    const m = chosen.get(r.id);
    if (!m || !mailboxSendsForReal(deps.services.mail, m)) return null;
    chosen.delete(r.id);
    return { defer: 'insecure_links', until, detail: reason };
  });
}

function contactRemoved(r: Row, data: StepData): Decision | null {
  const c = data.contacts.get(r.contact_id);
  if (!c || !isLiveContactRow(c)) return { skip: 'contact_removed', detail: 'the contact was deleted or erased' };
  return null;
}

function sequenceNotActive(r: Row, data: StepData): Decision | null {
  const s = data.seqs.get(r.sequence_id);
  if (!s || !['QUEUED', 'ACTIVE'].includes(s.status))
    return { skip: 'sequence_not_active', detail: `the sequence is ${s?.status ?? 'gone'}` };
  return null;
}

function draftNotApproved(r: Row, data: StepData): Decision | null {
  const d = data.drafts.get(`${r.sequence_id}:${r.step}`);
  if (d?.status !== 'APPROVED' || d.sent_at !== null)
    return { skip: 'draft_not_approved', detail: "the step's live draft is not an approved, unsent one" };
  return null;
}

function previousStepPending(r: Row, data: StepData, now: Date): Decision | null {
  if (r.step > 1 && !['sent', 'possibly_sent'].includes(data.before.get(`${r.sequence_id}:${r.step - 1}`) ?? '')) {
    return {
      defer: 'previous_step_pending',
      until: new Date(now.getTime() + RECHECK_MS),
      detail: `step ${r.step - 1} has not gone out yet`,
    };
  }
  return null;
}

/** The suppressed addresses among the passing steps' recipients (none read when no step is left). */
async function suppressedRecipients(deps: Deps, trx: Tx, org: string, pending: Row[]): Promise<Set<string>> {
  return pending.length
    ? await suppressedAmong(
        trx,
        org,
        pending.map((r) => r.email),
        deps.config.erasureHashSecret,
      )
    : new Set<string>();
}

function isSuppressed(r: Row, suppressed: Set<string>): Decision | null {
  return suppressed.has(r.email) ? { skip: 'suppressed', detail: 'the address is suppressed' } : null;
}

function doNotContact(r: Row, data: StepData): Decision | null {
  const c = data.contacts.get(r.contact_id)!;
  if (isDoNotContact(c.tags)) return { skip: 'do_not_contact', detail: 'the contact is tagged do-not-contact' };
  return null;
}

function contactSnoozed(r: Row, data: StepData, now: Date): Decision | null {
  const c = data.contacts.get(r.contact_id)!;
  if (c.snoozed_until && c.snoozed_until > now)
    return { defer: 'contact_snoozed', until: c.snoozed_until, detail: 'the contact is snoozed' };
  return null;
}

function contactOutOfOffice(r: Row, data: StepData, now: Date): Decision | null {
  const c = data.contacts.get(r.contact_id)!;
  if (c.out_of_office_until && c.out_of_office_until > now) {
    return { defer: 'contact_out_of_office', until: c.out_of_office_until, detail: 'the contact answered with an out-of-office reply' };
  }
  return null;
}

function sendingWindow(batch: Batch, settings: SendingSettings): void {
  const opens = windowOpensAt(settings, batch.now);
  if (opens > batch.now) batch.deferAll('sending_window', opens, `the sending window opens at ${opens.toISOString()}`);
}

/** Send records that count against a contact's day: a message claimed, sent or possibly sent (not one refused or failed). */
const TO_CONTACT = ['sending', 'sent', 'possibly_sent'];

/**
 * At most `contactDailyLimit` messages to one contact per local day (the organization's time
 * zone), across every sequence and mailbox: counted from the send records since the day's start,
 * plus the steps this batch let through before, under the contacts' locks. It comes last, so a
 * step held by a cap does not use up the contact's day; a step held by it gives its mailbox up.
 * Locks are taken in one order in every batch (mailboxes, then recipient domains, then contacts,
 * each set sorted, in one statement: src/dispatch/mailbox.ts), so two batches never deadlock.
 */
async function contactDailyLimit(
  trx: Tx,
  org: string,
  batch: Batch,
  chosen: Map<string, Mailbox>,
  settings: SendingSettings,
): Promise<void> {
  const contacts = [...new Set(batch.pending.filter((r) => chosen.has(r.id)).map((r) => r.contact_id))];
  if (contacts.length === 0) return;
  // Their locks (contactLockKey) were taken with the mailboxes' and the domains', for every step of the batch (chooseMailboxes).
  // A probe per contact (its few records, by the contact index): a range over the day's sends of
  // the whole organization, which the planner may otherwise pick, grows with every send.
  const counted = await sql<{ contact_id: string; n: number }>`
    SELECT c.contact_id, (
      SELECT count(*)::int FROM send_records r
      WHERE r.organization_id = ${org} AND r.contact_id = c.contact_id AND r.status = ANY(${TO_CONTACT}::text[])
        AND r.sent_at >= ${localDayStart(settings, batch.now)}::timestamptz) AS n
    FROM unnest(${contacts}::text[]) AS c(contact_id)`.execute(trx);
  const today = new Map(counted.rows.map((r) => [r.contact_id, r.n]));
  const limit = settings.contactDailyLimit;
  const until = windowOpensAt(settings, nextLocalDay(settings, batch.now));
  batch.decide((r) => {
    if (!chosen.has(r.id)) return null;
    const n = today.get(r.contact_id) ?? 0;
    if (n >= limit) {
      chosen.delete(r.id);
      return {
        defer: 'contact_daily_limit',
        until,
        detail: `${n} message${n === 1 ? '' : 's'} went to the contact today (${settings.timeZone}); the limit is ${limit} a day`,
      };
    }
    today.set(r.contact_id, n + 1);
    return null;
  });
}
