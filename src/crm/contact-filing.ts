// Contact filing: the one implementation of POST /contacts' rules 1-4, set-based for any number of
// people at once. POST /contacts and lead conversion file one person through it
// (fileContact below), the operator's CSV import a batch of up to 1,000 rows
// (src/crm/contact-import.ts); each caller holds the filing locks first (lockAddress, lockAllAddresses
// in src/crm/contact-locks.ts), so no other filing of an address interleaves.
//
// Per address, in one lookup: already on the list -> `on-list`; else the oldest live record
// elsewhere (not deleted nor erased, on a list neither deleted, archived nor a test list) ->
// `live`, attached to the list when the caller asks (an explicit list); else a new contact on the
// list (`created`), its company found or created by normalized domain (an unnamed one gets the
// row's company name), else matched by case-insensitive name (never created). The company input
// only matters when a contact is created: its domain is checked then (`refused`: not a domain, or
// a free mail provider's), as a 200 of POST /contacts ignores it. An address given on several rows
// is filed as if the rows came one after another: the first row that can create does, the later
// ones find it on the list. About five statements, whatever the number of rows.
import { type SqlBool, sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { organizationOwnerId } from '../account/people.js';
import { notFound } from '../http/problems.js';
import { newId } from '../platform/ids.js';
import { companyDomain, type DomainRefusal, domainProblem } from './companies.js';
import { lockAddress } from './contact-locks.js';
import { normalizeEmail } from './domains.js';
import { activeList } from './lists.js';
import type { QualificationStatus } from './qualification.js';

/** One person to file; the fields beyond the address are used only when a contact is created. */
export interface FilingRow {
  /** The normalized address (normalizeEmail). */
  email: string;
  name?: string;
  title?: string | null;
  /** As given: the domain (bare or URL) is normalized and checked only when a contact is created. */
  company?: { name?: string; domain?: string } | null;
  qualificationStatus?: string;
  fitScore?: number | null;
  urgencyScore?: number | null;
}

export interface FilingTarget {
  /** The list filed on; null when it does not exist yet (the `CRM import` list before first use). */
  listId: string | null;
  /** Whether a live record elsewhere is attached to the list (an explicit list, not the `CRM import` fallback). */
  attach: boolean;
  /** The list new contacts go on; called once, and only when a contact is created. */
  listForNew: () => Promise<string>;
  /** Owner and lead source of the contacts created. */
  ownerId: string | null;
  leadSource: string | null;
}

export type Filed = { outcome: 'on-list' | 'live' | 'created'; id: string } | ({ outcome: 'refused' } & DomainRefusal);

/** Files the rows on the target list, in the caller's transaction; one result per row, in order. */
export async function fileContacts(trx: Tx, org: string, target: FilingTarget, rows: readonly FilingRow[]): Promise<Filed[]> {
  const out: Filed[] = new Array(rows.length);
  const emails = [...new Set(rows.map((r) => r.email))];
  if (!emails.length) return out;

  // Rules 1-3 in one lookup by address (the email index): the record already on the list, else
  // the oldest live one elsewhere.
  const resolved = new Map<string, Filed>();
  const found = await sql<{ email: string; id: string; created_at: Date; on_list: boolean; live: boolean }>`
    SELECT c.email_normalized AS email, c.id, c.created_at, coalesce(c.list_id = ${target.listId}, false) AS on_list,
           (c.erased_at IS NULL AND l.deleted_at IS NULL AND l.archived_at IS NULL AND NOT l.is_test) AS live
    FROM contacts c JOIN contact_lists l ON l.organization_id = c.organization_id AND l.id = c.list_id
    WHERE c.organization_id = ${org} AND c.email_normalized = ANY(${emails}::text[]) AND c.deleted_at IS NULL
    ORDER BY c.created_at, c.id`.execute(trx);
  for (const c of found.rows) if (c.on_list) resolved.set(c.email, { outcome: 'on-list', id: c.id });
  const attach: { id: string; at: Date }[] = [];
  for (const c of found.rows) {
    if (!c.live || resolved.has(c.email)) continue;
    resolved.set(c.email, { outcome: 'live', id: c.id });
    attach.push({ id: c.id, at: c.created_at });
  }
  if (attach.length && target.attach && target.listId !== null) {
    await sql`
      INSERT INTO list_memberships (organization_id, list_id, contact_id, contact_created_at)
      SELECT ${org}, ${target.listId}, u.id, u.at FROM unnest(${attach.map((x) => x.id)}::text[], ${attach.map((x) => x.at)}::timestamptz[]) AS u(id, at)
      ON CONFLICT (organization_id, list_id, contact_id) DO UPDATE SET deleted_at = NULL`.execute(trx);
  }

  // Rule 4: per new address, the first row whose company domain is acceptable creates; rows
  // before it with a refused domain are refused, rows after it find the new contact on the list.
  const creators = new Map<string, { row: FilingRow; index: number; domain?: string }>();
  const repeats: { index: number; email: string }[] = [];
  rows.forEach((row, index) => {
    const known = resolved.get(row.email);
    if (known) {
      out[index] = known;
      return;
    }
    if (creators.has(row.email)) {
      repeats.push({ index, email: row.email });
      return;
    }
    const domain = row.company?.domain === undefined ? undefined : companyDomain(row.company.domain);
    if (domain !== undefined && typeof domain !== 'string') {
      out[index] = { outcome: 'refused', ...domain };
      return;
    }
    creators.set(row.email, { row, index, domain });
  });
  if (!creators.size) return out;
  const toCreate = [...creators.values()];

  // Companies by domain (created on demand; an unnamed one gets the first row's name), else by name.
  const byDomain = new Map<string, string | null>();
  const names = new Set<string>();
  for (const { row, domain } of toCreate) {
    if (domain !== undefined) {
      if (!byDomain.has(domain) || byDomain.get(domain) === null) byDomain.set(domain, row.company?.name ?? null);
    } else if (row.company?.name !== undefined) names.add(row.company.name.trim().toLowerCase());
  }
  const companyByDomain = await companiesByDomain(trx, org, byDomain);
  const companyByName = new Map<string, string>();
  if (names.size) {
    const hits = await sql<{ key: string; id: string }>`
      SELECT DISTINCT ON (lower(name)) lower(name) AS key, id FROM companies_search
      WHERE organization_id = ${org} AND lower(name) = ANY(${[...names]}::text[])
      ORDER BY lower(name), created_at, id`.execute(trx);
    for (const h of hits.rows) companyByName.set(h.key, h.id);
  }
  const companyOf = ({ row, domain }: { row: FilingRow; domain?: string }) =>
    domain !== undefined
      ? (companyByDomain.get(domain) ?? null)
      : row.company?.name !== undefined
        ? (companyByName.get(row.company.name.trim().toLowerCase()) ?? null)
        : null;

  const listId = await target.listForNew();
  const ids = toCreate.map(() => newId('con'));
  await sql`
    INSERT INTO contacts (organization_id, id, list_id, owner_user_id, email, email_normalized, name, title, company_id, lead_source,
                          qualification_status, fit_score, urgency_score)
    SELECT ${org}, u.id, ${listId}, ${target.ownerId}, u.email, u.email, u.name, u.title, u.company_id, ${target.leadSource}, u.status, u.fit, u.urgency
    FROM unnest(${ids}::text[], ${toCreate.map((x) => x.row.email)}::text[], ${toCreate.map((x) => x.row.name ?? '')}::text[],
                ${toCreate.map((x) => x.row.title ?? null)}::text[], ${toCreate.map(companyOf)}::text[],
                ${toCreate.map((x) => x.row.qualificationStatus ?? 'NEW')}::text[], ${toCreate.map((x) => x.row.fitScore ?? null)}::int[],
                ${toCreate.map((x) => x.row.urgencyScore ?? null)}::int[])
      AS u(id, email, name, title, company_id, status, fit, urgency)`.execute(trx);
  const createdId = new Map<string, string>();
  toCreate.forEach((c, i) => {
    out[c.index] = { outcome: 'created', id: ids[i] };
    createdId.set(c.row.email, ids[i]);
  });
  for (const r of repeats) out[r.index] = { outcome: 'on-list', id: createdId.get(r.email)! };
  return out;
}

/**
 * Company ids by normalized domain, inserting the missing companies and naming unnamed ones, in
 * one statement. A company a concurrent transaction commits meanwhile (POST /companies) is skipped
 * by the insert yet invisible to the statement's snapshot, so a domain left unanswered is asked
 * once more, by a statement that sees it.
 */
async function companiesByDomain(trx: Tx, org: string, wanted: Map<string, string | null>): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  let domains = [...wanted.keys()];
  for (let round = 0; round < 2 && domains.length; round += 1) {
    const rows = await sql<{ id: string; domain_normalized: string }>`
      WITH v AS (SELECT * FROM unnest(${domains.map(() => newId('cmp'))}::text[], ${domains}::text[], ${domains.map((d) => wanted.get(d) ?? null)}::text[]) AS v(id, domain, name)),
      ins AS (
        INSERT INTO companies (organization_id, id, name, domain, domain_normalized)
        SELECT ${org}, v.id, v.name, v.domain, v.domain FROM v
        ON CONFLICT (organization_id, domain_normalized) DO NOTHING
        RETURNING id, domain_normalized
      ), named AS (
        UPDATE companies c SET name = v.name, updated_at = now_ms() FROM v
        WHERE c.organization_id = ${org} AND c.domain_normalized = v.domain AND c.name IS NULL AND v.name IS NOT NULL
        RETURNING c.id, c.domain_normalized
      )
      SELECT id, domain_normalized FROM ins
      UNION SELECT id, domain_normalized FROM companies WHERE organization_id = ${org} AND domain_normalized = ANY(${domains}::text[])`.execute(
      trx,
    );
    for (const c of rows.rows) ids.set(c.domain_normalized, c.id);
    domains = domains.filter((d) => !ids.has(d));
  }
  return ids;
}

// ---------------------------------------------------------------- one person (POST /contacts, lead conversion)

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
 * Files one person as POST /contacts does (rules 1-4, fileContacts above): `on-list`, `live`
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
