// POST /actions: the seven actions on a contact. Each checks its own scope (from the operation's
// `x-action-scopes`), then finds the contact, then either has nothing to do (noop), degrades to an
// advisory action item (advisory-locked by the operator, not in the plan, out of drafts), or runs,
// committing its state and events in one transaction. The operation is `x-long-running`: a reply
// draft may wait on the language model, which is asked between two short transactions.
import { sql } from 'kysely';
import { type Tx, withOrg } from '../db/database.js';
import { assigneeFor } from '../src/account/people.js';
import { outboundEntitled } from '../src/account/plans.js';
import { draftsRemaining, takeDrafts } from '../src/account/usage.js';
import { DO_NOT_CONTACT_TAG } from '../src/compliance/do-not-contact.js';
import { suppressAddress } from '../src/compliance/suppression-add.js';
import { matchSuppression } from '../src/compliance/suppression-match.js';
import { cancelQueued } from '../src/dispatch/queue.js';
import { storedEvidence } from '../src/drafting/context.js';
import { storedContactResearch } from '../src/drafting/generate.js';
import { replyContext, writeReply } from '../src/drafting/reply.js';
import type { AuthInfo, LongHandler } from '../src/http/handler.js';
import { invalid, notFound, ProblemError } from '../src/http/problems.js';
import type { Config } from '../src/platform/config.js';
import { type EmitInput, emit, emitMany } from '../src/platform/events.js';
import { newId } from '../src/platform/ids.js';
import { ACTION_SCOPES } from '../src/platform/spec.js';
import { IN_FLIGHT_SEQUENCE_STATUSES, pauseSequences, resumeSequences } from '../src/sequences/lifecycle.js';
import { openActionItem } from '../src/work/action-items.js';
import { HANDOFF_ACTION_TYPE, handOff } from '../src/work/handoff.js';

type Ctx = Parameters<LongHandler<'dispatchAction'>>[0];
type Body = Ctx['body'];
type Action = Body['action'];
interface Outcome {
  outcome: 'executed' | 'advisory' | 'noop';
  detail: string;
  actionItemId: string | null;
  result: Record<string, unknown>;
}

/** Actions that write drafts: a plan without outbound does not include them. */
const OUTBOUND_ACTIONS: readonly Action[] = ['resume_sequence', 'draft_reply'];
/** An advisory item is a suggestion for a person; left undone it expires. */
const ADVISORY_TTL_DAYS = 14;
const MAX_TAGS = 100;

const executed = (detail: string, result: Record<string, unknown> = {}): Outcome => ({
  outcome: 'executed',
  detail,
  actionItemId: null,
  result,
});
const noop = (detail: string): Outcome => ({ outcome: 'noop', detail, actionItemId: null, result: {} });

/** The contact, live and of the organization, locked so actions on one contact apply one after the other; else 404. */
async function lockContact(trx: Tx, org: string, id: string) {
  const c = await trx
    .selectFrom('contacts')
    .select(['id', 'name', 'email', 'email_normalized', 'title', 'tags', 'company_id', 'research'])
    .where('organization_id', '=', org)
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .where('erased_at', 'is', null)
    .forUpdate()
    .executeTakeFirst();
  if (!c) throw notFound('contact');
  return c;
}
type Contact = Awaited<ReturnType<typeof lockContact>>;
const labelOf = (c: Contact) => c.name || c.email;

interface Run {
  trx: Tx;
  org: string;
  auth: AuthInfo;
  body: Body;
  contact: Contact;
  config: Config;
}

/** Why the action only advises for this organization, or null when it may run. */
async function degradedBecause(trx: Tx, org: string, action: Action): Promise<string | null> {
  const o = await trx.selectFrom('organizations').select(['plan', 'advisory_actions']).where('id', '=', org).executeTakeFirstOrThrow();
  if (o.advisory_actions.includes(action)) return `${action} is advisory-locked for this organization by the operator`;
  if (OUTBOUND_ACTIONS.includes(action) && !outboundEntitled(o.plan))
    return `the ${o.plan} plan does not include outbound (draft generation)`;
  return null;
}

const TITLES: Record<Action, (label: string, b: Body) => string> = {
  pause_sequence: (l) => `Pause the sequence of ${l}`,
  resume_sequence: (l) => `Resume the sequence of ${l}`,
  snooze_contact: (l, b) => `Snooze ${l} for ${b.days} day(s)`,
  tag_contact: (l, b) => `Tag ${l} with "${b.tag}"`,
  add_to_suppression: (l) => `Add ${l} to the suppression list`,
  handoff_to_ae: (l) => `Hand ${l} off to an account executive`,
  draft_reply: (l) => `Reply to the latest message of ${l}`,
};

/**
 * The advisory item a degraded action opens for the contact's owner instead of running; the same
 * request while that item is still pending answers it again (the contact's lock serializes them).
 */
async function advise(r: Run, why: string): Promise<Outcome> {
  const { trx, org, body, contact } = r;
  const params = { ...(body.days !== undefined ? { days: body.days } : {}), ...(body.tag !== undefined ? { tag: body.tag } : {}) };
  const open = await trx
    .selectFrom('action_items')
    .select('id')
    .where('organization_id', '=', org)
    .where('entity_type', '=', 'Contact')
    .where('entity_id', '=', contact.id)
    .where('action_type', '=', body.action)
    .where('status', '=', 'pending')
    .where('ai_generated', '=', true)
    .where(sql<boolean>`coalesce(details->'params', '{}'::jsonb) = ${JSON.stringify(params)}::jsonb`)
    .executeTakeFirst();
  if (open)
    return {
      outcome: 'advisory',
      detail: `Not run: ${why}. The advisory action item ${open.id} for it is still open.`,
      actionItemId: open.id,
      result: {},
    };
  const id = (await openActionItem(trx, org, {
    actionType: body.action,
    title: TITLES[body.action](labelOf(contact), body),
    description: `Advisory: ${why}, so this was not done automatically; do it by hand if it is right.${body.reason ? ` Reason given: ${body.reason}` : ''}`,
    priority: 'medium',
    salesPersonId: await assigneeFor(trx, org, contact.id),
    aiGenerated: true,
    entityType: 'Contact',
    entityId: contact.id,
    expiresAt: new Date(Date.now() + ADVISORY_TTL_DAYS * 86_400_000),
    details: {
      action: body.action,
      params,
      reason: body.reason ?? null,
      degradedBecause: why,
      requestedByKeyId: r.auth.keyId,
      requestedByUserId: r.auth.userId,
    },
  }))!;
  return { outcome: 'advisory', detail: `Not run: ${why}. An advisory action item was opened instead.`, actionItemId: id, result: {} };
}

/** Runs `act` unless the action degrades for the organization. */
async function unlessDegraded(r: Run, act: () => Promise<Outcome>): Promise<Outcome> {
  const why = await degradedBecause(r.trx, r.org, r.body.action);
  return why === null ? act() : advise(r, why);
}

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
      .set({ snoozed_until: sql<Date>`now_ms() + ${days} * interval '1 day'`, updated_at: sql<Date>`now_ms()` } as never)
      .where('organization_id', '=', r.org)
      .where('id', '=', r.contact.id)
      .returning('snoozed_until')
      .executeTakeFirstOrThrow();
    const snoozedUntil = row.snoozed_until!.toISOString();
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
      .set({ tags: sql`array_append(tags, ${tag}::text)`, updated_at: sql<Date>`now_ms()` } as never)
      .where('organization_id', '=', r.org)
      .where('id', '=', r.contact.id)
      .execute();
    const dnc = tag.toLowerCase() === DO_NOT_CONTACT_TAG;
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

const RUNNERS: Record<Exclude<Action, 'draft_reply'>, Runner> = {
  pause_sequence: pauseSequence,
  resume_sequence: resumeSequence,
  snooze_contact: snoozeContact,
  tag_contact: tagContact,
  add_to_suppression: addToSuppression,
  handoff_to_ae: handoffToAe,
};

/** The contact's latest inbound message from a person (automatic mail, such as an out-of-office or a delivery report, is not answered). */
const latestInbound = (trx: Tx, org: string, contactId: string) =>
  trx
    .selectFrom('messages')
    .select(['id', 'message_id', 'subject', 'stripped_text', 'body', 'intent', 'created_at'])
    .where('organization_id', '=', org)
    .where('contact_id', '=', contactId)
    .where('direction', '=', 'INBOUND')
    .where('automatic', '=', false)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();

const QUOTA_USED = 'the drafts allowance of the period is used up';

/**
 * draft_reply: what the reply needs is read in one transaction, the reply is written outside any
 * (the model may take its time), and the draft, its quota use and its events commit in a second.
 */
async function draftReply(ctx: Ctx): Promise<Outcome> {
  const { db, auth, body, config } = ctx;
  const org = auth.organizationId;
  const run = (trx: Tx, contact: Contact): Run => ({ trx, org, auth, body, contact, config });
  const read = await withOrg(db, org, async (trx) => {
    const contact = await lockContact(trx, org, body.contactId);
    const message = await latestInbound(trx, org, contact.id);
    if (!message) return { done: noop('The contact has sent no message (other than automatic mail) to reply to.') };
    const why = (await degradedBecause(trx, org, 'draft_reply')) ?? ((await draftsRemaining(trx, org)) < 1 ? QUOTA_USED : null);
    if (why) return { done: await advise(run(trx, contact), why) };
    const company =
      contact.company_id === null
        ? null
        : await trx
            .selectFrom('companies')
            .select(['name', 'domain_normalized'])
            .where('organization_id', '=', org)
            .where('id', '=', contact.company_id)
            .executeTakeFirst();
    return { contact, message, company: company ? (company.name ?? company.domain_normalized) : null };
  });
  if ('done' in read) return read.done!;
  const { contact, message } = read;
  const rc = replyContext({
    contact: { name: contact.name, title: contact.title, company: read.company },
    senderName: auth.org.name,
    message: {
      id: message.id,
      messageId: message.message_id,
      subject: message.subject,
      text: message.stripped_text ?? message.body,
      intent: message.intent,
      receivedAt: message.created_at,
    },
    research: storedContactResearch(contact.research),
  });
  const w = await writeReply(rc, ctx.services.model, ctx.log);

  return withOrg(db, org, async (trx) => {
    const c = await lockContact(trx, org, body.contactId);
    const taken = await takeDrafts(trx, org, { created: 1, regenerated: 0, llmTokens: w.tokens, llmCostMillicents: w.costMillicents });
    if (taken.created < 1) return advise(run(trx, c), QUOTA_USED);
    const draftId = newId('drf');
    const flagged = w.flags.length > 0;
    await trx
      .insertInto('drafts')
      .values({
        organization_id: org,
        id: draftId,
        contact_id: c.id,
        sequence_id: null,
        step: 1,
        status: 'DRAFT_GENERATED',
        version: 1,
        subject: w.subject,
        body: w.body,
        provider: w.provider,
        flagged,
        llm_tokens: w.tokens,
        evidence: storedEvidence(rc.research, w.citations, { inReplyTo: { messageId: message.id } }),
        guardrail: JSON.stringify({
          clean: !flagged && w.advisories.length === 0,
          attempts: w.attempts,
          repaired: w.repaired,
          advisories: w.advisories,
          flags: w.flags,
        }),
      })
      .execute();
    const data = { draftId, contactId: c.id, sequenceId: null, step: 1, version: 1, provider: w.provider, inReplyToMessageId: message.id };
    const events: EmitInput[] = [{ type: 'draft.created', resource: { type: 'Draft', id: draftId }, data: { ...data, flagged } }];
    if (flagged) events.push({ type: 'grounding.would_fire', resource: { type: 'Draft', id: draftId }, data: { ...data, flags: w.flags } });
    await emitMany(trx, org, events);
    return executed(
      `Drafted a reply to message ${message.id} for review (${w.provider}); it is not part of a sequence and is never sent by itself.`,
      { draftId, messageId: message.id, provider: w.provider, flagged },
    );
  });
}

const dispatchAction: LongHandler<'dispatchAction'> = async (ctx) => {
  const { auth, body, db, config } = ctx;
  // The body passed validation already; the action's own scope comes next, then the contact.
  const scope = ACTION_SCOPES[body.action];
  if (scope === undefined || !auth.scopes.includes(scope)) {
    throw new ProblemError(
      'insufficient-scope',
      `The action ${body.action} requires the scope ${scope}, which the API key lacks (missing: ${scope}).`,
    );
  }
  const org = auth.organizationId;
  const out =
    body.action === 'draft_reply'
      ? await draftReply(ctx)
      : await withOrg(db, org, async (trx) =>
          RUNNERS[body.action as Exclude<Action, 'draft_reply'>]({
            trx,
            org,
            auth,
            body,
            config,
            contact: await lockContact(trx, org, body.contactId),
          }),
        );
  return { status: 200, body: { action: body.action, contactId: body.contactId, ...out } };
};

export const actionHandlers = { dispatchAction };
