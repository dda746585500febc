// Operator rows of organizations: creation (with its OWNER) and changes to plan, flags, budgets,
// sending settings and experiments (src/account/organizations.ts).
import { withOrg } from '../../db/database.js';
import { createOrganization, updateOrganization } from '../../src/account/organizations.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';

const adminCreateOrganization: AdminHandler<'adminCreateOrganization'> = async ({ db, body }) => ({
  status: 201 as const,
  body: await createOrganization(db, body),
});

const adminUpdateOrganization: AdminHandler<'adminUpdateOrganization'> = async ({ db, params, body, services }) =>
  withOrg(db, params.orgId, async (trx) => ({
    status: 200 as const,
    body: await updateOrganization(trx, params.orgId, body, services.clock),
  }));

export const organizationHandlers = { adminCreateOrganization, adminUpdateOrganization } satisfies Partial<AdminHandlers>;
