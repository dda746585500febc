// The gates a due step passes before it is claimed, in their order (runGates), set-based over the
// batch. A gate that forbids skips the step with its reason; one that defers moves the step's job to
// when it can pass (src/dispatch/outcomes.ts writeDecisions). Each gate sees only the steps the gates
// before it let through; each is named for its reason code.

import type { Tx } from '../../db/database.js';
import { isDoNotContact } from '../compliance/do-not-contact.js';
import { suppressedAmong } from '../compliance/suppression-match.js';
import { isLiveContactRow } from '../crm/live-contacts.js';
import { deploymentSendsForReal, insecureLinksReason, mailboxSendsForReal } from '../mail/link-safety.js';
import type { Deps } from '../platform/services.js';
import { type Batch, type Decision, type Mailbox, RECHECK_MS, type Row } from './batch.js';
import { loadStepData, type StepData, takeStepData } from './claim.js';
import { chooseMailboxes, recipientDomainCap } from './mailbox.js';
import { type SendingSettings, sendingSettings, windowOpensAt } from './settings.js';

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
  await killSwitch(trx, batch);
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
  const settings = await organizationSending(trx, org);
  sendingWindow(batch, settings);
  if (batch.pending.length === 0) return null;
  // mailbox_unavailable, no_verified_mailbox, mailbox_paused, mailbox_daily_cap, min_gap.
  const chosen = await chooseMailboxes(deps, trx, org, batch, settings);
  insecureLinks(deps, batch, chosen);
  await recipientDomainCap(trx, org, batch, chosen, settings);
  if (batch.pending.length === 0) return null;
  return { settings, chosen };
}

function notYetDue(r: Row, now: Date): Decision | null {
  return r.scheduled_at > now ? { defer: 'not_yet_due', until: r.scheduled_at, detail: 'the step is due later' } : null;
}

async function killSwitch(trx: Tx, batch: Batch): Promise<void> {
  const kill = await trx.selectFrom('platform_settings').select('email_kill_switch').executeTakeFirst();
  if (kill?.email_kill_switch) batch.deferAll('kill_switch', new Date(batch.now.getTime() + 60_000), 'the operator stopped all sending');
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

async function organizationSending(trx: Tx, org: string): Promise<SendingSettings> {
  const orgRow = await trx.selectFrom('organizations').select('sending').where('id', '=', org).executeTakeFirstOrThrow();
  return sendingSettings(orgRow.sending);
}

function sendingWindow(batch: Batch, settings: SendingSettings): void {
  const opens = windowOpensAt(settings, batch.now);
  if (opens > batch.now) batch.deferAll('sending_window', opens, `the sending window opens at ${opens.toISOString()}`);
}
