// The classification of a stored inbound message and its effects (the `classify_reply` job). The
// raw MIME is read again (the job's payload is two ids), classified outside any transaction (the
// model may be slow), then in ONE transaction: the message gets its intent, confidence, source,
// reason and report facts and becomes `classified`, reply.classified is emitted, and the effects
// happen. Idempotent: only a message still `received` is classified, so a second run does nothing.
//
// Effects by what the message is, when it is authenticated (src/inbound/authentication.ts); an
// unauthenticated message is stored and classified (`authenticated: false` on reply.classified)
// but acts only where a forgery can do little harm: a matched report acts as below (matching it
// needs our reply token or our Message-ID, so its sender saw our message, and it can only touch the
// one address that message went to); unsubscribe wording in a human reply pauses the contact's
// sequences, opens an action item and suppresses within a bound (src/inbound/unverified-unsubscribe.ts);
// nothing else (no repliedAt, no pause as a reply, no qualification, no lead.interested or
// meeting.booked, no action item for interest, no out-of-office hold).
//   a human reply (not automatic, not a report, not out of office): the contact's sequences are
//     paused (reason `replied`, or `unsubscribed`) and the answered draft (else the contact's latest
//     sent one) gets repliedAt; besides, by intent:
//       unsubscribe      UNSUBSCRIBE suppression (suppression.added) and email.unsubscribed;
//       interested       lead.interested and an action item (`reply_interested`, high);
//       meeting_request  meeting.booked and an action item (`reply_meeting_request`, urgent);
//       (both also make the contact QUALIFIED unless it is a CUSTOMER: contact.stage_changed);
//   out of office: not a reply, nothing paused: the contact is out of office until the return date
//     (default 7 days, at most 90), and the dispatcher holds its next step until then;
//   a report (delivery or feedback) matched to no send of ours: recorded only (unmatched_report);
//   a delivery report stating a failure for our send's recipient: the failure with its reason, and
//     the effects of its class, as the dispatcher's own (src/dispatch/bounce.ts): hard_bounce
//     (recipient: suppressed for ever), soft_bounce (counted; suppressed only when repeated),
//     sender_refusal (counted against the mailbox), other_failure; a notice stating none
//     (delivered, relayed, expanded, delayed) is recorded only (delivery_notice);
//   a complaint (an abuse report, or a complaint forward): COMPLAINT suppression, email.complained,
//     the contact's sequences paused; an opt-out (the recipient asking for no more mail): an
//     UNSUBSCRIBE suppression, email.unsubscribed (source `feedback report`), the sequences paused
//     (`unsubscribed`); any other feedback report (auth-failure, fraud, virus, not-spam, other) is
//     recorded only (feedback_report): no suppression, no complaint counted;
//   other automatic mail: recorded only, never a reply.
// Event payloads carry ids, intent, confidence and reason: never the message text or an address
// (suppression.added carries the suppressed address, as everywhere).
import { sql } from 'kysely';
import { type Tx, withOrg } from '../../db/database.js';
import { recheckOrgHealth } from '../account/org-health.js';
import { assigneeFor } from '../account/people.js';
import { suppressAddress } from '../compliance/suppression-add.js';
import { normalizeEmail } from '../crm/domains.js';
import { setQualificationStatus } from '../crm/qualification.js';
import { recordDeliveryFailure } from '../dispatch/bounce.js';
import { reevaluateHeld } from '../dispatch/reevaluate.js';
import type { BounceClass } from '../mail/bounce-taxonomy.js';
import type { Clock } from '../platform/clock.js';
import { type EmitInput, emitMany } from '../platform/events.js';
import type { Deps } from '../platform/services.js';
import { pauseSequences } from '../sequences/lifecycle.js';
import { openActionItem } from '../work/action-items.js';
import { type Classification, INTENTS, type ParsedMail } from './analysis.js';
import { classify, parseMail } from './analyze/index.js';
import { judgeDeliveryReport } from './report-judgement.js';
import { unverifiedUnsubscribe } from './unverified-unsubscribe.js';

/** Out of office with no return date in the text: the contact is left alone this long (Interseller: 1 week; Unify: 14 days). */
export const OOO_DEFAULT_DAYS = 7;
/** A return date further out than this is taken as this (a misread date must not silence a contact for a year). */
export const OOO_MAX_DAYS = 90;
const DAY_MS = 86_400_000;

export type ReplyKind =
  | 'reply'
  | 'out_of_office'
  | 'hard_bounce'
  | 'soft_bounce'
  | 'sender_refusal'
  | 'other_failure'
  | 'delivery_notice'
  | 'complaint'
  | 'opt_out'
  | 'feedback_report'
  | 'unmatched_report'
  | 'automatic';

/** The kind of a delivery report by the class of the failure it states for our recipient. */
const FAILURE_KIND: Record<BounceClass, ReplyKind> = {
  recipient: 'hard_bounce',
  soft: 'soft_bounce',
  sender: 'sender_refusal',
  other: 'other_failure',
};

/** The send a message was matched to, as far as its kind depends on it. */
interface Matched {
  sendRecordId: string | null;
  toEmail: string | null;
}

/**
 * What a message is. A report counts only when it was matched to a send of ours (else
 * `unmatched_report`): a delivery report by what it states for that send's recipient, a feedback
 * report as a complaint only when it is one. Automatic mail is never a reply.
 */
export function kindOf(mail: ParsedMail, c: Classification, sent: Matched): ReplyKind {
  const r = mail.report;
  if (r) {
    if (sent.sendRecordId === null) return 'unmatched_report';
    if (r.kind === 'arf') return r.complaint ? 'complaint' : r.feedbackType === 'opt-out' ? 'opt_out' : 'feedback_report';
    const judged = judgeDeliveryReport(r, sent.toEmail);
    return judged ? FAILURE_KIND[judged.bounceClass] : 'delivery_notice';
  }
  if (c.intent === 'out_of_office') return 'out_of_office';
  if (mail.automatic.automatic || c.intent === 'bounce' || c.intent === 'complaint') return 'automatic';
  return 'reply';
}

/** Until when an out-of-office contact is left alone. */
export function outOfOfficeUntil(returnDate: Date | null, now: Date): Date {
  const max = now.getTime() + OOO_MAX_DAYS * DAY_MS;
  const t = returnDate?.getTime();
  if (t === undefined || Number.isNaN(t) || t <= now.getTime()) return new Date(now.getTime() + OOO_DEFAULT_DAYS * DAY_MS);
  return new Date(Math.min(t, max));
}

/** A classification as stored: a known intent, a confidence in 0-1, a bounded reason. */
function sane(c: Classification): Classification {
  const confidence = Number.isFinite(c.confidence) ? Math.min(1, Math.max(0, c.confidence)) : 0;
  return {
    ...c,
    intent: INTENTS.includes(c.intent) ? c.intent : 'other',
    confidence,
    reason: String(c.reason ?? '')
      .replace(/\u0000/g, '')
      .slice(0, 200),
  };
}

interface Stored {
  id: string;
  contactId: string | null;
  sendRecordId: string | null;
  sequenceId: string | null;
  fromEmail: string | null;
  createdAt: Date;
  contactEmail: string | null;
  draftId: string | null;
  toEmail: string | null;
  mailboxId: string | null;
  step: number | null;
  recordSequenceId: string | null;
  /** Shown to come from its sender (the effects of a reply need it). */
  authenticated: boolean;
}

/** The effects of a classified message; returns the events to emit (pauses emit their own). */
async function applyEffects(
  trx: Tx,
  org: string,
  m: Stored,
  mail: ParsedMail,
  c: Classification,
  kind: ReplyKind,
  oooUntil: Date | null,
  clock: Clock,
) {
  const events: EmitInput[] = [];
  const done: string[] = [];
  const ref = { messageId: m.id, contactId: m.contactId, sendRecordId: m.sendRecordId, sequenceId: m.sequenceId };
  const about = m.draftId
    ? { type: 'Draft', id: m.draftId }
    : m.contactId
      ? { type: 'Contact', id: m.contactId }
      : { type: 'Message', id: m.id };
  /** An UNSUBSCRIBE suppression of the address and, when new, email.unsubscribed. */
  const unsubscribe = async (address: string | null, source: string) => {
    const added = address ? await suppressAddress(trx, org, { email: address, reason: 'UNSUBSCRIBE', source }) : null;
    if (added) {
      done.push('suppressed');
      events.push(added.event, { type: 'email.unsubscribed', resource: about, data: { ...ref, draftId: m.draftId, step: m.step, source } });
    }
  };
  if (kind === 'reply' && !m.authenticated) {
    if (c.intent === 'unsubscribe') {
      const r = await unverifiedUnsubscribe(trx, org, {
        messageId: m.id,
        contactId: m.contactId,
        contactEmail: m.contactEmail,
        sendRecordId: m.sendRecordId,
        sequenceId: m.sequenceId,
        draftId: m.draftId,
        step: m.step,
      });
      events.push(...r.events);
      done.push(...r.done);
    }
  } else if (kind === 'reply') {
    // The draft it answers, else the contact's latest sent one.
    const replied = await sql<{ id: string }>`
      UPDATE drafts SET replied_at = coalesce(replied_at, ${m.createdAt}::timestamptz), updated_at = now_ms()
      WHERE organization_id = ${org} AND id = coalesce(${m.draftId}::text, (
        SELECT id FROM drafts WHERE organization_id = ${org} AND contact_id = ${m.contactId}::text AND sent_at IS NOT NULL
        ORDER BY sent_at DESC, id DESC LIMIT 1))
      RETURNING id`.execute(trx);
    if (replied.rows.length) done.push('replied_at');
    if (m.contactId && (await pauseSequences(trx, org, [m.contactId], c.intent === 'unsubscribe' ? 'unsubscribed' : 'replied')) > 0)
      done.push('paused');
    if (c.intent === 'unsubscribe') await unsubscribe(m.contactEmail ?? (m.fromEmail ? normalizeEmail(m.fromEmail) : null), 'reply');
    if (c.intent === 'interested' || c.intent === 'meeting_request') {
      const meeting = c.intent === 'meeting_request';
      const facts = { ...ref, intent: c.intent, confidence: c.confidence, reason: c.reason };
      const actionItemId = await openActionItem(trx, org, {
        actionType: meeting ? 'reply_meeting_request' : 'reply_interested',
        title: meeting ? 'Schedule the meeting a contact asked for' : 'Follow up on an interested reply',
        description: `A reply was classified ${c.intent} (confidence ${c.confidence.toFixed(2)}, ${c.reason}); read it with GET /messages${m.contactId ? `?contactId=${m.contactId}` : ''}.`,
        priority: meeting ? 'urgent' : 'high',
        salesPersonId: await assigneeFor(trx, org, m.contactId),
        aiGenerated: true,
        entityType: m.contactId ? 'Contact' : 'Message',
        entityId: m.contactId ?? m.id,
        sourceKey: `reply:${m.id}`,
        details: facts,
      });
      if (actionItemId) done.push('action_item');
      // A prospect who asks for more or for a meeting is qualified (contact.stage_changed); a customer stays one.
      if (m.contactId) {
        const moved = await setQualificationStatus(trx, org, [m.contactId], 'QUALIFIED', 'reply', {
          keep: ['CUSTOMER'],
          extra: { messageId: m.id, intent: c.intent },
        });
        if (moved.length) done.push('qualified');
      }
      events.push({
        type: meeting ? 'meeting.booked' : 'lead.interested',
        resource: m.contactId ? { type: 'Contact', id: m.contactId } : { type: 'Message', id: m.id },
        data: { ...facts, actionItemId },
      });
    }
  } else if (kind === 'out_of_office' && m.contactId && oooUntil && m.authenticated) {
    await trx
      .updateTable('contacts')
      .set({ out_of_office_until: oooUntil, updated_at: sql<Date>`now_ms()` })
      .where('organization_id', '=', org)
      .where('id', '=', m.contactId)
      .execute();
    // Steps held by an earlier return date wait for this one instead (sooner or later).
    await reevaluateHeld(trx, { organizationId: org, contactId: m.contactId, codes: ['contact_out_of_office'] });
    done.push('out_of_office');
  } else if (mail.report?.kind === 'dsn' && m.sendRecordId && m.toEmail) {
    // A failure stated for our recipient (a notice states none): judged by its reason's class.
    const judged = judgeDeliveryReport(mail.report, m.toEmail);
    if (judged) {
      const failure = await recordDeliveryFailure(
        trx,
        org,
        {
          recordId: m.sendRecordId,
          email: m.toEmail,
          contactId: m.contactId,
          sequenceId: m.recordSequenceId,
          draftId: m.draftId,
          step: m.step,
          mailboxId: m.mailboxId,
          code: judged.status,
          diagnostic: [judged.status, judged.diagnostic].filter(Boolean).join(' ') || 'delivery report',
          reason: judged.reason,
          bounceClass: judged.bounceClass,
          temporary: judged.temporary,
          source: 'delivery report',
          extra: { messageId: m.id },
        },
        clock,
      );
      if (failure.events.length) done.push('bounce_recorded', ...failure.effects);
      events.push(...failure.events);
    }
  } else if (kind === 'opt_out') {
    // The recipient asks for no more mail (an opt-out feedback report, Apple Mail's unsubscribe message): not a complaint, not a reply.
    await unsubscribe(m.toEmail, 'feedback report');
    if (m.contactId && (await pauseSequences(trx, org, [m.contactId], 'unsubscribed')) > 0) done.push('paused');
  } else if (kind === 'complaint' && mail.report?.kind === 'arf') {
    const email = m.toEmail;
    if (email) {
      const added = await suppressAddress(trx, org, {
        email,
        reason: 'COMPLAINT',
        source: 'complaint report',
        notes: mail.report.feedbackType,
      });
      if (added) events.push(added.event);
      events.push({
        type: 'email.complained',
        resource: about,
        data: { ...ref, draftId: m.draftId, step: m.step, feedbackType: mail.report.feedbackType },
      });
      done.push('suppressed');
      if (m.contactId && (await pauseSequences(trx, org, [m.contactId], 'complained')) > 0) done.push('paused');
    }
  }
  return { events, done };
}

/** Classifies one stored message and applies its effects; does nothing for a message already classified. */
export async function classifyReply(deps: Deps, org: string, id: string): Promise<void> {
  const row = await withOrg(deps.db, org, (trx) =>
    trx
      .selectFrom('messages as m')
      .leftJoin('inbound_raw_messages as r', (j) =>
        j.onRef('r.organization_id', '=', 'm.organization_id').onRef('r.message_id', '=', 'm.id'),
      )
      .select(['r.raw_mime', 'm.status'])
      .where('m.organization_id', '=', org)
      .where('m.id', '=', id)
      .where('m.direction', '=', 'INBOUND')
      .executeTakeFirst(),
  );
  if (row?.status !== 'received') return;
  if (row.raw_mime === null) {
    // Its contact was erased before it was classified (or its raw MIME aged out): nothing is left
    // to read, nothing is done.
    await withOrg(deps.db, org, (trx) =>
      trx
        .updateTable('messages')
        .set({ status: 'redacted', classified_at: sql<Date>`now_ms()` })
        .where('organization_id', '=', org)
        .where('id', '=', id)
        .where('status', '=', 'received')
        .execute(),
    );
    return;
  }
  const mail = await parseMail(row.raw_mime);
  const c = await classify(mail, { model: deps.services.model });
  await withOrg(deps.db, org, (trx) => recordClassification(trx, org, id, mail, c, deps.services.clock));
}

/**
 * In the caller's transaction: a `received` message gets its classification, reply.classified and
 * its effects; a message no longer `received` (classified meanwhile by another run) is left alone.
 * The classification job calls it; so does ingestion, when no model is configured (the rules alone
 * decide, so the message is classified as it is stored, with no job and no second parse).
 */
export async function recordClassification(
  trx: Tx,
  org: string,
  id: string,
  mail: ParsedMail,
  classification: Classification,
  clock: Clock,
): Promise<void> {
  const c = sane(classification);
  // Out of office is never a report (a report's kind is known once its send is read, below).
  const oooUntil = mail.report === null && c.intent === 'out_of_office' ? outOfOfficeUntil(c.returnDate, new Date()) : null;
  const updated = await sql<{
    contact_id: string | null;
    send_record_id: string | null;
    sequence_id: string | null;
    from_email: string | null;
    created_at: Date;
    authenticated: boolean;
  }>`
    UPDATE messages SET status = 'classified', intent = ${c.intent}, intent_confidence = ${c.confidence}, intent_source = ${c.source},
      intent_reason = ${c.reason}, automatic = ${mail.automatic.automatic || mail.report !== null}, ooo_until = ${oooUntil}, classified_at = now_ms()
    WHERE organization_id = ${org} AND id = ${id} AND status = 'received'
    RETURNING contact_id, send_record_id, sequence_id, from_email, created_at, authenticated`.execute(trx);
  const u = updated.rows[0];
  if (!u) return;
  const ctx = (
    await sql<{
      contact_email: string | null;
      draft_id: string | null;
      to_email: string | null;
      mailbox_id: string | null;
      step: number | null;
      record_sequence_id: string | null;
    }>`
    SELECT c.email_normalized AS contact_email, r.draft_id, r.to_email, r.mailbox_id, r.step, r.sequence_id AS record_sequence_id
    FROM (SELECT 1) one
    LEFT JOIN contacts c ON c.organization_id = ${org} AND c.id = ${u.contact_id}::text AND c.erased_at IS NULL
    LEFT JOIN send_records r ON r.organization_id = ${org} AND r.id = ${u.send_record_id}::text`.execute(trx)
  ).rows[0];
  const m: Stored = {
    id,
    contactId: u.contact_id,
    sendRecordId: u.send_record_id,
    sequenceId: u.sequence_id,
    fromEmail: u.from_email,
    createdAt: u.created_at,
    contactEmail: ctx.contact_email,
    draftId: ctx.draft_id,
    toEmail: ctx.to_email,
    mailboxId: ctx.mailbox_id,
    step: ctx.step,
    recordSequenceId: ctx.record_sequence_id,
    authenticated: u.authenticated,
  };
  const kind = kindOf(mail, c, m);
  const { events, done } = await applyEffects(trx, org, m, mail, c, kind, oooUntil, clock);
  await emitMany(trx, org, [
    {
      type: 'reply.classified',
      resource: { type: 'Message', id },
      data: {
        messageId: id,
        contactId: m.contactId,
        sendRecordId: m.sendRecordId,
        sequenceId: m.sequenceId,
        intent: c.intent,
        confidence: c.confidence,
        reason: c.reason,
        source: c.source,
        kind,
        authenticated: m.authenticated,
        oooUntil: oooUntil?.toISOString() ?? null,
        effects: done,
      },
    },
    ...events,
  ]);
  // A complaint moves the complaint rate (counted from the email.complained events just written);
  // an unverified suppression, or one held back, the count of the last hour's.
  if (
    (kind === 'complaint' && events.some((e) => e.type === 'email.complained')) ||
    (!m.authenticated && (done.includes('suppressed') || done.includes('suppression_held')))
  )
    await recheckOrgHealth(trx, org, clock);
}
