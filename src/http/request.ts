// A request as the pipeline reads it: its context variables, its body limits, its JSON body (read
// within the limit, nesting at most MAX_JSON_DEPTH levels), query and header parameters (checked by
// the generated validators, with NUL characters refused), and the validation problems of input
// that does not pass.
import type { IncomingMessage } from 'node:http';
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { Context as HonoContext } from 'hono';
import bodyValidators from '../../generated/bodies.cjs';
import paramValidators from '../../generated/params.cjs';
import type { OperationInfo } from '../platform/openapi-doc.js';
import { readBody } from './body.js';
import { ProblemError } from './problems.js';
import { type Api, matchOperation, rawPathname } from './routing.js';

export const MAX_BODY_BYTES = 1024 * 1024;
/** Arrays and objects a JSON body may nest, its own top level included. */
export const MAX_JSON_DEPTH = 64;

export type Vars = {
  requestId: string;
  operationId?: string;
  organizationId?: string;
  extraHeaders?: Record<string, string>;
  /** The matched operation's constant response headers by status (OperationInfo.constantHeaders). */
  constantHeaders?: Record<string, Record<string, string>>;
};
export type C = HonoContext<{ Variables: Vars }>;

// A body that declares a length over the limit is read to the end (up to a bound) and discarded
// before the 413, so the client, still sending, receives the answer instead of a reset connection.
// A body without a length is counted as it is read (readJsonBody) and refused at the limit.
// An operation may set its own limit (x-body-limit-bytes: the CSV import), which it also
// enforces while streaming a body sent without a length.
/** The body limit of an API's requests; `ownLimits`: the API whose operations may set their own (the operator API). */
export function limitBody(ownLimits?: Api) {
  const prefix = ownLimits ? `${ownLimits.root}/` : null;
  const limitOf = (c: C): number => {
    if (ownLimits === undefined || !c.req.path.startsWith(prefix!)) return MAX_BODY_BYTES;
    try {
      return matchOperation(ownLimits, c.req.method.toLowerCase(), rawPathname(c.req.url)).bodyLimitBytes ?? MAX_BODY_BYTES;
    } catch {
      return MAX_BODY_BYTES;
    }
  };
  return async (c: C, next: () => Promise<void>) => {
    const declared = Number(header(c, 'content-length') ?? '0');
    const limit = declared > MAX_BODY_BYTES ? limitOf(c) : MAX_BODY_BYTES;
    if (declared > limit) {
      let seen = 0;
      const reader = c.req.raw.body?.getReader();
      while (reader && seen < 64 * MAX_BODY_BYTES) {
        const { done, value } = await reader.read();
        if (done) break;
        seen += value.byteLength;
      }
      throw new ProblemError('payload-too-large', `Request bodies may be at most ${limit} bytes.`);
    }
    await next();
  };
}

function fieldOf(e: ErrorObject, part: string): string {
  const missing = (e.params as { missingProperty?: string }).missingProperty;
  const extra = e.params as { unevaluatedProperty?: string; additionalProperty?: string };
  const name = missing ?? extra.unevaluatedProperty ?? extra.additionalProperty;
  const base = e.instancePath.replace(/^\//, '').replace(/\//g, '.');
  const path = [base, name].filter(Boolean).join('.');
  return part === 'body' ? (path ? `body.${path}` : 'body') : path || part;
}

// A flat body states both additionalProperties and unevaluatedProperties (for client generators):
// an unknown field is reported once, the same way under either keyword.
const UNKNOWN_FIELD = new Set(['unevaluatedProperties', 'additionalProperties']);

function validationProblem(part: string, errors: ErrorObject[] | null | undefined): ProblemError {
  const seen = new Set<string>();
  const list = (errors ?? [])
    .filter((e) => !['if', 'allOf', 'anyOf', 'oneOf'].includes(e.keyword) || (errors ?? []).length === 1)
    .map((e) => ({
      field: fieldOf(e, part),
      message: UNKNOWN_FIELD.has(e.keyword) ? 'is not a known field' : (e.message ?? 'is invalid'),
    }))
    .filter((x) => {
      const key = `${x.field}\u0000${x.message}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    })
    .slice(0, 20);
  const detail = list.length ? list.map((x) => `${x.field} ${x.message}`).join('; ') : `The ${part} is invalid.`;
  return new ProblemError('validation-failed', detail, { errors: list });
}

function validate(fn: ValidateFunction | undefined, part: string, value: unknown): void {
  if (fn && !fn(value)) throw validationProblem(part, fn.errors);
}

/** Stands on nulAt's stack for a key holding U+0000, reported at its object (a key has no path of its own). */
const NUL_KEY = Symbol('key holding U+0000');

/**
 * Where a value holds U+0000, as a field path (the first in document order), or null. Postgres
 * text cannot store it, so such input is refused up front rather than failing in the database.
 * The walk keeps its own stack: a value's depth cannot exhaust the call stack.
 */
function nulAt(value: unknown, path: string): string | null {
  const stack: [unknown, string][] = [[value, path]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [v, at] = next;
    if (v === NUL_KEY) return at;
    if (typeof v === 'string') {
      if (v.includes('\u0000')) return at;
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    const entries = Object.entries(v);
    for (let i = entries.length - 1; i >= 0; i -= 1) {
      const [k, child] = entries[i];
      stack.push(k.includes('\u0000') ? [NUL_KEY, at] : [child, at ? `${at}.${k}` : k]);
    }
  }
  return null;
}

/** Whether JSON text nests arrays and objects deeper than `max` levels (brackets inside strings are text). */
function nestsDeeper(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c)
        i += 1; // backslash: the escaped character is skipped
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x5b || ch === 0x7b) {
      depth += 1;
      if (depth > max) return true;
    } else if (ch === 0x5d || ch === 0x7d) depth -= 1;
  }
  return false;
}

function rejectNul(part: string, value: unknown): void {
  const field = nulAt(value, part === 'body' ? 'body' : '');
  if (field !== null) {
    throw new ProblemError('validation-failed', `${field || part} contains a NUL character (U+0000), which is not accepted.`, {
      errors: [{ field: field || part, message: 'contains U+0000' }],
    });
  }
}

type JsonBody = { present: boolean; value: unknown };
/** Each request's JSON body, read once: received early (receiveBody), used by parseRequest. */
const jsonBodies = new WeakMap<Request, Promise<JsonBody>>();

function jsonBodyOf(c: C): Promise<JsonBody> {
  let body = jsonBodies.get(c.req.raw);
  if (body === undefined) {
    body = readJsonBody(c);
    jsonBodies.set(c.req.raw, body);
  }
  return body;
}

/**
 * Receives the whole JSON body before the pipeline takes a database connection, so a client that
 * sends its body slowly holds no connection meanwhile. A refusal of the body (too large, not
 * JSON) is kept for parseRequest, so it comes in the same order as before (after 401 and 403).
 */
export async function receiveBody(c: C, op: OperationInfo): Promise<void> {
  if (!op.streamBody) await jsonBodyOf(c).catch(() => {});
}

async function readJsonBody(c: C): Promise<JsonBody> {
  // GET and HEAD carry no body; asking the request for its stream would build a full Request.
  if (c.req.method === 'GET' || c.req.method === 'HEAD') return { present: false, value: undefined };
  const bytes = await readBody(c.req.raw, MAX_BODY_BYTES);
  if (bytes === null) throw new ProblemError('payload-too-large', `Request bodies may be at most ${MAX_BODY_BYTES} bytes.`);
  // As Request.text() decodes: UTF-8, a byte-order mark dropped, malformed bytes replaced.
  const raw = new TextDecoder().decode(bytes);
  if (raw.trim().length === 0) return { present: false, value: undefined };
  // JSON sent as text/plain (fetch's default for a string) or with no type is still JSON.
  const ct = (header(c, 'content-type') ?? '').toLowerCase();
  if (ct !== '' && !/^(application\/([\w.+-]+\+)?json|text\/plain)\b/.test(ct)) {
    throw new ProblemError('malformed-json', `Request bodies must be JSON (application/json), not "${ct}".`);
  }
  // Checked on the text, before parsing builds the nesting: deep values cost memory to build and
  // would exhaust the call stack of any recursive walk later (validation, storage, replay).
  if (nestsDeeper(raw, MAX_JSON_DEPTH)) {
    const message = `nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`;
    throw new ProblemError('validation-failed', `body ${message}.`, { errors: [{ field: 'body', message }] });
  }
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (e) {
    throw new ProblemError('malformed-json', `The body is not valid JSON: ${(e as Error).message}`);
  }
  // JSON can only carry U+0000 escaped, so bodies without the escape need no walk.
  if (/\\u0000/i.test(raw)) rejectNul('body', value);
  return { present: true, value };
}

function queryObject(c: C): Record<string, string> {
  const out: Record<string, string> = {};
  const url = c.req.url;
  const q = url.indexOf('?');
  if (q < 0) return out;
  for (const [k, v] of new URLSearchParams(url.slice(q + 1))) out[k] = v;
  // Form decoding reads `+` as a space; an address has no spaces, so there an unencoded `+` is a
  // plus. The value is otherwise left as sent (a space sent as %20 included), so that its length
  // and its form are checked on what the client sent.
  if (out.email !== undefined) out.email = new URLSearchParams(url.slice(q + 1).replaceAll('+', '%2B')).getAll('email').at(-1)!;
  return out;
}

function headerObject(c: C, op: OperationInfo): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of op.parameters) {
    if (p.in !== 'header') continue;
    const v = header(c, p.name.toLowerCase());
    if (v !== undefined) out[p.name.toLowerCase()] = v;
  }
  return out;
}

/**
 * A request header by its lower-case name. Under @hono/node-server it is read from Node's parsed
 * headers: `c.req.header` would first build a WHATWG Headers copy of every header, on each
 * request (about 3% of the API process's busy time in the bench's profile).
 */
export function header(c: C, name: string): string | undefined {
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  if (incoming === undefined) return c.req.header(name);
  const v = incoming.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

const isEmptyObject = (v: unknown): boolean => v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0;

/** Validates and coerces path, query and header parameters, then the body. */
export async function parseRequest(c: C, op: OperationInfo, params: Record<string, string>) {
  const vp = paramValidators[`${op.operationId}_path`];
  const vq = paramValidators[`${op.operationId}_query`];
  const vh = paramValidators[`${op.operationId}_header`];
  const query = queryObject(c);
  const headers = headerObject(c, op);
  // A path value that fails its schema names nothing that can exist: an unknown id.
  if ((vp && !vp(params)) || nulAt(params, '') !== null) throw new ProblemError('not-found', 'No resource with that id.');
  rejectNul('query', query);
  rejectNul('header', headers);
  validate(vq, 'query', query);
  validate(vh, 'header', headers);
  // A body that is not JSON (a CSV import) is left unread: its handler streams it.
  const body = op.streamBody ? { present: false, value: undefined } : await jsonBodyOf(c);
  if (body.present && !op.bodyPointer) {
    // Clients commonly send `{}` to a POST that takes no body: it says nothing, so it is no body.
    if (!isEmptyObject(body.value))
      throw new ProblemError('validation-failed', 'This operation takes no request body (an empty one or {} is accepted).');
    return { params, query, headers, body: undefined };
  }
  if (op.bodyPointer) {
    if (!body.present && op.bodyRequired)
      throw new ProblemError('validation-failed', 'A JSON request body is required.', {
        errors: [{ field: 'body', message: 'is required' }],
      });
    if (body.present) validate(bodyValidators[`${op.operationId}_body`], 'body', body.value);
  }
  return { params, query, headers, body: body.value };
}
