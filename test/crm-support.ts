// Helpers shared by the CRM suites (contacts, companies, lists, suppression, erase): reading the
// state left behind (events, rows) with row-level security in system mode, and seeding rows the
// API cannot create yet (sequences, drafts, messages).
import crypto from 'node:crypto';
import { sql } from 'kysely';
import { withSystem } from '../db/database.js';
import type { PublicClient, TestService } from './support/harness.js';

export const uid = (p = 'x') => `${p}${crypto.randomBytes(5).toString('hex')}`;
export const uniqueEmail = (p = 'p') => `${uid(p)}@${uid('co')}.example.com`;

export interface EventRow {
  id: string;
  type: string;
  data: Record<string, unknown>;
  resource_type: string;
  resource_id: string;
}

/** The organization's events, oldest first, optionally of one type. */
export async function eventsOf(svc: TestService, orgId: string, type?: string): Promise<EventRow[]> {
  return withSystem(svc.ownerDb, async (trx) => {
    let q = trx.selectFrom('events').select(['id', 'type', 'data', 'resource_type', 'resource_id']).where('organization_id', '=', orgId);
    if (type) q = q.where('type', '=', type);
    return q.orderBy('created_at').orderBy('id').execute() as Promise<EventRow[]>;
  });
}

/** Runs SQL with row-level security in system mode (set-up and inspection). */
export async function system<T>(svc: TestService, fn: Parameters<typeof withSystem<T>>[1]): Promise<T> {
  return withSystem(svc.ownerDb, fn);
}

/** A sequence row for a contact (sequences have no create endpoint in this area). */
export async function insertSequence(svc: TestService, orgId: string, contactId: string, status: string): Promise<string> {
  const id = uid('seq_');
  await system(svc, (trx) =>
    trx
      .insertInto('contact_sequences')
      .values({
        organization_id: orgId,
        id,
        contact_id: contactId,
        template_id: uid('tpl_'),
        status,
      })
      .execute(),
  );
  return id;
}

export async function sequenceStatus(svc: TestService, orgId: string, id: string): Promise<string> {
  const r = await system(svc, (trx) =>
    trx
      .selectFrom('contact_sequences')
      .select('status')
      .where('organization_id', '=', orgId)
      .where('id', '=', id)
      .executeTakeFirstOrThrow(),
  );
  return r.status;
}

export async function mkList(api: PublicClient, name = uid('List ')) {
  const r = await api.POST('/lists', { body: { name } });
  if (r.response.status !== 201 || !r.data) throw new Error(`list: ${r.response.status} ${JSON.stringify(r.error)}`);
  return r.data;
}

export async function mkContact(api: PublicClient, body: Partial<{ email: string; name: string; listId: string; fitScore: number }> = {}) {
  const r = await api.POST('/contacts', { body: { email: uniqueEmail(), name: uid('Person '), ...body } });
  if (r.response.status !== 201 || !r.data) throw new Error(`contact: ${r.response.status} ${JSON.stringify(r.error)}`);
  return r.data;
}

/** EXPLAIN of a query as the application role bound to an organization (plans under row-level security), scans disfavoured. */
export async function planOf(svc: TestService, orgId: string, query: string): Promise<string> {
  return svc.rt.db.transaction().execute(async (trx) => {
    await sql`select set_config('app.org_id', ${orgId}, true)`.execute(trx);
    // On a test-sized table a scan is cheapest anyway; what matters is that an index CAN serve it.
    await sql`set local enable_seqscan = off`.execute(trx);
    const r = await sql<{ 'QUERY PLAN': string }>`${sql.raw(`EXPLAIN ${query}`)}`.execute(trx);
    return r.rows.map((x) => x['QUERY PLAN']).join('\n');
  });
}
