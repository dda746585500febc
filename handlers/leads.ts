// Inbound leads (tag leads): the list, conversion on demand and marking spam. Capture is in
// src/leads/ (the public form endpoint and the operator row); the periodic qualification and
// conversion sweep in src/leads/sweep.ts.
import type { Selectable } from 'kysely';
import { sql } from 'kysely';
import type { InboundLeadsTable } from '../db/schema.js';
import type { Handler } from '../src/http/handler.js';
import { keyset, page } from '../src/http/paging.js';
import { notFound, ProblemError } from '../src/http/problems.js';
import { convertLead } from '../src/leads/convert.js';
import { iso, isoNN } from '../src/platform/ids.js';

type LeadStatus = 'NEW' | 'QUALIFIED' | 'CONVERTED' | 'SPAM';
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
type LeadRow = Pick<Selectable<InboundLeadsTable>, (typeof LEAD_COLUMNS)[number]>;

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

const listLeads: Handler<'listLeads'> = async ({ trx, auth, query }) => {
  const limit = query.limit ?? 50;
  let q = trx
    .selectFrom('inbound_leads')
    .select([...LEAD_COLUMNS])
    .where('organization_id', '=', auth.organizationId)
    .where('erased_at', 'is', null);
  if (query.status !== undefined) q = q.where('status', '=', query.status);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'captured_at', idCol: 'id' }).execute();
  return { status: 200, body: page(rows, limit, (r) => ({ at: r.captured_at, id: r.id }), toLead) };
};

const convertLeadHandler: Handler<'convertLead'> = async ({ trx, auth, params, body }) => {
  const result = await convertLead(trx, auth.organizationId, params.id, {
    createDeal: body?.createDeal,
    dealName: body?.dealName,
    userId: auth.userId,
    by: auth.userId ?? auth.keyId,
    via: 'api',
  });
  return { status: 200, body: result };
};

/** NEW or QUALIFIED -> SPAM; idempotent on SPAM; 409 on CONVERTED; 404 unknown, erased or foreign. */
const markLeadSpam: Handler<'markLeadSpam'> = async ({ trx, auth, params }) => {
  const org = auth.organizationId;
  const lead = await trx
    .selectFrom('inbound_leads')
    .select('status')
    .where('organization_id', '=', org)
    .where('id', '=', params.id)
    .where('erased_at', 'is', null)
    .forUpdate()
    .executeTakeFirst();
  if (!lead) throw notFound('lead');
  if (lead.status === 'CONVERTED') throw new ProblemError('lead-already-converted', 'The lead was converted and cannot be marked as spam.');
  if (lead.status === 'SPAM') return { status: 200, body: { leadId: params.id, status: 'SPAM', alreadySpam: true } };
  await trx
    .updateTable('inbound_leads')
    .set({ status: 'SPAM', spam_at: sql<Date>`now_ms()`, updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', org)
    .where('id', '=', params.id)
    .execute();
  return { status: 200, body: { leadId: params.id, status: 'SPAM', alreadySpam: false } };
};

export const leadHandlers = { listLeads, convertLead: convertLeadHandler, markLeadSpam };
