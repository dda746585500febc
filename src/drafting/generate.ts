// Draft generation for a batch of sequences (one sequence for POST /sequences, a chunk of a list
// for POST /lists/{id}/generate). Set-based: the inputs are read in a few queries, the drafts are
// written in memory (the model calls concurrently, within LLM_CONCURRENCY), and everything the
// batch changes commits in one transaction: the quota it takes, the drafts (superseding older
// versions), the contacts' derived research, the sequences' statuses, the list run's counters and
// every event. Before the writers run, each sequence is pinned to the mailbox it will send from
// (src/dispatch/senders.ts; committed with the quota check), whose name signs its drafts with the
// list owner's title (src/drafting/sender.ts). Idempotent per generation pass: a re-run of the
// same pass writes nothing twice.
import { sql } from 'kysely';
import { type Tx, withOrg } from '../../db/database.js';
import { draftsRemaining, takeDrafts } from '../account/usage.js';
import { heldOutUnits } from '../analytics/holdout.js';
import { isDoNotContact } from '../compliance/do-not-contact.js';
import { suppressedAmong } from '../compliance/suppression-match.js';
import { isLiveContactRow } from '../crm/live-contacts.js';
import { cancelQueued, sendClaimed } from '../dispatch/queue.js';
import { candidates, pinMailboxes } from '../dispatch/senders.js';
import { sendingSettings } from '../dispatch/settings.js';
import { type EmitInput, emitMany } from '../platform/events.js';
import { newId } from '../platform/ids.js';
import type { Deps } from '../platform/services.js';
import { assessContact, functionOf } from '../research/assess.js';
import type { Fact, Source } from '../research/dossier.js';
import { storedDossier } from '../research/runs.js';
import { citableResearch } from '../research/suspicious.js';
import { type DraftContext, storedEvidence, type TemplateStep, type WrittenDraft } from './context.js';
import { type EditedText, writeEdit } from './edit-writer.js';
import { writeFallback } from './fallback.js';
import { linkPolicy, senderDomains } from './links.js';
import { nameParts } from './merge.js';
import { writeOrFallBack, writeWithModel } from './model-writer.js';
import { type ListOwner, listOwners, senderValues } from './sender.js';

/**
 * Which steps a pass writes: `missing` those without a live draft (a new sequence); `unapproved`
 * also those whose live draft is not approved (a re-run of list generation); `unsent` every step
 * not sent yet (resume, which has superseded them already); `step` the one step of `rewrite`.
 */
export type GenerationMode = 'missing' | 'unapproved' | 'unsent' | 'step';

/**
 * A reviewer's new version of one step (PATCH /drafts/{id}, POST /drafts/{id}/regenerate,
 * src/drafting/revise.ts): written over the live draft `replaces` only while it is still the live,
 * unsent one, whatever its status (an approved one leaves the send queue).
 */
export interface Rewrite {
  step: number;
  replaces: string;
  status: 'EDITED' | 'REGENERATED';
  /** A regeneration counts against the drafts allowance; an edit does not. */
  charged: boolean;
  /** The reviewer's wishes for the model writer (a regeneration). */
  instructions?: string;
  /** An edit: the reviewer's text, judged with the citations it keeps (src/drafting/edit-writer.ts). */
  edit?: EditedText;
}

export interface GenerationRequest {
  sequenceIds: string[];
  pass: string;
  mode: GenerationMode;
  runId: string | null;
  /** With mode `step`: the step rewritten (one sequence). */
  rewrite?: Rewrite;
}

/** Statuses in which a sequence's drafts are (re)written. */
export const GENERATING_STATUSES = ['NEW', 'DRAFTED', 'APPROVED'];
/** A reviewer may also rewrite an unsent step of a sequence that is sending. */
export const REWRITABLE_STATUSES = [...GENERATING_STATUSES, 'QUEUED', 'ACTIVE'];
const statusesOf = (req: GenerationRequest) => (req.rewrite ? REWRITABLE_STATUSES : GENERATING_STATUSES);
const DAY_MS = 86_400_000;

interface ContactResearch {
  runId: string;
  facts: Fact[];
  sources: Source[];
}

/**
 * The contact research a draft may cite: stored research of this version of the service, without
 * instruction-like facts (research stored before they were left out may hold some), or null.
 */
export function storedContactResearch(research: unknown): ContactResearch | null {
  const r = research as Partial<ContactResearch & { version: number }> | null;
  return r && typeof r === 'object' && r.version === 1 && typeof r.runId === 'string' && Array.isArray(r.facts) && Array.isArray(r.sources)
    ? citableResearch({ runId: r.runId, facts: r.facts, sources: r.sources })
    : null;
}

/** Research derived for a contact from its company's dossier during generation (stored at commit). */
type Derived = ReturnType<typeof assessContact> & {
  companyId: string;
  companyRunId: string;
  companyResearchUpdatedAt: string;
  lowConfidence: boolean;
  hasMinimumCoverage: boolean;
};

interface Item {
  /** account: the contact's company, the unit of the ai_email_lift holdout experiment. */
  seq: string;
  /** Who the drafts are signed for (with the mailbox pinned to the sequence: src/drafting/sender.ts); null for nobody named. */
  owner: ListOwner | null;
  contact: string;
  account: string | null;
  step: TemplateStep;
  stepCount: number;
  scheduledAt: Date;
  ctx: DraftContext;
  written?: WrittenDraft;
  version?: number;
}
interface Failure {
  seq: string;
  contact: string;
  step: number;
  reason: string;
  detail: string;
}

async function load(trx: Tx, org: string, req: GenerationRequest, secret: string | null) {
  const organization = await trx
    .selectFrom('organizations')
    .select(['name', 'plan', 'sending'])
    .where('id', '=', org)
    .executeTakeFirstOrThrow();
  const sequences = await trx
    .selectFrom('contact_sequences')
    .select(['id', 'contact_id', 'status', 'anchor_at_utc', 'created_at', 'steps', 'product_id'])
    .where('organization_id', '=', org)
    .where('id', 'in', req.sequenceIds)
    .orderBy('id')
    .execute();
  const contactIds = [...new Set(sequences.map((s) => s.contact_id))];
  const contacts =
    contactIds.length === 0
      ? []
      : await trx
          .selectFrom('contacts as c')
          .leftJoin('companies as co', (j) => j.onRef('co.organization_id', '=', 'c.organization_id').onRef('co.id', '=', 'c.company_id'))
          .leftJoin('contact_lists as l', (j) =>
            j.onRef('l.organization_id', '=', 'c.organization_id').onRef('l.id', '=', 'c.list_id').on('l.deleted_at', 'is', null),
          )
          .select([
            'c.id',
            'c.name',
            'c.title',
            'c.email_normalized',
            'c.deleted_at',
            'c.erased_at',
            'c.tags',
            'c.research',
            'c.fit_score',
            'c.urgency_score',
            'co.id as company_id',
            'co.name as company_name',
            'co.domain_normalized',
            'co.research as dossier',
            'co.research_updated_at as dossier_at',
            'l.name as list_name',
            'l.connection_point',
            'l.goal',
            'l.user_id as list_owner_id',
          ])
          .where('c.organization_id', '=', org)
          .where('c.id', 'in', contactIds)
          .execute();
  const productIds = [...new Set(sequences.map((s) => s.product_id).filter((p): p is string => p !== null))];
  const products =
    productIds.length === 0
      ? []
      : await trx.selectFrom('products').select('name').where('organization_id', '=', org).where('id', 'in', productIds).execute();
  const suppressed = await suppressedAmong(
    trx,
    org,
    contacts.filter((c) => c.erased_at === null).map((c) => c.email_normalized),
    secret,
  );
  const sender = await senderDomains(trx, org);
  return {
    organization,
    sequences,
    contacts: new Map(contacts.map((c) => [c.id, c])),
    products,
    suppressed,
    sender,
    owners: await listOwners(
      trx,
      org,
      organization.name,
      contacts.map((c) => c.list_owner_id),
    ),
  };
}

/** Live drafts (and the highest version of each step) of the sequences, by `seq:step`. */
async function draftsOf(trx: Tx, org: string, sequenceIds: string[]) {
  const rows = await trx
    .selectFrom('drafts')
    .select(['id', 'sequence_id', 'step', 'status', 'sent_at', 'generation_pass', 'version', 'superseded_at'])
    .where('organization_id', '=', org)
    .where('sequence_id', 'in', sequenceIds)
    .execute();
  const live = new Map<string, (typeof rows)[number]>();
  const maxVersion = new Map<string, number>();
  for (const r of rows) {
    const k = `${r.sequence_id}:${r.step}`;
    maxVersion.set(k, Math.max(maxVersion.get(k) ?? 0, r.version));
    if (r.superseded_at === null) live.set(k, r);
  }
  return { live, maxVersion };
}

type Live = Awaited<ReturnType<typeof draftsOf>>['live'] extends Map<string, infer V> ? V : never;

/** Whether a pass writes a step, given its live draft. */
function wanted(req: Pick<GenerationRequest, 'mode' | 'pass' | 'rewrite'>, step: number, live: Live | undefined): boolean {
  if (live?.generation_pass === req.pass || live?.sent_at) return false;
  if (req.rewrite) return live?.id === req.rewrite.replaces && step === req.rewrite.step;
  if (!live) return true;
  if (req.mode === 'unapproved') return live.status !== 'APPROVED';
  return req.mode === 'unsent';
}

/**
 * How many drafts a pass of this mode would write for these sequences now, by the rule the pass
 * follows (the figure a list generation run is started with).
 */
export async function stepsToWrite(trx: Tx, org: string, sequenceIds: string[], mode: GenerationMode): Promise<number> {
  if (sequenceIds.length === 0) return 0;
  const sequences = await trx
    .selectFrom('contact_sequences')
    .select(['id', 'status', 'steps'])
    .where('organization_id', '=', org)
    .where('id', 'in', sequenceIds)
    .execute();
  const { live } = await draftsOf(trx, org, sequenceIds);
  return sequences
    .filter((s) => GENERATING_STATUSES.includes(s.status))
    .reduce((n, s) => n + s.steps.filter((st) => wanted({ mode, pass: '' }, st.step, live.get(`${s.id}:${st.step}`))).length, 0);
}

const knownWords = (...names: Array<string | null | undefined>) =>
  new Set(names.flatMap((n) => (n ?? '').toLowerCase().split(/[^\p{L}\p{N}'’-]+/u)).filter((w) => w.length > 1));

/**
 * The one place a sequence draft's writer is chosen: a reviewer's edit is their text; else the
 * model when one is configured, unless the account is held out.
 */
const write = (deps: Deps, item: Item, heldOut: boolean, edit: EditedText | undefined): Promise<WrittenDraft> =>
  edit
    ? Promise.resolve(writeEdit(item.ctx, edit))
    : heldOut
      ? Promise.resolve(writeFallback(item.ctx))
      : writeOrFallBack(
          deps.services.model,
          deps.log,
          (m) => writeWithModel(item.ctx, m),
          () => writeFallback(item.ctx),
        );

export async function generateDrafts(deps: Deps, org: string, req: GenerationRequest): Promise<{ written: number; failed: number }> {
  if (req.sequenceIds.length === 0) return { written: 0, failed: 0 };
  const secret = deps.config.erasureHashSecret;
  const input = await withOrg(deps.db, org, async (trx) => ({
    ...(await load(trx, org, req, secret)),
    drafts: await draftsOf(trx, org, req.sequenceIds),
  }));
  const items: Item[] = [];
  const failures: Failure[] = [];
  const derived = new Map<string, Derived>();
  // Steps left alone because their live draft stays (counted on a list generation run).
  let kept = 0;
  for (const s of input.sequences) {
    if (!statusesOf(req).includes(s.status)) continue;
    const steps = s.steps.filter((st) => wanted(req, st.step, input.drafts.live.get(`${s.id}:${st.step}`)));
    kept += s.steps.length - steps.length;
    if (steps.length === 0) continue;
    const c = input.contacts.get(s.contact_id);
    const refusal =
      !c || !isLiveContactRow(c)
        ? ['contact_removed', 'the contact was deleted or erased']
        : input.suppressed.has(c.email_normalized)
          ? ['contact_suppressed', "the contact's address is suppressed"]
          : isDoNotContact(c.tags)
            ? ['contact_do_not_contact', 'the contact is tagged do-not-contact']
            : null;
    if (refusal || !c) {
      for (const st of steps) failures.push({ seq: s.id, contact: s.contact_id, step: st.step, reason: refusal![0], detail: refusal![1] });
      continue;
    }
    // Drafts cite the contact's research; a contact without any gets it from its company's
    // stored dossier (no fetching: research is run on request, within its budget).
    let research = storedContactResearch(c.research);
    if (!research && c.company_id) {
      const dossier = storedDossier(c.dossier);
      if (dossier && c.dossier_at) {
        const a = assessContact(
          { id: c.id, name: c.name, title: c.title, fitScore: c.fit_score, urgencyScore: c.urgency_score },
          { id: c.company_id, name: c.company_name ?? c.domain_normalized ?? '', researchUpdatedAt: c.dossier_at.toISOString() },
          dossier,
        );
        const runId = newId('rsc');
        derived.set(c.id, {
          ...a,
          companyId: c.company_id,
          companyRunId: dossier.runId,
          companyResearchUpdatedAt: c.dossier_at.toISOString(),
          lowConfidence: dossier.coverage.lowConfidence,
          hasMinimumCoverage: dossier.coverage.hasMinimumCoverage,
        });
        research = citableResearch({ runId, facts: a.facts, sources: a.sources });
      }
    }
    const { first, last } = nameParts(c.name);
    const anchor = s.anchor_at_utc ?? s.created_at;
    const known = knownWords(c.name, c.company_name, input.organization.name, ...input.products.map((p) => p.name));
    const senderNames = [input.organization.name, ...input.products.map((p) => p.name)];
    for (const st of steps) {
      items.push({
        seq: s.id,
        owner: input.owners.get(c.list_owner_id ?? '') ?? null,
        contact: c.id,
        account: c.company_id,
        step: st,
        stepCount: s.steps.length,
        scheduledAt: new Date(anchor.getTime() + st.dayOffset * DAY_MS),
        ctx: {
          step: st,
          stepCount: s.steps.length,
          research,
          known,
          senderNames,
          contactFunction: functionOf(c.title),
          links: linkPolicy(input.sender, deps.config.researchSiteUrlTemplate, c.domain_normalized),
          instructions: req.rewrite?.instructions,
          merge: {
            firstName: first,
            lastName: last,
            name: c.name || null,
            company: c.company_name,
            title: c.title,
            listName: c.list_name,
            connectionPoint: c.connection_point,
            goal: c.goal,
          },
        },
      });
    }
  }

  // The quota is checked before any model is asked (and taken for real at commit; a reviewer's
  // edit takes none). The accounts about to be written for are then exposed to the AI email
  // holdout (src/analytics/holdout.ts).
  const charged = req.rewrite?.charged !== false;
  const heldOut = await withOrg(deps.db, org, async (trx) => {
    const over = charged ? items.splice(await draftsRemaining(trx, org, deps.services.clock)) : [];
    for (const it of over)
      failures.push({
        seq: it.seq,
        contact: it.contact,
        step: it.step.step,
        reason: 'quota_exceeded',
        detail: "the plan's drafts per month are used up",
      });
    // Each sequence is pinned to its mailbox now, before its drafts are written: its name signs them.
    const all = await candidates(trx, org, sendingSettings(input.organization.sending), deps.config);
    const pins = await pinMailboxes(trx, org, [...new Set(items.map((it) => it.seq))], all);
    for (const it of items) {
      const sender = senderValues(pins.get(it.seq) ?? null, it.owner, input.organization.name);
      it.ctx.merge = { ...it.ctx.merge, ...sender };
      it.ctx.known = new Set([...it.ctx.known, ...knownWords(sender['sender.name'], sender['sender.title'])]);
    }
    return heldOutUnits(
      trx,
      org,
      'ai_email_lift',
      items.flatMap((it) => (it.account ? [it.account] : [])),
    );
  });
  await Promise.all(
    items.map(async (it) => {
      it.written = await write(deps, it, it.account !== null && heldOut.has(it.account), req.rewrite?.edit);
    }),
  );

  return withOrg(deps.db, org, (trx) => commit(trx, deps, org, req, items, failures, derived, kept));
}

/** A jsonb object of counts with each of `reasons` added once. */
function addCounts(column: string, reasons: string[]) {
  const add: Record<string, number> = {};
  for (const r of reasons) add[r] = (add[r] ?? 0) + 1;
  return sql<string>`(SELECT coalesce(jsonb_object_agg(k, n), '{}'::jsonb) FROM (
    SELECT k, sum(v::int) AS n FROM (SELECT * FROM jsonb_each_text(${sql.ref(column)}) UNION ALL SELECT * FROM jsonb_each_text(${JSON.stringify(add)}::jsonb)) x(k, v)
    GROUP BY k) y)`;
}

async function commit(
  trx: Tx,
  deps: Deps,
  org: string,
  req: GenerationRequest,
  items: Item[],
  failures: Failure[],
  derived: Map<string, Derived>,
  kept: number,
): Promise<{ written: number; failed: number }> {
  // Passes over the same sequence queue here; this one then sees what an earlier one wrote.
  const seqs = await trx
    .selectFrom('contact_sequences')
    .select(['id', 'contact_id', 'status', 'steps'])
    .where('organization_id', '=', org)
    .where('id', 'in', req.sequenceIds)
    .orderBy('id')
    .forUpdate()
    .execute();
  const status = new Map(seqs.map((s) => [s.id, s.status]));
  const { live, maxVersion } = await draftsOf(trx, org, req.sequenceIds);
  // A rewrite of a step that a send claimed meanwhile writes nothing: the step went out as it was.
  const claimed = req.rewrite !== undefined && (await sendClaimed(trx, org, req.rewrite.replaces));
  const todo = items.filter(
    (it) =>
      !claimed && statusesOf(req).includes(status.get(it.seq) ?? '') && wanted(req, it.step.step, live.get(`${it.seq}:${it.step.step}`)),
  );
  for (const it of todo) it.version = (maxVersion.get(`${it.seq}:${it.step.step}`) ?? 0) + 1;
  const firsts = todo.filter((it) => it.version === 1);
  const regens = todo.filter((it) => it.version! > 1);
  const spent = todo.reduce((a, it) => ({ tokens: a.tokens + it.written!.tokens, cost: a.cost + it.written!.costMillicents }), {
    tokens: 0,
    cost: 0,
  });
  const allowed =
    req.rewrite?.charged === false
      ? { created: firsts.length, regenerated: regens.length }
      : await takeDrafts(
          trx,
          org,
          {
            created: firsts.length,
            regenerated: regens.length,
            llmTokens: spent.tokens,
            llmCostMillicents: spent.cost,
          },
          deps.services.clock,
        );
  const laterStatus = req.rewrite?.status ?? 'REGENERATED';
  const go = [...firsts.slice(0, allowed.created), ...regens.slice(0, allowed.regenerated)];
  for (const it of [...firsts.slice(allowed.created), ...regens.slice(allowed.regenerated)]) {
    failures.push({
      seq: it.seq,
      contact: it.contact,
      step: it.step.step,
      reason: 'quota_exceeded',
      detail: "the plan's drafts per month are used up",
    });
  }

  const events: EmitInput[] = [];
  if (go.length > 0) {
    const superseded = await sql<{ id: string }>`
      UPDATE drafts d SET superseded_at = now_ms(), updated_at = now_ms()
      FROM unnest(${go.map((it) => it.seq)}::text[], ${go.map((it) => it.step.step)}::int[]) AS v(seq, step)
      WHERE d.organization_id = ${org} AND d.sequence_id = v.seq AND d.step = v.step AND d.superseded_at IS NULL AND d.sent_at IS NULL
      RETURNING d.id`.execute(trx);
    // A superseded version that was approved and queued leaves the queue: the new one awaits approval.
    await cancelQueued(trx, org, { draftIds: superseded.rows.map((r) => r.id) }, 'draft_superseded');
    const ids = go.map(() => newId('drf'));
    const evidence = go.map((it) => storedEvidence(it.ctx.research, it.written!.citations));
    const guardrail = go.map((it) => {
      const w = it.written!;
      return JSON.stringify({
        clean: w.flags.length === 0 && w.advisories.length === 0,
        attempts: w.attempts,
        repaired: w.repaired,
        advisories: w.advisories,
        flags: w.flags,
      });
    });
    await sql`
      INSERT INTO drafts (organization_id, id, contact_id, sequence_id, step, status, subject, body, evidence, version, scheduled_at,
                          provider, guardrail, flagged, generation_pass, generation_run_id, llm_tokens)
      SELECT ${org}, v.id, v.contact_id, v.seq, v.step, CASE WHEN v.version = 1 THEN 'DRAFT_GENERATED' ELSE ${laterStatus} END, v.subject, v.body,
             v.evidence::jsonb, v.version, v.scheduled_at, v.provider, v.guardrail::jsonb, v.flagged, ${req.pass}, ${req.runId}, v.tokens
      FROM unnest(${ids}::text[], ${go.map((it) => it.contact)}::text[], ${go.map((it) => it.seq)}::text[], ${go.map((it) => it.step.step)}::int[],
                  ${go.map((it) => it.written!.subject)}::text[], ${go.map((it) => it.written!.body)}::text[], ${evidence}::text[],
                  ${go.map((it) => it.version!)}::int[], ${go.map((it) => it.scheduledAt)}::timestamptz[], ${go.map((it) => it.written!.provider)}::text[],
                  ${guardrail}::text[], ${go.map((it) => it.written!.flags.length > 0)}::boolean[], ${go.map((it) => it.written!.tokens)}::int[])
           AS v(id, contact_id, seq, step, subject, body, evidence, version, scheduled_at, provider, guardrail, flagged, tokens)`.execute(
      trx,
    );
    go.forEach((it, i) => {
      const data = {
        draftId: ids[i],
        contactId: it.contact,
        sequenceId: it.seq,
        step: it.step.step,
        version: it.version,
        provider: it.written!.provider,
      };
      events.push({
        type: 'draft.created',
        resource: { type: 'Draft', id: ids[i] },
        data: { ...data, flagged: it.written!.flags.length > 0 },
      });
      if (it.written!.flags.length > 0) {
        events.push({ type: 'grounding.would_fire', resource: { type: 'Draft', id: ids[i] }, data: { ...data, flags: it.written!.flags } });
      }
      live.set(`${it.seq}:${it.step.step}`, {
        id: ids[i],
        sequence_id: it.seq,
        step: it.step.step,
        status: it.version === 1 ? 'DRAFT_GENERATED' : laterStatus,
        sent_at: null,
        generation_pass: req.pass,
        version: it.version!,
        superseded_at: null,
      });
    });
  }

  // Research derived for contacts that had none (only if they still have none).
  const used = new Set(go.map((it) => it.contact));
  const stage = [...derived].filter(([id]) => used.has(id));
  if (stage.length > 0) {
    const researchOf = (id: string, r: Derived) =>
      JSON.stringify({
        version: 1,
        runId: go.find((it) => it.contact === id)!.ctx.research!.runId,
        companyId: r.companyId,
        companyRunId: r.companyRunId,
        companyResearchUpdatedAt: r.companyResearchUpdatedAt,
        facts: r.facts,
        sources: r.sources,
        contactAssessment: r.contactAssessment,
        signalReasons: r.signalReasons,
      });
    const stored = await sql<{ id: string }>`
      UPDATE contacts c SET research = v.research::jsonb, research_updated_at = ${deps.services.clock.now()}::timestamptz
      FROM unnest(${stage.map(([id]) => id)}::text[], ${stage.map(([id, r]) => researchOf(id, r))}::text[]) AS v(id, research)
      WHERE c.organization_id = ${org} AND c.id = v.id AND c.research IS NULL AND c.erased_at IS NULL
      RETURNING c.id`.execute(trx);
    for (const { id } of stored.rows) {
      const r = derived.get(id)!;
      events.push({
        type: 'research.completed',
        resource: { type: 'Contact', id },
        data: {
          contactId: id,
          companyId: r.companyId,
          hasMinimumCoverage: r.hasMinimumCoverage,
          lowConfidence: r.lowConfidence,
          companyResearchReused: true,
        },
      });
    }
  }

  // Sequences: DRAFTED once every step has a live draft (APPROVED when all of them are approved).
  const changed: Array<{ id: string; status: string }> = [];
  for (const s of seqs) {
    if (!statusesOf(req).includes(s.status)) continue;
    const steps = s.steps;
    const drafts = steps.map((st) => live.get(`${s.id}:${st.step}`));
    if (drafts.some((d) => !d)) continue;
    const awaiting = drafts.some((d) => d!.status !== 'APPROVED');
    const next = awaiting ? 'DRAFTED' : 'APPROVED';
    // A sequence that is sending (a reviewer's rewrite) keeps its status: its new step awaits approval.
    if (GENERATING_STATUSES.includes(s.status) && next !== s.status) changed.push({ id: s.id, status: next });
    const mine = go.filter((it) => it.seq === s.id);
    if (mine.length > 0 && awaiting) {
      events.push({
        type: 'draft.pending_approval',
        resource: { type: 'Sequence', id: s.id },
        data: { sequenceId: s.id, contactId: s.contact_id, draftIds: drafts.filter((d) => d!.status !== 'APPROVED').map((d) => d!.id) },
      });
    }
  }
  if (changed.length > 0) {
    await sql`
      UPDATE contact_sequences s SET status = v.status, updated_at = now_ms()
      FROM unnest(${changed.map((c) => c.id)}::text[], ${changed.map((c) => c.status)}::text[]) AS v(id, status)
      WHERE s.organization_id = ${org} AND s.id = v.id`.execute(trx);
  }

  for (const f of failures) {
    events.push({
      type: 'draft.failed',
      resource: { type: 'Sequence', id: f.seq },
      data: { sequenceId: f.seq, contactId: f.contact, step: f.step, reason: f.reason, detail: f.detail },
    });
  }
  if (req.runId) {
    await trx
      .updateTable('list_generation_runs')
      .set({
        drafts_generated: sql`drafts_generated + ${go.length}`,
        drafts_failed: sql`drafts_failed + ${failures.length}`,
        skipped_live_draft: sql`skipped_live_draft + ${kept}`,
        failed_reasons: addCounts(
          'failed_reasons',
          failures.map((f) => f.reason),
        ),
      })
      .where('organization_id', '=', org)
      .where('id', '=', req.runId)
      .execute();
  }
  await emitMany(trx, org, events);
  deps.log.debug({ organizationId: org, pass: req.pass, written: go.length, failed: failures.length }, 'drafts generated');
  return { written: go.length, failed: failures.length };
}
