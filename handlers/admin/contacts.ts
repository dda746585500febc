// Operator rows about contacts: restoring a soft-deleted contact within its undo window (src/crm/contact-deletion.ts).
import { withOrg } from '../../db/database.js';
import { requireOrg } from '../../src/account/organizations.js';
import { restoreContact } from '../../src/crm/contact-deletion.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';

const adminRestoreContact: AdminHandler<'adminRestoreContact'> = async ({ db, params }) =>
  withOrg(db, params.orgId, async (trx) => {
    await requireOrg(trx, params.orgId);
    return { status: 200 as const, body: await restoreContact(trx, params.orgId, params.contactId) };
  });

export const adminContactHandlers = { adminRestoreContact } satisfies Partial<AdminHandlers>;
