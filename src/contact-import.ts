// CSV import of contacts into a list (the operator row POST .../lists/{listId}/import).
//
// The body is read as a stream: bytes are counted (64 MiB at most) and decoded as strict UTF-8,
// csv-parse splits records (RFC 4180: quotes, a header row, the same cell count on every row),
// and rows are filed in batches of BATCH_ROWS with a handful of set-based statements each, so
// memory holds one batch whatever the file's size. Everything happens in the caller's
// transaction: a file that turns out malformed half-way is a 400 and its rollback leaves nothing.
//
// Each row is checked against POST /contacts' own body validator and filed by the same rules
// (handlers/contacts.ts fileContact): already on the list -> existing; live on another list (not
// archived, not a test list) -> existing and attached to this list; otherwise a new contact on
// the list, its company found or created by normalized domain, else matched by name. The
// organization's filing lock is held exclusively instead of one lock per address (a transaction
// cannot hold 100,000 advisory locks), so no other filing of the organization interleaves.
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parse, CsvError } from 'csv-parse';
import { sql } from 'kysely';
import type { Tx } from '../db/database.js';
import bodyValidators from '../generated/bodies.cjs';
import { emit } from './events.js';
import { newId } from './ids.js';
import { ProblemError } from './http/problems.js';
import { isFreemailDomain, normalizeDomain, normalizeEmail } from './domains.js';
import { suppressedAmong } from './suppression-match.js';
import { lockAllAddresses } from '../handlers/contacts.js';

/** The body limit of the import route (x-body-limit-bytes in spec/admin). */
export const CSV_MAX_BYTES = 64 * 1024 * 1024;
/** Data rows one file may hold. */
export const CSV_MAX_ROWS = 200_000;
/** Rows filed per batch (a few statements each). */
const BATCH_ROWS = 1000;
/** Non-created rows whose outcome the answer lists. */
export const OUTCOME_LIMIT = 1000;
/** One record (row) of the file at most; a longer one is malformed. */
const MAX_RECORD_BYTES = 1024 * 1024;

type Field = 'email' | 'name' | 'firstName' | 'lastName' | 'title' | 'companyName' | 'companyDomain' | 'qualificationStatus' | 'fitScore' | 'urgencyScore';

/** Accepted header spellings, compared lowercased without spaces, `_` and `-`. */
const HEADERS: Record<string, Field> = {
  email: 'email', emailaddress: 'email', mail: 'email', workemail: 'email', businessemail: 'email',
  name: 'name', fullname: 'name', contactname: 'name',
  firstname: 'firstName', givenname: 'firstName', lastname: 'lastName', surname: 'lastName', familyname: 'lastName',
  title: 'title', jobtitle: 'title', position: 'title',
  company: 'companyName', companyname: 'companyName', organization: 'companyName', organisation: 'companyName', account: 'companyName', accountname: 'companyName',
  companydomain: 'companyDomain', domain: 'companyDomain', website: 'companyDomain', companywebsite: 'companyDomain', url: 'companyDomain',
  qualificationstatus: 'qualificationStatus', status: 'qualificationStatus', leadstatus: 'qualificationStatus',
  fitscore: 'fitScore', fit: 'fitScore', urgencyscore: 'urgencyScore', urgency: 'urgencyScore',
};

export interface ImportOutcome {
  line: number; outcome: 'existing' | 'invalid'; email: string | null; contactId: string | null; existingList: boolean; reason: string | null;
}

export interface ImportResult {
  listId: string; rows: number; created: number; existing: number; attached: number; invalid: number; suppressed: number;
  outcomes: ImportOutcome[]; outcomesTruncated: boolean;
}

/** A row that passed POST /contacts' checks. */
interface Row {
  line: number; rawEmail: string; email: string; name?: string; title?: string;
  company: { name?: string; domain?: string } | null; qualificationStatus?: string; fitScore?: number; urgencyScore?: number;
}

const malformed = (detail: string) => new ProblemError('malformed-csv', detail);

/** The body's bytes as strict UTF-8 text, refusing more than CSV_MAX_BYTES. */
async function* utf8(body: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let bytes = 0;
  try {
    for await (const chunk of body) {
      bytes += chunk.byteLength;
      if (bytes > CSV_MAX_BYTES) throw new ProblemError('payload-too-large', `A CSV import may be at most ${CSV_MAX_BYTES} bytes (64 MiB).`);
      const text = decoder.decode(chunk, { stream: true });
      if (text) yield text;
    }
    const rest = decoder.decode();
    if (rest) yield rest;
  } catch (e) {
    if (e instanceof TypeError) throw malformed(`The file is not UTF-8 text (after about ${bytes} bytes).`);
    throw e;
  }
}

/** Column index -> field, from the header row; ignores unknown columns, refuses a file without an email column. */
function mapHeader(header: string[]): Map<number, Field> {
  const map = new Map<number, Field>();
  const taken = new Set<Field>();
  header.forEach((h, i) => {
    const f = HEADERS[h.toLowerCase().replace(/[\s_-]+/g, '')];
    if (f && !taken.has(f)) { map.set(i, f); taken.add(f); }
  });
  if (!taken.has('email')) throw malformed(`The header row has no email column (found: ${header.slice(0, 20).map((h) => JSON.stringify(h)).join(', ')}).`);
  return map;
}

const createContactBody = bodyValidators.createContact_body!;

/** A record as POST /contacts' body, checked by its validator; a string reason when it would be a 400 there. */
function toRow(record: string[], columns: Map<number, Field>, line: number, listId: string): Row | { reason: string; rawEmail: string | null } {
  const v: Partial<Record<Field, string>> = {};
  for (const [i, f] of columns) {
    const cell = record[i]?.trim();
    if (cell) v[f] = cell;
  }
  const name = v.name ?? ([v.firstName, v.lastName].filter(Boolean).join(' ') || undefined);
  const score = (s: string | undefined) => (s === undefined ? undefined : /^\d{1,9}$/.test(s) ? Number(s) : s);
  const company = v.companyName !== undefined || v.companyDomain !== undefined
    ? { ...(v.companyName !== undefined ? { name: v.companyName } : {}), ...(v.companyDomain !== undefined ? { domain: v.companyDomain } : {}) } : undefined;
  const body = {
    email: v.email, listId, ...(name !== undefined ? { name } : {}), ...(v.title !== undefined ? { title: v.title } : {}),
    ...(company ? { company } : {}),
    ...(v.qualificationStatus !== undefined ? { qualificationStatus: v.qualificationStatus.toUpperCase() } : {}),
    ...(v.fitScore !== undefined ? { fitScore: score(v.fitScore) } : {}),
    ...(v.urgencyScore !== undefined ? { urgencyScore: score(v.urgencyScore) } : {}),
  };
  const rawEmail = v.email ?? null;
  if (rawEmail === null) return { reason: 'email is missing', rawEmail };
  if (!createContactBody(body)) {
    const reason = (createContactBody.errors ?? []).slice(0, 5)
      .map((e) => `${e.instancePath.replace(/^\//, '').replace(/\//g, '.') || 'row'} ${e.message ?? 'is invalid'}`).join('; ');
    return { reason, rawEmail };
  }
  let domain: string | undefined;
  if (company?.domain !== undefined) {
    const d = normalizeDomain(company.domain);
    if (!d) return { reason: 'company.domain is not a valid domain name or URL', rawEmail };
    if (isFreemailDomain(d)) return { reason: `company.domain ${d} is a free email provider`, rawEmail };
    domain = d;
  }
  return {
    line, rawEmail, email: normalizeEmail(rawEmail), name, title: v.title,
    company: company ? { ...(company.name !== undefined ? { name: company.name } : {}), ...(domain !== undefined ? { domain } : {}) } : null,
    qualificationStatus: body.qualificationStatus, fitScore: body.fitScore as number | undefined, urgencyScore: body.urgencyScore as number | undefined,
  };
}

interface Tally { result: ImportResult; suppressionSecret: string | null }

/**
 * Keeps the outcomes of the first OUTCOME_LIMIT non-created rows by line (a batch's `existing`
 * rows are known after later `invalid` ones), trimming now and then so memory stays bounded.
 */
function note(t: Tally, o: ImportOutcome) {
  const list = t.result.outcomes;
  list.push(o);
  if (list.length >= 2 * OUTCOME_LIMIT) trimOutcomes(t);
}

function trimOutcomes(t: Tally) {
  const list = t.result.outcomes.sort((a, b) => a.line - b.line);
  if (list.length > OUTCOME_LIMIT) {
    list.length = OUTCOME_LIMIT;
    t.result.outcomesTruncated = true;
  }
}

/** Files one batch of checked rows on the list, set-based (the rules of fileContact). */
async function fileBatch(trx: Tx, org: string, list: { id: string; ownerId: string | null }, rows: Row[], t: Tally): Promise<void> {
  const r = t.result;
  // An address repeated in the batch is filed once (its first row); the others are `existing` on it.
  const first = new Map<string, Row>();
  for (const row of rows) if (!first.has(row.email)) first.set(row.email, row);
  const emails = [...first.keys()];
  const resolved = new Map<string, { id: string; existingList: boolean }>();

  // Rules 1-3 in one lookup by address (the email index): the record already on the list, else
  // the oldest live one elsewhere (not deleted, on a list neither deleted, archived nor a test list).
  const found = await sql<{ email: string; id: string; created_at: Date; on_list: boolean; live: boolean }>`
    SELECT c.email_normalized AS email, c.id, c.created_at, c.list_id = ${list.id} AS on_list,
           (c.erased_at IS NULL AND l.deleted_at IS NULL AND l.archived_at IS NULL AND NOT l.is_test) AS live
    FROM contacts c JOIN contact_lists l ON l.organization_id = c.organization_id AND l.id = c.list_id
    WHERE c.organization_id = ${org} AND c.email_normalized = ANY(${emails}::text[]) AND c.deleted_at IS NULL
    ORDER BY c.created_at, c.id`.execute(trx);
  for (const c of found.rows) if (c.on_list) resolved.set(c.email, { id: c.id, existingList: false });
  const attach: { id: string; at: Date }[] = [];
  for (const c of found.rows) {
    if (!c.live || resolved.has(c.email)) continue;
    resolved.set(c.email, { id: c.id, existingList: true });
    attach.push({ id: c.id, at: c.created_at });
  }
  if (attach.length) {
    await sql`
      INSERT INTO list_memberships (organization_id, list_id, contact_id, contact_created_at)
      SELECT ${org}, ${list.id}, u.id, u.at FROM unnest(${attach.map((x) => x.id)}::text[], ${attach.map((x) => x.at)}::timestamptz[]) AS u(id, at)
      ON CONFLICT (organization_id, list_id, contact_id) DO UPDATE SET deleted_at = NULL`.execute(trx);
  }
  // Creation: companies by domain (created on demand, an unnamed one gets the row's name), else by name.
  const toCreate = emails.filter((e) => !resolved.has(e)).map((e) => first.get(e)!);
  const byDomain = new Map<string, string | null>();
  const names = new Set<string>();
  for (const row of toCreate) {
    if (row.company?.domain !== undefined) {
      if (!byDomain.has(row.company.domain) || byDomain.get(row.company.domain) === null) byDomain.set(row.company.domain, row.company.name ?? null);
    } else if (row.company?.name !== undefined) names.add(row.company.name.trim().toLowerCase());
  }
  const companyByDomain = new Map<string, string>();
  if (byDomain.size) {
    const domains = [...byDomain.keys()];
    const domainNames = domains.map((d) => byDomain.get(d) ?? null);
    const rows2 = await sql<{ id: string; domain_normalized: string }>`
      WITH v AS (SELECT * FROM unnest(${domains.map(() => newId('cmp'))}::text[], ${domains}::text[], ${domainNames}::text[]) AS v(id, domain, name)),
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
      UNION SELECT id, domain_normalized FROM companies WHERE organization_id = ${org} AND domain_normalized = ANY(${domains}::text[])`.execute(trx);
    for (const c of rows2.rows) companyByDomain.set(c.domain_normalized, c.id);
  }
  const companyByName = new Map<string, string>();
  if (names.size) {
    const hits = await sql<{ key: string; id: string }>`
      SELECT DISTINCT ON (lower(name)) lower(name) AS key, id FROM companies_search
      WHERE organization_id = ${org} AND lower(name) = ANY(${[...names]}::text[])
      ORDER BY lower(name), created_at, id`.execute(trx);
    for (const h of hits.rows) companyByName.set(h.key, h.id);
  }
  if (toCreate.length) {
    const ids = toCreate.map(() => newId('con'));
    const companyOf = (row: Row) => (row.company?.domain !== undefined ? companyByDomain.get(row.company.domain) ?? null
      : row.company?.name !== undefined ? companyByName.get(row.company.name.trim().toLowerCase()) ?? null : null);
    await sql`
      INSERT INTO contacts (organization_id, id, list_id, owner_user_id, email, email_normalized, name, title, company_id, lead_source,
                            qualification_status, fit_score, urgency_score)
      SELECT ${org}, u.id, ${list.id}, ${list.ownerId}, u.email, u.email, u.name, u.title, u.company_id, 'CSV import', u.status, u.fit, u.urgency
      FROM unnest(${ids}::text[], ${toCreate.map((x) => x.email)}::text[], ${toCreate.map((x) => x.name ?? '')}::text[],
                  ${toCreate.map((x) => x.title ?? null)}::text[], ${toCreate.map(companyOf)}::text[],
                  ${toCreate.map((x) => x.qualificationStatus ?? 'NEW')}::text[], ${toCreate.map((x) => x.fitScore ?? null)}::int[],
                  ${toCreate.map((x) => x.urgencyScore ?? null)}::int[])
        AS u(id, email, name, title, company_id, status, fit, urgency)`.execute(trx);
    r.created += toCreate.length;
    toCreate.forEach((row, i) => resolved.set(row.email, { id: ids[i], existingList: false }));
  }

  const suppressed = await suppressedAmong(trx, org, emails, t.suppressionSecret);
  const created = new Set(toCreate);
  for (const row of rows) {
    const at = resolved.get(row.email)!;
    if (suppressed.has(row.email)) r.suppressed += 1;
    if (created.has(row)) continue;
    r.existing += 1;
    if (at.existingList) r.attached += 1;
    note(t, { line: row.line, outcome: 'existing', email: row.rawEmail, contactId: at.id, existingList: at.existingList, reason: null });
  }
}

/**
 * Imports a CSV body into a live list of the organization, in the caller's transaction (bound to
 * the organization); emits list.uploaded with the counts. Throws 400 malformed-csv / 413.
 */
export async function importCsv(
  trx: Tx, org: string, list: { id: string; ownerId: string | null }, body: AsyncIterable<Uint8Array>, suppressionSecret: string | null,
): Promise<ImportResult> {
  await lockAllAddresses(trx, org);
  const t: Tally = {
    suppressionSecret,
    result: { listId: list.id, rows: 0, created: 0, existing: 0, attached: 0, invalid: 0, suppressed: 0, outcomes: [], outcomesTruncated: false },
  };
  const parser = parse({ bom: true, skip_empty_lines: true, skip_records_with_empty_values: true, info: true, max_record_size: MAX_RECORD_BYTES });
  const feeding = pipeline(Readable.from(utf8(body)), parser);
  feeding.catch(() => { /* surfaces through the parser's iteration below */ });
  let columns: Map<number, Field> | null = null;
  let batch: Row[] = [];
  try {
    for await (const { record, info } of parser as AsyncIterable<{ record: string[]; info: { lines: number } }>) {
      if (columns === null) { columns = mapHeader(record); continue; }
      t.result.rows += 1;
      if (t.result.rows > CSV_MAX_ROWS) throw malformed(`The file has more than ${CSV_MAX_ROWS} data rows.`);
      const row = toRow(record, columns, info.lines, list.id);
      if ('reason' in row) {
        t.result.invalid += 1;
        note(t, { line: info.lines, outcome: 'invalid', email: row.rawEmail, contactId: null, existingList: false, reason: row.reason });
        continue;
      }
      batch.push(row);
      if (batch.length >= BATCH_ROWS) { await fileBatch(trx, org, list, batch, t); batch = []; }
    }
    await feeding;
  } catch (e) {
    parser.destroy();
    if (e instanceof CsvError) throw malformed(`Line ${(e as CsvError & { lines?: number }).lines ?? '?'}: ${e.message}`);
    throw e;
  }
  if (columns === null) throw malformed('The file is empty: it needs a header row naming at least an email column.');
  if (batch.length) await fileBatch(trx, org, list, batch, t);
  trimOutcomes(t);
  const { outcomes: _o, outcomesTruncated: _t, ...counts } = t.result;
  await emit(trx, org, { type: 'list.uploaded', resource: { type: 'ContactList', id: list.id }, data: counts });
  return t.result;
}
