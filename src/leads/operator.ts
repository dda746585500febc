// The operator rows of inbound leads: a new lead form with the key its public capture endpoint
// (src/leads/endpoint.ts) is reached by, and a lead captured through the same path as a real one
// (src/leads/capture.ts).
import { type Db, withOrg } from '../../db/database.js';
import { requireOrgExists } from '../account/organizations.js';
import type { adminOperations } from '../http/handler.js';
import { newId } from '../platform/ids.js';
import { captureLead, checkPayloadSize } from './capture.js';
import { newFormKey } from './endpoint.js';

export type OperatorLead = adminOperations['adminCreateInboundLead']['requestBody']['content']['application/json'];

/** Creates the form, its name trimmed (kept as given when it is only whitespace); 404 for an unknown organization. */
export async function createLeadForm(db: Db, orgId: string, name: string): Promise<{ id: string; formKey: string }> {
  await requireOrgExists(db, orgId);
  const id = newId('lfm');
  const formKey = newFormKey();
  await withOrg(db, orgId, (trx) =>
    trx
      .insertInto('lead_forms')
      .values({ organization_id: orgId, id, name: name.trim() || name, form_key: formKey })
      .execute(),
  );
  return { id, formKey };
}

/** Captures the lead the operator gives (its scores as given, else computed); returns the lead's id. */
export async function captureOperatorLead(db: Db, orgId: string, body: OperatorLead): Promise<string> {
  const payload = body.payload ?? {};
  checkPayloadSize(payload);
  await requireOrgExists(db, orgId);
  const { leadId } = await withOrg(db, orgId, (trx) =>
    captureLead(trx, orgId, {
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
  return leadId;
}
