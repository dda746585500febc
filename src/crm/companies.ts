// Companies: identity is (organization, normalized domain). A repeat create never duplicates and
// never overwrites a curated name; it only backfills a name onto an unnamed company.
import { type Selectable, sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { Companies } from '../../db/schema.js';
import type { Handler } from '../http/handler.js';
import { keyset, page } from '../http/paging.js';
import { invalid, notFound, ProblemError } from '../http/problems.js';
import type { Clock } from '../platform/clock.js';
import { iso, isoNN, newId } from '../platform/ids.js';
import { isFresh, storedDossier } from '../research/runs.js';
import { isFreemailDomain, normalizeDomain } from './domains.js';

export type CompanyRow = Selectable<Companies>;

/** Escapes LIKE wildcards so user text matches literally (backslash is Postgres's default escape). */
export const likeEscape = (s: string): string => s.replace(/[\\%_]/g, (c) => `\\${c}`);

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
/** An array of objects from a stored free-shape value; [] for anything malformed. */
export const objectArray = (v: unknown): Record<string, unknown>[] => (Array.isArray(v) ? v.filter(isObject) : []);
/** A non-negative integer from a stored value, or null. */
export const nonNegativeInt = (v: unknown): number | null => (Number.isInteger(v) && (v as number) >= 0 ? (v as number) : null);

/** The organization's research TTL in days: freshness is always judged by its current value. */
export async function researchTtlDays(trx: Tx, organizationId: string): Promise<number> {
  const o = await trx.selectFrom('organizations').select('research_ttl_days').where('id', '=', organizationId).executeTakeFirstOrThrow();
  return o.research_ttl_days;
}

/** Freshness of cached research: updatedAt plus the organization's TTL still after the clock's now. */
export const freshness = (updatedAt: Date, ttlDays: number, clock: Clock) => ({
  ttlDays,
  isFresh: isFresh(updatedAt, ttlDays, clock.now()),
});

export function toCompany(r: CompanyRow) {
  return {
    id: r.id,
    name: r.name ?? r.domain ?? r.domain_normalized,
    domain: r.domain,
    domainNormalized: r.domain_normalized,
    industry: r.industry,
    companySize: r.company_size,
    headquarters: r.headquarters,
    tier: r.tier,
    tags: r.tags ?? [],
    ownerSalesPersonId: r.owner_sales_person_id,
    researchUpdatedAt: iso(r.research_updated_at),
    sourcesCount: nonNegativeInt(r.sources_count) ?? 0,
    createdAt: isoNN(r.created_at),
    updatedAt: isoNN(r.updated_at),
  };
}

/** Why a company domain input is refused: not a domain name or URL, or a free mail provider's. */
export type DomainRefusal = { refused: 'invalid' } | { refused: 'freemail'; domain: string };

/** The normalized domain a company is known by, or why the input cannot name a company. */
export function companyDomain(domainInput: string): string | DomainRefusal {
  const domain = normalizeDomain(domainInput);
  if (!domain) return { refused: 'invalid' };
  return isFreemailDomain(domain) ? { refused: 'freemail', domain } : domain;
}

/** The 400 of a refused company domain (`field` names the input). */
export function domainProblem(refusal: DomainRefusal, field: string): ProblemError {
  if (refusal.refused === 'invalid') return invalid(`${field} is not a valid domain name or URL.`, field);
  return new ProblemError('freemail-domain', `${refusal.domain} is a free email provider; use the company's own domain.`, {
    errors: [{ field, message: 'is a freemail provider domain' }],
  });
}

/**
 * The company of a domain (bare or URL), created when the organization has none; an existing
 * unnamed company gets `name`. 400 for an invalid or freemail domain (`field` names the input).
 */
export async function findOrCreateCompany(
  trx: Tx,
  organizationId: string,
  domainInput: string,
  name: string | undefined,
  field: string,
): Promise<{ row: CompanyRow; created: boolean }> {
  const domain = companyDomain(domainInput);
  if (typeof domain !== 'string') throw domainProblem(domain, field);
  const created = await trx
    .insertInto('companies')
    .values({
      organization_id: organizationId,
      id: newId('cmp'),
      name: name ?? null,
      domain,
      domain_normalized: domain,
    })
    .onConflict((oc) => oc.columns(['organization_id', 'domain_normalized']).doNothing())
    .returningAll()
    .executeTakeFirst();
  if (created) return { row: created, created: true };
  let row = await trx
    .selectFrom('companies')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('domain_normalized', '=', domain)
    .forUpdate()
    .executeTakeFirstOrThrow();
  if (name !== undefined && row.name === null) {
    row = await trx
      .updateTable('companies')
      .set({ name, updated_at: sql<Date>`now_ms()` })
      .where('organization_id', '=', organizationId)
      .where('id', '=', row.id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }
  return { row, created: false };
}

type ListQuery = Parameters<Handler<'listCompanies'>>[0]['query'];

/** A page of GET /companies: by creation, optionally narrowed by a search term. */
export async function companyPage(trx: Tx, organizationId: string, query: ListQuery) {
  const org = organizationId;
  const limit = query.limit ?? 50;
  let q = trx
    .selectFrom('companies as c')
    .select(['c.id', 'c.name', 'c.domain', 'c.domain_normalized', 'c.created_at'])
    .where('c.organization_id', '=', org);
  const search = query.search?.trim().toLowerCase();
  if (search) {
    // Name substring (trigram index) or domain prefix (pattern index), selected through the
    // search view so the indexes apply under row-level security (see 0002_crm.sql).
    const hits = keyset(
      trx
        .selectFrom('companies_search as s')
        .select(['s.id', 's.created_at'])
        .where('s.organization_id', '=', org)
        .where((eb) =>
          eb.or([eb(sql`lower(s.name)`, 'like', `%${likeEscape(search)}%`), eb('s.domain_normalized', 'like', `${likeEscape(search)}%`)]),
        ),
      { cursor: query.cursor, limit, createdCol: 's.created_at', idCol: 's.id' },
    );
    q = q.where('c.id', 'in', trx.selectFrom(hits.as('h')).select('h.id'));
  }
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'c.created_at', idCol: 'c.id' }).execute();
  return page(
    rows,
    limit,
    (r) => ({ at: r.created_at, id: r.id }),
    (r) => ({
      id: r.id,
      name: r.name ?? r.domain ?? r.domain_normalized,
      domain: r.domain,
      createdAt: isoNN(r.created_at),
    }),
  );
}

/** One company of the organization, or 404. */
export async function companyById(trx: Tx, organizationId: string, id: string): Promise<CompanyRow> {
  const row = await trx
    .selectFrom('companies')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!row) throw notFound('company');
  return row;
}

/** Cached research (CompanyResearch); 404 until research has been computed (researchUpdatedAt null). */
export async function companyResearch(trx: Tx, organizationId: string, id: string, clock: Clock) {
  const row = await companyById(trx, organizationId, id);
  if (row.research_updated_at === null)
    throw new ProblemError('not-found', 'No research has been computed for this company yet; run POST /companies/{id}/research.');
  const r = isObject(row.research) ? row.research : {};
  return {
    companyId: row.id,
    summary: typeof r.summary === 'string' ? r.summary : null,
    facts: objectArray(r.facts),
    researchSources: objectArray(r.researchSources),
    recentNews: objectArray(r.recentNews),
    painPoints: objectArray(r.painPoints),
    coverage: storedDossier(r)?.coverage ?? null,
    updatedAt: isoNN(row.research_updated_at),
    ...freshness(row.research_updated_at, await researchTtlDays(trx, organizationId), clock),
  };
}
