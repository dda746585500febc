// Operator rows of inbound leads: a lead form (and the key of its public capture endpoint), and a
// lead captured through the same path as a real one (src/leads/operator.ts).
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { captureOperatorLead, createLeadForm } from '../../src/leads/operator.js';

const adminCreateLeadForm: AdminHandler<'adminCreateLeadForm'> = async ({ db, config, params, body }) => {
  const { id, formKey } = await createLeadForm(db, params.orgId, body.name);
  return { status: 201 as const, body: { id, formKey, captureUrl: `${config.publicBaseUrl}/capture/${formKey}` } };
};

const adminCreateInboundLead: AdminHandler<'adminCreateInboundLead'> = async ({ db, params, body }) => ({
  status: 201 as const,
  body: { id: await captureOperatorLead(db, params.orgId, body) },
});

export const leadAdminHandlers = { adminCreateLeadForm, adminCreateInboundLead } satisfies Partial<AdminHandlers>;
