// What becomes of a batch's steps: the gates' decisions (deferred, skipped) and the jobs they move
// or drop; then, after the SMTP transactions, each claimed step's outcome: sent, failed for good
// (a 5xx to RCPT TO or DATA: its reason read from the answer, the effects of its class:
// src/dispatch/bounce.ts), tried again later (4xx, connection trouble; a 4xx still there after
// the last attempt is then judged by its reason too), or possibly sent (no answer after the whole
// message went over); with the events and the release of each sequence's next step.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { readBounceReason } from '../mail/bounce-reason.js';
import { type BounceClass, type BounceReason, bounceClass } from '../mail/bounce-taxonomy.js';
import type { SendOutcome } from '../mail/transport.js';
import type { Clock } from '../platform/clock.js';
import { type EmitInput, emitMany } from '../platform/events.js';
import { newId } from '../platform/ids.js';
import type { Claim, Decision } from './batch.js';
import { recordDeliveryFailure, STEP_FAILED_REASON } from './bounce.js';
import { scheduleSends } from './queue.js';

/** Delays before attempts 2..5 of a step whose SMTP answer was temporary. */
export const RETRY_DELAYS_MS = [60_000, 5 * 60_000, 15 * 60_000, 60 * 60_000];

/** The batch's deferred and skipped steps: their state and reason; a deferred step's job moves to when it may pass. */
export async function writeDecisions(trx: Tx, org: string, decided: Map<string, Decision>): Promise<void> {
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
  const skipped = [...decided].filter(([, d]) => 'skip' in d) as [string, { skip: string; detail: string }][];
  await stopAfterSkips(
    trx,
    org,
    skipped.map(([id, d]) => ({ id, code: d.skip, detail: d.detail })),
  );
}

/**
 * A skipped step ends its sequence's sending: the later open steps are skipped with the same
 * reason (else each would wait behind it for ever, `previous_step_pending`) and their jobs
 * removed, and the sequence, when still QUEUED or ACTIVE, is PAUSED (pausedFrom kept) with
 * `sequence.paused {reason}`, as a hard bounce or an unsubscribe pauses it.
 */
async function stopAfterSkips(trx: Tx, org: string, skips: { id: string; code: string; detail: string }[]): Promise<void> {
  if (skips.length === 0) return;
  const later = await sql<{ id: string }>`
    WITH s AS (
      SELECT DISTINCT ON (q.sequence_id) q.sequence_id, q.step, v.code, v.detail
      FROM send_queue q JOIN unnest(${skips.map((k) => k.id)}::text[], ${skips.map((k) => k.code)}::text[], ${skips.map((k) => k.detail)}::text[])
        AS v(id, code, detail) ON q.id = v.id
      WHERE q.organization_id = ${org}
      ORDER BY q.sequence_id, q.step
    )
    UPDATE send_queue l SET state = 'skipped', held_by = s.code, held_detail = left('step ' || s.step || ' was skipped: ' || s.detail, 500),
      updated_at = now_ms()
    FROM s WHERE l.organization_id = ${org} AND l.sequence_id = s.sequence_id AND l.step > s.step AND l.state IN ('queued', 'deferred')
    RETURNING l.id`.execute(trx);
  if (later.rows.length) await sql`SELECT remove_jobs(${later.rows.map((r) => r.id)}::text[])`.execute(trx);
  const paused = await sql<{ id: string; contact_id: string; paused_from: string; reason: string }>`
    WITH s AS (
      SELECT DISTINCT ON (q.sequence_id) q.sequence_id, v.code
      FROM send_queue q JOIN unnest(${skips.map((k) => k.id)}::text[], ${skips.map((k) => k.code)}::text[]) AS v(id, code) ON q.id = v.id
      WHERE q.organization_id = ${org}
      ORDER BY q.sequence_id, q.step
    )
    UPDATE contact_sequences c SET status = 'PAUSED', paused_from = c.status, paused_at = now_ms(), updated_at = now_ms()
    FROM s WHERE c.organization_id = ${org} AND c.id = s.sequence_id AND c.status IN ('QUEUED', 'ACTIVE')
    RETURNING c.id, c.contact_id, c.paused_from, s.code AS reason`.execute(trx);
  await emitMany(
    trx,
    org,
    paused.rows.map((p) => ({
      type: 'sequence.paused',
      resource: { type: 'Sequence', id: p.id },
      data: { sequenceId: p.id, contactId: p.contact_id, reason: p.reason, pausedFrom: p.paused_from },
    })),
  );
}

/** The other steps now decided have their jobs moved (deferred: writeDecisions) or gone (skipped, claimed); the job running keeps its own. */
export async function dropSettledJobs(trx: Tx, claims: Claim[], decided: Map<string, Decision>, ownId: string | null): Promise<void> {
  const done = [...claims.map((c) => c.queueId), ...[...decided].filter(([, d]) => 'skip' in d).map(([id]) => id)].filter(
    (id) => id !== ownId,
  );
  if (done.length) await sql`SELECT remove_jobs(${done}::text[])`.execute(trx);
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
 * worker died after the hand-over): possibly sent, shown so in the outbox and the send queue,
 * never sent again automatically (sending twice does more harm than not knowing; the operator
 * resolves it: src/dispatch/resolve.ts), and the sequence goes on, or completes after its last step.
 */
export async function markPossiblySent(trx: Tx, org: string, recordId: string, detail: string): Promise<boolean> {
  const r = await trx
    .updateTable('send_records')
    .set({ status: 'possibly_sent', smtp_response: detail.slice(0, 1000) })
    .where('organization_id', '=', org)
    .where('id', '=', recordId)
    .where('status', '=', 'sending')
    .returning(['queue_id', 'sequence_id', 'step'])
    .executeTakeFirst();
  if (!r) return false;
  await trx
    .updateTable('send_queue')
    .set({ state: 'possibly_sent', held_by: 'possibly_sent', held_detail: detail.slice(0, 500), updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', org)
    .where('id', '=', r.queue_id!)
    .where('state', '=', 'sending')
    .execute();
  await releaseNext(trx, org, [{ sequenceId: r.sequence_id!, step: r.step! }]);
  // Its last step gone, as far as anyone can tell, the sequence has nothing left to send.
  const completed = await sql<{ id: string; contact_id: string; steps: number }>`
    UPDATE contact_sequences SET status = 'COMPLETED', current_step = greatest(current_step, ${r.step!}::int), updated_at = now_ms()
    WHERE organization_id = ${org} AND id = ${r.sequence_id!} AND status IN ('QUEUED', 'ACTIVE') AND jsonb_array_length(steps) <= ${r.step!}::int
    RETURNING id, contact_id, jsonb_array_length(steps) AS steps`.execute(trx);
  await emitMany(
    trx,
    org,
    completed.rows.map((s) => ({
      type: 'sequence.completed',
      resource: { type: 'Sequence', id: s.id },
      data: { sequenceId: s.id, contactId: s.contact_id, steps: s.steps },
    })),
  );
  return true;
}

/**
 * Phase 3 for the accepted steps, set-based: the ledger, the queue, the drafts, the sequences, the
 * events, the next steps (also a possibly sent step the operator marks sent: src/dispatch/resolve.ts).
 */
export async function recordAccepted(trx: Tx, org: string, done: { c: Claim; outcome: SendOutcome }[]): Promise<EmitInput[]> {
  if (done.length === 0) return [];
  // A record the recovery sweep marked possibly sent while the server was slow is sent after all.
  // Its queue row and draft are marked sent, and each sent message joins the conversation
  // (GET /messages) as OUTBOUND, in the same statement.
  const updated = await sql<{ id: string }>`
    WITH sent AS (
      UPDATE send_records r SET status = 'sent', smtp_response = v.response, provider_message_id = v.provider
      FROM unnest(${done.map((d) => d.c.recordId)}::text[], ${done.map((d) => d.outcome.response)}::text[], ${done.map((d) => d.outcome.providerMessageId)}::text[],
                  ${done.map(() => newId('msg'))}::text[])
        AS v(id, response, provider, message_row)
      WHERE r.organization_id = ${org} AND r.id = v.id AND r.status IN ('sending', 'possibly_sent')
      RETURNING r.*, v.message_row
    ), queued AS (
      UPDATE send_queue q SET state = 'sent', updated_at = now_ms() FROM sent s WHERE q.organization_id = ${org} AND q.id = s.queue_id
    ), drafted AS (
      UPDATE drafts d SET sent_at = now_ms(), updated_at = now_ms() FROM sent s WHERE d.organization_id = ${org} AND d.id = s.draft_id
    ), written AS (
      INSERT INTO messages (organization_id, id, contact_id, direction, channel, from_email, to_email, subject, body, message_id,
        send_record_id, sequence_id, status)
      SELECT s.organization_id, s.message_row, s.contact_id, 'OUTBOUND', 'email', s.from_email, s.to_email, s.subject, coalesce(d.body, b.text_body, ''),
        s.message_id, s.id, s.sequence_id, 'sent'
      FROM sent s LEFT JOIN drafts d ON d.organization_id = s.organization_id AND d.id = s.draft_id
      LEFT JOIN send_bodies b ON b.organization_id = s.organization_id AND b.send_record_id = s.id
    )
    SELECT id FROM sent`.execute(trx);
  const live = new Set(updated.rows.map((r) => r.id));
  const sent = done.map((d) => d.c).filter((c) => live.has(c.recordId));
  if (sent.length === 0) return [];
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
    if (c.step >= c.stepCount && old.get(c.sequenceId) !== 'COMPLETED')
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

/** The failure the receiving server stated at send time: its reason and class (src/mail/bounce-reason.ts). */
function stated(outcome: SendOutcome): { reason: BounceReason; bounceClass: BounceClass; temporary: boolean } {
  const status = REPLY_STATUS.exec(outcome.response)?.[1] ?? null;
  const read = readBounceReason({ status, smtpCode: outcome.code, diagnostic: outcome.response, action: 'failed' });
  return { reason: read.reason, bounceClass: bounceClass(read.reason, read.temporary), temporary: read.temporary };
}
/** An RFC 3463 status is read from a reply only right after its code (`550 5.1.1 …`, RFC 3463 section 1), never from its text. */
const REPLY_STATUS = /^[245]\d\d[ -]([245]\.\d{1,3}\.\d{1,3})(?![\d.])/;

/**
 * Phase 3 for a step whose failure the server stated, for good (a 5xx) or still after the last
 * attempt (a 4xx, `temporary`): the step failed, the failure recorded with its reason and its
 * class's effects (src/dispatch/bounce.ts), send.failed and sequence.step_failed.
 */
async function recordFailure(
  trx: Tx,
  org: string,
  c: Claim,
  outcome: SendOutcome,
  clock: Clock,
  attempts: number | null,
): Promise<EmitInput[]> {
  const ref = { sequenceId: c.sequenceId, contactId: c.contactId, draftId: c.draftId, step: c.step };
  const { reason, bounceClass, temporary } = stated(outcome);
  // Out of attempts, the step keeps its old code; a failure for good is named by its class.
  const code = attempts === null ? STEP_FAILED_REASON[bounceClass] : 'transport_failed';
  await trx
    .updateTable('send_queue')
    .set({ state: 'failed', held_by: code, held_detail: outcome.response.slice(0, 500), updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', org)
    .where('id', '=', c.queueId)
    .execute();
  const { events } = await recordDeliveryFailure(
    trx,
    org,
    {
      ...ref,
      recordId: c.recordId,
      email: String((c.message.to as { address: string }).address),
      mailboxId: c.mailbox.id,
      code: outcome.code,
      diagnostic: outcome.response,
      reason,
      bounceClass,
      temporary,
      source: 'dispatcher',
      outOfAttempts: attempts !== null,
    },
    clock,
  );
  const failure = {
    ...ref,
    code: outcome.code,
    response: outcome.response,
    bounceReason: reason,
    bounceClass,
    ...(attempts === null ? {} : { attempts }),
  };
  events.push(
    { type: 'send.failed', resource: { type: 'Draft', id: c.draftId }, data: { ...failure, permanent: attempts === null } },
    { type: 'sequence.step_failed', resource: { type: 'Sequence', id: c.sequenceId }, data: { ...failure, reason: code } },
  );
  return events;
}

/**
 * Phase 3 for a temporary failure: tried again after a growing delay, then given up with
 * send.failed; a failure the receiving server stated is then judged by its reason like a 5xx.
 */
async function recordRetry(trx: Tx, org: string, c: Claim, outcome: SendOutcome, clock: Clock, throttled: boolean): Promise<EmitInput[]> {
  await trx
    .updateTable('send_records')
    .set({ status: 'failed', smtp_response: outcome.response })
    .where('organization_id', '=', org)
    .where('id', '=', c.recordId)
    .execute();
  if (throttled) {
    // A throttle is the server's pace, not the message's trouble: the attempt is given back; the
    // step is deferred to its server's backoff end once that is known (src/dispatch/backoff.ts).
    await sql`UPDATE send_queue SET attempts = greatest(attempts - 1, 0) WHERE organization_id = ${org} AND id = ${c.queueId}`.execute(trx);
    return [];
  }
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
  if (outcome.aboutRecipient) return recordFailure(trx, org, c, outcome, clock, q.attempts);
  await trx
    .updateTable('send_queue')
    .set({ state: 'failed', held_by: 'transport_failed', held_detail: outcome.response.slice(0, 500), updated_at: sql<Date>`now_ms()` })
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

/**
 * Phase 3: what the SMTP answers mean for the steps, the sequences, the contacts and the mailboxes
 * (`clock`: for the organization's health); `throttled`: the queue row ids of the steps whose
 * answer was a throttle (src/dispatch/backoff.ts), whose deferral the caller writes.
 */
export async function recordOutcomes(
  trx: Tx,
  org: string,
  done: { c: Claim; outcome: SendOutcome }[],
  clock: Clock,
  throttled: Set<string> = new Set(),
): Promise<void> {
  const events = await recordAccepted(
    trx,
    org,
    done.filter((d) => d.outcome.kind === 'accepted'),
  );
  for (const { c, outcome } of done) {
    if (outcome.kind === 'permanent') events.push(...(await recordFailure(trx, org, c, outcome, clock, null)));
    else if (outcome.kind === 'temporary') events.push(...(await recordRetry(trx, org, c, outcome, clock, throttled.has(c.queueId))));
    else if (outcome.kind === 'unknown') await markPossiblySent(trx, org, c.recordId, outcome.response);
  }
  await emitMany(trx, org, events);
}
