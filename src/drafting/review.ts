// A person's review of a draft: approval (the contact must still be emailable; a flagged draft
// needs its flags, of every kind, acknowledged; the approval keeps the evidence approved) and rejection. Approving
// the last live step of a sequence approves the sequence; a step approved while its sequence is
// sending joins the send queue. No email is sent here.

import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { contactBlock } from '../compliance/contact-block.js';
import { queueSteps } from '../dispatch/queue.js';
import { invalid, notFound, ProblemError } from '../http/problems.js';
import { emit } from '../platform/events.js';
import { storedFlags } from './guardrails.js';

const APPROVABLE = ['DRAFT_GENERATED', 'EDITED', 'REGENERATED'];

/** The draft (locked) with what approval, rejection and sending need; 404 when unknown or foreign. */
export async function draftForUpdate(trx: Tx, org: string, id: string) {
  const d = await trx
    .selectFrom('drafts')
    .select([
      'id',
      'contact_id',
      'sequence_id',
      'step',
      'status',
      'version',
      'superseded_at',
      'sent_at',
      'flagged',
      'guardrail',
      'evidence',
      'generation_run_id',
      'subject',
      'body',
      'provider',
    ])
    .where('organization_id', '=', org)
    .where('id', '=', id)
    .forUpdate()
    .executeTakeFirst();
  if (!d) throw notFound('draft');
  return d;
}

/** Every live step draft of the sequence is approved (a draft outside a sequence stands alone). */
async function allApproved(trx: Tx, org: string, sequenceId: string | null, draftStatus: string): Promise<boolean> {
  if (sequenceId === null) return draftStatus === 'APPROVED';
  const r = await sql<{ all: boolean }>`
    SELECT jsonb_array_length(s.steps) = count(d.id) FILTER (WHERE d.status = 'APPROVED') AS all
    FROM contact_sequences s LEFT JOIN drafts d ON d.organization_id = s.organization_id AND d.sequence_id = s.id AND d.superseded_at IS NULL
    WHERE s.organization_id = ${org} AND s.id = ${sequenceId} GROUP BY s.organization_id, s.id`.execute(trx);
  return r.rows[0]?.all === true;
}

/** 400 when the draft's contact can no longer be emailed (approval, a new version of a step). */
export async function assertEmailable(trx: Tx, org: string, contactId: string, erasureHashSecret: string | null): Promise<void> {
  const block = await contactBlock(trx, org, contactId, erasureHashSecret);
  if (block?.reason === 'contact_removed') throw invalid("The draft's contact was deleted or erased and cannot be emailed.");
  if (block?.reason === 'suppressed') {
    throw invalid(`The draft's contact cannot be emailed: the address is suppressed${block.entry ? ` (${block.entry.reason})` : ''}.`);
  }
  if (block?.reason === 'do_not_contact') throw invalid("The draft's contact is tagged do-not-contact.");
}

export interface Approval {
  /** The API key and the person (if any) approving. */
  keyId: string;
  userId: string | null;
  acknowledgeFlags: boolean;
  /** The secret the erased addresses' suppression hashes are keyed with. */
  erasureHashSecret: string | null;
}

/**
 * Approves a live, approvable draft (an approved one again is a 200 unchanged); 400 for a
 * superseded or unapprovable draft, a contact that cannot be emailed, or unacknowledged flags.
 */
export async function approveDraft(trx: Tx, org: string, id: string, approval: Approval) {
  const d = await draftForUpdate(trx, org, id);
  if (d.superseded_at !== null)
    throw invalid('This draft is a superseded version of its step; approve the live version (GET /drafts?contactId=...).');
  if (d.status === 'APPROVED') {
    return {
      draftId: d.id,
      status: 'approved' as const,
      allApproved: await allApproved(trx, org, d.sequence_id, d.status),
      contactId: d.contact_id,
    };
  }
  if (!APPROVABLE.includes(d.status))
    throw invalid(`A ${d.status} draft cannot be approved (only DRAFT_GENERATED, EDITED or REGENERATED ones can).`);
  await assertEmailable(trx, org, d.contact_id, approval.erasureHashSecret);
  // Every kind of flag (unsupported claim, offer, claim about the sender) needs the acknowledgement.
  const flags = storedFlags(d.guardrail);
  if (d.flagged && approval.acknowledgeFlags !== true) {
    throw new ProblemError(
      'validation-failed',
      `The draft carries flags; approve with acknowledgeFlags: true to accept them: ${flags.map((f) => `${f.kind} "${f.sentence}" (${f.claims.join(', ')})`).join('; ')}.`,
      { errors: [{ field: 'body.acknowledgeFlags', message: 'must be true for a flagged draft' }], flags },
    );
  }
  // The approval keeps the evidence the person approved.
  await trx
    .updateTable('drafts')
    .set({
      status: 'APPROVED',
      approved_at: sql<Date>`now_ms()`,
      updated_at: sql<Date>`now_ms()`,
      approval: JSON.stringify({
        keyId: approval.keyId,
        userId: approval.userId,
        acknowledgedFlags: d.flagged ? flags : [],
        evidence: d.evidence,
        guardrail: d.guardrail,
      }),
    })
    .where('organization_id', '=', org)
    .where('id', '=', d.id)
    .execute();
  await emit(trx, org, {
    type: 'draft.approved',
    resource: { type: 'Draft', id: d.id },
    data: { draftId: d.id, contactId: d.contact_id, sequenceId: d.sequence_id, step: d.step },
  });
  const all = await allApproved(trx, org, d.sequence_id, 'APPROVED');
  if (all && d.sequence_id !== null) {
    await trx
      .updateTable('contact_sequences')
      .set({ status: 'APPROVED', updated_at: sql<Date>`now_ms()` })
      .where('organization_id', '=', org)
      .where('id', '=', d.sequence_id)
      .where('status', 'in', ['NEW', 'DRAFTED'])
      .execute();
  }
  if (d.generation_run_id !== null) await listApprovalEvent(trx, org, d.generation_run_id);
  // A step approved while its sequence is sending joins the queue now.
  if (d.sequence_id !== null) {
    const seq = await trx
      .selectFrom('contact_sequences')
      .select('status')
      .where('organization_id', '=', org)
      .where('id', '=', d.sequence_id)
      .executeTakeFirst();
    if (seq && ['QUEUED', 'ACTIVE'].includes(seq.status)) await queueSteps(trx, org, d.sequence_id);
  }
  return { draftId: d.id, status: 'approved' as const, allApproved: all, contactId: d.contact_id };
}

/**
 * The list-level draft.approved: once, when the approval that completes every live draft of a
 * finished list generation run is made.
 */
async function listApprovalEvent(trx: Tx, org: string, runId: string): Promise<void> {
  const done = await sql<{ list_id: string; approved: number }>`
    UPDATE list_generation_runs r SET all_approved_at = now_ms()
    FROM (SELECT count(*) FILTER (WHERE status = 'APPROVED') AS approved, count(*) AS total
          FROM drafts WHERE organization_id = ${org} AND generation_run_id = ${runId} AND superseded_at IS NULL) c
    WHERE r.organization_id = ${org} AND r.id = ${runId} AND r.status = 'completed' AND r.all_approved_at IS NULL
      AND c.total > 0 AND c.approved = c.total
    RETURNING r.list_id, c.approved::int AS approved`.execute(trx);
  const r = done.rows[0];
  if (!r) return;
  await emit(trx, org, {
    type: 'draft.approved',
    resource: { type: 'ContactList', id: r.list_id },
    data: { listId: r.list_id, generationRunId: runId, approvedCount: r.approved },
  });
}

/** Rejects a live, approvable draft, keeping the reviewer's reason; 400 for a superseded or unapprovable one. */
export async function rejectDraft(trx: Tx, org: string, id: string, reason: string | null = null) {
  const d = await draftForUpdate(trx, org, id);
  if (d.superseded_at !== null) throw invalid('This draft is a superseded version of its step and cannot be rejected.');
  if (!APPROVABLE.includes(d.status))
    throw invalid(`A ${d.status} draft cannot be rejected (only DRAFT_GENERATED, EDITED or REGENERATED ones can).`);
  await trx
    .updateTable('drafts')
    .set({ status: 'REJECTED', rejection_reason: reason, updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', org)
    .where('id', '=', d.id)
    .execute();
  return { draftId: d.id, status: 'rejected' as const, contactId: d.contact_id };
}
