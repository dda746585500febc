// CSV import of contacts into a list (the operator row POST .../lists/{listId}/import).
//
// The body is read as a stream: bytes are counted (64 MiB at most) and decoded as strict UTF-8,
// csv-parse splits records (RFC 4180: quotes, a header row, the same cell count on every row),
// and rows are filed in batches of BATCH_ROWS with a handful of set-based statements each, so
// memory holds one batch whatever the file's size. Everything happens in the caller's
// transaction: a file that turns out malformed half-way is a 400 and its rollback leaves nothing.
//
// Each row is checked against POST /contacts' own body validator, then filed by its rules through
// their one implementation (src/crm/contact-filing.ts, which POST /contacts and lead conversion use
// too): already on the list -> existing; live on another list (not archived, not a test list) ->
// existing and attached to this list; otherwise a new contact on the list (owner = the list's
// owner, leadSource `CSV import`), its company found or created by normalized domain, else matched
// by name; a company domain that is not a domain or a free mail provider's makes the row invalid
// when it would create a contact (an existing person's company input is ignored, as on a 200). The
// organization's filing lock is held exclusively instead of one lock per address (a transaction
// cannot hold 100,000 advisory locks), so no other filing of the organization interleaves.
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { CsvError, parse } from 'csv-parse';
import type { Tx } from '../../db/database.js';
import bodyValidators from '../../generated/bodies.cjs';
import { suppressedAmong } from '../compliance/suppression-match.js';
import { notFound, ProblemError } from '../http/problems.js';
import { emit } from '../platform/events.js';
import type { DomainRefusal } from './companies.js';
import { fileContacts } from './contact-filing.js';
import { lockAllAddresses } from './contact-locks.js';
import { normalizeEmail } from './domains.js';

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

type Field =
  | 'email'
  | 'name'
  | 'firstName'
  | 'lastName'
  | 'title'
  | 'companyName'
  | 'companyDomain'
  | 'qualificationStatus'
  | 'fitScore'
  | 'urgencyScore';

/** Accepted header spellings, compared lowercased without spaces, `_` and `-`. */
const HEADERS: Record<string, Field> = {
  email: 'email',
  emailaddress: 'email',
  mail: 'email',
  workemail: 'email',
  businessemail: 'email',
  name: 'name',
  fullname: 'name',
  contactname: 'name',
  firstname: 'firstName',
  givenname: 'firstName',
  lastname: 'lastName',
  surname: 'lastName',
  familyname: 'lastName',
  title: 'title',
  jobtitle: 'title',
  position: 'title',
  company: 'companyName',
  companyname: 'companyName',
  organization: 'companyName',
  organisation: 'companyName',
  account: 'companyName',
  accountname: 'companyName',
  companydomain: 'companyDomain',
  domain: 'companyDomain',
  website: 'companyDomain',
  companywebsite: 'companyDomain',
  url: 'companyDomain',
  qualificationstatus: 'qualificationStatus',
  status: 'qualificationStatus',
  leadstatus: 'qualificationStatus',
  fitscore: 'fitScore',
  fit: 'fitScore',
  urgencyscore: 'urgencyScore',
  urgency: 'urgencyScore',
};

export interface ImportOutcome {
  line: number;
  outcome: 'existing' | 'invalid';
  email: string | null;
  contactId: string | null;
  existingList: boolean;
  reason: string | null;
}

export interface ImportResult {
  listId: string;
  rows: number;
  created: number;
  existing: number;
  attached: number;
  invalid: number;
  suppressed: number;
  outcomes: ImportOutcome[];
  outcomesTruncated: boolean;
}

/** A row that passed POST /contacts' body validator (its company domain is checked when it would create). */
interface Row {
  line: number;
  rawEmail: string;
  email: string;
  name?: string;
  title?: string;
  company: { name?: string; domain?: string } | null;
  qualificationStatus?: string;
  fitScore?: number;
  urgencyScore?: number;
}

const malformed = (detail: string) => new ProblemError('malformed-csv', detail);

/** The body's bytes as strict UTF-8 text, refusing more than CSV_MAX_BYTES. */
async function* utf8(body: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let bytes = 0;
  try {
    for await (const chunk of body) {
      bytes += chunk.byteLength;
      if (bytes > CSV_MAX_BYTES)
        throw new ProblemError('payload-too-large', `A CSV import may be at most ${CSV_MAX_BYTES} bytes (64 MiB).`);
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
    if (f && !taken.has(f)) {
      map.set(i, f);
      taken.add(f);
    }
  });
  if (!taken.has('email'))
    throw malformed(
      `The header row has no email column (found: ${header
        .slice(0, 20)
        .map((h) => JSON.stringify(h))
        .join(', ')}).`,
    );
  return map;
}

const createContactBody = bodyValidators.createContact_body!;

/** A record as POST /contacts' body, checked by its validator; a string reason when it would be a 400 there. */
function toRow(
  record: string[],
  columns: Map<number, Field>,
  line: number,
  listId: string,
): Row | { reason: string; rawEmail: string | null } {
  const v: Partial<Record<Field, string>> = {};
  for (const [i, f] of columns) {
    const cell = record[i]?.trim();
    if (cell) v[f] = cell;
  }
  const name = v.name ?? ([v.firstName, v.lastName].filter(Boolean).join(' ') || undefined);
  const score = (s: string | undefined) => (s === undefined ? undefined : /^\d{1,9}$/.test(s) ? Number(s) : s);
  const company =
    v.companyName !== undefined || v.companyDomain !== undefined
      ? {
          ...(v.companyName !== undefined ? { name: v.companyName } : {}),
          ...(v.companyDomain !== undefined ? { domain: v.companyDomain } : {}),
        }
      : undefined;
  const body = {
    email: v.email,
    listId,
    ...(name !== undefined ? { name } : {}),
    ...(v.title !== undefined ? { title: v.title } : {}),
    ...(company ? { company } : {}),
    ...(v.qualificationStatus !== undefined ? { qualificationStatus: v.qualificationStatus.toUpperCase() } : {}),
    ...(v.fitScore !== undefined ? { fitScore: score(v.fitScore) } : {}),
    ...(v.urgencyScore !== undefined ? { urgencyScore: score(v.urgencyScore) } : {}),
  };
  const rawEmail = v.email ?? null;
  if (rawEmail === null) return { reason: 'email is missing', rawEmail };
  if (!createContactBody(body)) {
    const reason = (createContactBody.errors ?? [])
      .slice(0, 5)
      .map((e) => `${e.instancePath.replace(/^\//, '').replace(/\//g, '.') || 'row'} ${e.message ?? 'is invalid'}`)
      .join('; ');
    return { reason, rawEmail };
  }
  return {
    line,
    rawEmail,
    email: normalizeEmail(rawEmail),
    name,
    title: v.title,
    company: company ?? null,
    qualificationStatus: body.qualificationStatus,
    fitScore: body.fitScore as number | undefined,
    urgencyScore: body.urgencyScore as number | undefined,
  };
}

interface Tally {
  result: ImportResult;
  suppressionSecret: string | null;
}

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

/** Reasons of a row whose company domain is refused when it would create a contact. */
const refusalReason = (f: DomainRefusal) =>
  f.refused === 'invalid' ? 'company.domain is not a valid domain name or URL' : `company.domain ${f.domain} is a free email provider`;

/** Files one batch of checked rows on the list (src/crm/contact-filing.ts) and tallies the outcomes. */
async function fileBatch(trx: Tx, org: string, list: { id: string; ownerId: string | null }, rows: Row[], t: Tally): Promise<void> {
  const r = t.result;
  const filed = await fileContacts(
    trx,
    org,
    {
      listId: list.id,
      attach: true,
      listForNew: async () => list.id,
      ownerId: list.ownerId,
      leadSource: 'CSV import',
    },
    rows,
  );
  const suppressed = await suppressedAmong(trx, org, [...new Set(rows.map((row) => row.email))], t.suppressionSecret);
  rows.forEach((row, i) => {
    const f = filed[i];
    if (f.outcome === 'refused') {
      r.invalid += 1;
      note(t, { line: row.line, outcome: 'invalid', email: row.rawEmail, contactId: null, existingList: false, reason: refusalReason(f) });
      return;
    }
    if (suppressed.has(row.email)) r.suppressed += 1;
    if (f.outcome === 'created') {
      r.created += 1;
      return;
    }
    r.existing += 1;
    if (f.outcome === 'live') r.attached += 1;
    note(t, {
      line: row.line,
      outcome: 'existing',
      email: row.rawEmail,
      contactId: f.id,
      existingList: f.outcome === 'live',
      reason: null,
    });
  });
}

/**
 * Imports a CSV body into a live list of the organization, in the caller's transaction (bound to
 * the organization); emits list.uploaded with the counts. Throws 400 malformed-csv / 413.
 */
export async function importCsv(
  trx: Tx,
  org: string,
  list: { id: string; ownerId: string | null },
  body: AsyncIterable<Uint8Array>,
  suppressionSecret: string | null,
): Promise<ImportResult> {
  await lockAllAddresses(trx, org);
  const t: Tally = {
    suppressionSecret,
    result: {
      listId: list.id,
      rows: 0,
      created: 0,
      existing: 0,
      attached: 0,
      invalid: 0,
      suppressed: 0,
      outcomes: [],
      outcomesTruncated: false,
    },
  };
  const parser = parse({
    bom: true,
    skip_empty_lines: true,
    skip_records_with_empty_values: true,
    info: true,
    max_record_size: MAX_RECORD_BYTES,
  });
  const feeding = pipeline(Readable.from(utf8(body)), parser);
  feeding.catch(() => {
    /* surfaces through the parser's iteration below */
  });
  let columns: Map<number, Field> | null = null;
  let batch: Row[] = [];
  try {
    for await (const { record, info } of parser as AsyncIterable<{ record: string[]; info: { lines: number } }>) {
      if (columns === null) {
        columns = mapHeader(record);
        continue;
      }
      t.result.rows += 1;
      if (t.result.rows > CSV_MAX_ROWS) throw malformed(`The file has more than ${CSV_MAX_ROWS} data rows.`);
      const row = toRow(record, columns, info.lines, list.id);
      if ('reason' in row) {
        t.result.invalid += 1;
        note(t, { line: info.lines, outcome: 'invalid', email: row.rawEmail, contactId: null, existingList: false, reason: row.reason });
        continue;
      }
      batch.push(row);
      if (batch.length >= BATCH_ROWS) {
        await fileBatch(trx, org, list, batch, t);
        batch = [];
      }
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

/**
 * The operator row's import: the list (live, held FOR SHARE so it is not deleted meanwhile; 404
 * otherwise), then importCsv with the list's owner as the owner of new contacts.
 */
export async function importListCsv(
  trx: Tx,
  org: string,
  listId: string,
  body: AsyncIterable<Uint8Array>,
  suppressionSecret: string | null,
): Promise<ImportResult> {
  const list = await trx
    .selectFrom('contact_lists')
    .select(['id', 'user_id'])
    .where('organization_id', '=', org)
    .where('id', '=', listId)
    .where('deleted_at', 'is', null)
    .forShare()
    .executeTakeFirst();
  if (!list) throw notFound('list');
  return importCsv(trx, org, { id: list.id, ownerId: list.user_id }, body, suppressionSecret);
}
