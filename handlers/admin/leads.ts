// Operator rows of inbound leads: a lead form (and the key of its public capture endpoint), and a
// lead captured through the same path as a real one (src/leads/capture.ts).

import { withOrg } from '../../db/database.js';
import { requireOrgExists } from '../../src/account/organizations.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { captureLead, checkPayloadSize } from '../../src/leads/capture.js';
import { newFormKey } from '../../src/leads/endpoint.js';
import { newId } from '../../src/platform/ids.js';

const adminCreateLeadForm: AdminHandler<'adminCreateLeadForm'> = async ({ db, config, params, body }) => {
  await requireOrgExists(db, params.orgId);
  const id = newId('lfm');
  const formKey = newFormKey();
  await withOrg(db, params.orgId, (trx) =>
    trx
      .insertInto('lead_forms')
      .values({ organization_id: params.orgId, id, name: body.name.trim() || body.name, form_key: formKey })
      .execute(),
  );
  return { status: 201 as const, body: { id, formKey, captureUrl: `${config.publicBaseUrl}/capture/${formKey}` } };
};

const adminCreateInboundLead: AdminHandler<'adminCreateInboundLead'> = async ({ db, params, body }) => {
  const payload = body.payload ?? {};
  checkPayloadSize(payload);
  await requireOrgExists(db, params.orgId);
  const { leadId } = await withOrg(db, params.orgId, (trx) =>
    captureLead(trx, params.orgId, {
      email: body.email,
      name: body.name,
      companyName: body.companyName,
      source: body.source,
      fitScore: body.fitScore,
      intentConfidence: body.intentConfidence,
      payload,
      via: 'operator',
    }),
  );
  return { status: 201 as const, body: { id: leadId } };
};

export const leadAdminHandlers: AdminHandlers = { adminCreateLeadForm, adminCreateInboundLead };
