// Reading list generation runs (GET /lists/{id}/generation-runs[/{runId}]): the run's record as
// its chunks and drafting passes keep it (src/drafting/list-generation.ts, generate.ts), its state
// derived from the stored status and whether a chunk has begun.
import type { Selectable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { ListGenerationRuns } from '../../db/schema.js';
import type { operations } from '../http/handler.js';
import { keyset, page } from '../http/paging.js';
import { notFound } from '../http/problems.js';
import { iso, isoNN } from '../platform/ids.js';

type GenerationRun = operations['getListGenerationRun']['responses'][200]['content']['application/json'];
type Row = Selectable<ListGenerationRuns>;

function stateOf(r: Row): GenerationRun['state'] {
  if (r.status === 'running') return r.started_at === null ? 'queued' : 'running';
  return r.status as GenerationRun['state'];
}

function runOf(r: Row): GenerationRun {
  return {
    id: r.id,
    listId: r.list_id,
    state: stateOf(r),
    regenerate: r.regenerate,
    totalContacts: r.total_contacts,
    chunkCount: r.chunk_count,
    chunksDone: r.done_chunks.length,
    draftsToWrite: r.drafts_to_write,
    allowanceRemaining: r.allowance_remaining,
    sequencesCreated: r.sequences_created,
    sequencesReused: r.sequences_reused,
    draftsGenerated: r.drafts_generated,
    draftsFailed: r.drafts_failed,
    failedReasons: r.failed_reasons as Record<string, number>,
    skipped: {
      suppressed: r.skipped_suppressed,
      doNotContact: r.skipped_do_not_contact,
      productCollision: r.skipped_collision,
      contactUnavailable: r.skipped_other,
      sequenceActive: r.skipped_sequence_active,
      liveDraft: r.skipped_live_draft,
    },
    // Every draft a run writes is taken from the month's allowance, regenerated ones too.
    allowanceUsed: r.drafts_generated,
    createdAt: isoNN(r.created_at),
    startedAt: iso(r.started_at),
    finishedAt: iso(r.finished_at),
  };
}

/** 404 unless the list is a live list of the organization. */
async function requireList(trx: Tx, org: string, listId: string): Promise<void> {
  const list = await trx
    .selectFrom('contact_lists')
    .select('id')
    .where('organization_id', '=', org)
    .where('id', '=', listId)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  if (!list) throw notFound('list');
}

/** GET /lists/{id}/generation-runs/{runId}. */
export async function generationRun(trx: Tx, org: string, listId: string, runId: string): Promise<GenerationRun> {
  await requireList(trx, org, listId);
  const row = await trx
    .selectFrom('list_generation_runs')
    .selectAll()
    .where('organization_id', '=', org)
    .where('list_id', '=', listId)
    .where('id', '=', runId)
    .executeTakeFirst();
  if (!row) throw notFound('generation run');
  return runOf(row);
}

/** GET /lists/{id}/generation-runs: newest first, keyset-paged. */
export async function generationRunsPage(
  trx: Tx,
  org: string,
  listId: string,
  query: NonNullable<operations['listListGenerationRuns']['parameters']['query']>,
) {
  await requireList(trx, org, listId);
  const limit = query.limit ?? 50;
  const q = trx.selectFrom('list_generation_runs').selectAll().where('organization_id', '=', org).where('list_id', '=', listId);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return page(rows, limit, (r) => ({ at: r.created_at, id: r.id }), runOf);
}
