// The send queue: which steps of a sequence are asked to go out, one row each, with a send job due
// at the step's time. POST /drafts/{id}/send queues every approved, unsent step of the draft's
// sequence; a step approved later, while its sequence is QUEUED or ACTIVE, joins the queue then.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { newId } from '../platform/ids.js';

/** Queue states of a step not (known to be) sent: it still counts as in the queue. */
export const OPEN_STATES = ['queued', 'deferred', 'sending'];

/**
 * (Re)schedules the send jobs of queue rows: one job per row (the job key), moved when a gate
 * defers the step (null: now). Runs in the caller's transaction.
 */
export async function scheduleSends(trx: Tx, organizationId: string, rows: { queueId: string; runAt: Date | null }[]): Promise<void> {
  if (rows.length === 0) return;
  await sql`SELECT enqueue_job('send_step', json_build_object('organizationId', ${organizationId}::text, 'queueId', v.id), v.run_at, v.id)
    FROM unnest(${rows.map((r) => r.queueId)}::text[], ${rows.map((r) => r.runAt)}::timestamptz[]) AS v(id, run_at)`.execute(trx);
}

/**
 * Queues the approved, unsent live drafts of the sequence that are not queued yet; returns how
 * many were queued now. The sequence becomes QUEUED when it was DRAFTED or APPROVED.
 */
export async function queueSteps(trx: Tx, organizationId: string, sequenceId: string): Promise<number> {
  const org = organizationId;
  const drafts = await trx
    .selectFrom('drafts')
    .select(['id', 'step', 'contact_id', 'scheduled_at', 'created_at'])
    .where('organization_id', '=', org)
    .where('sequence_id', '=', sequenceId)
    .where('superseded_at', 'is', null)
    .where('status', '=', 'APPROVED')
    .where('sent_at', 'is', null)
    .orderBy('step')
    .execute();
  if (drafts.length === 0) return 0;
  const ids = drafts.map(() => newId('sq'));
  const queued = await sql<{ id: string; next_attempt_at: Date }>`
    INSERT INTO send_queue (organization_id, id, sequence_id, step, contact_id, draft_id, scheduled_at, next_attempt_at)
    SELECT ${org}, v.id, ${sequenceId}, v.step, v.contact_id, v.draft_id, v.at, v.at
    FROM unnest(${ids}::text[], ${drafts.map((d) => d.step)}::int[], ${drafts.map((d) => d.contact_id)}::text[],
                ${drafts.map((d) => d.id)}::text[], ${drafts.map((d) => d.scheduled_at ?? d.created_at)}::timestamptz[])
         AS v(id, step, contact_id, draft_id, at)
    ON CONFLICT (organization_id, sequence_id, step) WHERE state NOT IN ('skipped', 'failed') DO NOTHING
    RETURNING id, next_attempt_at`.execute(trx);
  await scheduleSends(
    trx,
    org,
    queued.rows.map((q) => ({ queueId: q.id, runAt: q.next_attempt_at })),
  );
  if (queued.rows.length > 0) {
    await trx
      .updateTable('contact_sequences')
      .set({ status: 'QUEUED', updated_at: sql<Date>`now_ms()` })
      .where('organization_id', '=', org)
      .where('id', '=', sequenceId)
      .where('status', 'in', ['DRAFTED', 'APPROVED'])
      .execute();
  }
  return queued.rows.length;
}

/**
 * Whether a send has claimed the draft's step (its queue row is sending, or was handed over). Locks
 * the draft's queue rows, so a claim running now is waited for; once this says no, a claim that
 * follows finds the row as this transaction leaves it (cancelled by a new version of the step).
 */
export async function sendClaimed(trx: Tx, organizationId: string, draftId: string): Promise<boolean> {
  const rows = await trx
    .selectFrom('send_queue')
    .select('state')
    .where('organization_id', '=', organizationId)
    .where('draft_id', '=', draftId)
    .forUpdate()
    .execute();
  return rows.some((r) => ['sending', 'sent', 'possibly_sent'].includes(r.state));
}

/**
 * Cancels the open queue rows of the given sequences, contact or drafts (a pause, an erasure, a
 * new version of an approved step): they will not go out.
 */
export async function cancelQueued(
  trx: Tx,
  organizationId: string,
  where: { sequenceIds?: string[]; contactId?: string; draftIds?: string[] },
  reason: string,
): Promise<number> {
  let q = trx
    .updateTable('send_queue')
    .set({ state: 'skipped', held_by: reason, updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', organizationId)
    .where('state', 'in', ['queued', 'deferred']);
  if (where.sequenceIds) q = q.where('sequence_id', 'in', where.sequenceIds.length ? where.sequenceIds : ['']);
  if (where.contactId) q = q.where('contact_id', '=', where.contactId);
  if (where.draftIds) {
    if (where.draftIds.length === 0) return 0;
    q = q.where('draft_id', 'in', where.draftIds);
  }
  const r = await q.executeTakeFirst();
  return Number(r.numUpdatedRows);
}
