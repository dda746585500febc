// PATCH /deals/{id}: the deal's own fields. Only what differs is written; a changed amount or
// close date emits its event.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { operations } from '../http/handler.js';
import { emit } from '../platform/events.js';
import { DEAL_RESOURCE, type DealRow, lockDeal } from './read.js';
import { requireLiveContact } from './references.js';

export type UpdateDealBody = operations['updateDeal']['requestBody']['content']['application/json'];

/** Applies the changes to the locked deal; `updated` is false when nothing differed. */
export async function updateDeal(trx: Tx, org: string, id: string, body: UpdateDealBody): Promise<{ id: string; updated: boolean }> {
  const deal = await lockDeal(trx, org, id);
  if (body.primaryContactId !== undefined && body.primaryContactId !== null) await requireLiveContact(trx, org, body.primaryContactId);
  const changes: Partial<Pick<DealRow, 'name' | 'value_cents' | 'probability' | 'close_date' | 'primary_contact_id'>> = {};
  if (body.name !== undefined && body.name !== deal.name) changes.name = body.name;
  if (body.valueCents !== undefined && body.valueCents !== deal.value_cents) changes.value_cents = body.valueCents;
  if (body.probability !== undefined && body.probability !== deal.probability) changes.probability = body.probability;
  if (body.closeDate !== undefined && body.closeDate !== deal.close_date) changes.close_date = body.closeDate;
  if (body.primaryContactId !== undefined && body.primaryContactId !== deal.primary_contact_id)
    changes.primary_contact_id = body.primaryContactId;
  if (Object.keys(changes).length === 0) return { id: deal.id, updated: false };

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
  return { id: deal.id, updated: true };
}
