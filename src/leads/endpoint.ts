// The public capture endpoint of lead forms, served without an API key (the form key in the path
// is the credential), outside /api/v1:
//   POST    /capture/{formKey}  a submission: JSON (also sent as text/plain, as browsers do to
//                               avoid a preflight), form-encoded or multipart; 201 {status: "received"}
//   OPTIONS /capture/{formKey}  the CORS preflight; any origin may submit.
// In order: the body is read up to CAPTURE_MAX_BODY_BYTES, counted as it arrives (413 at once
// past it, src/http/body.ts); the form is looked up by its key
// (404) and the submission counted against the source address's window (429 past the limit);
// the body is parsed (415, 400); a filled honeypot field is answered exactly like a success but
// nothing is stored; the fields are checked (400); the lead is captured (src/leads/capture.ts).
// A browser that asks for HTML (a form posting straight here) gets a small page instead of JSON.

import crypto from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Context, Env, Hono } from 'hono';
import { sql } from 'kysely';
import { type Db, withOrg, withSystem } from '../../db/database.js';
import { normalizeDomain } from '../crm/domains.js';
import { readBody } from '../http/body.js';
import { PROBLEMS, ProblemError, problemBody } from '../http/problems.js';
import { page } from '../mail/links.js';
import { clientIp, rateKeyOf } from '../net/client-ip.js';
import type { SystemDeps } from '../platform/services.js';
import { captureLead } from './capture.js';

export const CAPTURE_MAX_BODY_BYTES = 32 * 1024;
/** The fixed rate-limit window, from the first counted submission of a source address. */
export const CAPTURE_WINDOW_SECONDS = 600;
/** Bots fill every field; people never see this one. A submission that fills it is answered as a success and dropped. */
export const HONEYPOT_FIELD = '_gotcha';
export const MAX_FIELDS = 50;
export const MAX_FIELD_NAME = 100;
export const MAX_FIELD_VALUE = 5000;
const MAX_PERSON_FIELD = 200;
const EMAIL_MAX = 320;
const FORM_KEY = /^lf_[A-Za-z0-9_-]{32}$/;

/** A new form key: 192 random bits. */
export const newFormKey = (): string => `lf_${crypto.randomBytes(24).toString('base64url')}`;

const CORS = { 'Access-Control-Allow-Origin': '*' };

type Fields = Record<string, string | number | boolean | null>;

const invalidField = (field: string, message: string) =>
  new ProblemError('validation-failed', `${field} ${message}.`, { errors: [{ field, message }] });

/** The submission's fields, by media type; 415 for another type, 400 for a malformed body. */
async function parseFields(contentType: string, raw: Buffer): Promise<Fields> {
  const type = contentType.split(';')[0].trim().toLowerCase();
  if (type === '' || type === 'text/plain' || /^application\/([\w.+-]+\+)?json$/.test(type)) {
    const text = raw.toString('utf8');
    if (text.trim() === '') return {};
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      throw new ProblemError('malformed-json', `The body is not valid JSON: ${(e as Error).message}`);
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalidField('body', 'must be a JSON object of fields');
    for (const [k, v] of Object.entries(value)) {
      if (v !== null && !['string', 'number', 'boolean'].includes(typeof v))
        throw invalidField(k, 'must be a string, number, boolean or null (fields are flat)');
    }
    return value as Fields;
  }
  if (type === 'application/x-www-form-urlencoded') return collect(new URLSearchParams(raw.toString('utf8')));
  if (type === 'multipart/form-data') {
    let form: FormData;
    try {
      form = await new Response(new Uint8Array(raw), { headers: { 'content-type': contentType } }).formData();
    } catch {
      throw invalidField('body', 'is not a well-formed multipart/form-data body');
    }
    // Uploaded files are not part of a lead: only text fields are kept.
    return collect([...form.entries()].filter((e): e is [string, string] => typeof e[1] === 'string'));
  }
  throw new ProblemError(
    'unsupported-media-type',
    `A submission is JSON, application/x-www-form-urlencoded or multipart/form-data, not "${type}".`,
  );
}

/** Form fields into one object; a name given several times (checkboxes) keeps its values joined by ", ". */
function collect(entries: Iterable<[string, string]>): Fields {
  const out: Record<string, string> = {};
  for (const [k, v] of entries) out[k] = Object.hasOwn(out, k) ? `${out[k]}, ${v}` : v;
  return out;
}

/** 400 unless the submission stays within the field limits (and holds no U+0000, which Postgres cannot store). */
function checkFields(fields: Fields): void {
  const names = Object.keys(fields);
  if (names.length > MAX_FIELDS) throw invalidField('body', `has more than ${MAX_FIELDS} fields`);
  for (const k of names) {
    if (k.length > MAX_FIELD_NAME || k.includes('\u0000'))
      throw invalidField(k.slice(0, MAX_FIELD_NAME), `is not a field name of at most ${MAX_FIELD_NAME} characters`);
    const v = fields[k];
    if (typeof v === 'string' && v.length > MAX_FIELD_VALUE) throw invalidField(k, `is longer than ${MAX_FIELD_VALUE} characters`);
    if (typeof v === 'string' && v.includes('\u0000')) throw invalidField(k, 'contains U+0000');
  }
}

/** The first non-blank string among the named fields; 400 when it is longer than `max`. */
function pick(fields: Fields, names: string[], max: number): string | null {
  for (const n of names) {
    const v = fields[n];
    if (typeof v !== 'string' || v.trim() === '') continue;
    if (v.trim().length > max) throw invalidField(n, `is longer than ${max} characters`);
    return v.trim();
  }
  return null;
}

/** An address: a local part of 1-64 characters without spaces or specials, at a valid domain name. */
export function isAddress(email: string): boolean {
  const at = email.lastIndexOf('@');
  if (at < 1 || email.length > EMAIL_MAX) return false;
  const local = email.slice(0, at);
  const domain = email.slice(at + 1);
  return local.length <= 64 && !/[\s"<>(),;:\\[\]@]/.test(local) && !/[\s/:?#\\@[\]]/.test(domain) && normalizeDomain(domain) !== null;
}

function personOf(fields: Fields) {
  const email = typeof fields.email === 'string' ? fields.email.trim() : '';
  if (email === '') throw invalidField('email', 'is required');
  if (!isAddress(email)) throw invalidField('email', 'is not an email address');
  const first = pick(fields, ['firstName', 'first_name'], MAX_PERSON_FIELD);
  const lastName = pick(fields, ['lastName', 'last_name'], MAX_PERSON_FIELD);
  const joined = [first, lastName].filter(Boolean).join(' ');
  const name =
    pick(fields, ['name', 'fullName', 'full_name'], MAX_PERSON_FIELD) ?? (joined === '' ? null : joined.slice(0, MAX_PERSON_FIELD));
  const companyName = pick(fields, ['company', 'companyName', 'company_name'], MAX_PERSON_FIELD);
  return { email, name, companyName };
}

const isFilled = (v: unknown) => v !== undefined && v !== null && v !== false && String(v).trim() !== '';

interface FormHit {
  organization_id: string;
  id: string;
  name: string;
  count: number;
  start_ms: string;
}

/**
 * The form of the key, with the submission counted in its source address's window (one statement),
 * on the cross-organization role: the form's organization is not known before.
 */
async function formAndCount(db: Db, formKey: string, ipHash: string): Promise<FormHit | undefined> {
  return withSystem(
    db,
    async (trx) =>
      (
        await sql<FormHit>`
    WITH f AS (SELECT organization_id, id, name FROM lead_forms WHERE form_key = ${formKey}),
    w AS (
      INSERT INTO lead_capture_windows AS w (organization_id, ip_hash, window_start, count)
      SELECT organization_id, ${ipHash}, now_ms(), 1 FROM f
      ON CONFLICT (organization_id, ip_hash) DO UPDATE SET
        count = CASE WHEN w.window_start > now_ms() - make_interval(secs => ${CAPTURE_WINDOW_SECONDS}) THEN w.count + 1 ELSE 1 END,
        window_start = CASE WHEN w.window_start > now_ms() - make_interval(secs => ${CAPTURE_WINDOW_SECONDS}) THEN w.window_start ELSE now_ms() END
      RETURNING count, (extract(epoch FROM window_start) * 1000)::int8 AS start_ms
    )
    SELECT f.organization_id, f.id, f.name, w.count, w.start_ms FROM f, w`.execute(trx)
      ).rows[0],
  );
}

export function mountLeadCapture<E extends Env>(app: Hono<E>, deps: SystemDeps): void {
  const { config, log } = deps;
  const wantsHtml = (c: Context) => /text\/html/i.test(c.req.header('accept') ?? '');
  const requestId = (c: Context) => String(c.get('requestId') ?? '');

  const received = (c: Context) =>
    wantsHtml(c)
      ? c.html(page('Thank you', '<h1>Thank you</h1><p>We received your details and will be in touch.</p>'), 201, {
          ...CORS,
          'Cache-Control': 'no-store',
        })
      : c.json({ status: 'received' }, 201, { ...CORS, 'Cache-Control': 'no-store' });

  const refused = (c: Context, err: ProblemError) => {
    const headers = { ...CORS, ...err.headers, 'Cache-Control': 'no-store' };
    if (wantsHtml(c)) {
      const e = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
      return c.html(
        page(PROBLEMS[err.slug].title, `<h1>${e(PROBLEMS[err.slug].title)}</h1><p>${e(err.message)}</p>`),
        err.status as 400,
        headers,
      );
    }
    const body = problemBody(config.publicBaseUrl, err, `${c.req.path}#${requestId(c)}`);
    return c.body(JSON.stringify(body), err.status as 400, { ...headers, 'Content-Type': 'application/problem+json' });
  };

  app.options('/capture/:formKey', (c) =>
    c.body(null, 204, {
      ...CORS,
      'Access-Control-Allow-Methods': 'POST, OPTIONS',
      'Access-Control-Max-Age': '86400',
      'Access-Control-Allow-Headers': (c.req.header('access-control-request-headers') ?? 'Content-Type, Accept').slice(0, 500),
    }),
  );

  app.post('/capture/:formKey', async (c) => {
    try {
      const raw = await readBody(c.req.raw, CAPTURE_MAX_BODY_BYTES);
      if (raw === null) throw new ProblemError('payload-too-large', `A submission may be at most ${CAPTURE_MAX_BODY_BYTES} bytes.`);
      const formKey = c.req.param('formKey');
      if (!FORM_KEY.test(formKey)) throw new ProblemError('not-found', 'No lead form with that key.');
      const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
      const ip = clientIp(incoming?.socket?.remoteAddress, c.req.header('x-forwarded-for'), config.trustProxy) ?? 'unknown';
      const ipHash = deps.services.ipHash(rateKeyOf(ip));
      const form = await formAndCount(deps.systemDb, formKey, ipHash);
      if (!form) throw new ProblemError('not-found', 'No lead form with that key.');
      if (form.count > config.leadCaptureRateLimit) {
        const retryAfter = Math.max(1, Math.ceil((Number(form.start_ms) + CAPTURE_WINDOW_SECONDS * 1000 - Date.now()) / 1000));
        throw new ProblemError(
          'capture-rate-limited',
          `At most ${config.leadCaptureRateLimit} submissions per source address per ${CAPTURE_WINDOW_SECONDS / 60} minutes; retry after ${retryAfter} s.`,
          {},
          { 'Retry-After': String(retryAfter) },
        );
      }
      const fields = await parseFields(c.req.header('content-type') ?? '', raw);
      checkFields(fields);
      if (isFilled(fields[HONEYPOT_FIELD])) return received(c);
      const person = personOf(fields);
      const { [HONEYPOT_FIELD]: _trap, ...payload } = fields;
      await withOrg(deps.db, form.organization_id, (trx) =>
        captureLead(trx, form.organization_id, {
          ...person,
          source: form.name.slice(0, 100),
          payload,
          formId: form.id,
          ipHash,
          via: 'form',
        }),
      );
      return received(c);
    } catch (e) {
      if (e instanceof ProblemError) return refused(c, e);
      const code = (e as { code?: unknown }).code;
      if (typeof code === 'string' && code.startsWith('22'))
        return refused(c, new ProblemError('validation-failed', 'A field value is malformed for storage.'));
      log.error({ requestId: requestId(c), err: { message: (e as Error).message, stack: (e as Error).stack } }, 'lead capture failed');
      return refused(c, new ProblemError('internal-error', `An unexpected error occurred; quote request id ${requestId(c)}.`));
    }
  });

  // Any other method on a capture URL (a browser opening it, say).
  app.all('/capture/:formKey', (c) =>
    refused(
      c,
      new ProblemError(
        'method-not-allowed',
        `${c.req.method} is not allowed here; allowed: POST, OPTIONS.`,
        {},
        { Allow: 'POST, OPTIONS' },
      ),
    ),
  );
}
