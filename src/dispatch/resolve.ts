// Claims settled after the fact: a claim whose message never went (its worker died, or it went
// stale, before the hand-over) is released and its step tried again; a possibly sent step is
// resolved by the operator (POST /admin/api/organizations/{orgId}/send-queue/{queueId}/resolve):
// sent, as a real send, or queued to go again.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { notFound, ProblemError } from '../http/problems.js';
import { emitMany } from '../platform/events.js';
import type { Claim } from './batch.js';
import { markPossiblySent, recordAccepted } from './outcomes.js';
import { scheduleSends } from './queue.js';

/**
 * Settles claims whose worker is gone (dead, or the claim stale), each by its hand-over mark:
 * handed over, possibly sent; not, released (its record deleted, the caps' hourly buckets no
 * longer counting it: the caps count what was handed over), its step queued again with a job at
 * once and the attempt given back. Rows are locked, so a worker still alive that comes to mark a
 * released claim finds it gone and does not send it (src/dispatch/claim.ts markHandedOver).
 */
export async function settleAbandonedClaims(trx: Tx, org: string, recordIds: string[], detail: string) {
  const rows = await sql<{ id: string; handed: boolean }>`
    SELECT id, handed_over_at IS NOT NULL AS handed FROM send_records
    WHERE organization_id = ${org} AND id = ANY(${recordIds}::text[]) AND status = 'sending'
    ORDER BY id FOR UPDATE`.execute(trx);
  let possiblySent = 0;
  for (const r of rows.rows.filter((x) => x.handed)) if (await markPossiblySent(trx, org, r.id, detail)) possiblySent += 1;
  const released = await releaseClaims(
    trx,
    org,
    rows.rows.filter((x) => !x.handed).map((x) => x.id),
  );
  return { possiblySent, released };
}

/** The release of claims never handed over (see settleAbandonedClaims); returns how many. */
async function releaseClaims(trx: Tx, org: string, recordIds: string[]): Promise<number> {
  if (recordIds.length === 0) return 0;
  const gone = await sql<{ queue_id: string }>`
    WITH gone AS (
      DELETE FROM send_records WHERE organization_id = ${org} AND id = ANY(${recordIds}::text[]) AND status = 'sending' AND handed_over_at IS NULL
      RETURNING queue_id, mailbox_id, recipient_domain, sent_at
    ), counted AS (
      SELECT scope, date_trunc('hour', g.sent_at) AS hour, count(*)::int AS n
      FROM gone g, LATERAL (VALUES ('mailbox:' || g.mailbox_id), ('domain:' || g.recipient_domain)) AS s(scope)
      WHERE g.mailbox_id IS NOT NULL AND g.recipient_domain IS NOT NULL
      GROUP BY 1, 2
    ), uncounted AS (
      UPDATE send_ledger_hours h SET sends = greatest(h.sends - c.n, 0)
      FROM counted c WHERE h.organization_id = ${org} AND h.scope = c.scope AND h.hour = c.hour
    )
    SELECT queue_id FROM gone`.execute(trx);
  const again = await sql<{ id: string }>`
    UPDATE send_queue SET state = 'queued', held_by = NULL, held_detail = NULL, send_record_id = NULL, attempts = greatest(attempts - 1, 0),
      next_attempt_at = now_ms(), updated_at = now_ms()
    WHERE organization_id = ${org} AND id = ANY(${gone.rows.map((g) => g.queue_id)}::text[]) AND state = 'sending'
    RETURNING id`.execute(trx);
  await scheduleSends(
    trx,
    org,
    again.rows.map((q) => ({ queueId: q.id, runAt: null })),
  );
  return gone.rows.length;
}

export type Resolution = 'sent' | 'send_again';

/**
 * The operator's verdict on a possibly sent step: `sent` records it as a send (the record sent,
 * the message in the conversation, the draft's sentAt, draft.sent, the sequence's progress, the
 * next step released), `send_again` fails its record (no longer counted against the caps) and
 * queues the step again, due now (a sequence completed by it is ACTIVE again).
 */
export async function resolvePossiblySent(trx: Tx, org: string, queueId: string, outcome: Resolution) {
  const q = await sql<{
    id: string;
    state: string;
    sequence_id: string;
    step: number;
    contact_id: string;
    draft_id: string;
    record_id: string | null;
    message_id: string | null;
    mailbox_id: string | null;
    steps: number;
  }>`
    SELECT q.id, q.state, q.sequence_id, q.step, q.contact_id, q.draft_id, r.id AS record_id, r.message_id, r.mailbox_id,
      jsonb_array_length(s.steps) AS steps
    FROM send_queue q
    LEFT JOIN send_records r ON r.organization_id = q.organization_id AND r.id = q.send_record_id
    JOIN contact_sequences s ON s.organization_id = q.organization_id AND s.id = q.sequence_id
    WHERE q.organization_id = ${org} AND q.id = ${queueId}
    FOR UPDATE OF q`.execute(trx);
  const row = q.rows[0];
  if (!row) throw notFound('send-queue row');
  if (row.state !== 'possibly_sent' || row.record_id === null)
    throw new ProblemError('step-not-possibly-sent', `The step is ${row.state}; only a possibly sent step is resolved.`);
  const detail = outcome === 'sent' ? 'the operator found it delivered' : 'the operator found it not delivered: sent again';
  if (outcome === 'sent') {
    const claim = {
      recordId: row.record_id,
      queueId: row.id,
      sequenceId: row.sequence_id,
      step: row.step,
      stepCount: row.steps,
      contactId: row.contact_id,
      draftId: row.draft_id,
      mailbox: { id: row.mailbox_id },
      message: { messageId: row.message_id },
    } as unknown as Claim;
    const events = await recordAccepted(trx, org, [
      { c: claim, outcome: { kind: 'accepted', response: detail, code: null, providerMessageId: null, aboutRecipient: false } },
    ]);
    await emitMany(trx, org, events);
  } else {
    await sql`UPDATE send_records SET status = 'failed', smtp_response = ${detail} WHERE organization_id = ${org} AND id = ${row.record_id}`.execute(
      trx,
    );
    await sql`
      UPDATE send_queue SET state = 'queued', held_by = NULL, held_detail = NULL, send_record_id = NULL, next_attempt_at = now_ms(), updated_at = now_ms()
      WHERE organization_id = ${org} AND id = ${row.id}`.execute(trx);
    await sql`
      UPDATE contact_sequences SET status = 'ACTIVE', updated_at = now_ms()
      WHERE organization_id = ${org} AND id = ${row.sequence_id} AND status = 'COMPLETED' AND jsonb_array_length(steps) <= ${row.step}::int`.execute(
      trx,
    );
    await scheduleSends(trx, org, [{ queueId: row.id, runAt: null }]);
  }
  const after = await sql<{ state: string }>`SELECT state FROM send_queue WHERE organization_id = ${org} AND id = ${row.id}`.execute(trx);
  return { queueId: row.id, outcome, state: after.rows[0].state as 'sent' | 'queued' };
}
