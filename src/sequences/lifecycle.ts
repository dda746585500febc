// The life of a contact's sequence, in the caller's transaction:
//   NEW (created; drafts are being generated) -> DRAFTED (every step has a live draft) ->
//   APPROVED (every step's live draft is approved) -> QUEUED -> ACTIVE -> COMPLETED (sending).
// Pausing (from an in-flight status: DRAFTED, APPROVED, QUEUED or ACTIVE) sets PAUSED and keeps the
// status it left in pausedFrom; resuming supersedes every unsent step's draft, regenerates them as REGENERATED
// versions and returns the sequence to DRAFTED, awaiting approval. Sent steps stay sent.
import { type SelectQueryBuilder, sql } from 'kysely';
import type { Database, Tx } from '../../db/database.js';
import { isLiveContact } from '../crm/live-contacts.js';
import { cancelQueued } from '../dispatch/queue.js';
import type { TemplateStep } from '../drafting/context.js';
import { notFound, ProblemError } from '../http/problems.js';
import { type EmitInput, emit, emitMany } from '../platform/events.js';
import { iso, isoNN, newId } from '../platform/ids.js';
import { BUILTIN_TEMPLATES } from './builtin-templates.js';

/** Statuses that hold a list's deletion (409 without force=true) and that pausing acts on. */
export const IN_FLIGHT_SEQUENCE_STATUSES = ['ACTIVE', 'QUEUED', 'DRAFTED', 'APPROVED'];
/** A contact may have sequences of one product at a time among these (NEW is about to be in flight). */
export const ACTIVE_SEQUENCE_STATUSES = ['NEW', ...IN_FLIGHT_SEQUENCE_STATUSES];

export type SequenceRow = {
  id: string;
  organization_id: string;
  contact_id: string;
  template_id: string;
  product_id: string | null;
  status: string;
  anchor_at_utc: Date | null;
  current_step: number;
  mailbox_id: string | null;
  paused_from: string | null;
  created_at: Date;
  updated_at: Date;
  /** Its next step's hold, when read with it (src/sequences/sequence-reads.ts); absent: none (a sequence just created). */
  hold_reason?: string | null;
  next_attempt_at?: Date | null;
};

export function toSequence(r: SequenceRow) {
  return {
    id: r.id,
    organizationId: r.organization_id,
    contactId: r.contact_id,
    templateId: r.template_id,
    status: r.status as 'NEW' | 'ACTIVE' | 'QUEUED' | 'DRAFTED' | 'APPROVED' | 'PAUSED' | 'COMPLETED',
    anchorAtUtc: iso(r.anchor_at_utc),
    currentStep: r.current_step,
    productId: r.product_id,
    mailboxId: r.mailbox_id,
    pausedFrom: r.paused_from,
    holdReason: r.hold_reason ?? null,
    nextAttemptAt: iso(r.next_attempt_at ?? null),
    createdAt: isoNN(r.created_at),
    updatedAt: isoNN(r.updated_at),
  };
}

export const SEQUENCE_COLUMNS = [
  'id',
  'organization_id',
  'contact_id',
  'template_id',
  'product_id',
  'status',
  'anchor_at_utc',
  'current_step',
  'mailbox_id',
  'paused_from',
  'created_at',
  'updated_at',
] as const;

/** Stored template steps ({dayOffset, subject, body} in order) numbered from 1. */
const numbered = (steps: Array<Omit<TemplateStep, 'step'>>): TemplateStep[] =>
  steps.map((s, i) => ({ step: i + 1, dayOffset: s.dayOffset, subject: s.subject, body: s.body }));

/** A template the organization may use: a built-in one, its own sequence template, else an active public one. */
export async function templateSteps(
  trx: Tx,
  organizationId: string,
  templateId: string,
): Promise<{ steps: TemplateStep[]; productId: string | null } | null> {
  const builtin = BUILTIN_TEMPLATES[templateId];
  if (builtin) return { steps: builtin, productId: null };
  const own = await trx
    .selectFrom('sequence_templates')
    .select(['steps', 'product_id'])
    .where('organization_id', '=', organizationId)
    .where('id', '=', templateId)
    .executeTakeFirst();
  if (own) return { steps: numbered(own.steps), productId: own.product_id };
  const pub = await trx
    .selectFrom('public_templates')
    .select('steps')
    .where('id', '=', templateId)
    .where('active', '=', true)
    .executeTakeFirst();
  return pub ? { steps: numbered(pub.steps), productId: null } : null;
}

/** Enqueues draft generation for sequences (in the caller's transaction, so it commits with them). */
export async function enqueueGeneration(
  trx: Tx,
  organizationId: string,
  sequenceIds: string[],
  mode: 'missing' | 'unapproved' | 'unsent',
  runId: string | null = null,
): Promise<void> {
  if (sequenceIds.length === 0) return;
  await sql`SELECT enqueue_job('generate_drafts', ${JSON.stringify({ organizationId, sequenceIds, pass: newId('gen'), mode, runId })}::json)`.execute(
    trx,
  );
}

export interface NewSequence {
  contactId: string;
  templateId: string;
  anchorAtUtc?: string;
  productId?: string;
}

/**
 * Creates a contact's sequence (NEW) and enqueues its drafts, or answers the existing sequence of
 * the same (contact, template) unchanged. 404 for an unknown contact, template or product; 400
 * product-collision when the contact has an active sequence of another product.
 */
export async function createSequence(trx: Tx, organizationId: string, input: NewSequence): Promise<{ row: SequenceRow; created: boolean }> {
  const org = organizationId;
  const contact = await trx
    .selectFrom('contacts')
    .select('id')
    .where('organization_id', '=', org)
    .where('id', '=', input.contactId)
    .where(isLiveContact())
    .executeTakeFirst();
  if (!contact) throw notFound('contact');
  const template = await templateSteps(trx, org, input.templateId);
  if (!template) throw notFound('template');
  if (input.productId !== undefined) {
    const p = await trx
      .selectFrom('products')
      .select('id')
      .where('organization_id', '=', org)
      .where('id', '=', input.productId)
      .executeTakeFirst();
    if (!p) throw notFound('product');
  }
  // Creations for one contact queue here: the idempotency and product rules see each other.
  await sql`SELECT pg_advisory_xact_lock(hashtextextended('sequence:' || ${org} || ':' || ${contact.id}, 0))`.execute(trx);
  const existing = await trx
    .selectFrom('contact_sequences')
    .select(SEQUENCE_COLUMNS)
    .where('organization_id', '=', org)
    .where('contact_id', '=', contact.id)
    .where('template_id', '=', input.templateId)
    .executeTakeFirst();
  if (existing) return { row: existing, created: false };
  const productId = input.productId ?? template.productId;
  if (productId !== null) {
    const other = await trx
      .selectFrom('contact_sequences')
      .select(['id', 'product_id'])
      .where('organization_id', '=', org)
      .where('contact_id', '=', contact.id)
      .where('status', 'in', ACTIVE_SEQUENCE_STATUSES)
      .where('product_id', 'is not', null)
      .where('product_id', '<>', productId)
      .executeTakeFirst();
    if (other) {
      throw new ProblemError(
        'product-collision',
        `The contact has an active sequence (${other.id}) of another product (${other.product_id}); pause it or wait until it ends.`,
      );
    }
  }
  const row = await trx
    .insertInto('contact_sequences')
    .values({
      organization_id: org,
      id: newId('seq'),
      contact_id: contact.id,
      template_id: input.templateId,
      product_id: productId,
      anchor_at_utc: input.anchorAtUtc ?? sql<Date>`now_ms()`,
      steps: JSON.stringify(template.steps),
      status: 'NEW',
    })
    .returning(SEQUENCE_COLUMNS)
    .executeTakeFirstOrThrow();
  await enqueueGeneration(trx, org, [row.id], 'missing');
  return { row, created: true };
}

/** Which sequences a pause is about: every in-flight one of some contacts (ids or a subquery of ids), or some sequences. */
export type PauseTarget =
  | { contactIds: string[] | SelectQueryBuilder<Database, keyof Database, { id: string }> }
  | { sequenceIds: string[] };

/**
 * Pauses in-flight sequences, keeping the status each paused from, and takes their queued steps
 * out of the queue (those of the sequences named too, paused before or not); returns one
 * sequence.paused event per sequence paused, for the caller to emit in its own order. The one
 * implementation of every pause: a person's, a list's deletion, a reply, a complaint, an
 * unsubscribe, a delivery failure.
 */
export async function pauseSequencesOf(trx: Tx, organizationId: string, target: PauseTarget, reason: string | null): Promise<EmitInput[]> {
  let q = trx
    .updateTable('contact_sequences')
    .set({ status: 'PAUSED', paused_from: sql`status`, paused_at: sql<Date>`now_ms()`, updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', organizationId)
    .where('status', 'in', IN_FLIGHT_SEQUENCE_STATUSES);
  if ('sequenceIds' in target) q = q.where('id', 'in', target.sequenceIds.length ? target.sequenceIds : ['']);
  else q = q.where('contact_id', 'in', target.contactIds as string[]); // ids or a subquery of ids
  const paused = await q.returning(['id', 'contact_id', 'paused_from']).execute();
  // A paused sequence sends nothing: its queued steps leave the queue (a resume asks for approval again).
  const stopped = [...new Set([...paused.map((s) => s.id), ...('sequenceIds' in target ? target.sequenceIds : [])])];
  if (stopped.length) await cancelQueued(trx, organizationId, { sequenceIds: stopped }, 'sequence_not_active');
  return paused.map((s) => ({
    type: 'sequence.paused',
    resource: { type: 'Sequence', id: s.id },
    data: { sequenceId: s.id, contactId: s.contact_id, reason, pausedFrom: s.paused_from },
  }));
}

/**
 * Pauses every in-flight sequence of the given contacts (a list of ids or a subquery of ids) and
 * emits one sequence.paused per sequence (pauseSequencesOf). Returns the count.
 */
export async function pauseSequences(
  trx: Tx,
  organizationId: string,
  contactIds: string[] | SelectQueryBuilder<Database, keyof Database, { id: string }>,
  reason: string | null,
): Promise<number> {
  const events = await pauseSequencesOf(trx, organizationId, { contactIds }, reason);
  await emitMany(trx, organizationId, events);
  return events.length;
}

/**
 * Resumes a contact's paused sequences: every unsent step's draft is superseded and regenerated
 * (as REGENERATED, awaiting approval), the sequence returns to DRAFTED, sequence.resumed is
 * emitted. Nothing is sent. Returns the resumed sequence ids.
 */
export async function resumeSequences(trx: Tx, organizationId: string, contactId: string, reason: string | null): Promise<string[]> {
  const resumed = await trx
    .updateTable('contact_sequences')
    .set({ status: 'DRAFTED', paused_at: null, updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', organizationId)
    .where('contact_id', '=', contactId)
    .where('status', '=', 'PAUSED')
    .returning(['id', 'paused_from'])
    .execute();
  const ids = resumed.map((r) => r.id);
  if (ids.length === 0) return [];
  await trx
    .updateTable('drafts')
    .set({ superseded_at: sql<Date>`now_ms()`, updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', organizationId)
    .where('sequence_id', 'in', ids)
    .where('superseded_at', 'is', null)
    .where('sent_at', 'is', null)
    .execute();
  await enqueueGeneration(trx, organizationId, ids, 'unsent');
  for (const r of resumed) {
    await emit(trx, organizationId, {
      type: 'sequence.resumed',
      resource: { type: 'Sequence', id: r.id },
      data: { sequenceId: r.id, contactId, reason, pausedFrom: r.paused_from },
    });
  }
  return ids;
}
