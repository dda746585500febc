// Operator rows of the action-item work queue: an item created by hand, through the one insert
// every signal uses (openActionItem), as the operator's (aiGenerated false, no event).

import { withSystem } from '../../db/database.js';
import { requireOrg } from '../../src/account/organizations.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { invalid, notFound } from '../../src/http/problems.js';
import { openActionItem } from '../../src/work/action-items.js';

const adminCreateActionItem: AdminHandler<'adminCreateActionItem'> = async ({ db, params, body }) => {
  if (body.expiresAt !== undefined && !(Date.parse(body.expiresAt) > Date.now()))
    throw invalid('expiresAt must be in the future.', 'body.expiresAt');
  return withSystem(db, async (trx) => {
    await requireOrg(trx, params.orgId);
    const person = await trx
      .selectFrom('users')
      .select(['id', 'status'])
      .where('organization_id', '=', params.orgId)
      .where('id', '=', body.salesPersonId)
      .executeTakeFirst();
    if (!person) throw notFound('sales person');
    // Removed people (and invited ones, who have not accepted yet) get no new work.
    if (person.status !== 'active')
      throw invalid(`salesPersonId names a person who is ${person.status}, not an active member.`, 'body.salesPersonId');
    const id = await openActionItem(trx, params.orgId, {
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
    return { status: 201 as const, body: { id: id! } };
  });
};

export const adminActionItemHandlers: AdminHandlers = { adminCreateActionItem };
