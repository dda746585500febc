// Reading contacts and mapping them to the API's shapes: the Contact shape (and the JSON writer of
// GET /contacts' items), a live contact or 404, and the research a contact has cached.
import { epochMs, type Tx } from '../../db/database.js';
import { notFound, ProblemError } from '../http/problems.js';
import type { Clock } from '../platform/clock.js';
import { isoNN, msIso, msJson } from '../platform/ids.js';
import { freshness, objectArray, researchTtlDays } from './companies.js';
import { isLiveContact } from './live-contacts.js';
import type { QualificationStatus } from './qualification.js';

/** Contacts with what the Contact shape needs from their company and (live) list. */
export function contactSelect(trx: Tx) {
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
export type ContactRow = Awaited<ReturnType<ReturnType<typeof contactSelect>['executeTakeFirstOrThrow']>>;

/** The Contact shape: the one mapping of a contact. */
export function toContact(r: ContactRow) {
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
export function contactListItemJson(r: ContactRow): string {
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
async function toResearch(trx: Tx, organizationId: string, research: unknown, updatedAt: Date | null, clock: Clock) {
  if (updatedAt === null) return null;
  const r = research !== null && typeof research === 'object' && !Array.isArray(research) ? (research as Record<string, unknown>) : {};
  return {
    facts: objectArray(r.facts),
    sources: objectArray(r.sources),
    updatedAt: isoNN(updatedAt),
    ...freshness(updatedAt, await researchTtlDays(trx, organizationId), clock),
  };
}

/** A live contact (neither soft-deleted nor erased) of the organization, or 404. */
export async function liveContact(trx: Tx, organizationId: string, id: string) {
  const row = await contactSelect(trx)
    .select(['c.research', 'c.research_updated_at'])
    .where('c.organization_id', '=', organizationId)
    .where('c.id', '=', id)
    .where(isLiveContact('c'))
    .executeTakeFirst();
  if (!row) throw notFound('contact');
  return row;
}

/** GET /contacts/{id}: a live contact, with its cached research when asked (ContactDetail). */
export async function contactDetail(trx: Tx, organizationId: string, id: string, withResearch: boolean, clock: Clock) {
  const row = await liveContact(trx, organizationId, id);
  const body = toContact(row);
  if (!withResearch) return body;
  return { ...body, research: await toResearch(trx, organizationId, row.research, row.research_updated_at, clock) };
}

/** GET /contacts/{id}/research: a live contact's cached research; 404 before the first run. */
export async function contactResearch(trx: Tx, organizationId: string, id: string, clock: Clock) {
  const row = await liveContact(trx, organizationId, id);
  const research = await toResearch(trx, organizationId, row.research, row.research_updated_at, clock);
  if (!research) throw new ProblemError('not-found', 'No research has been cached for this contact yet; run POST /contacts/{id}/research.');
  const r = row.research as Record<string, unknown>;
  const assessment = r.contactAssessment;
  return {
    contactId: row.id,
    companyId: typeof r.companyId === 'string' ? r.companyId : null,
    ...research,
    contactAssessment:
      assessment !== null && typeof assessment === 'object' && !Array.isArray(assessment) ? (assessment as Record<string, unknown>) : null,
    signalReasons: Array.isArray(r.signalReasons) ? r.signalReasons.filter((x): x is string => typeof x === 'string') : [],
  };
}
