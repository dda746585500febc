// A delivery failure, wherever it is learnt: the receiving server's answer to the dispatcher's
// RCPT TO or DATA (a 5xx, or a 4xx still there after the last attempt), or a delivery report
// (RFC 3464) matched to one of our sends later. Its reason (src/mail/bounce-taxonomy.ts) is stored
// on the send record with its class and the instant it was learnt; a record is judged once, so a
// second report of the same failure changes nothing. The effects follow the class:
//   recipient  the address gets a HARD_BOUNCE suppression for ever; every in-flight sequence of
//              the contact stops (PAUSED, reason hard_bounce, their queued steps cancelled), not
//              only the failed send's; counted in the mailbox's bounce rate;
//   soft       counted for the address: SOFT_BOUNCE_LIMIT soft failures within
//              SOFT_BOUNCE_WINDOW_DAYS, the first and last at least SOFT_BOUNCE_SPAN_DAYS apart,
//              suppress it (HARD_BOUNCE, source `repeated soft bounces`, expiring after
//              SOFT_BOUNCE_SUPPRESSION_DAYS) and stop every sequence of the contact (reason
//              soft_bounces); the message is never sent again as such;
//   sender     never a suppression: counted against the sending mailbox (its refusal rate, read by
//              the operator with the reasons), and the sequence stops (reason sender_refused):
//              more mail from the same sender would meet the same refusal and harm the mailbox;
//   other      nothing but the record and the event.
// At send time the step did not go out, so its sequence stops whatever the class (reason
// hard_bounce, soft_bounce, sender_refused or delivery_failed); a report comes after the step went
// out, and a soft or other failure then leaves the sequence going on. Every failure emits
// email.bounced {kind, bounceClass, reason, temporary, suppressed, code, diagnostic}: kind `hard`
// for the recipient class (the address is suppressed for ever), else `soft`.
// In the caller's transaction; returns the events.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { suppressAddress } from '../compliance/suppression-add.js';
import type { BounceClass, BounceReason } from '../mail/bounce-taxonomy.js';
import type { Clock } from '../platform/clock.js';
import type { EmitInput } from '../platform/events.js';
import { pauseSequencesOf } from '../sequences/lifecycle.js';
import { checkMailboxHealth } from './health.js';

/** Soft failures of one address that suppress it, within the window and spanning the days below (see docs/sending.md). */
export const SOFT_BOUNCE_LIMIT = 3;
export const SOFT_BOUNCE_WINDOW_DAYS = 30;
export const SOFT_BOUNCE_SPAN_DAYS = 3;
/** A suppression for repeated soft failures lapses after this long: the address may be tried again. */
export const SOFT_BOUNCE_SUPPRESSION_DAYS = 90;
const DAY_MS = 86_400_000;

export interface DeliveryFailure {
  /** The send record the failure is about. */
  recordId: string;
  /** The address that failed (the send record's recipient). */
  email: string;
  /** The contact; with no draft, the resource of email.bounced (one of the two is always known). */
  contactId: string | null;
  /** The sequence to stop; without one, the contact's sequences in sending (QUEUED, ACTIVE). */
  sequenceId: string | null;
  draftId: string | null;
  step: number | null;
  mailboxId: string | null;
  /** The SMTP reply code (dispatcher) or the DSN status (`5.1.1`). */
  code: number | string | null;
  /** What the server said, as stored on the record (and the suppression entry). */
  diagnostic: string;
  reason: BounceReason;
  bounceClass: BounceClass;
  /** The server said it was temporary (a 4.x.x status, a 4xx reply, a delayed action). */
  temporary: boolean;
  /**
   * `dispatcher`: the answer at send time, the step did not go out (the record is `bounced`, or
   * `failed` when it was a temporary answer still there after the last attempt); `delivery
   * report`: learnt after the step went out (the record becomes `bounced`).
   */
  source: 'dispatcher' | 'delivery report';
  /** The record is left `failed` (a temporary answer at send time, out of attempts). */
  outOfAttempts?: boolean;
  /** Extra facts for the email.bounced payload (e.g. the inbound message id of a report). */
  extra?: Record<string, unknown>;
}

export interface FailureEffects {
  events: EmitInput[];
  /** What was done: `suppressed`, `paused`, `soft_failure_counted`, `mailbox_refusal_counted`. */
  effects: string[];
}

/** Whether the address's soft failures, this one counted, now call for its suppression. */
async function repeatedSoftFailures(trx: Tx, org: string, email: string, clock: Clock): Promise<boolean> {
  const now = clock.now();
  const r = await sql<{ n: number; first: Date | null; last: Date | null }>`
    SELECT count(*)::int AS n, min(bounced_at) AS first, max(bounced_at) AS last FROM send_records
    WHERE organization_id = ${org} AND to_email = ${email} AND bounce_class = 'soft'
      AND bounced_at > ${now}::timestamptz - ${sql.lit(SOFT_BOUNCE_WINDOW_DAYS)} * interval '1 day'`.execute(trx);
  const { n, first, last } = r.rows[0];
  return n >= SOFT_BOUNCE_LIMIT && first !== null && last !== null && last.getTime() - first.getTime() >= SOFT_BOUNCE_SPAN_DAYS * DAY_MS;
}

/**
 * Stops sequences for a failure: every in-flight sequence of the contact when the address is now
 * suppressed (it takes no more mail, from any sequence), else the failed send's sequence (the
 * failure is about that message or its sender); without a sequence, the contact's. Returns the events.
 */
async function stopSequences(trx: Tx, org: string, f: DeliveryFailure, reason: string, suppressed: boolean): Promise<EmitInput[]> {
  const wholeContact = f.contactId !== null && (suppressed || f.sequenceId === null);
  if (!wholeContact) return f.sequenceId ? pauseSequencesOf(trx, org, { sequenceIds: [f.sequenceId] }, reason) : [];
  const events = await pauseSequencesOf(trx, org, { contactIds: [f.contactId!] }, reason);
  // The failed send's own sequence leaves the queue even when it was paused already.
  if (f.sequenceId) events.push(...(await pauseSequencesOf(trx, org, { sequenceIds: [f.sequenceId] }, reason)));
  return events;
}

/** The reason a sequence stops for a failure of this class learnt at send time. */
export const STEP_FAILED_REASON: Record<BounceClass, string> = {
  recipient: 'hard_bounce',
  soft: 'soft_bounce',
  sender: 'sender_refused',
  other: 'delivery_failed',
};

/** Records a delivery failure on its send and applies its effects; nothing when the send was judged already. */
export async function recordDeliveryFailure(trx: Tx, org: string, f: DeliveryFailure, clock: Clock): Promise<FailureEffects> {
  const judged = await sql<{ id: string }>`
    UPDATE send_records SET status = ${f.outOfAttempts ? 'failed' : 'bounced'}, smtp_response = ${f.diagnostic.slice(0, 1000)},
      bounce_reason = ${f.reason}, bounce_class = ${f.bounceClass}, bounced_at = ${clock.now()}::timestamptz
    WHERE organization_id = ${org} AND id = ${f.recordId} AND bounce_class IS NULL
      AND status IN (${sql.join(f.outOfAttempts ? ['failed'] : ['sending', 'sent', 'possibly_sent'])})
    RETURNING id`.execute(trx);
  if (judged.rows.length === 0) return { events: [], effects: [] };
  const events: EmitInput[] = [];
  const effects: string[] = [];
  const atSendTime = f.source === 'dispatcher';
  let suppressed = false;
  let stop: string | null = atSendTime ? STEP_FAILED_REASON[f.bounceClass] : null;
  if (f.bounceClass === 'recipient') {
    const added = await suppressAddress(trx, org, {
      email: f.email,
      reason: 'HARD_BOUNCE',
      source: f.source,
      notes: f.diagnostic.slice(0, 1000),
    });
    if (added) events.push(added.event);
    suppressed = true;
    stop = 'hard_bounce';
  } else if (f.bounceClass === 'soft') {
    effects.push('soft_failure_counted');
    if (await repeatedSoftFailures(trx, org, f.email, clock)) {
      const added = await suppressAddress(trx, org, {
        email: f.email,
        reason: 'HARD_BOUNCE',
        source: 'repeated soft bounces',
        notes: f.diagnostic.slice(0, 1000),
        expiresAt: new Date(clock.now().getTime() + SOFT_BOUNCE_SUPPRESSION_DAYS * DAY_MS),
      });
      if (added) events.push(added.event);
      suppressed = true;
      stop = 'soft_bounces';
    }
  } else if (f.bounceClass === 'sender') {
    effects.push('mailbox_refusal_counted');
    stop = 'sender_refused';
  }
  if (suppressed) effects.push('suppressed');
  const paused = stop ? await stopSequences(trx, org, f, stop, suppressed) : [];
  if (paused.length) effects.push('paused');
  events.push({
    type: 'email.bounced',
    resource: f.draftId ? { type: 'Draft', id: f.draftId } : { type: 'Contact', id: f.contactId ?? '' },
    data: {
      sequenceId: f.sequenceId,
      contactId: f.contactId,
      draftId: f.draftId,
      step: f.step,
      kind: f.bounceClass === 'recipient' ? 'hard' : 'soft',
      bounceClass: f.bounceClass,
      reason: f.reason,
      temporary: f.temporary,
      suppressed,
      code: f.code,
      diagnostic: f.diagnostic,
      ...f.extra,
    },
  });
  events.push(...paused);
  // Hard bounces and refusals are what the mailbox's health counts.
  if (f.mailboxId !== null && (f.bounceClass === 'recipient' || f.bounceClass === 'sender'))
    events.push(...(await checkMailboxHealth(trx, org, f.mailboxId, clock)));
  return { events, effects };
}
