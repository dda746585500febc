// Operator rows of the action-item work queue: an item created by hand, through the one insert
// every signal uses, as the operator's (aiGenerated false, no event; src/work/operator-action-item.ts).
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { openOperatorActionItem } from '../../src/work/operator-action-item.js';

const adminCreateActionItem: AdminHandler<'adminCreateActionItem'> = async ({ db, params, body, services }) => ({
  status: 201 as const,
  body: { id: await openOperatorActionItem(db, params.orgId, body, services.clock) },
});

export const adminActionItemHandlers = { adminCreateActionItem } satisfies Partial<AdminHandlers>;
