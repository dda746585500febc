// GET /leads: the organization's inbound leads (erased ones never), newest capture first,
// keyset-paged, as the InboundLead shape.
import type { Selectable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { InboundLeads } from '../../db/schema.js';
import type { operations } from '../http/handler.js';
import { keyset, page } from '../http/paging.js';
import { iso, isoNN } from '../platform/ids.js';

type LeadStatus = 'NEW' | 'QUALIFIED' | 'CONVERTED' | 'SPAM';
export type LeadFilter = NonNullable<operations['listLeads']['parameters']['query']>;

/** The columns the InboundLead shape shows: never the payload, the IP hash or the snapshot. */
const LEAD_COLUMNS = [
  'id',
  'email',
  'name',
  'company_name',
  'source',
  'status',
  'fit_score',
  'intent_confidence',
  'contact_id',
  'deal_id',
  'captured_at',
  'converted_at',
  'updated_at',
] as const;
type LeadRow = Pick<Selectable<InboundLeads>, (typeof LEAD_COLUMNS)[number]>;

function toLead(r: LeadRow) {
  return {
    id: r.id,
    email: r.email,
    name: r.name,
    companyName: r.company_name,
    source: r.source,
    status: r.status as LeadStatus,
    fitScore: r.fit_score,
    intentConfidence: r.intent_confidence,
    contactId: r.contact_id,
    dealId: r.deal_id,
    capturedAt: isoNN(r.captured_at),
    convertedAt: iso(r.converted_at),
    updatedAt: isoNN(r.updated_at),
  };
}

export async function leadsPage(trx: Tx, organizationId: string, query: LeadFilter) {
  const limit = query.limit ?? 50;
  let q = trx
    .selectFrom('inbound_leads')
    .select([...LEAD_COLUMNS])
    .where('organization_id', '=', organizationId)
    .where('erased_at', 'is', null);
  if (query.status !== undefined) q = q.where('status', '=', query.status);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'captured_at', idCol: 'id' }).execute();
  return page(rows, limit, (r) => ({ at: r.captured_at, id: r.id }), toLead);
}
