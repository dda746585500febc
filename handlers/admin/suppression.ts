// Operator row of the suppression list: a DOMAIN entry covering every address at a domain.

import { withSystem } from '../../db/database.js';
import { requireOrg } from '../../src/account/organizations.js';
import { toSuppressionEntry } from '../../src/compliance/suppression-entries.js';
import { normalizeDomain } from '../../src/crm/domains.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { invalid } from '../../src/http/problems.js';
import { emit } from '../../src/platform/events.js';
import { newId } from '../../src/platform/ids.js';

const adminCreateSuppressionDomain: AdminHandler<'adminCreateSuppressionDomain'> = async ({ db, params, body }) => {
  const domain = normalizeDomain(body.domain);
  if (!domain) throw invalid('domain is not a valid domain name.', 'body.domain');
  return withSystem(db, async (trx) => {
    await requireOrg(trx, params.orgId);
    const inserted = await trx
      .insertInto('suppression_entries')
      .values({
        organization_id: params.orgId,
        id: newId('sup'),
        level: 'DOMAIN',
        email: domain,
        reason: 'MANUAL_BLOCK',
        source: body.reason ?? null,
      })
      .onConflict((oc) => oc.doNothing())
      .returningAll()
      .executeTakeFirst();
    if (inserted) {
      await emit(trx, params.orgId, {
        type: 'suppression.added',
        resource: { type: 'SuppressionEntry', id: inserted.id },
        data: { domain, level: 'DOMAIN', reason: 'MANUAL_BLOCK' },
      });
      return { status: 201 as const, body: toSuppressionEntry(inserted) };
    }
    const existing = await trx
      .selectFrom('suppression_entries')
      .selectAll()
      .where('organization_id', '=', params.orgId)
      .where('level', '=', 'DOMAIN')
      .where('email', '=', domain)
      .executeTakeFirstOrThrow();
    return { status: 201 as const, body: toSuppressionEntry(existing) };
  });
};

export const adminSuppressionHandlers: AdminHandlers = { adminCreateSuppressionDomain };
