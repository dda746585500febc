// POST /lists/{id}/generate: a run over the list's own contacts, in chunks of CHUNK_SIZE, one job
// each. A chunk gets (or reuses: idempotent on contact and template) each contact's sequence on
// the list's template and product, skipping (and counting) suppressed contacts and product
// collisions, then generates the drafts those sequences lack or have not had approved. The run
// completes when every chunk has committed; at most one run per list is in flight.
import { sql } from 'kysely';
import { type Tx, withOrg } from '../../db/database.js';
import { isDoNotContact } from '../compliance/do-not-contact.js';
import { suppressedAmong } from '../compliance/suppression-match.js';
import { isLiveContact } from '../crm/live-contacts.js';
import { invalid, ProblemError } from '../http/problems.js';
import { newId } from '../platform/ids.js';
import type { Deps } from '../platform/services.js';
import { BUILTIN_SEQUENCE_ID } from '../sequences/builtin-templates.js';
import { ACTIVE_SEQUENCE_STATUSES, templateSteps } from '../sequences/lifecycle.js';
import { generateDrafts } from './generate.js';

export const CHUNK_SIZE = 100;

export type GenerationStart =
  | { listId: string; generationQueued: false; generationRunning: true; runId: string }
  | { listId: string; generationQueued: true; chunkCount: number; totalContacts: number; runId: string };

/** Starts a run (or answers the one in flight), in the request's transaction. */
export async function startListGeneration(
  trx: Tx,
  org: string,
  list: { id: string; use_case_template_id: string | null; product_id: string | null },
): Promise<GenerationStart> {
  const running = await trx
    .selectFrom('list_generation_runs')
    .select('id')
    .where('organization_id', '=', org)
    .where('list_id', '=', list.id)
    .where('status', '=', 'running')
    .executeTakeFirst();
  if (running) return { listId: list.id, generationQueued: false, generationRunning: true, runId: running.id };
  // A list without a template uses the built-in sequence (first touch, follow-up, break-up).
  const templateId = list.use_case_template_id ?? BUILTIN_SEQUENCE_ID;
  const template = await templateSteps(trx, org, templateId);
  if (!template)
    throw new ProblemError('list-template-unavailable', `The list's template ${templateId} no longer exists or is no longer active.`);
  const runId = newId('lgr');
  const { rows } = await sql<{ total: number; chunks: number }>`
    WITH own AS (
      SELECT id, (row_number() OVER (ORDER BY created_at, id) - 1) / ${CHUNK_SIZE} AS chunk
      FROM contacts WHERE organization_id = ${org} AND list_id = ${list.id} AND ${isLiveContact()}
    ), run AS (
      INSERT INTO list_generation_runs (organization_id, id, list_id, template_id, product_id, total_contacts, chunk_count)
      SELECT ${org}, ${runId}, ${list.id}, ${templateId}, ${list.product_id ?? template.productId}, count(*), coalesce(max(chunk) + 1, 0)
      FROM own HAVING count(*) > 0
      ON CONFLICT (organization_id, list_id) WHERE status = 'running' DO NOTHING
      RETURNING total_contacts, chunk_count
    ), jobs AS (
      SELECT enqueue_job('generate_list_chunk', json_build_object('organizationId', ${org}::text, 'runId', ${runId}::text, 'chunk', chunk, 'contactIds', array_agg(id ORDER BY id)))
      FROM own WHERE EXISTS (SELECT 1 FROM run) GROUP BY chunk
    )
    SELECT total_contacts AS total, chunk_count AS chunks FROM run, (SELECT count(*) FROM jobs) j`.execute(trx);
  if (rows.length === 0) {
    const again = await trx
      .selectFrom('list_generation_runs')
      .select('id')
      .where('organization_id', '=', org)
      .where('list_id', '=', list.id)
      .where('status', '=', 'running')
      .executeTakeFirst();
    if (again) return { listId: list.id, generationQueued: false, generationRunning: true, runId: again.id };
    throw invalid(
      'The list has no contacts of its own to generate drafts for (contacts merely attached to it are generated on their own list).',
    );
  }
  return { listId: list.id, generationQueued: true, chunkCount: rows[0].chunks, totalContacts: rows[0].total, runId };
}

/** One chunk of a run: its contacts' sequences, then their drafts, then the chunk is marked done. */
export async function runListChunk(deps: Deps, org: string, runId: string, chunk: number, contactIds: string[]): Promise<void> {
  const secret = deps.config.erasureHashSecret;
  const prepared = await withOrg(deps.db, org, async (trx) => {
    const run = await trx
      .selectFrom('list_generation_runs')
      .selectAll()
      .where('organization_id', '=', org)
      .where('id', '=', runId)
      .executeTakeFirst();
    if (!run || run.done_chunks.includes(chunk)) return null;
    const template = await templateSteps(trx, org, run.template_id);
    const contacts = await trx
      .selectFrom('contacts')
      .select(['id', 'email_normalized', 'tags'])
      .where('organization_id', '=', org)
      .where('id', 'in', contactIds)
      .where(isLiveContact())
      .execute();
    const suppressed = await suppressedAmong(
      trx,
      org,
      contacts.map((c) => c.email_normalized),
      secret,
    );
    const sequences =
      contacts.length === 0
        ? []
        : await trx
            .selectFrom('contact_sequences')
            .select(['id', 'contact_id', 'template_id', 'product_id', 'status'])
            .where('organization_id', '=', org)
            .where(
              'contact_id',
              'in',
              contacts.map((c) => c.id),
            )
            .execute();
    const counts = { created: 0, reused: 0, suppressed: 0, collision: 0, other: contactIds.length - contacts.length };
    const reuse: string[] = [];
    const create: string[] = [];
    for (const c of contacts) {
      if (suppressed.has(c.email_normalized) || isDoNotContact(c.tags)) {
        counts.suppressed += 1;
        continue;
      }
      const own = sequences.find((s) => s.contact_id === c.id && s.template_id === run.template_id);
      if (own) {
        counts.reused += 1;
        reuse.push(own.id);
        continue;
      }
      const collides =
        run.product_id !== null &&
        sequences.some(
          (s) =>
            s.contact_id === c.id &&
            ACTIVE_SEQUENCE_STATUSES.includes(s.status) &&
            s.product_id !== null &&
            s.product_id !== run.product_id,
        );
      if (collides || !template) {
        counts[collides ? 'collision' : 'other'] += 1;
        continue;
      }
      create.push(c.id);
    }
    const created =
      create.length === 0 || !template
        ? []
        : (
            await sql<{ id: string }>`
      INSERT INTO contact_sequences (organization_id, id, contact_id, template_id, product_id, anchor_at_utc, steps, status, list_id, generation_run_id)
      SELECT ${org}, v.id, v.contact_id, ${run.template_id}, ${run.product_id}, now_ms(), ${JSON.stringify(template.steps)}::jsonb, 'NEW', ${run.list_id}, ${runId}
      FROM unnest(${create.map(() => newId('seq'))}::text[], ${create}::text[]) AS v(id, contact_id)
      ON CONFLICT (organization_id, contact_id, template_id) DO NOTHING
      RETURNING id`.execute(trx)
          ).rows.map((r) => r.id);
    counts.created = created.length;
    if (reuse.length > 0) {
      await trx
        .updateTable('contact_sequences')
        .set({ list_id: run.list_id, generation_run_id: runId })
        .where('organization_id', '=', org)
        .where('id', 'in', reuse)
        .execute();
    }
    await trx
      .updateTable('list_generation_runs')
      .set({
        sequences_created: sql`sequences_created + ${counts.created}`,
        sequences_reused: sql`sequences_reused + ${counts.reused}`,
        skipped_suppressed: sql`skipped_suppressed + ${counts.suppressed}`,
        skipped_collision: sql`skipped_collision + ${counts.collision}`,
        skipped_other: sql`skipped_other + ${counts.other}`,
      })
      .where('organization_id', '=', org)
      .where('id', '=', runId)
      .execute();
    return [...created, ...reuse];
  });
  if (prepared === null) return;
  // Sequences new to this run get every step; reused ones the steps not approved yet (a re-run).
  await generateDrafts(deps, org, { sequenceIds: prepared, pass: `${runId}:${chunk}`, mode: 'unapproved', runId });
  await withOrg(deps.db, org, (trx) =>
    sql`
    UPDATE list_generation_runs SET done_chunks = array_append(done_chunks, ${chunk}::int),
      status = CASE WHEN cardinality(done_chunks) + 1 >= chunk_count THEN 'completed' ELSE status END,
      finished_at = CASE WHEN cardinality(done_chunks) + 1 >= chunk_count THEN now_ms() ELSE finished_at END
    WHERE organization_id = ${org} AND id = ${runId} AND NOT (${chunk}::int = ANY (done_chunks))`.execute(trx),
  );
}
