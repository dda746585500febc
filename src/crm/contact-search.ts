// GET /contacts: the filtered keyset listing of contacts, with a substring search that decides by
// looking how to find its term, and the page of a list (its own contacts and attached ones).
import { type Expression, type SqlBool, sql } from 'kysely';
import { type Tx, withGenericPlan } from '../../db/database.js';
import type { Handler } from '../http/handler.js';
import { decodeCursor, jsonPage, keyset } from '../http/paging.js';
import { likeEscape } from './companies.js';
import { contactListItemJson, contactSelect, type toContact } from './contact-view.js';
import { normalizeEmail } from './domains.js';
import { activeList } from './lists.js';
import { isLiveContact } from './live-contacts.js';

type ListQuery = Parameters<Handler<'listContacts'>>[0]['query'];
/** An item of GET /contacts, as contactListItemJson writes it. */
type ContactListItem = ReturnType<typeof toContact> & { deletedAt: string | null; erasedAt: string | null };

/** Rows a search examines in list order to learn how common its term is. */
const PROBE_ROWS = 300;
/** Matches among the probed rows from which walking in list order beats the trigram index. */
const PROBE_WALK_HITS = 2;

/** The filters shared by every way of listing, on a source aliased `c` (search text excluded). */
function filters(organizationId: string, query: ListQuery): Expression<SqlBool> {
  const conds: Expression<SqlBool>[] = [sql<SqlBool>`c.organization_id = ${organizationId}`];
  if (query.includeDeleted !== 'true') conds.push(isLiveContact('c'));
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
 * plan (see contactPage): its branches are decided at execution, not by the planner.
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
  const opts = { cursor: query.cursor, limit, createdCol: 'c.created_at', idCol: 'c.id' };
  const base = () => {
    // The search view's columns are the table's, with the same types: either source is typed as the view.
    const q = trx
      .selectFrom(`${search !== null ? 'contacts_search' : 'contacts'} as c` as 'contacts_search as c')
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
  return trx
    .selectFrom(own.as('o'))
    .select('o.id')
    .unionAll(trx.selectFrom(attached.as('a')).select('a.id'));
}

/** A page of GET /contacts, its items written straight to JSON. */
export async function contactPage(trx: Tx, organizationId: string, query: ListQuery) {
  const org = organizationId;
  const limit = query.limit ?? 50;
  decodeCursor(query.cursor); // a bad cursor is 400 whatever the filters
  const empty = { data: [] as ContactListItem[], nextCursor: null };
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
  return jsonPage<(typeof rows)[number], ContactListItem>(rows, limit, (r) => ({ at: r.created_ms, id: r.id }), contactListItemJson);
}
