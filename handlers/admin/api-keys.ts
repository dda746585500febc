// Operator rows of API keys: issue (the secret shown once, its hash stored) and revoke
// (src/account/api-keys.ts).
import { withOrg } from '../../db/database.js';
import { createApiKey, revokeApiKey } from '../../src/account/api-keys.js';
import { requireOrg } from '../../src/account/organizations.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';

const adminCreateApiKey: AdminHandler<'adminCreateApiKey'> = async ({ db, params, body }) =>
  withOrg(db, params.orgId, async (trx) => {
    await requireOrg(trx, params.orgId);
    return { status: 201 as const, body: await createApiKey(trx, params.orgId, body) };
  });

const adminRevokeApiKey: AdminHandler<'adminRevokeApiKey'> = async ({ db, systemDb, params }) => ({
  status: 200 as const,
  body: await revokeApiKey(db, systemDb, params.keyId),
});

export const apiKeyHandlers = { adminCreateApiKey, adminRevokeApiKey } satisfies Partial<AdminHandlers>;
