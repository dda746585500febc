// The records a deal points at, checked when a request names them: its primary contact (live, of
// the organization) and its company (of the organization).

import type { Tx } from '../../db/database.js';
import { isLiveContact } from '../crm/live-contacts.js';
import { invalid } from '../http/problems.js';

export async function requireLiveContact(trx: Tx, orgId: string, contactId: string): Promise<void> {
  const c = await trx
    .selectFrom('contacts')
    .select('id')
    .where('organization_id', '=', orgId)
    .where('id', '=', contactId)
    .where(isLiveContact())
    .executeTakeFirst();
  if (!c) throw invalid('primaryContactId is not a live contact of this organization.', 'body.primaryContactId');
}

export async function requireCompany(trx: Tx, orgId: string, companyId: string): Promise<void> {
  const c = await trx
    .selectFrom('companies')
    .select('id')
    .where('organization_id', '=', orgId)
    .where('id', '=', companyId)
    .executeTakeFirst();
  if (!c) throw invalid('companyId is not a company of this organization.', 'body.companyId');
}
