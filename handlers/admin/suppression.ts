// Operator row of the suppression list: a DOMAIN entry covering every address at a domain (src/compliance/suppression-list.ts).

import { withOrg } from '../../db/database.js';
import { requireOrg } from '../../src/account/organizations.js';
import { blockDomain } from '../../src/compliance/suppression-list.js';
import { normalizeDomain } from '../../src/crm/domains.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { invalid } from '../../src/http/problems.js';

const adminCreateSuppressionDomain: AdminHandler<'adminCreateSuppressionDomain'> = async ({ db, params, body }) => {
  const domain = normalizeDomain(body.domain);
  if (!domain) throw invalid('domain is not a valid domain name.', 'body.domain');
  return withOrg(db, params.orgId, async (trx) => {
    await requireOrg(trx, params.orgId);
    return { status: 201 as const, body: await blockDomain(trx, params.orgId, domain, body.reason ?? null) };
  });
};

export const adminSuppressionHandlers = { adminCreateSuppressionDomain } satisfies Partial<AdminHandlers>;
