// Operator rows of the dispatcher: mailboxes (verified by an SMTP handshake;
// src/dispatch/mailbox-registry.ts), the deployment's kill switch (src/dispatch/kill-switch.ts), the
// send queue and the outbox (src/dispatch/outbox.ts), a possibly sent step resolved (src/dispatch/resolve.ts). Organizations' sending settings are changed
// with the organization (organizations.ts).
import { withOrg } from '../../db/database.js';
import { requireOrg, requireOrgExists } from '../../src/account/organizations.js';
import { killSwitch, setKillSwitch } from '../../src/dispatch/kill-switch.js';
import { createMailbox, listMailboxes, updateMailbox } from '../../src/dispatch/mailbox-registry.js';
import { outboxMessages, readOrganizations, sendQueueRows } from '../../src/dispatch/outbox.js';
import { resolvePossiblySent } from '../../src/dispatch/resolve.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';

const adminCreateMailbox: AdminHandler<'adminCreateMailbox'> = async ({ db, params, body, services, config }) => {
  await requireOrgExists(db, params.orgId);
  return { status: 201 as const, body: await createMailbox(db, { services, config }, params.orgId, body) };
};

const adminListMailboxes: AdminHandler<'adminListMailboxes'> = async ({ db, params, services, config }) =>
  withOrg(db, params.orgId, async (trx) => {
    await requireOrg(trx, params.orgId);
    return { status: 200 as const, body: await listMailboxes(trx, { services, config }, params.orgId) };
  });

const adminUpdateMailbox: AdminHandler<'adminUpdateMailbox'> = async ({ db, params, body, services, config }) => {
  return { status: 200 as const, body: await updateMailbox(db, { services, config }, params.orgId, params.mailboxId, body) };
};

const adminGetSettings: AdminHandler<'adminGetSettings'> = async ({ db }) => {
  return { status: 200 as const, body: await killSwitch(db) };
};

const adminUpdateSettings: AdminHandler<'adminUpdateSettings'> = async ({ systemDb, body }) => {
  return { status: 200 as const, body: await setKillSwitch(systemDb, body.emailKillSwitch) };
};

const adminListSendQueue: AdminHandler<'adminListSendQueue'> = async ({ db, systemDb, query }) =>
  readOrganizations(db, systemDb, query.organizationId, async (trx) => ({
    status: 200 as const,
    body: await sendQueueRows(trx, query.organizationId),
  }));

const adminResolvePossiblySent: AdminHandler<'adminResolvePossiblySent'> = async ({ db, params, body }) =>
  withOrg(db, params.orgId, async (trx) => {
    await requireOrg(trx, params.orgId);
    return { status: 200 as const, body: await resolvePossiblySent(trx, params.orgId, params.queueId, body.outcome) };
  });

const adminListOutbox: AdminHandler<'adminListOutbox'> = async ({ db, systemDb, query }) =>
  readOrganizations(db, systemDb, query.organizationId, async (trx) => ({
    status: 200 as const,
    body: await outboxMessages(trx, query.organizationId),
  }));

export const sendingHandlers = {
  adminCreateMailbox,
  adminListMailboxes,
  adminUpdateMailbox,
  adminGetSettings,
  adminUpdateSettings,
  adminListSendQueue,
  adminResolvePossiblySent,
  adminListOutbox,
} satisfies Partial<AdminHandlers>;
