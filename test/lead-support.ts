// Shared set-up for the inbound lead suites (test/leads.test.ts, test/lead-capture.test.ts).
import { sql } from 'kysely';
import { withSystem } from '../db/database.js';
import { uid } from './crm-support.js';
import type { TestService } from './support/harness.js';

export interface LeadRow {
  organization_id: string;
  id: string;
  form_id: string | null;
  email: string;
  email_normalized: string;
  name: string | null;
  company_name: string | null;
  source: string | null;
  status: string;
  fit_score: number | null;
  intent_confidence: number | null;
  payload: Record<string, unknown>;
  ip_hash: string | null;
  qual_snapshot: Record<string, unknown> | null;
  submissions: number;
  last_submitted_at: Date;
  contact_id: string | null;
  deal_id: string | null;
  captured_at: Date;
  qualified_at: Date | null;
  converted_at: Date | null;
  spam_at: Date | null;
  erased_at: Date | null;
}

/** An address at a company domain (not a freemail provider). */
export const businessEmail = (p = 'lead') => `${uid(p)}@${uid('acme')}.example.com`;

/** Creates a lead form through the operator API. */
export async function mkForm(svc: TestService, orgId: string, name = 'website-demo') {
  const r = await svc.admin.POST('/organizations/{orgId}/lead-forms', { params: { path: { orgId } }, body: { name } });
  if (r.response.status !== 201 || !r.data) throw new Error(`lead form: ${r.response.status} ${JSON.stringify(r.error)}`);
  return r.data;
}

/** Captures a lead through the operator row; answers its id. */
export async function mkLead(
  svc: TestService,
  orgId: string,
  body: Partial<{
    email: string;
    name: string;
    companyName: string;
    source: string;
    fitScore: number;
    intentConfidence: number;
    payload: Record<string, unknown>;
  }> = {},
): Promise<string> {
  const r = await svc.admin.POST('/organizations/{orgId}/inbound-leads', {
    params: { path: { orgId } },
    body: { email: businessEmail(), name: 'Riley Inbound', companyName: 'Northwind Labs', source: 'website', ...body },
  });
  if (r.response.status !== 201 || !r.data) throw new Error(`lead: ${r.response.status} ${JSON.stringify(r.error)}`);
  return r.data.id;
}

/** The organization's lead rows (every column), oldest first. */
export async function leadRows(svc: TestService, orgId: string): Promise<LeadRow[]> {
  return withSystem(svc.ownerDb, (trx) =>
    trx.selectFrom('inbound_leads').selectAll().where('organization_id', '=', orgId).orderBy('captured_at').orderBy('id').execute(),
  ) as Promise<LeadRow[]>;
}

export async function leadRow(svc: TestService, orgId: string, id: string): Promise<LeadRow> {
  const row = (await leadRows(svc, orgId)).find((r) => r.id === id);
  if (!row) throw new Error(`no lead ${id}`);
  return row;
}

/** Moves a lead's capture time back by `minutes` (the sweep's minimum age, the dedupe window). */
export async function backdate(svc: TestService, orgId: string, id: string, minutes: number): Promise<void> {
  await withSystem(svc.ownerDb, (trx) =>
    sql`UPDATE inbound_leads SET captured_at = captured_at - make_interval(mins => ${minutes})
    WHERE organization_id = ${orgId} AND id = ${id}`.execute(trx),
  );
}
