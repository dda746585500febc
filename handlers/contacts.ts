// Contacts: idempotent creation per person, filtered keyset listing, soft delete, GDPR erasure and
// pausing of a contact's sequences.
import { type Expression, type Kysely, type SqlBool, sql } from 'kysely';
import { epochMs, type Tx, withGenericPlan, withOrg } from '../db/database.js';
import type { Database } from '../db/schema.js';
import { organizationOwnerId } from '../src/account/people.js';
import { eraseAddress } from '../src/compliance/erasure.js';
import { usableErasureSecret } from '../src/compliance/suppression-match.js';
import { fileContacts } from '../src/crm/contact-filing.js';
import { normalizeEmail } from '../src/crm/domains.js';
import { type QualificationStatus, recordStageChanges } from '../src/crm/qualification.js';
import { cancelQueued } from '../src/dispatch/queue.js';
import type { Handler, LongHandler } from '../src/http/handler.js';
import { decodeCursor, jsonPage, keyset } from '../src/http/paging.js';
import { invalid, notFound, ProblemError } from '../src/http/problems.js';
import { emit } from '../src/platform/events.js';
import { isoNN, msIso, msJson, newId } from '../src/platform/ids.js';
import { researchContact as runContactResearch } from '../src/research/contact-research.js';
import { pauseSequences } from '../src/sequences/lifecycle.js';
import { domainProblem, freshness, likeEscape, objectArray, researchTtlDays } from './companies.js';

/** How long a soft delete can be undone (DELETE's undoAvailableUntil; the operator's restore). */
export const UNDO_WINDOW_MS = 30 * 86_400_000;
const ERASE_ROLES = ['MANAGER', 'ADMIN', 'OWNER'];
const ERASE_NOTE =
  'Every record of this organization with the same address was erased and the address is suppressed for good. ' +
  'Plus-tag variants of the address (name+tag@domain) are separate records and were not erased (they stay suppressed); erase each by its own id. ' +
  "Events already delivered to webhook subscribers are outside the service's reach.";

// ---------------------------------------------------------------- reading and mapping

/** Contacts with what the Contact shape needs from their company and (live) list. */
function contactSelect(trx: Tx) {
  return trx
    .selectFrom('contacts as c')
    .leftJoin('companies as co', (j) => j.onRef('co.organization_id', '=', 'c.organization_id').onRef('co.id', '=', 'c.company_id'))
    .leftJoin('contact_lists as l', (j) =>
      j.onRef('l.organization_id', '=', 'c.organization_id').onRef('l.id', '=', 'c.list_id').on('l.deleted_at', 'is', null),
    )
    .select([
      'c.id',
      'c.organization_id',
      'c.name',
      'c.email',
      'c.title',
      'c.phone',
      'c.notes',
      'c.lead_source',
      'c.qualification_status',
      'c.fit_score',
      'c.urgency_score',
      epochMs('c.deleted_at').as('deleted_ms'),
      epochMs('c.erased_at').as('erased_ms'),
      epochMs('c.created_at').as('created_ms'),
      epochMs('c.updated_at').as('updated_ms'),
      'co.id as company_ref',
      'co.name as company_name',
      'co.domain as company_domain',
      'co.domain_normalized as company_domain_normalized',
      'l.id as list_ref',
      'l.name as list_name',
    ]);
}
type ContactRow = Awaited<ReturnType<ReturnType<typeof contactSelect>['executeTakeFirstOrThrow']>>;

/** The Contact shape: the one mapping of a contact. */
function toContact(r: ContactRow) {
  return {
    id: r.id,
    organizationId: r.organization_id,
    name: r.name,
    email: r.email,
    title: r.title,
    phone: r.phone,
    notes: r.notes,
    leadSource: r.lead_source,
    company:
      r.company_ref === null ? null : { id: r.company_ref, name: r.company_name, domain: r.company_domain ?? r.company_domain_normalized },
    qualificationStatus: r.qualification_status as QualificationStatus,
    fitScore: r.fit_score,
    urgencyScore: r.urgency_score,
    // A soft-deleted list is gone: its contacts survive, but live on no list any more.
    list: r.list_ref === null || r.list_name === null ? null : { id: r.list_ref, name: r.list_name },
    createdAt: msIso(r.created_ms)!,
    updatedAt: msIso(r.updated_ms)!,
  };
}

/**
 * Items of GET /contacts: the Contact shape with the soft-delete and erasure times, written
 * straight to JSON (see jsonPage). It writes exactly what toContact gives, key for key.
 */
function contactListItemJson(r: ContactRow): string {
  const j = JSON.stringify;
  const company =
    r.company_ref === null
      ? 'null'
      : `{"id":${j(r.company_ref)},"name":${j(r.company_name)},"domain":${j(r.company_domain ?? r.company_domain_normalized)}}`;
  const list = r.list_ref === null || r.list_name === null ? 'null' : `{"id":${j(r.list_ref)},"name":${j(r.list_name)}}`;
  return (
    `{"id":${j(r.id)},"organizationId":${j(r.organization_id)},"name":${j(r.name)},"email":${j(r.email)},"title":${j(r.title)},` +
    `"phone":${j(r.phone)},"notes":${j(r.notes)},"leadSource":${j(r.lead_source)},"company":${company},` +
    `"qualificationStatus":${j(r.qualification_status)},"fitScore":${j(r.fit_score)},"urgencyScore":${j(r.urgency_score)},"list":${list},` +
    `"createdAt":${msJson(r.created_ms)},"updatedAt":${msJson(r.updated_ms)},"deletedAt":${msJson(r.deleted_ms)},"erasedAt":${msJson(r.erased_ms)}}`
  );
}

/** One contact of the organization in the Contact shape (any state). */
export async function contactById(trx: Tx, organizationId: string, id: string) {
  return toContact(
    await contactSelect(trx).where('c.organization_id', '=', organizationId).where('c.id', '=', id).executeTakeFirstOrThrow(),
  );
}

/** Cached research as ContactDetail.research shows it (the spec's five keys); null when none. */
async function toResearch(trx: Tx, organizationId: string, research: unknown, updatedAt: Date | null) {
  if (updatedAt === null) return null;
  const r = research !== null && typeof research === 'object' && !Array.isArray(research) ? (research as Record<string, unknown>) : {};
  return {
    facts: objectArray(r.facts),
    sources: objectArray(r.sources),
    updatedAt: isoNN(updatedAt),
    ...freshness(updatedAt, await researchTtlDays(trx, organizationId)),
  };
}

/** A live contact (neither soft-deleted nor erased) of the organization, or 404. */
async function liveContact(trx: Tx, organizationId: string, id: string) {
  const row = await contactSelect(trx)
    .select(['c.research', 'c.research_updated_at'])
    .where('c.organization_id', '=', organizationId)
    .where('c.id', '=', id)
    .where('c.deleted_at', 'is', null)
    .where('c.erased_at', 'is', null)
    .executeTakeFirst();
  if (!row) throw notFound('contact');
  return row;
}

/** A list of the organization that is not soft-deleted (archived lists count), or undefined. */
async function activeList(trx: Tx, organizationId: string, id: string) {
  return trx
    .selectFrom('contact_lists')
    .select(['id', 'name'])
    .where('organization_id', '=', organizationId)
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
}

// ---------------------------------------------------------------- GET /contacts

type ListQuery = Parameters<Handler<'listContacts'>>[0]['query'];
// The search view and the table have the same columns as far as listing goes; typed loosely.
type SearchDb = Kysely<Database & { src: Database['contacts_search'] }>;

/** Rows a search examines in list order to learn how common its term is. */
const PROBE_ROWS = 300;
/** Matches among the probed rows from which walking in list order beats the trigram index. */
const PROBE_WALK_HITS = 2;

/** The filters shared by every way of listing, on a source aliased `c` (search text excluded). */
function filters(organizationId: string, query: ListQuery): Expression<SqlBool> {
  const conds: Expression<SqlBool>[] = [sql<SqlBool>`c.organization_id = ${organizationId}`];
  if (query.includeDeleted !== 'true') conds.push(sql<SqlBool>`c.deleted_at IS NULL AND c.erased_at IS NULL`);
  if (query.qualificationStatus !== undefined) conds.push(sql<SqlBool>`c.qualification_status = ${query.qualificationStatus}`);
  if (query.email !== undefined) conds.push(sql<SqlBool>`c.email_normalized = ${normalizeEmail(query.email)}`);
  return sql.join(conds, sql` AND `) as Expression<SqlBool>;
}

/** The searched text of a contact: exactly the expression of contacts_search_trgm_idx. */
const searched = (alias: string) => sql`(lower(${sql.ref(`${alias}.name`)}) || ' ' || ${sql.ref(`${alias}.email_normalized`)})`;
const pattern = (search: string) => `%${likeEscape(search)}%`;
/** Case-insensitive substring of name or email, answerable by the trigram index. */
const matches = (alias: string, search: string) => sql<SqlBool>`${searched(alias)} LIKE ${pattern(search)}`;
/** The same test in a form the trigram index cannot answer, so the rows are tested in list order. */
const matchesInOrder = (alias: string, search: string) => sql<SqlBool>`(${searched(alias)} || '') LIKE ${pattern(search)}`;

/** Rows strictly after the cursor position in (createdAt DESC, id DESC) order; true without one. */
function afterCursor(cursor: string | undefined): Expression<SqlBool> {
  const pos = decodeCursor(cursor);
  return pos ? sql<SqlBool>`(c.created_at, c.id) < (${pos.at}::timestamptz, ${pos.id})` : sql<SqlBool>`true`;
}

/**
 * The page's ids for a substring search without a list, as one subquery. Postgres cannot
 * estimate how many rows a substring matches, and either plan is a disaster in the wrong case
 * (walking a million rows for a rare term, or fetching and sorting a million matches of a common
 * one), so the query decides by looking: it tests the next PROBE_ROWS rows in list order. A term
 * found there at least PROBE_WALK_HITS times is common enough that walking on in list order fills
 * the page soon (about limit / frequency rows); a rarer term has few matches in all, which the
 * trigram index finds and which are then sorted. Both read the search view (see 0002_crm.sql),
 * scoped to the organization; only the chosen branch runs. The statement runs with its generic
 * plan (see listContacts): its branches are decided at execution, not by the planner.
 */
function searchIds(organizationId: string, query: ListQuery, search: string, limit: number) {
  const where = sql`${filters(organizationId, query)} AND ${afterCursor(query.cursor)}`;
  return sql`
    WITH probe AS (
      SELECT c.name, c.email_normalized FROM contacts_search c
      WHERE ${where} ORDER BY c.created_at DESC, c.id DESC LIMIT ${sql.lit(PROBE_ROWS)}
    ), walk AS (
      SELECT count(*) < ${sql.lit(PROBE_ROWS)} OR count(*) FILTER (WHERE ${matches('c', search)}) >= ${sql.lit(PROBE_WALK_HITS)} AS yes
      FROM probe c
    ), walked AS (
      SELECT c.id FROM contacts_search c
      WHERE (SELECT yes FROM walk) AND ${where} AND ${matchesInOrder('c', search)}
      ORDER BY c.created_at DESC, c.id DESC LIMIT ${sql.lit(limit + 1)}
    ), index_hits AS MATERIALIZED (
      SELECT c.id, c.created_at FROM contacts_search c
      WHERE NOT (SELECT yes FROM walk) AND ${where} AND ${matches('c', search)}
    )
    SELECT id FROM walked
    UNION ALL
    (SELECT id FROM index_hits ORDER BY created_at DESC, id DESC LIMIT ${sql.lit(limit + 1)})`;
}

/**
 * The page's ids of a list: contacts whose own list it is and contacts attached to it, each an
 * index walk of at most limit+1 rows, merged (optionally with a substring search).
 */
function listPageIds(trx: Tx, organizationId: string, query: ListQuery & { listId: string }, search: string | null, limit: number) {
  const db = trx as unknown as SearchDb;
  const opts = { cursor: query.cursor, limit, createdCol: 'c.created_at', idCol: 'c.id' };
  const base = () => {
    const q = db
      .selectFrom(`${search !== null ? 'contacts_search' : 'contacts'} as c` as 'src as c')
      .select(['c.id', 'c.created_at'])
      .where(filters(organizationId, query));
    return search !== null ? q.where(matches('c', search)) : q;
  };
  const own = keyset(base().where('c.list_id', '=', query.listId), opts);
  // Walked in the memberships' copy of the contact's order (list_memberships_page_idx).
  const attached = keyset(
    base()
      .innerJoin('list_memberships as m', (j) => j.onRef('m.organization_id', '=', 'c.organization_id').onRef('m.contact_id', '=', 'c.id'))
      .where('m.organization_id', '=', organizationId)
      .where('m.list_id', '=', query.listId)
      .where('m.deleted_at', 'is', null)
      .where('c.list_id', '<>', query.listId),
    { ...opts, createdCol: 'm.contact_created_at', idCol: 'm.contact_id' },
  );
  return db
    .selectFrom(own.as('o'))
    .select('o.id')
    .unionAll(db.selectFrom(attached.as('a')).select('a.id'));
}

const listContacts: Handler<'listContacts'> = async ({ trx, auth, query }) => {
  const org = auth.organizationId;
  const limit = query.limit ?? 50;
  decodeCursor(query.cursor); // a bad cursor is 400 whatever the filters
  const empty = { status: 200 as const, body: { data: [], nextCursor: null } };
  const search = query.q?.trim().toLowerCase() || null;
  let q = contactSelect(trx).where('c.organization_id', '=', org);
  let genericPlan = false;
  if (query.listId !== undefined) {
    if (!(await activeList(trx, org, query.listId))) return empty;
    const listQuery = { ...query, listId: query.listId };
    // ARRAY(...) runs the two short walks once, up front; as an IN subquery the planner may
    // instead re-run them for every contact of the organization it walks.
    q = q.where(sql<SqlBool>`c.id = ANY(ARRAY(${listPageIds(trx, org, listQuery, search, limit)}))`);
  } else if (search !== null) {
    q = q.where(sql<SqlBool>`c.id = ANY(ARRAY(${searchIds(org, query, search, limit)}))`);
    // The search decides its branch at execution (searchIds); planning it afresh for every term,
    // as Postgres otherwise does for a LIKE parameter, would cost more than running it.
    genericPlan = true;
  } else {
    // One index walk (live contacts, by status, or all with includeDeleted) straight to the rows.
    q = q.where(filters(org, query));
  }
  const paged = keyset(q, { cursor: query.cursor, limit, createdCol: 'c.created_at', idCol: 'c.id' });
  const rows = genericPlan ? await withGenericPlan(trx, () => paged.execute()) : await paged.execute();
  return { status: 200, body: jsonPage(rows, limit, (r) => ({ at: r.created_ms, id: r.id }), contactListItemJson) };
};

// ---------------------------------------------------------------- POST /contacts

/** The organization's `CRM import` list, if it has one yet. */
const findCrmImportList = (trx: Tx, organizationId: string) =>
  trx
    .selectFrom('contact_lists')
    .select(['id', 'name'])
    .where('organization_id', '=', organizationId)
    .where('is_crm_import', '=', true)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();

/** Creates the `CRM import` list on first use; a unique index keeps it single, so a concurrent create finds the other's. */
async function createCrmImportList(trx: Tx, organizationId: string, userId: string | null) {
  const owner = userId ?? (await organizationOwnerId(trx, organizationId));
  const created = await trx
    .insertInto('contact_lists')
    .values({
      organization_id: organizationId,
      id: newId('lst'),
      name: 'CRM import',
      user_id: owner,
      is_crm_import: true,
    })
    .onConflict((oc) => oc.column('organization_id').where(sql<SqlBool>`is_crm_import AND deleted_at IS NULL`).doNothing())
    .returning(['id', 'name'])
    .executeTakeFirst();
  return created ?? (await findCrmImportList(trx, organizationId))!;
}

export type CompanyInput = { name?: string; domain?: string };

/** The organization-wide filing lock: shared by every address lock, exclusive for a CSV import. */
const filingLockKey = (organizationId: string) => `contact-filing:${organizationId}`;

/**
 * Serializes, to commit, the writes of one organization that turn on one (normalized) address.
 * It also takes the organization's filing lock shared, so these writes wait while a CSV import
 * (which holds it exclusively instead of one lock per address) files the organization's contacts.
 */
export async function lockAddress(trx: Tx, organizationId: string, email: string): Promise<void> {
  await sql`select pg_advisory_xact_lock_shared(hashtextextended(${filingLockKey(organizationId)}, 0)),
    pg_advisory_xact_lock(hashtextextended(${`contact:${organizationId}:${email}`}, 0))`.execute(trx);
}

/** Takes the organization's filing lock exclusively, to commit: no address lock of the organization is granted meanwhile. */
export async function lockAllAddresses(trx: Tx, organizationId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${filingLockKey(organizationId)}, 0))`.execute(trx);
}

export interface ContactFiling {
  email: string;
  name?: string;
  title?: string | null;
  company?: CompanyInput | null;
  qualificationStatus?: QualificationStatus;
  fitScore?: number | null;
  urgencyScore?: number | null;
  leadSource?: string | null;
  /** The list to file on; absent: the organization's `CRM import` list (created on first use). */
  listId?: string;
  /** The contact's owner (the key's user); null: none. */
  userId: string | null;
}

/**
 * Files one person as POST /contacts does (rules 1-4, src/crm/contact-filing.ts): `on-list`, `live`
 * (attached to an explicit list) or `created`. What only single filing has is here: the address
 * lock, 404 for an unknown listId, the `CRM import` list (created only when a contact is), and the
 * 400 of a refused company domain. Shared by POST /contacts and inbound lead conversion.
 */
export async function fileContact(
  trx: Tx,
  organizationId: string,
  input: ContactFiling,
): Promise<{ id: string; outcome: 'on-list' | 'live' | 'created' }> {
  const org = organizationId;
  const email = normalizeEmail(input.email);
  // Concurrent creates of one person queue here, so each sees the other's record (rules 1-2).
  await lockAddress(trx, org, email);
  // The CRM import list is only looked up here: a 200 must not leave a new, empty list behind.
  const requested = input.listId !== undefined ? await activeList(trx, org, input.listId) : await findCrmImportList(trx, org);
  if (input.listId !== undefined && !requested) throw notFound('list');
  const [filed] = await fileContacts(
    trx,
    org,
    {
      listId: requested?.id ?? null,
      attach: input.listId !== undefined,
      listForNew: async () => requested?.id ?? (await createCrmImportList(trx, org, input.userId)).id,
      ownerId: input.userId,
      leadSource: input.leadSource ?? null,
    },
    [
      {
        email,
        name: input.name,
        title: input.title,
        company: input.company,
        qualificationStatus: input.qualificationStatus,
        fitScore: input.fitScore,
        urgencyScore: input.urgencyScore,
      },
    ],
  );
  if (filed.outcome === 'refused') throw domainProblem(filed, 'body.company.domain');
  return filed;
}

const createContact: Handler<'createContact'> = async ({ trx, auth, body }) => {
  const org = auth.organizationId;
  const filed = await fileContact(trx, org, {
    email: body.email,
    name: body.name,
    title: body.title,
    company: body.company,
    listId: body.listId,
    qualificationStatus: body.qualificationStatus,
    fitScore: body.fitScore,
    urgencyScore: body.urgencyScore,
    userId: auth.userId,
  });
  const contact = await contactById(trx, org, filed.id);
  if (filed.outcome === 'created') return { status: 201, body: contact };
  return filed.outcome === 'live'
    ? { status: 200, body: contact, headers: { 'X-Service-Existing-List': 'true' } }
    : { status: 200, body: contact };
};

// ---------------------------------------------------------------- one contact

const getContact: Handler<'getContact'> = async ({ trx, auth, params, query }) => {
  const row = await liveContact(trx, auth.organizationId, params.id);
  const include = new Set((query.include ?? '').split(',').map((s) => s.trim().toLowerCase()));
  const body = toContact(row);
  if (!include.has('research')) return { status: 200, body };
  return { status: 200, body: { ...body, research: await toResearch(trx, auth.organizationId, row.research, row.research_updated_at) } };
};

const getContactResearch: Handler<'getContactResearch'> = async ({ trx, auth, params }) => {
  const row = await liveContact(trx, auth.organizationId, params.id);
  const research = await toResearch(trx, auth.organizationId, row.research, row.research_updated_at);
  if (!research) throw new ProblemError('not-found', 'No research has been cached for this contact yet; run POST /contacts/{id}/research.');
  const r = row.research as Record<string, unknown>;
  const assessment = r.contactAssessment;
  return {
    status: 200,
    body: {
      contactId: row.id,
      companyId: typeof r.companyId === 'string' ? r.companyId : null,
      ...research,
      contactAssessment:
        assessment !== null && typeof assessment === 'object' && !Array.isArray(assessment)
          ? (assessment as Record<string, unknown>)
          : null,
      signalReasons: Array.isArray(r.signalReasons) ? r.signalReasons.filter((x): x is string => typeof x === 'string') : [],
    },
  };
};

/** Researches the contact (synchronous; see src/research/): 404 unknown, 400 no company domain, then the run. */
const researchContact: LongHandler<'researchContact'> = async ({ config, db, log, services, auth, params }) => {
  const org = auth.organizationId;
  const row = await withOrg(db, org, (trx) => liveContact(trx, org, params.id));
  if (row.company_ref === null || (row.company_domain ?? row.company_domain_normalized) === null) {
    throw invalid('The contact has no linked company with a domain to research; link one with PATCH /contacts/{id} (companyId).');
  }
  const result = await runContactResearch(
    { config, db, log, services },
    org,
    { id: row.id, name: row.name, title: row.title, fitScore: row.fit_score, urgencyScore: row.urgency_score },
    { id: row.company_ref, name: row.company_name ?? row.company_domain_normalized ?? row.company_ref },
  );
  return { status: 200, body: result };
};

const PATCHABLE = {
  name: 'name',
  title: 'title',
  phone: 'phone',
  notes: 'notes',
  leadSource: 'lead_source',
  companyId: 'company_id',
  qualificationStatus: 'qualification_status',
  fitScore: 'fit_score',
  urgencyScore: 'urgency_score',
} as const;

const updateContact: Handler<'updateContact'> = async ({ trx, auth, params, body }) => {
  const org = auth.organizationId;
  const current = await trx
    .selectFrom('contacts')
    .selectAll()
    .where('organization_id', '=', org)
    .where('id', '=', params.id)
    .where('deleted_at', 'is', null)
    .where('erased_at', 'is', null)
    .forUpdate()
    .executeTakeFirst();
  if (!current) throw notFound('contact');
  if (body.companyId !== undefined && body.companyId !== null) {
    const co = await trx
      .selectFrom('companies')
      .select('id')
      .where('organization_id', '=', org)
      .where('id', '=', body.companyId)
      .executeTakeFirst();
    if (!co) throw invalid('companyId names no company of this organization.', 'body.companyId');
  }
  const changes: Record<string, unknown> = {};
  for (const [key, column] of Object.entries(PATCHABLE)) {
    const value = (body as Record<string, unknown>)[key];
    if (value !== undefined && value !== current[column]) changes[column] = value;
  }
  const updated = Object.keys(changes).length > 0;
  if (updated) {
    await trx
      .updateTable('contacts')
      .set({ ...changes, updated_at: sql<Date>`now_ms()` })
      .where('organization_id', '=', org)
      .where('id', '=', params.id)
      .execute();
    if (changes.qualification_status !== undefined) {
      await recordStageChanges(trx, org, 'api', [
        { contactId: params.id, from: current.qualification_status, to: changes.qualification_status as string },
      ]);
    }
  }
  return { status: 200, body: { id: params.id, updated } };
};

const deleteContact: Handler<'deleteContact'> = async ({ trx, auth, params }) => {
  const org = auth.organizationId;
  const first = await trx
    .updateTable('contacts')
    .set({ deleted_at: sql<Date>`now_ms()`, updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', org)
    .where('id', '=', params.id)
    .where('deleted_at', 'is', null)
    .returning('deleted_at')
    .executeTakeFirst();
  let deletedAt = first?.deleted_at ?? null;
  if (first) {
    await emit(trx, org, { type: 'contact.deleted', resource: { type: 'Contact', id: params.id }, data: { contactId: params.id } });
    // A removed contact is out of the send queue at once (and out of it for good).
    await cancelQueued(trx, org, { contactId: params.id }, 'contact_removed');
  } else {
    const prior = await trx
      .selectFrom('contacts')
      .select('deleted_at')
      .where('organization_id', '=', org)
      .where('id', '=', params.id)
      .executeTakeFirst();
    if (!prior) throw notFound('contact');
    deletedAt = prior.deleted_at;
  }
  const at = deletedAt!;
  return {
    status: 200,
    body: { id: params.id, deleted: true, deletedAt: isoNN(at), undoAvailableUntil: isoNN(new Date(at.getTime() + UNDO_WINDOW_MS)) },
  };
};

// ---------------------------------------------------------------- erase

const eraseContact: Handler<'eraseContact'> = async ({ trx, auth, params, body, config, services }) => {
  if (auth.userId === null || !ERASE_ROLES.includes(auth.userRole ?? '')) {
    throw new ProblemError(
      'role-required',
      'Erasing a contact needs an API key attributed to a person with role MANAGER, ADMIN or OWNER; the scope alone is not enough.',
    );
  }
  const secret = usableErasureSecret(config.erasureHashSecret);
  if (!secret) throw new ProblemError('erasure-not-configured');
  const org = auth.organizationId;
  const find = () =>
    trx
      .selectFrom('contacts')
      .select(['id', 'email_normalized', 'erased_at'])
      .where('organization_id', '=', org)
      .where('id', '=', params.id)
      .executeTakeFirst();
  const seen = await find();
  if (!seen) throw notFound('contact');
  // Erasures of one address queue on it before locking any record, so two erasures naming
  // different records of that address cannot deadlock; the second then finds it erased.
  await lockAddress(trx, org, seen.email_normalized);
  const contact = (await find())!;
  if (contact.erased_at !== null) {
    return {
      status: 200,
      body: {
        id: contact.id,
        erased: true,
        erasedAt: isoNN(contact.erased_at),
        alreadyErased: true,
        erasedContactIds: [],
        note: ERASE_NOTE,
      },
    };
  }
  const at = (await sql<{ at: Date }>`select now_ms() as at`.execute(trx)).rows[0].at;
  const erasedContactIds = await eraseAddress(
    trx,
    {
      organizationId: org,
      requesterRef: body.requesterRef.trim(),
      reason: body.reason.trim(),
      keyId: auth.keyId,
      userId: auth.userId,
      secret,
      services,
    },
    contact.id,
    contact.email_normalized,
    at,
  );
  return {
    status: 200,
    body: { id: contact.id, erased: true, erasedAt: isoNN(at), alreadyErased: false, erasedContactIds, note: ERASE_NOTE },
  };
};

// ---------------------------------------------------------------- sequences

const pauseContactSequence: Handler<'pauseContactSequence'> = async ({ trx, auth, params, body }) => {
  const org = auth.organizationId;
  const contact = await trx
    .selectFrom('contacts')
    .select('id')
    .where('organization_id', '=', org)
    .where('id', '=', params.id)
    .where('deleted_at', 'is', null)
    .where('erased_at', 'is', null)
    .executeTakeFirst();
  if (!contact) throw notFound('contact');
  const pausedCount = await pauseSequences(trx, org, [contact.id], body?.reason ?? null);
  return { status: 200, body: { contactId: contact.id, pausedCount } };
};

export const contactHandlers = {
  listContacts,
  createContact,
  getContact,
  updateContact,
  deleteContact,
  eraseContact,
  getContactResearch,
  researchContact,
  pauseContactSequence,
};
