// Shared set-up for the deal test files (test/deal*.test.ts).
import crypto from 'node:crypto';
import { withOrg } from '../db/database.js';
import { newId } from '../src/platform/ids.js';
import { ALL_SCOPES, type TestService } from './support/harness.js';

export interface DealOrg {
  id: string;
  ownerId: string;
  key: string;
  api: ReturnType<TestService['api']>;
}

/** A fresh organization with an all-scope key attributed to its owner. */
export async function dealOrg(svc: TestService): Promise<DealOrg & { org: Awaited<ReturnType<TestService['newOrg']>> }> {
  const org = await svc.newOrg();
  const key = await org.key(ALL_SCOPES, { userId: org.ownerId });
  return { org, id: org.id, ownerId: org.ownerId, key, api: svc.api(key) };
}

/** Inserts a contact directly (the contacts handlers are another area's). */
export async function insertContact(svc: TestService, orgId: string, state: 'live' | 'deleted' | 'erased' = 'live'): Promise<string> {
  const id = newId('con');
  const email = `c${crypto.randomBytes(4).toString('hex')}@example.com`;
  await withOrg(svc.rt.db, orgId, (trx) =>
    trx
      .insertInto('contacts')
      .values({
        organization_id: orgId,
        id,
        list_id: 'lst_test',
        owner_user_id: null,
        email,
        email_normalized: email,
        title: null,
        phone: null,
        notes: null,
        lead_source: null,
        company_id: null,
        fit_score: null,
        urgency_score: null,
        research: null,
        research_updated_at: null,
        deleted_at: state === 'deleted' ? new Date() : null,
        erased_at: state === 'erased' ? new Date() : null,
      })
      .execute(),
  );
  return id;
}

export async function insertCompany(svc: TestService, orgId: string): Promise<string> {
  const id = newId('co');
  const domain = `d${crypto.randomBytes(4).toString('hex')}.example.com`;
  await withOrg(svc.rt.db, orgId, (trx) =>
    trx
      .insertInto('companies')
      .values({
        organization_id: orgId,
        id,
        name: 'Acme',
        domain,
        domain_normalized: domain,
        industry: null,
        company_size: null,
        headquarters: null,
        tier: null,
        owner_sales_person_id: null,
        research: null,
        research_updated_at: null,
        sources_count: null,
      })
      .execute(),
  );
  return id;
}

export interface EventRow {
  id: string;
  type: string;
  data: Record<string, unknown>;
  resource_type: string;
  resource_id: string;
}

/** The organization's events (oldest first), optionally of one type. */
export async function eventsOf(svc: TestService, orgId: string, type?: string): Promise<EventRow[]> {
  return withOrg(svc.rt.db, orgId, async (trx) => {
    let q = trx
      .selectFrom('events')
      .select(['id', 'type', 'data', 'resource_type', 'resource_id'])
      .where('organization_id', '=', orgId)
      .orderBy('created_at')
      .orderBy('id');
    if (type) q = q.where('type', '=', type);
    return (await q.execute()) as EventRow[];
  });
}

/** YYYY-MM-DD (UTC) of `from` (the wall clock's now unless given, e.g. a test's clock) shifted by `days`. */
export const utcDate = (days = 0, from: Date = new Date()): string =>
  new Date(from.getTime() + days * 86_400_000).toISOString().slice(0, 10);
