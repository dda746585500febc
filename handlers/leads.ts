// Inbound leads (tag leads): the list, conversion on demand and marking spam (src/leads/list.ts,
// src/leads/convert.ts, src/leads/spam.ts). Capture is in src/leads/ (the public form endpoint and
// the operator row); the periodic qualification and conversion sweep in src/leads/sweep.ts.
import type { Handler, Handlers } from '../src/http/handler.js';
import { convertLead } from '../src/leads/convert.js';
import { leadsPage } from '../src/leads/list.js';
import { markLeadSpam } from '../src/leads/spam.js';

const listLeads: Handler<'listLeads'> = async ({ trx, auth, query }) => ({
  status: 200,
  body: await leadsPage(trx, auth.organizationId, query),
});

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

const markLeadSpamHandler: Handler<'markLeadSpam'> = async ({ trx, auth, params }) => ({
  status: 200,
  body: await markLeadSpam(trx, auth.organizationId, params.id),
});

export const leadHandlers = { listLeads, convertLead: convertLeadHandler, markLeadSpam: markLeadSpamHandler } satisfies Partial<Handlers>;
