// Operator rows of the team lifecycle (src/account/team.ts): a sales person is added as an active
// member or invited, activated when they accept, renamed or given a title (their signature), and
// removed (their keys revoked, their pending action items to the owner); and the organization's
// health (src/account/org-health.ts).

import { withOrg } from '../../db/database.js';
import { organizationHealth } from '../../src/account/org-health.js';
import { requireOrg } from '../../src/account/organizations.js';
import { activateTeamMember, addTeamMember, listTeam, removeTeamMember, updateTeamMember } from '../../src/account/team.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';

const adminCreateUser: AdminHandler<'adminCreateUser'> = async ({ db, params, body }) =>
  withOrg(db, params.orgId, async (trx) => {
    await requireOrg(trx, params.orgId);
    return { status: 201 as const, body: await addTeamMember(trx, params.orgId, body) };
  });

const adminListUsers: AdminHandler<'adminListUsers'> = async ({ db, params, query }) =>
  withOrg(db, params.orgId, async (trx) => {
    await requireOrg(trx, params.orgId);
    return { status: 200 as const, body: await listTeam(trx, params.orgId, query) };
  });

const adminActivateUser: AdminHandler<'adminActivateUser'> = async ({ db, params }) =>
  withOrg(db, params.orgId, async (trx) => ({ status: 200 as const, body: await activateTeamMember(trx, params.orgId, params.userId) }));

const adminUpdateUser: AdminHandler<'adminUpdateUser'> = async ({ db, params, body }) =>
  withOrg(db, params.orgId, async (trx) => ({
    status: 200 as const,
    body: await updateTeamMember(trx, params.orgId, params.userId, body),
  }));

const adminRemoveUser: AdminHandler<'adminRemoveUser'> = async ({ db, params }) =>
  withOrg(db, params.orgId, async (trx) => ({ status: 200 as const, body: await removeTeamMember(trx, params.orgId, params.userId) }));

const adminGetOrganizationHealth: AdminHandler<'adminGetOrganizationHealth'> = async ({ db, params }) =>
  withOrg(db, params.orgId, async (trx) => ({ status: 200 as const, body: await organizationHealth(trx, params.orgId) }));

export const teamHandlers = {
  adminCreateUser,
  adminListUsers,
  adminActivateUser,
  adminUpdateUser,
  adminRemoveUser,
  adminGetOrganizationHealth,
} satisfies Partial<AdminHandlers>;
