// Drafts as the API reads them: the list (live versions by default, each item written straight to
// JSON with a body preview) and one draft, with the evidence on request.
import { sql } from 'kysely';
import { epochMs, type Tx } from '../../db/database.js';
import type { operations } from '../http/handler.js';
import { jsonPage, keyset } from '../http/paging.js';
import { notFound } from '../http/problems.js';
import { msIso, msJson } from '../platform/ids.js';
import { previewSql } from '../platform/text.js';
import { storedFlags } from './guardrails.js';

type DraftStatus = 'DRAFT_GENERATED' | 'EDITED' | 'REGENERATED' | 'APPROVED' | 'REJECTED';
export type DraftFilter = NonNullable<operations['listDrafts']['parameters']['query']>;
type DraftListItem = operations['listDrafts']['responses'][200]['content']['application/json']['data'][number];

/** Queue states of a step that has not gone out and whose hold a draft shows (src/dispatch/queue.ts). */
const HELD_STATES = ['queued', 'deferred', 'possibly_sent'];

function draftSelect(trx: Tx) {
  return (
    trx
      .selectFrom('drafts as d')
      .innerJoin('contacts as c', (j) => j.onRef('c.organization_id', '=', 'd.organization_id').onRef('c.id', '=', 'd.contact_id'))
      // The live version's step in the send queue, while it waits or is possibly sent (at most one
      // such row per step: send_queue_step_idx), for holdReason and nextAttemptAt.
      .leftJoin('send_queue as q', (j) =>
        j
          .onRef('q.organization_id', '=', 'd.organization_id')
          .onRef('q.sequence_id', '=', 'd.sequence_id')
          .onRef('q.step', '=', 'd.step')
          .on('q.state', 'in', HELD_STATES)
          .on('d.superseded_at', 'is', null),
      )
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
        'd.rejection_reason',
        epochMs('d.sent_at').as('sent_ms'),
        epochMs('d.opened_at').as('opened_ms'),
        epochMs('d.replied_at').as('replied_ms'),
        epochMs('d.created_at').as('created_ms'),
        epochMs('d.superseded_at').as('superseded_ms'),
        epochMs('d.scheduled_at').as('scheduled_ms'),
        'q.held_by as hold_reason',
        sql<number | null>`CASE WHEN q.state = 'possibly_sent' THEN NULL ELSE ${epochMs('q.next_attempt_at')} END`.as('next_attempt_ms'),
      ])
  );
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
    holdReason: r.hold_reason,
    nextAttemptAt: msIso(r.next_attempt_ms),
    createdAt: msIso(r.created_ms)!,
    rejectionReason: r.rejection_reason,
  };
}

/** A list item written straight to JSON, key for key as common + bodyPreview + tail. */
function itemJson(r: DraftRow & { body_preview: string }): string {
  const j = JSON.stringify;
  return (
    `{"id":${j(r.id)},"organizationId":${j(r.organization_id)},"contactId":${j(r.contact_id)},"contactName":${j(r.contact_name)},` +
    `"subject":${j(r.subject)},"bodyPreview":${j(r.body_preview)},"step":${r.step},"status":${j(r.status)},"sequenceId":${j(r.sequence_id)},` +
    `"version":${r.version},"flagged":${r.flagged},"scheduledAt":${msJson(r.scheduled_ms)},"supersededAt":${msJson(r.superseded_ms)},` +
    `"sentAt":${msJson(r.sent_ms)},"openedAt":${msJson(r.opened_ms)},"repliedAt":${msJson(r.replied_ms)},"holdReason":${j(r.hold_reason)},` +
    `"nextAttemptAt":${msJson(r.next_attempt_ms)},"createdAt":${msJson(r.created_ms)},"rejectionReason":${j(r.rejection_reason)}}`
  );
}

export async function listDrafts(trx: Tx, organizationId: string, filter: DraftFilter) {
  const limit = filter.limit ?? 50;
  let q = draftSelect(trx)
    // About 200 characters, cut at a word where one is near; the full body stays in the database.
    .select(previewSql(sql.ref('d.body')).as('body_preview'))
    .where('d.organization_id', '=', organizationId);
  if (filter.includeSuperseded !== 'true') q = q.where('d.superseded_at', 'is', null);
  if (filter.status !== undefined) q = q.where('d.status', '=', filter.status);
  if (filter.contactId !== undefined) q = q.where('d.contact_id', '=', filter.contactId);
  if (filter.sequenceId !== undefined) q = q.where('d.sequence_id', '=', filter.sequenceId);
  if (filter.flagged !== undefined) q = q.where('d.flagged', '=', filter.flagged === 'true');
  // A list's drafts are those of the sequences its generation started (the sequence keeps its list).
  if (filter.listId !== undefined) {
    const listId = filter.listId;
    q = q.where('d.sequence_id', 'in', (eb) =>
      eb
        .selectFrom('contact_sequences as s')
        .select('s.id')
        .where('s.organization_id', '=', organizationId)
        .where('s.list_id', '=', listId),
    );
  }
  const rows = await keyset(q, { cursor: filter.cursor, limit, createdCol: 'd.created_at', idCol: 'd.id' }).execute();
  return jsonPage<(typeof rows)[number], DraftListItem>(rows, limit, (r) => ({ at: r.created_ms, id: r.id }), itemJson);
}

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

/** The draft (any version); with `evidence`, its citations as they resolve now, the guardrail report and the provider. 404 when unknown or foreign. */
export async function getDraft(trx: Tx, organizationId: string, id: string, opts: { evidence: boolean }) {
  const row = await draftSelect(trx)
    .select(['d.body', 'd.evidence', 'd.guardrail', 'd.provider', sql<string | null>`c.research->>'runId'`.as('research_run_id')])
    .where('d.organization_id', '=', organizationId)
    .where('d.id', '=', id)
    .executeTakeFirst();
  if (!row) throw notFound('draft');
  const body = { ...common(row), body: row.body, ...tail(row) };
  if (!opts.evidence) return body;
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
  const g = row.guardrail as { clean: boolean; attempts: number; repaired: string[]; advisories: string[] } | null;
  return {
    ...body,
    citations,
    unresolvedCitationCount: citations.filter((c) => !c.resolved).length,
    guardrailReport: g
      ? { clean: g.clean, attempts: g.attempts, repaired: g.repaired, advisories: g.advisories, flags: storedFlags(g) }
      : null,
    provider: row.provider,
  };
}
