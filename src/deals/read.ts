// Reading deals: the one select and mapping behind list items, GET by id and the create response
// (with its straight-to-JSON twin for list pages), the filtered keyset list, and the row reads
// the writes start from (locked for a change; with its live primary contact for an activity).

import type { Selectable } from 'kysely';
import { epochMs, type Tx } from '../../db/database.js';
import type { Deals } from '../../db/schema.js';
import { isLiveContact } from '../crm/live-contacts.js';
import type { operations } from '../http/handler.js';
import { jsonPage, keyset } from '../http/paging.js';
import { invalid, notFound } from '../http/problems.js';
import { msJson } from '../platform/ids.js';
import type { ForecastCategory } from './stages.js';

export type DealRow = Selectable<Deals>;
export type Deal = operations['getDeal']['responses'][200]['content']['application/json'];

/** The resource type of the deal.* events. */
export const DEAL_RESOURCE = 'Deal';

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

export async function readDeal(trx: Tx, orgId: string, id: string, withMeddpic: boolean): Promise<Deal> {
  const row = await dealSelect(trx, orgId, withMeddpic).where('d.id', '=', id).executeTakeFirst();
  if (!row) throw notFound('deal');
  return toDeal(row, withMeddpic);
}

export interface DealFilter {
  stageSlug?: string;
  minValueCents?: number;
  maxValueCents?: number;
  withMeddpic: boolean;
  cursor?: string;
  limit?: number;
}

/** A page of GET /deals, newest first, written as JSON. */
export async function dealsPage(trx: Tx, org: string, f: DealFilter) {
  const { minValueCents: min, maxValueCents: max, stageSlug, withMeddpic } = f;
  if (min !== undefined && max !== undefined && min > max) throw invalid('minValueCents may not exceed maxValueCents.', 'minValueCents');
  const limit = f.limit ?? 50;
  let q = dealSelect(trx, org, withMeddpic);
  if (stageSlug !== undefined) {
    // The slug is unique per organization: one id, then the (org, stage, created) index.
    q = q.where('d.stage_id', '=', (eb) =>
      eb.selectFrom('deal_stages').select('id').where('organization_id', '=', org).where('slug', '=', stageSlug),
    );
  }
  if (min !== undefined) q = q.where('d.value_cents', '>=', min);
  if (max !== undefined) q = q.where('d.value_cents', '<=', max);
  const rows = await keyset(q, { cursor: f.cursor, limit, createdCol: 'd.created_at', idCol: 'd.id' }).execute();
  return jsonPage<(typeof rows)[number], Deal>(
    rows,
    limit,
    (r) => ({ at: r.created_ms, id: r.id }),
    (r) => dealJson(r, withMeddpic),
  );
}

/** The deal's row, locked so changes to one deal apply one after the other; else 404. */
export async function lockDeal(trx: Tx, orgId: string, id: string): Promise<DealRow> {
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

/** The deal, with its primary contact's id while that contact is live (else null), or 404. */
export async function requireDeal(trx: Tx, orgId: string, id: string) {
  const deal = await trx
    .selectFrom('deals as d')
    .leftJoin('contacts as c', (j) =>
      j.onRef('c.organization_id', '=', 'd.organization_id').onRef('c.id', '=', 'd.primary_contact_id').on(isLiveContact('c')),
    )
    .select(['d.id', 'c.id as live_contact_id'])
    .where('d.organization_id', '=', orgId)
    .where('d.id', '=', id)
    .executeTakeFirst();
  if (!deal) throw notFound('deal');
  return deal;
}
