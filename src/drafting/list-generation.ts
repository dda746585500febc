// POST /lists/{id}/generate: a run over the list's own contacts, in chunks of CHUNK_SIZE, one job
// each. A chunk gets (or reuses: idempotent on contact and template) each contact's sequence on
// the list's template and product, skipping (and counting) suppressed and do-not-contact contacts
// and product collisions, then generates the drafts those sequences lack (or, when the run was
// asked to regenerate, have not had approved). The run completes when every chunk has committed;
// at most one run per list is in flight. Before a run is enqueued, the drafts it will write are
// counted by the same rules against the month's allowance left: a run that would exceed it is
// recorded as not started, and nothing is enqueued.
import { sql } from 'kysely';
import { type Tx, withOrg } from '../../db/database.js';
import { draftsRemaining } from '../account/usage.js';
import { isDoNotContact } from '../compliance/do-not-contact.js';
import { suppressedAmong } from '../compliance/suppression-match.js';
import { isLiveContact } from '../crm/live-contacts.js';
import { invalid, ProblemError } from '../http/problems.js';
import type { Clock } from '../platform/clock.js';
import { newId } from '../platform/ids.js';
import type { Deps } from '../platform/services.js';
import { BUILTIN_SEQUENCE_ID } from '../sequences/builtin-templates.js';
import { ACTIVE_SEQUENCE_STATUSES, templateSteps } from '../sequences/lifecycle.js';
import { GENERATING_STATUSES, type GenerationMode, generateDrafts, stepsToWrite } from './generate.js';

export const CHUNK_SIZE = 100;
/** Contacts counted at a time when a run's drafts are planned (bounds the ids of a statement). */
const PLAN_SLICE = 1000;

export type GenerationStart =
  | { listId: string; generationQueued: false; generationRunning: true; runId: string }
  | {
      listId: string;
      generationQueued: true;
      chunkCount: number;
      totalContacts: number;
      runId: string;
      draftsToWrite: number;
      allowanceRemaining: number;
    }
  | { listId: string; generationQueued: false; allowanceExceeded: true; runId: string; draftsToWrite: number; allowanceRemaining: number };

/** The mode of the drafting pass of a run: only missing steps, unless it was asked to regenerate. */
const modeOf = (regenerate: boolean): GenerationMode => (regenerate ? 'unapproved' : 'missing');

interface RunTarget {
  templateId: string;
  productId: string | null;
}

type Contact = { id: string; email_normalized: string; tags: string[] };

/**
 * The one place a run sorts its contacts: skipped (suppressed, do-not-contact, a product collision),
 * a sequence on the template to reuse (drafting or past it), or a sequence to create.
 */
async function sortContacts(trx: Tx, org: string, secret: string | null, target: RunTarget, contacts: Contact[]) {
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
  const counts = { suppressed: 0, doNotContact: 0, collision: 0, reused: 0, active: 0 };
  const reuse: string[] = [];
  const drafting: string[] = [];
  const create: string[] = [];
  for (const c of contacts) {
    if (suppressed.has(c.email_normalized)) {
      counts.suppressed += 1;
      continue;
    }
    if (isDoNotContact(c.tags)) {
      counts.doNotContact += 1;
      continue;
    }
    const own = sequences.find((s) => s.contact_id === c.id && s.template_id === target.templateId);
    if (own) {
      reuse.push(own.id);
      if (GENERATING_STATUSES.includes(own.status)) {
        counts.reused += 1;
        drafting.push(own.id);
      } else counts.active += 1;
      continue;
    }
    const collides =
      target.productId !== null &&
      sequences.some(
        (s) =>
          s.contact_id === c.id &&
          ACTIVE_SEQUENCE_STATUSES.includes(s.status) &&
          s.product_id !== null &&
          s.product_id !== target.productId,
      );
    if (collides) {
      counts.collision += 1;
      continue;
    }
    create.push(c.id);
  }
  return { counts, reuse, drafting, create };
}

const ownContacts = (trx: Tx, org: string, listId: string) =>
  trx
    .selectFrom('contacts')
    .select(['id', 'email_normalized', 'tags'])
    .where('organization_id', '=', org)
    .where('list_id', '=', listId)
    .where(isLiveContact())
    .execute();

const runningRun = (trx: Tx, org: string, listId: string) =>
  trx
    .selectFrom('list_generation_runs')
    .select('id')
    .where('organization_id', '=', org)
    .where('list_id', '=', listId)
    .where('status', '=', 'running')
    .executeTakeFirst();

/**
 * Starts a run (or answers the one in flight, or records one not started for the allowance), in
 * the request's transaction (which holds the list's row).
 */
export async function startListGeneration(
  trx: Tx,
  org: string,
  list: { id: string; use_case_template_id: string | null; product_id: string | null },
  opts: { regenerate: boolean; secret: string | null; clock: Clock },
): Promise<GenerationStart> {
  const running = await runningRun(trx, org, list.id);
  if (running) return { listId: list.id, generationQueued: false, generationRunning: true, runId: running.id };
  // A list without a template uses the built-in sequence (first touch, follow-up, break-up).
  const templateId = list.use_case_template_id ?? BUILTIN_SEQUENCE_ID;
  const template = await templateSteps(trx, org, templateId);
  if (!template)
    throw new ProblemError('list-template-unavailable', `The list's template ${templateId} no longer exists or is no longer active.`);
  const productId = list.product_id ?? template.productId;
  const contacts = await ownContacts(trx, org, list.id);
  if (contacts.length === 0) {
    throw invalid(
      'The list has no contacts of its own to generate drafts for (contacts merely attached to it are generated on their own list).',
    );
  }
  // What the run will write, by the rules its chunks follow, against what the month has left;
  // counted a slice at a time so that no statement carries more ids than a slice.
  let draftsToWrite = 0;
  for (let i = 0; i < contacts.length; i += PLAN_SLICE) {
    const sorted = await sortContacts(trx, org, opts.secret, { templateId, productId }, contacts.slice(i, i + PLAN_SLICE));
    draftsToWrite +=
      sorted.create.length * template.steps.length + (await stepsToWrite(trx, org, sorted.drafting, modeOf(opts.regenerate)));
  }
  const allowanceRemaining = await draftsRemaining(trx, org, opts.clock);
  const runId = newId('lgr');
  const figures = { draftsToWrite, allowanceRemaining };
  if (draftsToWrite > allowanceRemaining) {
    await trx
      .insertInto('list_generation_runs')
      .values({
        organization_id: org,
        id: runId,
        list_id: list.id,
        template_id: templateId,
        product_id: productId,
        total_contacts: contacts.length,
        chunk_count: 0,
        status: 'not_started',
        regenerate: opts.regenerate,
        drafts_to_write: draftsToWrite,
        allowance_remaining: allowanceRemaining,
        finished_at: sql<Date>`now_ms()`,
      })
      .execute();
    return { listId: list.id, generationQueued: false, allowanceExceeded: true, runId, ...figures };
  }
  const { rows } = await sql<{ total: number; chunks: number }>`
    WITH own AS (
      SELECT id, (row_number() OVER (ORDER BY created_at, id) - 1) / ${CHUNK_SIZE} AS chunk
      FROM contacts WHERE organization_id = ${org} AND list_id = ${list.id} AND ${isLiveContact()}
    ), run AS (
      INSERT INTO list_generation_runs (organization_id, id, list_id, template_id, product_id, total_contacts, chunk_count,
                                        regenerate, drafts_to_write, allowance_remaining)
      SELECT ${org}, ${runId}, ${list.id}, ${templateId}, ${productId}, count(*), coalesce(max(chunk) + 1, 0),
             ${opts.regenerate}, ${draftsToWrite}, ${allowanceRemaining}
      FROM own HAVING count(*) > 0
      ON CONFLICT (organization_id, list_id) WHERE status = 'running' DO NOTHING
      RETURNING total_contacts, chunk_count
    ), jobs AS (
      SELECT enqueue_job('generate_list_chunk', json_build_object('organizationId', ${org}::text, 'runId', ${runId}::text, 'chunk', chunk, 'contactIds', array_agg(id ORDER BY id)))
      FROM own WHERE EXISTS (SELECT 1 FROM run) GROUP BY chunk
    )
    SELECT total_contacts AS total, chunk_count AS chunks FROM run, (SELECT count(*) FROM jobs) j`.execute(trx);
  if (rows.length === 0) {
    const again = await runningRun(trx, org, list.id);
    if (again) return { listId: list.id, generationQueued: false, generationRunning: true, runId: again.id };
    throw invalid(
      'The list has no contacts of its own to generate drafts for (contacts merely attached to it are generated on their own list).',
    );
  }
  return { listId: list.id, generationQueued: true, chunkCount: rows[0].chunks, totalContacts: rows[0].total, runId, ...figures };
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
    if (run?.status !== 'running' || run.done_chunks.includes(chunk)) return null;
    const template = await templateSteps(trx, org, run.template_id);
    const contacts = await trx
      .selectFrom('contacts')
      .select(['id', 'email_normalized', 'tags'])
      .where('organization_id', '=', org)
      .where('id', 'in', contactIds)
      .where(isLiveContact())
      .execute();
    const sorted = await sortContacts(trx, org, secret, { templateId: run.template_id, productId: run.product_id }, contacts);
    // Without its template (removed since the run was asked) no sequence is created.
    const create = template ? sorted.create : [];
    const unavailable = contactIds.length - contacts.length + (template ? 0 : sorted.create.length);
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
    if (sorted.reuse.length > 0) {
      await trx
        .updateTable('contact_sequences')
        .set({ list_id: run.list_id, generation_run_id: runId })
        .where('organization_id', '=', org)
        .where('id', 'in', sorted.reuse)
        .execute();
    }
    const { counts } = sorted;
    await trx
      .updateTable('list_generation_runs')
      .set({
        started_at: sql<Date>`coalesce(started_at, now_ms())`,
        sequences_created: sql`sequences_created + ${created.length}`,
        sequences_reused: sql`sequences_reused + ${counts.reused}`,
        skipped_suppressed: sql`skipped_suppressed + ${counts.suppressed}`,
        skipped_do_not_contact: sql`skipped_do_not_contact + ${counts.doNotContact}`,
        skipped_collision: sql`skipped_collision + ${counts.collision}`,
        skipped_sequence_active: sql`skipped_sequence_active + ${counts.active}`,
        skipped_other: sql`skipped_other + ${unavailable}`,
      })
      .where('organization_id', '=', org)
      .where('id', '=', runId)
      .execute();
    return { sequenceIds: [...created, ...sorted.drafting], mode: modeOf(run.regenerate) };
  });
  if (prepared === null) return;
  // New sequences get every step; reused ones the steps without a live draft (with regenerate, also those not approved).
  await generateDrafts(deps, org, { sequenceIds: prepared.sequenceIds, pass: `${runId}:${chunk}`, mode: prepared.mode, runId });
  await withOrg(deps.db, org, (trx) =>
    sql`
    UPDATE list_generation_runs SET done_chunks = array_append(done_chunks, ${chunk}::int),
      status = CASE WHEN cardinality(done_chunks) + 1 >= chunk_count THEN 'completed' ELSE status END,
      finished_at = CASE WHEN cardinality(done_chunks) + 1 >= chunk_count THEN now_ms() ELSE finished_at END
    WHERE organization_id = ${org} AND id = ${runId} AND status = 'running' AND NOT (${chunk}::int = ANY (done_chunks))`.execute(trx),
  );
}

/**
 * A chunk's job gave up after its last attempt: the run is failed (it would otherwise stay
 * running for ever and hold the list: at most one run per list is in flight).
 */
export async function failListRun(deps: Deps, org: string, runId: string): Promise<void> {
  await withOrg(deps.db, org, (trx) =>
    trx
      .updateTable('list_generation_runs')
      .set({ status: 'failed', finished_at: sql<Date>`now_ms()` })
      .where('organization_id', '=', org)
      .where('id', '=', runId)
      .where('status', '=', 'running')
      .execute(),
  );
}
