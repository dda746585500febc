// The actions of POST /actions that run in one transaction on the locked contact (draft_reply,
// which waits on the language model, is src/work/draft-reply-action.ts). Each first decides
// whether there is anything to do (noop), then runs unless the action degrades (action-run.ts).
import { sql } from 'kysely';
import { isDoNotContactTag } from '../compliance/do-not-contact.js';
import { suppressAddress } from '../compliance/suppression-add.js';
import { matchSuppression } from '../compliance/suppression-match.js';
import { cancelQueued } from '../dispatch/queue.js';
import { reevaluateHeld } from '../dispatch/reevaluate.js';
import { invalid } from '../http/problems.js';
import { emit } from '../platform/events.js';
import { IN_FLIGHT_SEQUENCE_STATUSES, pauseSequences, resumeSequences } from '../sequences/lifecycle.js';
import { type Action, executed, labelOf, noop, type Outcome, type Run, unlessDegraded } from './action-run.js';
import { HANDOFF_ACTION_TYPE, handOff } from './handoff.js';

const MAX_TAGS = 100;

type Runner = (r: Run) => Promise<Outcome>;

const pauseSequence: Runner = async (r) => {
  const inFlight = await r.trx
    .selectFrom('contact_sequences')
    .select('id')
    .where('organization_id', '=', r.org)
    .where('contact_id', '=', r.contact.id)
    .where('status', 'in', IN_FLIGHT_SEQUENCE_STATUSES)
    .executeTakeFirst();
  if (!inFlight) return noop('The contact has no sequence in flight (DRAFTED, APPROVED, QUEUED or ACTIVE) to pause.');
  return unlessDegraded(r, async () => {
    const pausedCount = await pauseSequences(r.trx, r.org, [r.contact.id], r.body.reason ?? null);
    return executed(`Paused ${pausedCount} sequence(s); their queued steps left the send queue.`, { pausedCount });
  });
};

const resumeSequence: Runner = async (r) => {
  const paused = await r.trx
    .selectFrom('contact_sequences')
    .select('id')
    .where('organization_id', '=', r.org)
    .where('contact_id', '=', r.contact.id)
    .where('status', '=', 'PAUSED')
    .executeTakeFirst();
  if (!paused) return noop('The contact has no paused sequence to resume.');
  return unlessDegraded(r, async () => {
    const sequenceIds = await resumeSequences(r.trx, r.org, r.contact.id, r.body.reason ?? null);
    return executed(`Resumed ${sequenceIds.length} sequence(s): their unsent steps are being regenerated for approval; nothing is sent.`, {
      resumedCount: sequenceIds.length,
      sequenceIds,
    });
  });
};

const snoozeContact: Runner = (r) =>
  unlessDegraded(r, async () => {
    const days = r.body.days!;
    const row = await r.trx
      .updateTable('contacts')
      .set({ snoozed_until: sql<Date>`now_ms() + ${days} * interval '1 day'`, updated_at: sql<Date>`now_ms()` })
      .where('organization_id', '=', r.org)
      .where('id', '=', r.contact.id)
      .returning('snoozed_until')
      .executeTakeFirstOrThrow();
    const snoozedUntil = row.snoozed_until!.toISOString();
    // Steps held by an earlier snooze wait for this one instead (sooner or later).
    await reevaluateHeld(r.trx, { organizationId: r.org, contactId: r.contact.id, codes: ['contact_snoozed'] });
    await emit(r.trx, r.org, {
      type: 'contact.snoozed',
      resource: { type: 'Contact', id: r.contact.id },
      data: { contactId: r.contact.id, days, snoozedUntil, reason: r.body.reason ?? null },
    });
    return executed(`Snoozed until ${snoozedUntil}: outreach to the contact waits until then.`, { snoozedUntil, days });
  });

const tagContact: Runner = async (r) => {
  const tag = r.body.tag!.trim();
  if (tag === '') throw invalid('tag must not be blank.', 'body.tag');
  if (r.contact.tags.some((t) => t.toLowerCase() === tag.toLowerCase())) return noop(`The contact already has the tag "${tag}".`);
  if (r.contact.tags.length >= MAX_TAGS) throw invalid(`A contact carries at most ${MAX_TAGS} tags.`, 'body.tag');
  return unlessDegraded(r, async () => {
    await r.trx
      .updateTable('contacts')
      .set({ tags: sql`array_append(tags, ${tag}::text)`, updated_at: sql<Date>`now_ms()` })
      .where('organization_id', '=', r.org)
      .where('id', '=', r.contact.id)
      .execute();
    const dnc = isDoNotContactTag(tag);
    // A do-not-contact contact is never sent to: its queued steps leave the queue now.
    const stepsCancelled = dnc ? await cancelQueued(r.trx, r.org, { contactId: r.contact.id }, 'do_not_contact') : 0;
    await emit(r.trx, r.org, {
      type: 'contact.tagged',
      resource: { type: 'Contact', id: r.contact.id },
      data: { contactId: r.contact.id, tag },
    });
    return executed(
      dnc ? `Tagged "${tag}": the contact is no longer contacted (${stepsCancelled} queued step(s) cancelled).` : `Tagged "${tag}".`,
      { tag, stepsCancelled },
    );
  });
};

const addToSuppression: Runner = async (r) => {
  const current = await matchSuppression(r.trx, r.org, r.contact.email_normalized, r.config.erasureHashSecret);
  if (current.suppressed) return noop("The contact's address is already suppressed.");
  return unlessDegraded(r, async () => {
    const added = await suppressAddress(r.trx, r.org, {
      email: r.contact.email_normalized,
      reason: 'MANUAL_BLOCK',
      source: 'action',
      notes: r.body.reason ?? null,
    });
    if (!added) return noop("The contact's address is already suppressed.");
    await emit(r.trx, r.org, added.event);
    return executed("The contact's address is suppressed (MANUAL_BLOCK): nothing more is sent to it.", { suppressionEntryId: added.id });
  });
};

const handoffToAe: Runner = async (r) => {
  const pending = await r.trx
    .selectFrom('action_items')
    .select(['id', 'details'])
    .where('organization_id', '=', r.org)
    .where('entity_type', '=', 'Contact')
    .where('entity_id', '=', r.contact.id)
    .where('action_type', '=', HANDOFF_ACTION_TYPE)
    .where('status', '=', 'pending')
    .where('ai_generated', '=', false)
    .executeTakeFirst();
  if (pending) return noop(`The contact was handed off already and its action item ${pending.id} is still pending.`);
  return unlessDegraded(r, async () => {
    const h = await handOff(
      r.trx,
      r.org,
      { id: r.contact.id, label: labelOf(r.contact) },
      { userId: r.auth.userId, reason: r.body.reason ?? null },
    );
    await emit(r.trx, r.org, {
      type: 'handoff.created',
      resource: { type: 'Handoff', id: h.handoffId },
      data: { handoffId: h.handoffId, contactId: r.contact.id, dealId: h.dealId, toUserId: h.toUserId },
    });
    return executed(
      `Handed off to ${h.toUserId} with the package (contact, company research, conversation, open deal); an action item is open for them.`,
      { handoffId: h.handoffId, toUserId: h.toUserId, dealId: h.dealId, actionItemId: h.actionItemId },
    );
  });
};

export const RUNNERS: Record<Exclude<Action, 'draft_reply'>, Runner> = {
  pause_sequence: pauseSequence,
  resume_sequence: resumeSequence,
  snooze_contact: snoozeContact,
  tag_contact: tagContact,
  add_to_suppression: addToSuppression,
  handoff_to_ae: handoffToAe,
};
