// POST /leads/{id}/spam: marking an inbound lead as spam.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { notFound, ProblemError } from '../http/problems.js';

/** NEW or QUALIFIED -> SPAM; idempotent on SPAM; 409 on CONVERTED; 404 unknown, erased or foreign. */
export async function markLeadSpam(trx: Tx, org: string, leadId: string) {
  const lead = await trx
    .selectFrom('inbound_leads')
    .select('status')
    .where('organization_id', '=', org)
    .where('id', '=', leadId)
    .where('erased_at', 'is', null)
    .forUpdate()
    .executeTakeFirst();
  if (!lead) throw notFound('lead');
  if (lead.status === 'CONVERTED') throw new ProblemError('lead-already-converted', 'The lead was converted and cannot be marked as spam.');
  if (lead.status === 'SPAM') return { leadId, status: 'SPAM' as const, alreadySpam: true };
  await trx
    .updateTable('inbound_leads')
    .set({ status: 'SPAM', spam_at: sql<Date>`now_ms()`, updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', org)
    .where('id', '=', leadId)
    .execute();
  return { leadId, status: 'SPAM' as const, alreadySpam: false };
}
