// Opening a deal: its creation stage, its owner, and the multi-step insert (row, primary contact
// link, first history row, `deal.created`) shared by POST /deals and lead conversion
// (src/leads/convert.ts).
import type { Tx } from '../../db/database.js';
import { organizationOwnerId } from '../account/people.js';
import type { operations } from '../http/handler.js';
import { invalid } from '../http/problems.js';
import { emit } from '../platform/events.js';
import { newId } from '../platform/ids.js';
import { insertHistory } from './history.js';
import { DEAL_RESOURCE, type Deal, readDeal } from './read.js';
import { requireCompany, requireLiveContact } from './references.js';
import { orgStages, resolveStage, type StageRow, stagesSeeded } from './stages.js';

/** The given owner (a user of the organization), else the key's user, else the organization's owner. */
async function resolveOwner(trx: Tx, org: string, keyUserId: string | null, given: string | undefined): Promise<string> {
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
  if (keyUserId) return keyUserId;
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

export type CreateDealBody = operations['createDeal']['requestBody']['content']['application/json'];

/** POST /deals: checks the stage, contact, company and owner, opens the deal and reads it back. */
export async function createDeal(trx: Tx, org: string, body: CreateDealBody, who: { keyUserId: string | null; by: string }): Promise<Deal> {
  const stage = await initialStage(trx, org, body.stage, body.stageId);
  if (body.primaryContactId !== undefined) await requireLiveContact(trx, org, body.primaryContactId);
  if (body.companyId !== undefined) await requireCompany(trx, org, body.companyId);
  const owner = await resolveOwner(trx, org, who.keyUserId, body.ownerSalesPersonId);
  const id = await insertDeal(trx, org, {
    name: body.name,
    stage,
    ownerId: owner,
    primaryContactId: body.primaryContactId,
    companyId: body.companyId,
    valueCents: body.valueCents,
    probability: body.probability,
    closeDate: body.closeDate,
    by: who.by,
  });
  return readDeal(trx, org, id, false);
}
