// Operator row of a list: archive, test-flag, and the list context drafts are written from (src/crm/lists.ts).
import { withOrg } from '../../db/database.js';
import { requireOrg } from '../../src/account/organizations.js';
import { updateListByOperator } from '../../src/crm/lists.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';

const adminUpdateList: AdminHandler<'adminUpdateList'> = async ({ db, params, body }) =>
  withOrg(db, params.orgId, async (trx) => {
    await requireOrg(trx, params.orgId);
    return { status: 200 as const, body: await updateListByOperator(trx, params.orgId, params.listId, body) };
  });

export const adminListHandlers = { adminUpdateList } satisfies Partial<AdminHandlers>;
