// The operator row's action item: created by hand, through the one insert every signal uses
// (openActionItem), as the operator's (aiGenerated false, no event).
import { type Db, withOrg } from '../../db/database.js';
import { requireOrg } from '../account/organizations.js';
import type { adminOperations } from '../http/handler.js';
import { invalid, notFound } from '../http/problems.js';
import type { Clock } from '../platform/clock.js';
import { openActionItem } from './action-items.js';

export type OperatorActionItem = adminOperations['adminCreateActionItem']['requestBody']['content']['application/json'];

/** Opens the item for an active member of the organization; returns its id. `expiresAt` must be after the clock's now. */
export async function openOperatorActionItem(db: Db, orgId: string, body: OperatorActionItem, clock: Clock): Promise<string> {
  if (body.expiresAt !== undefined && !(Date.parse(body.expiresAt) > clock.now().getTime()))
    throw invalid('expiresAt must be in the future.', 'body.expiresAt');
  return withOrg(db, orgId, async (trx) => {
    await requireOrg(trx, orgId);
    const person = await trx
      .selectFrom('users')
      .select(['id', 'status'])
      .where('organization_id', '=', orgId)
      .where('id', '=', body.salesPersonId)
      .executeTakeFirst();
    if (!person) throw notFound('sales person');
    // Removed people (and invited ones, who have not accepted yet) get no new work.
    if (person.status !== 'active')
      throw invalid(`salesPersonId names a person who is ${person.status}, not an active member.`, 'body.salesPersonId');
    const id = await openActionItem(trx, orgId, {
      actionType: body.actionType,
      title: body.title,
      description: body.description ?? null,
      priority: body.priority,
      salesPersonId: person.id,
      aiGenerated: false,
      entityType: body.entityType ?? null,
      entityId: body.entityId ?? null,
      expectedImpactCents: body.expectedImpactCents ?? null,
      expiresAt: body.expiresAt ?? null,
    });
    // Without a sourceKey the insert always opens an item.
    return id!;
  });
}
