// Deals pipeline: stages, deals, stage moves through gates, history and activities (tag deals).
// Rules are those of spec/paths/deal*.yaml and spec/DECISIONS.md.
import { type Selectable, sql } from 'kysely';
import { epochMs, type Tx } from '../db/database.js';
import type { DealStageHistoryTable, DealStagesTable, DealsTable } from '../db/schema.js';
import { organizationOwnerId } from '../src/account/people.js';
import type { AuthInfo, Handler, operations } from '../src/http/handler.js';
import { jsonPage, keyset, page } from '../src/http/paging.js';
import { invalid, notFound, ProblemError } from '../src/http/problems.js';
import { emit } from '../src/platform/events.js';
import { isoNN, msJson, newId } from '../src/platform/ids.js';

type StageRow = Selectable<DealStagesTable>;
type DealRow = Selectable<DealsTable>;
type HistoryRow = Selectable<DealStageHistoryTable>;
type Deal = operations['getDeal']['responses'][200]['content']['application/json'];
type ForecastCategory = NonNullable<Deal['forecastCategory']>;
type Category = 'active' | 'closed_won' | 'closed_lost';

const DEAL_RESOURCE = 'Deal';
/** An occurredAt this far ahead of the server clock is refused as "in the future" (clock skew). */
const FUTURE_TOLERANCE_MS = 60_000;

/** The default pipeline, seeded on the first deal created without a stage. */
export const DEFAULT_STAGES: ReadonlyArray<{
  slug: string;
  name: string;
  category: Category;
  terminal: boolean;
  forecast: ForecastCategory;
}> = [
  { slug: 'prospecting', name: 'Prospecting', category: 'active', terminal: false, forecast: 'pipeline' },
  { slug: 'qualification', name: 'Qualification', category: 'active', terminal: false, forecast: 'pipeline' },
  { slug: 'discovery', name: 'Discovery', category: 'active', terminal: false, forecast: 'pipeline' },
  { slug: 'proposal', name: 'Proposal', category: 'active', terminal: false, forecast: 'best_case' },
  { slug: 'negotiation', name: 'Negotiation', category: 'active', terminal: false, forecast: 'commit' },
  { slug: 'closed_won', name: 'Closed won', category: 'closed_won', terminal: true, forecast: 'closed_won' },
  { slug: 'closed_lost', name: 'Closed lost', category: 'closed_lost', terminal: true, forecast: 'closed_lost' },
];

/** Who a change is attributed to: the key's user, else the key itself. */
const actorOf = (auth: AuthInfo): string => auth.userId ?? auth.keyId;

const includes = (include: string | undefined, token: string): boolean => (include ?? '').split(',').some((t) => t.trim() === token);

const todayUtc = sql<string>`(now() AT TIME ZONE 'UTC')::date`;

// ---------------------------------------------------------------------------------------------
// Stages
// ---------------------------------------------------------------------------------------------

async function orgStages(trx: Tx, orgId: string): Promise<StageRow[]> {
  return trx.selectFrom('deal_stages').selectAll().where('organization_id', '=', orgId).orderBy('sort_order').orderBy('id').execute();
}

/**
 * Seeds the default stages when the organization has none. Concurrent first deals race on the
 * unique (organization, slug) index: the loser's INSERT waits for the winner and then does
 * nothing, and the re-read sees the winner's rows.
 */
async function stagesSeeded(trx: Tx, orgId: string): Promise<StageRow[]> {
  const existing = await orgStages(trx, orgId);
  if (existing.length > 0) return existing;
  await sql`
    INSERT INTO deal_stages (organization_id, id, slug, name, sort_order, category, is_terminal, forecast_category)
    VALUES ${sql.join(DEFAULT_STAGES.map((s, i) => sql`(${orgId}, ${newId('stg')}, ${s.slug}, ${s.name}, ${i + 1}, ${s.category}, ${s.terminal}, ${s.forecast})`))}
    ON CONFLICT DO NOTHING`.execute(trx);
  return orgStages(trx, orgId);
}

/** Finds the stage named by slug and/or id; both given must name the same stage. */
function resolveStage(stages: StageRow[], slug: string | undefined, id: string | undefined): StageRow {
  const bySlug = slug === undefined ? undefined : stages.find((s) => s.slug === slug);
  const byId = id === undefined ? undefined : stages.find((s) => s.id === id);
  if (slug !== undefined && !bySlug)
    throw new ProblemError('unknown-stage', `No stage with slug "${slug}" in this organization; see GET /deal-stages.`, {
      errors: [{ field: 'body.stage', message: 'is not a stage of the organization' }],
    });
  if (id !== undefined && !byId)
    throw new ProblemError('unknown-stage', `No stage with id "${id}" in this organization; see GET /deal-stages.`, {
      errors: [{ field: 'body.stageId', message: 'is not a stage of the organization' }],
    });
  if (bySlug && byId && bySlug.id !== byId.id) throw invalid('stage and stageId name different stages; send one of them.', 'body.stage');
  const found = bySlug ?? byId;
  if (!found) throw invalid('Name the target stage with stage (slug) or stageId.', 'body.stage');
  return found;
}

function toStage(s: StageRow) {
  return { id: s.id, slug: s.slug, name: s.name, sortOrder: s.sort_order, category: s.category as Category, isTerminal: s.is_terminal };
}

// ---------------------------------------------------------------------------------------------
// Deal reads
// ---------------------------------------------------------------------------------------------

/**
 * Deals of the organization joined to their stage, in the columns toDeal() maps. Timestamps come
 * as epoch milliseconds: list pages are the hot read, and parsing timestamp text into Dates was
 * the largest cost of a page on the API node. `meddpic` is read only when asked for.
 */
function dealSelect(trx: Tx, orgId: string, withMeddpic: boolean) {
  return trx
    .selectFrom('deals as d')
    .leftJoin('deal_stages as s', (j) => j.onRef('s.organization_id', '=', 'd.organization_id').onRef('s.id', '=', 'd.stage_id'))
    .where('d.organization_id', '=', orgId)
    .select([
      'd.id',
      'd.organization_id',
      'd.name',
      'd.value_cents',
      'd.probability',
      'd.close_date',
      'd.actual_close_date',
      'd.owner_sales_person_id',
      'd.primary_contact_id',
      'd.company_id',
      'd.stage_id',
      'd.forecast_category',
      'd.readiness_score',
      'd.loss_reason',
      's.slug as stage_slug',
      's.name as stage_name',
      epochMs('d.created_at').as('created_ms'),
      epochMs('d.updated_at').as('updated_ms'),
    ])
    .$if(withMeddpic, (q) => q.select('d.meddpic'));
}

type DealView = Omit<DealRow, 'meddpic' | 'created_at' | 'updated_at'> & {
  stage_slug: string | null;
  stage_name: string | null;
  created_ms: number;
  updated_ms: number;
  meddpic?: unknown;
};

const isPlainObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The public Deal: one mapping for list items, GET by id and the create response. */
function toDeal(r: DealView, withMeddpic: boolean): Deal {
  const deal: Deal = {
    id: r.id,
    organizationId: r.organization_id,
    name: r.name,
    valueCents: r.value_cents,
    probability: r.probability,
    closeDate: r.close_date,
    actualCloseDate: r.actual_close_date,
    ownerSalesPersonId: r.owner_sales_person_id,
    primaryContactId: r.primary_contact_id,
    companyId: r.company_id,
    stageId: r.stage_id,
    stageSlug: r.stage_slug,
    stageName: r.stage_name,
    forecastCategory: r.forecast_category as ForecastCategory | null,
    readinessScore: r.readiness_score,
    lossReason: r.loss_reason,
    createdAt: new Date(r.created_ms).toISOString(),
    updatedAt: new Date(r.updated_ms).toISOString(),
  };
  if (withMeddpic) deal.meddpic = isPlainObject(r.meddpic) ? (r.meddpic as Deal['meddpic']) : null;
  return deal;
}

/** toDeal written straight to JSON, key for key (GET /deals pages; see jsonPage). */
function dealJson(r: DealView, withMeddpic: boolean): string {
  const j = JSON.stringify;
  const meddpic = withMeddpic ? `,"meddpic":${j(isPlainObject(r.meddpic) ? r.meddpic : null)}` : '';
  return (
    `{"id":${j(r.id)},"organizationId":${j(r.organization_id)},"name":${j(r.name)},"valueCents":${j(r.value_cents)},` +
    `"probability":${j(r.probability)},"closeDate":${j(r.close_date)},"actualCloseDate":${j(r.actual_close_date)},` +
    `"ownerSalesPersonId":${j(r.owner_sales_person_id)},"primaryContactId":${j(r.primary_contact_id)},"companyId":${j(r.company_id)},` +
    `"stageId":${j(r.stage_id)},"stageSlug":${j(r.stage_slug)},"stageName":${j(r.stage_name)},"forecastCategory":${j(r.forecast_category)},` +
    `"readinessScore":${j(r.readiness_score)},"lossReason":${j(r.loss_reason)},` +
    `"createdAt":${msJson(r.created_ms)},"updatedAt":${msJson(r.updated_ms)}${meddpic}}`
  );
}

async function readDeal(trx: Tx, orgId: string, id: string, withMeddpic: boolean): Promise<Deal> {
  const row = await dealSelect(trx, orgId, withMeddpic).where('d.id', '=', id).executeTakeFirst();
  if (!row) throw notFound('deal');
  return toDeal(row, withMeddpic);
}

const listDealStages: Handler<'listDealStages'> = async ({ trx, auth }) => {
  const stages = await orgStages(trx, auth.organizationId);
  return { status: 200, body: { data: stages.map(toStage) } };
};

const listDeals: Handler<'listDeals'> = async ({ trx, auth, query }) => {
  const org = auth.organizationId;
  const { minValueCents: min, maxValueCents: max, stageSlug } = query;
  if (min !== undefined && max !== undefined && min > max) throw invalid('minValueCents may not exceed maxValueCents.', 'minValueCents');
  const withMeddpic = includes(query.include, 'meddpic');
  const limit = query.limit ?? 50;
  let q = dealSelect(trx, org, withMeddpic);
  if (stageSlug !== undefined) {
    // The slug is unique per organization: one id, then the (org, stage, created) index.
    q = q.where('d.stage_id', '=', (eb) =>
      eb.selectFrom('deal_stages').select('id').where('organization_id', '=', org).where('slug', '=', stageSlug),
    );
  }
  if (min !== undefined) q = q.where('d.value_cents', '>=', min);
  if (max !== undefined) q = q.where('d.value_cents', '<=', max);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'd.created_at', idCol: 'd.id' }).execute();
  return {
    status: 200,
    body: jsonPage(
      rows,
      limit,
      (r) => ({ at: r.created_ms, id: r.id }),
      (r) => dealJson(r, withMeddpic),
    ),
  };
};

const getDeal: Handler<'getDeal'> = async ({ trx, auth, params, query }) => {
  const withMeddpic = includes(query.include, 'meddpic');
  return { status: 200, body: await readDeal(trx, auth.organizationId, params.id, withMeddpic) };
};

// ---------------------------------------------------------------------------------------------
// Deal writes
// ---------------------------------------------------------------------------------------------

async function requireLiveContact(trx: Tx, orgId: string, contactId: string): Promise<void> {
  const c = await trx
    .selectFrom('contacts')
    .select('id')
    .where('organization_id', '=', orgId)
    .where('id', '=', contactId)
    .where('deleted_at', 'is', null)
    .where('erased_at', 'is', null)
    .executeTakeFirst();
  if (!c) throw invalid('primaryContactId is not a live contact of this organization.', 'body.primaryContactId');
}

async function requireCompany(trx: Tx, orgId: string, companyId: string): Promise<void> {
  const c = await trx
    .selectFrom('companies')
    .select('id')
    .where('organization_id', '=', orgId)
    .where('id', '=', companyId)
    .executeTakeFirst();
  if (!c) throw invalid('companyId is not a company of this organization.', 'body.companyId');
}

/** The given owner (a user of the organization), else the key's user, else the organization's owner. */
async function resolveOwner(trx: Tx, auth: AuthInfo, given: string | undefined): Promise<string> {
  const org = auth.organizationId;
  if (given !== undefined) {
    const u = await trx
      .selectFrom('users')
      .select('id')
      .where('organization_id', '=', org)
      .where('id', '=', given)
      .where('status', '=', 'active')
      .executeTakeFirst();
    if (!u) throw invalid('ownerSalesPersonId is not an active sales person of this organization.', 'body.ownerSalesPersonId');
    return u.id;
  }
  if (auth.userId) return auth.userId;
  return organizationOwnerId(trx, org);
}

/** The creation stage: the named one (never terminal), else the first, seeding defaults if needed. */
export async function initialStage(trx: Tx, orgId: string, slug: string | undefined, id: string | undefined): Promise<StageRow> {
  if (slug === undefined && id === undefined) return (await stagesSeeded(trx, orgId))[0];
  const stage = resolveStage(await orgStages(trx, orgId), slug, id);
  if (stage.is_terminal) {
    throw invalid(
      'A deal cannot be created in a closed stage; create it open and move it with POST /deals/{id}/stage.',
      slug !== undefined ? 'body.stage' : 'body.stageId',
    );
  }
  return stage;
}

/**
 * Writes a stage-history row. Its createdAt is kept strictly after the deal's previous row so
 * "newest first" is exact even when two moves land in the same millisecond.
 */
async function insertHistory(
  trx: Tx,
  orgId: string,
  row: {
    dealId: string;
    from: StageRow | null;
    to: StageRow;
    reason: string | null;
    by: string;
    chips?: string[];
  },
): Promise<void> {
  await trx
    .insertInto('deal_stage_history')
    .values({
      organization_id: orgId,
      id: newId('dsh'),
      deal_id: row.dealId,
      from_stage_id: row.from?.id ?? null,
      from_stage_name: row.from?.name ?? null,
      to_stage_id: row.to.id,
      to_stage_name: row.to.name,
      reason: row.reason,
      transitioned_by: row.by,
      reason_chips: row.chips ?? [],
      created_at: sql<Date>`GREATEST(now_ms(), (SELECT max(h.created_at) + interval '1 millisecond' FROM deal_stage_history h
      WHERE h.organization_id = ${orgId} AND h.deal_id = ${row.dealId}))`,
    })
    .execute();
}

export interface NewDeal {
  name: string;
  stage: StageRow;
  ownerId: string;
  primaryContactId?: string | null;
  companyId?: string | null;
  valueCents?: number | null;
  probability?: number | null;
  closeDate?: string | null;
  /** Who the first history row is attributed to (a user, a key, or a system process). */
  by: string;
}

/**
 * Opens a deal: the row, its primary contact's link, the first stage-history row and
 * `deal.created`, in the caller's transaction. Shared by POST /deals and lead conversion; the
 * caller has checked the stage, contact and company.
 */
export async function insertDeal(trx: Tx, orgId: string, d: NewDeal): Promise<string> {
  const id = newId('deal');
  await trx
    .insertInto('deals')
    .values({
      organization_id: orgId,
      id,
      name: d.name,
      value_cents: d.valueCents ?? null,
      probability: d.probability ?? null,
      close_date: d.closeDate ?? null,
      actual_close_date: null,
      owner_sales_person_id: d.ownerId,
      primary_contact_id: d.primaryContactId ?? null,
      company_id: d.companyId ?? null,
      stage_id: d.stage.id,
      forecast_category: d.stage.forecast_category,
      readiness_score: null,
      loss_reason: null,
      meddpic: null,
    })
    .execute();
  if (d.primaryContactId) {
    await trx
      .insertInto('deal_contacts')
      .values({ organization_id: orgId, deal_id: id, contact_id: d.primaryContactId })
      .onConflict((oc) => oc.doNothing())
      .execute();
  }
  await insertHistory(trx, orgId, { dealId: id, from: null, to: d.stage, reason: null, by: d.by });
  await emit(trx, orgId, { type: 'deal.created', resource: { type: DEAL_RESOURCE, id }, data: { dealId: id, dealName: d.name } });
  return id;
}

const createDeal: Handler<'createDeal'> = async ({ trx, auth, body }) => {
  const org = auth.organizationId;
  const stage = await initialStage(trx, org, body.stage, body.stageId);
  if (body.primaryContactId !== undefined) await requireLiveContact(trx, org, body.primaryContactId);
  if (body.companyId !== undefined) await requireCompany(trx, org, body.companyId);
  const owner = await resolveOwner(trx, auth, body.ownerSalesPersonId);
  const id = await insertDeal(trx, org, {
    name: body.name,
    stage,
    ownerId: owner,
    primaryContactId: body.primaryContactId,
    companyId: body.companyId,
    valueCents: body.valueCents,
    probability: body.probability,
    closeDate: body.closeDate,
    by: actorOf(auth),
  });
  return { status: 200, body: await readDeal(trx, org, id, false) };
};

async function lockDeal(trx: Tx, orgId: string, id: string): Promise<DealRow> {
  const deal = await trx
    .selectFrom('deals')
    .selectAll()
    .where('organization_id', '=', orgId)
    .where('id', '=', id)
    .forUpdate()
    .executeTakeFirst();
  if (!deal) throw notFound('deal');
  return deal;
}

const updateDeal: Handler<'updateDeal'> = async ({ trx, auth, params, body }) => {
  const org = auth.organizationId;
  const deal = await lockDeal(trx, org, params.id);
  if (body.primaryContactId !== undefined && body.primaryContactId !== null) await requireLiveContact(trx, org, body.primaryContactId);
  const changes: Partial<Pick<DealRow, 'name' | 'value_cents' | 'probability' | 'close_date' | 'primary_contact_id'>> = {};
  if (body.name !== undefined && body.name !== deal.name) changes.name = body.name;
  if (body.valueCents !== undefined && body.valueCents !== deal.value_cents) changes.value_cents = body.valueCents;
  if (body.probability !== undefined && body.probability !== deal.probability) changes.probability = body.probability;
  if (body.closeDate !== undefined && body.closeDate !== deal.close_date) changes.close_date = body.closeDate;
  if (body.primaryContactId !== undefined && body.primaryContactId !== deal.primary_contact_id)
    changes.primary_contact_id = body.primaryContactId;
  if (Object.keys(changes).length === 0) return { status: 200, body: { id: deal.id, updated: false } };

  await trx
    .updateTable('deals')
    .set({ ...changes, updated_at: sql`now_ms()` })
    .where('organization_id', '=', org)
    .where('id', '=', deal.id)
    .execute();
  if (changes.primary_contact_id) {
    await trx
      .insertInto('deal_contacts')
      .values({ organization_id: org, deal_id: deal.id, contact_id: changes.primary_contact_id })
      .onConflict((oc) => oc.doNothing())
      .execute();
  }
  const resource = { type: DEAL_RESOURCE, id: deal.id };
  if ('value_cents' in changes) {
    await emit(trx, org, {
      type: 'deal.amount_changed',
      resource,
      data: { dealId: deal.id, previousValueCents: deal.value_cents, valueCents: changes.value_cents },
    });
  }
  if ('close_date' in changes) {
    await emit(trx, org, {
      type: 'deal.close_date_changed',
      resource,
      data: { dealId: deal.id, previousCloseDate: deal.close_date, closeDate: changes.close_date },
    });
  }
  return { status: 200, body: { id: deal.id, updated: true } };
};

// ---------------------------------------------------------------------------------------------
// Stage moves and gates
// ---------------------------------------------------------------------------------------------

interface GateResult {
  gate: string;
  mode: 'block' | 'warn';
  detail: string;
}

/**
 * The gates a move fails, in evaluation order (see changeDealStage in the spec). Blocking gates
 * are all overridable; moving to closed_lost meets every blocking gate (a deal can always be
 * marked lost with a reason).
 */
export function failedGates(
  deal: Pick<DealRow, 'value_cents' | 'primary_contact_id' | 'close_date'>,
  from: StageRow | null,
  to: StageRow,
  stages: StageRow[],
): GateResult[] {
  const failed: GateResult[] = [];
  const won = to.category === 'closed_won';
  if ((to.forecast_category === 'commit' || won) && deal.value_cents === null) {
    failed.push({
      gate: 'value-required',
      mode: 'block',
      detail: `Moving to "${to.name}" needs the deal's valueCents; set it with PATCH /deals/{id} or send an overrideReason.`,
    });
  }
  const proposal = stages.find((s) => s.slug === 'proposal');
  const late = won || (to.category === 'active' && proposal !== undefined && to.sort_order >= proposal.sort_order);
  if (late) {
    const missing = [deal.primary_contact_id === null && 'primaryContactId', deal.close_date === null && 'closeDate'].filter(Boolean);
    if (missing.length > 0) {
      failed.push({
        gate: 'qualification-required',
        mode: 'block',
        detail: `Moving to "${to.name}" needs ${missing.join(' and ')} on the deal; set with PATCH /deals/{id} or send an overrideReason.`,
      });
    }
  }
  const fromOrder = from?.sort_order ?? Number.NEGATIVE_INFINITY;
  if (to.sort_order > fromOrder) {
    const crossed = stages.filter((s) => s.category === 'active' && s.sort_order > fromOrder && s.sort_order <= to.sort_order).length;
    if (crossed > 2) failed.push({ gate: 'skip-stages', mode: 'warn', detail: `The move skips ${crossed - 1} active stages.` });
  }
  return failed;
}

type StageBody = { stage?: string; stageId?: string; reason?: string; overrideReason?: string; reasonChips?: string[] };

const changeDealStage: Handler<'changeDealStage'> = async ({ trx, auth, params, body: rawBody }) => {
  const org = auth.organizationId;
  const body = rawBody as StageBody;
  const deal = await lockDeal(trx, org, params.id);
  const stages = await orgStages(trx, org);
  const to = resolveStage(stages, body.stage, body.stageId);
  const from = stages.find((s) => s.id === deal.stage_id) ?? null;
  const reason = body.reason?.trim() || null;
  const overrideReason = body.overrideReason?.trim() || null;

  if (from?.id === to.id) {
    throw new ProblemError('stage-transition-not-allowed', `The deal is already in stage "${to.name}".`);
  }
  if (from?.is_terminal && reason === null) {
    throw new ProblemError('stage-transition-not-allowed', `The deal is closed ("${from.name}"); reopening it needs a reason.`);
  }
  if (to.category === 'closed_lost' && reason === null) {
    throw new ProblemError('reason-required', 'Marking a deal lost needs a reason (stored as lossReason).', {
      errors: [{ field: 'body.reason', message: 'is required to move to a closed_lost stage' }],
    });
  }

  const failed = to.category === 'closed_lost' ? [] : failedGates(deal, from, to, stages);
  const blocking = failed.filter((g) => g.mode === 'block');
  if (blocking.length > 0 && overrideReason === null) {
    const g = blocking[0];
    throw new ProblemError('stage-gate-blocked', g.detail, { gate: g.gate, gateMode: 'block', needsOverride: true });
  }
  const recordedReason = blocking.length > 0 ? `override: ${overrideReason}${reason ? `; ${reason}` : ''}` : reason;

  const closed = to.category === 'closed_won' || to.category === 'closed_lost';
  const forecast = closed ? to.category : (to.forecast_category ?? deal.forecast_category);
  await trx
    .updateTable('deals')
    .set({
      stage_id: to.id,
      forecast_category: forecast,
      actual_close_date: closed ? todayUtc : null,
      loss_reason: to.category === 'closed_lost' ? reason : null,
      updated_at: sql`now_ms()`,
    })
    .where('organization_id', '=', org)
    .where('id', '=', deal.id)
    .execute();
  await insertHistory(trx, org, { dealId: deal.id, from, to, reason: recordedReason, by: actorOf(auth), chips: body.reasonChips });

  const resource = { type: DEAL_RESOURCE, id: deal.id };
  await emit(trx, org, {
    type: 'deal.stage_changed',
    resource,
    data: {
      dealId: deal.id,
      dealName: deal.name,
      fromStageId: from?.id ?? null,
      fromStage: from?.slug ?? null,
      toStageId: to.id,
      stage: to.slug,
    },
  });
  if (to.category === 'closed_won') {
    await emit(trx, org, { type: 'deal.won', resource, data: { dealId: deal.id, dealName: deal.name, valueCents: deal.value_cents } });
  } else if (to.category === 'closed_lost') {
    await emit(trx, org, { type: 'deal.lost', resource, data: { dealId: deal.id, dealName: deal.name, lossReason: reason } });
  }
  const warnings = failed.filter((g) => g.mode === 'warn').map((g) => g.gate);
  return { status: 200, body: { dealId: deal.id, stage: to.slug, stageId: to.id, warnings } };
};

// ---------------------------------------------------------------------------------------------
// History and activities
// ---------------------------------------------------------------------------------------------

/** The deal, with its primary contact's id while that contact is live (else null), or 404. */
async function requireDeal(trx: Tx, orgId: string, id: string) {
  const deal = await trx
    .selectFrom('deals as d')
    .leftJoin('contacts as c', (j) =>
      j
        .onRef('c.organization_id', '=', 'd.organization_id')
        .onRef('c.id', '=', 'd.primary_contact_id')
        .on('c.deleted_at', 'is', null)
        .on('c.erased_at', 'is', null),
    )
    .select(['d.id', 'c.id as live_contact_id'])
    .where('d.organization_id', '=', orgId)
    .where('d.id', '=', id)
    .executeTakeFirst();
  if (!deal) throw notFound('deal');
  return deal;
}

function toHistory(h: HistoryRow) {
  return {
    id: h.id,
    dealId: h.deal_id,
    fromStageId: h.from_stage_id,
    fromStageName: h.from_stage_name,
    toStageId: h.to_stage_id,
    toStageName: h.to_stage_name,
    reason: h.reason,
    transitionedBy: h.transitioned_by,
    createdAt: isoNN(h.created_at),
  };
}

const listDealHistory: Handler<'listDealHistory'> = async ({ trx, auth, params, query }) => {
  const org = auth.organizationId;
  await requireDeal(trx, org, params.id);
  const limit = query.limit ?? 50;
  const q = trx.selectFrom('deal_stage_history').selectAll().where('organization_id', '=', org).where('deal_id', '=', params.id);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return { status: 200, body: page(rows, limit, (r) => ({ at: r.created_at, id: r.id }), toHistory) };
};

const createDealActivity: Handler<'createDealActivity'> = async ({ trx, auth, params, body }) => {
  const org = auth.organizationId;
  const deal = await requireDeal(trx, org, params.id);
  const summary = body.summary.trim();
  if (summary.length === 0) throw invalid('summary must contain a non-whitespace character.', 'body.summary');
  const now = Date.now();
  const occurredAt = body.occurredAt === undefined ? new Date(now) : new Date(body.occurredAt);
  if (Number.isNaN(occurredAt.getTime())) throw invalid('occurredAt is not a valid date-time.', 'body.occurredAt');
  if (occurredAt.getTime() > now + FUTURE_TOLERANCE_MS) throw invalid('occurredAt may not be in the future.', 'body.occurredAt');
  const contactId = deal.live_contact_id;
  if (contactId === null) {
    throw new ProblemError(
      'deal-without-primary-contact',
      'This deal has no live primary contact to log the activity against; set primaryContactId with PATCH /deals/{id}.',
    );
  }
  const row = await trx
    .insertInto('deal_activities')
    .values({
      organization_id: org,
      id: newId('dact'),
      deal_id: deal.id,
      contact_id: contactId,
      kind: body.kind,
      summary,
      occurred_at: occurredAt,
      created_by: actorOf(auth),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return {
    status: 201,
    body: {
      id: row.id,
      dealId: row.deal_id,
      kind: row.kind as 'note' | 'call' | 'meeting',
      summary: row.summary,
      occurredAt: isoNN(row.occurred_at),
    },
  };
};

export const dealHandlers = {
  listDealStages,
  listDeals,
  createDeal,
  getDeal,
  updateDeal,
  changeDealStage,
  listDealHistory,
  createDealActivity,
};
