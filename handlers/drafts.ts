// Drafts: reading (live versions by default, the evidence on request), approval and rejection.
// No email is ever sent here (sending is POST /drafts/{id}/send and the dispatcher).
import { sql } from 'kysely';
import { epochMs, type Tx } from '../db/database.js';
import { outboundEntitled } from '../src/account/plans.js';
import { DO_NOT_CONTACT_TAG } from '../src/compliance/do-not-contact.js';
import { matchSuppression } from '../src/compliance/suppression-match.js';
import { queueSteps } from '../src/dispatch/queue.js';
import type { Flag } from '../src/drafting/guardrails.js';
import type { Handler } from '../src/http/handler.js';
import { jsonPage, keyset } from '../src/http/paging.js';
import { invalid, notFound, ProblemError } from '../src/http/problems.js';
import { emit } from '../src/platform/events.js';
import { msIso, msJson } from '../src/platform/ids.js';
import { previewSql } from '../src/platform/text.js';

type DraftStatus = 'DRAFT_GENERATED' | 'EDITED' | 'REGENERATED' | 'APPROVED' | 'REJECTED';
const APPROVABLE = ['DRAFT_GENERATED', 'EDITED', 'REGENERATED'];

function draftSelect(trx: Tx) {
  return trx
    .selectFrom('drafts as d')
    .innerJoin('contacts as c', (j) => j.onRef('c.organization_id', '=', 'd.organization_id').onRef('c.id', '=', 'd.contact_id'))
    .select([
      'd.id',
      'd.organization_id',
      'd.contact_id',
      'c.name as contact_name',
      'd.subject',
      'd.step',
      'd.status',
      'd.sequence_id',
      'd.version',
      'd.flagged',
      epochMs('d.sent_at').as('sent_ms'),
      epochMs('d.opened_at').as('opened_ms'),
      epochMs('d.replied_at').as('replied_ms'),
      epochMs('d.created_at').as('created_ms'),
      epochMs('d.superseded_at').as('superseded_ms'),
      epochMs('d.scheduled_at').as('scheduled_ms'),
    ]);
}
type DraftRow = Awaited<ReturnType<ReturnType<typeof draftSelect>['executeTakeFirstOrThrow']>>;

/** The fields list items and the detail share, in the order both write them. */
function common(r: DraftRow) {
  return {
    id: r.id,
    organizationId: r.organization_id,
    contactId: r.contact_id,
    contactName: r.contact_name,
    subject: r.subject,
  };
}
function tail(r: DraftRow) {
  return {
    step: r.step,
    status: r.status as DraftStatus,
    sequenceId: r.sequence_id,
    version: r.version,
    flagged: r.flagged,
    scheduledAt: msIso(r.scheduled_ms),
    supersededAt: msIso(r.superseded_ms),
    sentAt: msIso(r.sent_ms),
    openedAt: msIso(r.opened_ms),
    repliedAt: msIso(r.replied_ms),
    createdAt: msIso(r.created_ms)!,
  };
}

/** A list item written straight to JSON, key for key as common + bodyPreview + tail. */
function itemJson(r: DraftRow & { body_preview: string }): string {
  const j = JSON.stringify;
  return (
    `{"id":${j(r.id)},"organizationId":${j(r.organization_id)},"contactId":${j(r.contact_id)},"contactName":${j(r.contact_name)},` +
    `"subject":${j(r.subject)},"bodyPreview":${j(r.body_preview)},"step":${r.step},"status":${j(r.status)},"sequenceId":${j(r.sequence_id)},` +
    `"version":${r.version},"flagged":${r.flagged},"scheduledAt":${msJson(r.scheduled_ms)},"supersededAt":${msJson(r.superseded_ms)},` +
    `"sentAt":${msJson(r.sent_ms)},"openedAt":${msJson(r.opened_ms)},"repliedAt":${msJson(r.replied_ms)},"createdAt":${msJson(r.created_ms)}}`
  );
}

const listDrafts: Handler<'listDrafts'> = async ({ trx, auth, query }) => {
  const limit = query.limit ?? 50;
  let q = draftSelect(trx)
    // About 200 characters, cut at a word where one is near; the full body stays in the database.
    .select(previewSql(sql.ref('d.body')).as('body_preview'))
    .where('d.organization_id', '=', auth.organizationId);
  if (query.includeSuperseded !== 'true') q = q.where('d.superseded_at', 'is', null);
  if (query.status !== undefined) q = q.where('d.status', '=', query.status);
  if (query.contactId !== undefined) q = q.where('d.contact_id', '=', query.contactId);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'd.created_at', idCol: 'd.id' }).execute();
  return { status: 200, body: jsonPage(rows, limit, (r) => ({ at: r.created_ms, id: r.id }), itemJson) };
};

interface Evidence {
  researchRunId?: string | null;
  citations?: Array<{
    text: string;
    sourceIndex: number;
    sourceUrl: string | null;
    sourceTitle: string | null;
    sourceDomain: string | null;
    sourceSnippet: string | null;
    sourceKind?: string | null;
  }>;
}

const getDraft: Handler<'getDraft'> = async ({ trx, auth, params, query }) => {
  const row = await draftSelect(trx)
    .select(['d.body', 'd.evidence', 'd.guardrail', 'd.provider', sql<string | null>`c.research->>'runId'`.as('research_run_id')])
    .where('d.organization_id', '=', auth.organizationId)
    .where('d.id', '=', params.id)
    .executeTakeFirst();
  if (!row) throw notFound('draft');
  const body = { ...common(row), body: row.body, ...tail(row) };
  const include = new Set((query.include ?? '').split(',').map((s) => s.trim().toLowerCase()));
  if (!include.has('evidence')) return { status: 200, body };
  // A citation resolves while the contact's research is the run the draft cited.
  const ev = (row.evidence ?? {}) as Evidence;
  const resolved = typeof ev.researchRunId === 'string' && ev.researchRunId === row.research_run_id;
  // A reply's citation of the message it answers does not depend on the research run.
  const citations = (Array.isArray(ev.citations) ? ev.citations : []).map((c) => {
    const ok = resolved || c.sourceKind === 'message';
    return {
      text: c.text,
      sourceIndex: c.sourceIndex,
      resolved: ok,
      sourceUrl: ok ? c.sourceUrl : null,
      sourceTitle: ok ? c.sourceTitle : null,
      sourceDomain: ok ? c.sourceDomain : null,
      sourceSnippet: ok ? c.sourceSnippet : null,
    };
  });
  const g = row.guardrail as { clean: boolean; attempts: number; repaired: string[]; advisories: string[]; flags?: Flag[] } | null;
  return {
    status: 200,
    body: {
      ...body,
      citations,
      unresolvedCitationCount: citations.filter((c) => !c.resolved).length,
      guardrailReport: g
        ? { clean: g.clean, attempts: g.attempts, repaired: g.repaired, advisories: g.advisories, flags: g.flags ?? [] }
        : null,
      provider: row.provider,
    },
  };
};

/** The draft (locked) with what approval and rejection need; 404 when unknown or foreign. */
async function draftForUpdate(trx: Tx, org: string, id: string) {
  const d = await trx
    .selectFrom('drafts')
    .select(['id', 'contact_id', 'sequence_id', 'step', 'status', 'superseded_at', 'flagged', 'guardrail', 'evidence', 'generation_run_id'])
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

const approveDraft: Handler<'approveDraft'> = async ({ trx, auth, params, body, config }) => {
  const org = auth.organizationId;
  const d = await draftForUpdate(trx, org, params.id);
  if (d.superseded_at !== null)
    throw invalid('This draft is a superseded version of its step; approve the live version (GET /drafts?contactId=...).');
  if (d.status === 'APPROVED') {
    return {
      status: 200,
      body: {
        draftId: d.id,
        status: 'approved',
        allApproved: await allApproved(trx, org, d.sequence_id, d.status),
        contactId: d.contact_id,
      },
    };
  }
  if (!APPROVABLE.includes(d.status))
    throw invalid(`A ${d.status} draft cannot be approved (only DRAFT_GENERATED, EDITED or REGENERATED ones can).`);
  const contact = await trx
    .selectFrom('contacts')
    .select(['email_normalized', 'deleted_at', 'erased_at', 'tags'])
    .where('organization_id', '=', org)
    .where('id', '=', d.contact_id)
    .executeTakeFirstOrThrow();
  if (contact.deleted_at !== null || contact.erased_at !== null)
    throw invalid("The draft's contact was deleted or erased and cannot be emailed.");
  const suppression = await matchSuppression(trx, org, contact.email_normalized, config.erasureHashSecret);
  if (suppression.suppressed) {
    throw invalid(
      `The draft's contact cannot be emailed: the address is suppressed${suppression.entry ? ` (${suppression.entry.reason})` : ''}.`,
    );
  }
  if (contact.tags.some((t) => t.toLowerCase() === DO_NOT_CONTACT_TAG)) throw invalid("The draft's contact is tagged do-not-contact.");
  const flags = (d.guardrail as { flags?: Flag[] } | null)?.flags ?? [];
  if (d.flagged && body?.acknowledgeFlags !== true) {
    throw new ProblemError(
      'validation-failed',
      `The draft carries unsupported-claim flags; approve with acknowledgeFlags: true to accept them: ${flags.map((f) => `"${f.sentence}" (${f.claims.join(', ')})`).join('; ')}.`,
      { errors: [{ field: 'body.acknowledgeFlags', message: 'must be true for a flagged draft' }], flags },
    );
  }
  // The approval keeps the evidence the person approved.
  await trx
    .updateTable('drafts')
    .set({
      status: 'APPROVED',
      approved_at: sql`now_ms()`,
      updated_at: sql`now_ms()`,
      approval: JSON.stringify({
        keyId: auth.keyId,
        userId: auth.userId,
        acknowledgedFlags: d.flagged ? flags : [],
        evidence: d.evidence,
        guardrail: d.guardrail,
      }),
    } as never)
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
      .set({ status: 'APPROVED', updated_at: sql`now_ms()` } as never)
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
  return { status: 200, body: { draftId: d.id, status: 'approved', allApproved: all, contactId: d.contact_id } };
};

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

const rejectDraft: Handler<'rejectDraft'> = async ({ trx, auth, params }) => {
  const org = auth.organizationId;
  const d = await draftForUpdate(trx, org, params.id);
  if (d.superseded_at !== null) throw invalid('This draft is a superseded version of its step and cannot be rejected.');
  if (!APPROVABLE.includes(d.status))
    throw invalid(`A ${d.status} draft cannot be rejected (only DRAFT_GENERATED, EDITED or REGENERATED ones can).`);
  await trx
    .updateTable('drafts')
    .set({ status: 'REJECTED', updated_at: sql`now_ms()` } as never)
    .where('organization_id', '=', org)
    .where('id', '=', d.id)
    .execute();
  return { status: 200, body: { draftId: d.id, status: 'rejected', contactId: d.contact_id } };
};

type SkipReason =
  | 'contact_removed'
  | 'suppressed'
  | 'do_not_contact'
  | 'already_in_pipeline'
  | 'all_steps_sent'
  | 'sequence_not_active'
  | 'already_queued';

/**
 * Queues every approved, unsent step of the draft's sequence (src/dispatch/queue.ts). 404 while
 * the organization's send flag is off, 403 on a plan without outbound, 400 for a draft that is
 * not APPROVED or not part of a sequence; a skip is a 200 with a stable reason.
 */
const sendDraft: Handler<'sendDraft'> = async ({ trx, auth, params, config }) => {
  const org = auth.organizationId;
  if (!auth.org.flags.v1_2_api_send) throw notFound('draft');
  const d = await draftForUpdate(trx, org, params.id);
  if (!outboundEntitled(auth.org.plan))
    throw new ProblemError('not-entitled', `The ${auth.org.plan} plan does not include outbound (sending).`);
  if (d.status !== 'APPROVED' || d.superseded_at !== null)
    throw invalid(`Only the live APPROVED version of a step can be sent; this draft is ${d.superseded_at ? 'superseded' : d.status}.`);
  if (d.sequence_id === null) throw invalid('The draft is not part of a sequence; only sequence steps are sent.');
  const skipped = (reason: SkipReason) => ({
    status: 200 as const,
    body: { draftId: d.id, queued: false, queuedJobCount: 0, skippedReason: reason },
  });
  const contact = await trx
    .selectFrom('contacts')
    .select(['email_normalized', 'deleted_at', 'erased_at', 'tags'])
    .where('organization_id', '=', org)
    .where('id', '=', d.contact_id)
    .executeTakeFirstOrThrow();
  if (contact.deleted_at !== null || contact.erased_at !== null) return skipped('contact_removed');
  if ((await matchSuppression(trx, org, contact.email_normalized, config.erasureHashSecret)).suppressed) return skipped('suppressed');
  if (contact.tags.some((t) => t.toLowerCase() === DO_NOT_CONTACT_TAG)) return skipped('do_not_contact');
  const openDeal = await sql<{ id: string }>`
    SELECT d.id FROM deals d LEFT JOIN deal_stages s ON s.organization_id = d.organization_id AND s.id = d.stage_id
    WHERE d.organization_id = ${org} AND d.primary_contact_id = ${d.contact_id} AND d.actual_close_date IS NULL AND s.is_terminal IS NOT TRUE
    LIMIT 1`.execute(trx);
  if (openDeal.rows.length > 0) return skipped('already_in_pipeline');
  const seq = await trx
    .selectFrom('contact_sequences')
    .select(['status', 'steps'])
    .where('organization_id', '=', org)
    .where('id', '=', d.sequence_id)
    .forUpdate()
    .executeTakeFirstOrThrow();
  const sent = await trx
    .selectFrom('drafts')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('organization_id', '=', org)
    .where('sequence_id', '=', d.sequence_id)
    .where('superseded_at', 'is', null)
    .where('sent_at', 'is not', null)
    .executeTakeFirstOrThrow();
  if (Number(sent.n) >= (seq.steps as unknown[]).length) return skipped('all_steps_sent');
  if (!['DRAFTED', 'APPROVED', 'QUEUED', 'ACTIVE'].includes(seq.status)) return skipped('sequence_not_active');
  const queued = await queueSteps(trx, org, d.sequence_id);
  if (queued === 0) return skipped('already_queued');
  return { status: 200, body: { draftId: d.id, queued: true, queuedJobCount: queued, skippedReason: null } };
};

export const draftHandlers = { listDrafts, getDraft, approveDraft, rejectDraft, sendDraft };
