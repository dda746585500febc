// The HTTP application: one Hono app serving the public API (/api/v1), the operator API
// (/admin/api), health, documents and problem pages. Every error leaves through onError as a
// problem; every response carries X-Request-Id.
import crypto from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { Hono, type Context as HonoContext } from 'hono';
import { type Request as OABRequest, OpenAPIBackend } from 'openapi-backend';
import type { Logger } from 'pino';
import { type Db, transactionOn } from '../../db/database.js';
import bodyValidators from '../../generated/bodies.cjs';
import paramValidators from '../../generated/params.cjs';
import { mountLeadCapture } from '../leads/endpoint.js';
import { mountMailLinks } from '../mail/links.js';
import { mountMetrics } from '../metrics/index.js';
import type { Config } from '../platform/config.js';
import type { OpenApiDoc, OperationInfo } from '../platform/openapi-doc.js';
import type { Services } from '../platform/services.js';
import { adminDoc, adminOperations, publicDoc, publicOperations } from '../platform/spec.js';
import { botPage } from '../research/robots.js';
import { authenticate, bearerToken, enforceRate, rateHeaders, tokenMatches } from './auth.js';
import { mountDocs } from './docs.js';
import type { AdminHandlers, AuthInfo, Handlers } from './handler.js';
import { idempotent } from './idempotency.js';
import { JsonText } from './paging.js';
import { PROBLEMS, ProblemError, problemBody, problemPage } from './problems.js';

export const MAX_BODY_BYTES = 1024 * 1024;

export interface AppDeps {
  config: Config;
  /** The application role's pool, bound to no organization. */
  db: Db;
  /** The pool keyed requests run on: each checkout is bound to its key's organization by authentication. */
  requestDb: Db;
  services: Services;
  log: Logger;
  handlers: Handlers;
  adminHandlers: AdminHandlers;
  /** Reports whether the database is reachable and migrated (GET /healthz). */
  health: () => Promise<boolean>;
  /** The owner connection GET /metrics reads the job queue and stored series on; without it they are left out. */
  metricsDb?: Db;
}

type Vars = {
  requestId: string;
  operationId?: string;
  organizationId?: string;
  extraHeaders?: Record<string, string>;
  /** The matched operation's constant response headers by status (OperationInfo.constantHeaders). */
  constantHeaders?: Record<string, Record<string, string>>;
};
type C = HonoContext<{ Variables: Vars }>;

// openapi-backend 5 validates a loaded document against the 3.0 meta-schema and fails on 3.1;
// Redocly lints the document instead, and requests are checked by our generated validators.
class Router extends OpenAPIBackend {
  validateDefinition() {
    return this.definition;
  }
}

function makeRouter(doc: OpenApiDoc, apiRoot: string): Router {
  const r = new Router({ definition: structuredClone(doc) as never, apiRoot, validate: false, quick: true, ignoreTrailingSlashes: true });
  void r.init();
  // The router rebuilds its operation list with lodash on every match; the document never
  // changes after start, so the list is computed once.
  const ops = r.router.getOperations();
  r.router.getOperations = () => ops;
  return r;
}

/** The path as sent (still percent-encoded), without building a URL object. */
function rawPathname(url: string): string {
  const start = url.indexOf('/', url.indexOf('://') + 3);
  const q = url.indexOf('?', start);
  return start < 0 ? '/' : url.slice(start, q < 0 ? undefined : q);
}

/** Path parameters by a regex compiled once per operation path template. */
function paramExtractor(ops: Map<string, OperationInfo>, apiRoot: string) {
  const compiled = new Map<string, { re: RegExp; names: string[] }>();
  for (const op of ops.values()) {
    const names = [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
    const pattern = op.path
      .split(/\{[^}]+\}/)
      .map((part) => part.replace(/[.*+?^$()|[\]\\]/g, '\\$&'))
      .join('([^/]+)');
    compiled.set(op.operationId, { re: new RegExp(`^${apiRoot}${pattern}/?$`), names });
  }
  return (op: OperationInfo, pathname: string): Record<string, string> => {
    const c = compiled.get(op.operationId)!;
    const m = c.re.exec(pathname);
    const out: Record<string, string> = {};
    try {
      c.names.forEach((n, i) => {
        out[n] = decodeURIComponent(m?.[i + 1] ?? '');
      });
    } catch {
      throw new ProblemError('not-found', 'The path holds a malformed percent-encoding.');
    }
    return out;
  };
}

/** Finds the operation or throws 404 (no such path) / 405 (path without that method). */
function matchOperation(router: Router, ops: Map<string, OperationInfo>, method: string, path: string): OperationInfo {
  const req: OABRequest = { method, path, headers: {} };
  try {
    const m = router.router.matchOperation(req, true);
    return ops.get(m.operationId as string)!;
  } catch (e) {
    if (String((e as Error).message).startsWith('405')) {
      const allowed = ['get', 'post', 'put', 'patch', 'delete']
        .filter((m) => router.router.matchOperation({ ...req, method: m }) !== undefined)
        .map((m) => m.toUpperCase());
      throw new ProblemError(
        'method-not-allowed',
        `${method.toUpperCase()} is not allowed here; allowed: ${allowed.join(', ')}.`,
        {},
        { Allow: allowed.join(', ') },
      );
    }
    throw new ProblemError('not-found', `No route ${method} ${path}.`);
  }
}

function fieldOf(e: ErrorObject, part: string): string {
  const missing = (e.params as { missingProperty?: string }).missingProperty;
  const extra = e.params as { unevaluatedProperty?: string; additionalProperty?: string };
  const name = missing ?? extra.unevaluatedProperty ?? extra.additionalProperty;
  const base = e.instancePath.replace(/^\//, '').replace(/\//g, '.');
  const path = [base, name].filter(Boolean).join('.');
  return part === 'body' ? (path ? `body.${path}` : 'body') : path || part;
}

function validationProblem(part: string, errors: ErrorObject[] | null | undefined): ProblemError {
  const list = (errors ?? [])
    .filter((e) => !['if', 'allOf', 'anyOf', 'oneOf'].includes(e.keyword) || (errors ?? []).length === 1)
    .slice(0, 20)
    .map((e) => ({
      field: fieldOf(e, part),
      message: e.keyword === 'unevaluatedProperties' ? 'is not a known field' : (e.message ?? 'is invalid'),
    }));
  const detail = list.length ? list.map((x) => `${x.field} ${x.message}`).join('; ') : `The ${part} is invalid.`;
  return new ProblemError('validation-failed', detail, { errors: list });
}

function validate(fn: ValidateFunction | undefined, part: string, value: unknown): void {
  if (fn && !fn(value)) throw validationProblem(part, fn.errors);
}

/**
 * Where a value holds U+0000, as a field path, or null. Postgres text cannot store it, so such
 * input is refused up front rather than failing in the database.
 */
function nulAt(value: unknown, path: string): string | null {
  if (typeof value === 'string') return value.includes('\u0000') ? path : null;
  if (value === null || typeof value !== 'object') return null;
  for (const [k, v] of Object.entries(value)) {
    const at = k.includes('\u0000') ? path : nulAt(v, path ? `${path}.${k}` : k);
    if (at !== null) return at;
  }
  return null;
}

function rejectNul(part: string, value: unknown): void {
  const field = nulAt(value, part === 'body' ? 'body' : '');
  if (field !== null) {
    throw new ProblemError('validation-failed', `${field || part} contains a NUL character (U+0000), which is not accepted.`, {
      errors: [{ field: field || part, message: 'contains U+0000' }],
    });
  }
}

async function readJsonBody(c: C): Promise<{ present: boolean; value: unknown }> {
  // GET and HEAD carry no body; asking the request for its stream would build a full Request.
  if (c.req.method === 'GET' || c.req.method === 'HEAD') return { present: false, value: undefined };
  const raw = await c.req.text();
  if (raw.trim().length === 0) return { present: false, value: undefined };
  if (Buffer.byteLength(raw) > MAX_BODY_BYTES)
    throw new ProblemError('payload-too-large', `Request bodies may be at most ${MAX_BODY_BYTES} bytes.`);
  // JSON sent as text/plain (fetch's default for a string) or with no type is still JSON.
  const ct = (header(c, 'content-type') ?? '').toLowerCase();
  if (ct !== '' && !/^(application\/([\w.+-]+\+)?json|text\/plain)\b/.test(ct)) {
    throw new ProblemError('malformed-json', `Request bodies must be JSON (application/json), not "${ct}".`);
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
  // Form decoding reads `+` as a space; an address has no spaces, so there it was a plus.
  if (out.email !== undefined) out.email = out.email.trim().replaceAll(' ', '+');
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
function header(c: C, name: string): string | undefined {
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  if (incoming === undefined) return c.req.header(name);
  const v = incoming.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

const isEmptyObject = (v: unknown): boolean => v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0;

/** Validates and coerces path, query and header parameters, then the body. */
async function parseRequest(c: C, op: OperationInfo, params: Record<string, string>) {
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
  const body = op.streamBody ? { present: false, value: undefined } : await readJsonBody(c);
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

/** Fails closed: an operation the document gives no scope declaration is refused. */
function scopeAllows(auth: AuthInfo, scope: string | null): boolean {
  if (scope === 'none' || scope === 'per-action' || scope === 'public') return true;
  return scope !== null && auth.scopes.includes(scope);
}

type AnyReply = { status: number; body: unknown; headers?: Record<string, string> };
type AnyHandler = (ctx: unknown) => Promise<AnyReply>;

/** A handler's reply as the HTTP response (a body the handler serialized itself goes out as it is). */
function respond(c: C, reply: AnyReply, headers: Record<string, string>): Response {
  const all = { ...headers, ...(c.get('constantHeaders')?.[reply.status] ?? {}), ...(reply.headers ?? {}) };
  if (reply.body instanceof JsonText) return c.body(reply.body.text, reply.status as 200, { ...all, 'Content-Type': 'application/json' });
  return c.json(reply.body as object, reply.status as 200, all);
}

/** The operation's handler, or 501 for an operation this deployment does not implement yet. */
function handlerFor(map: object, op: OperationInfo): AnyHandler {
  const handler = (map as Record<string, AnyHandler | undefined>)[op.operationId];
  if (!handler) throw new ProblemError('not-implemented', `${op.operationId} is not implemented yet.`);
  return handler;
}

export function createApp(deps: AppDeps): Hono<{ Variables: Vars }> {
  const { config, db, requestDb, services, log } = deps;
  const app = new Hono<{ Variables: Vars }>();
  mountMetrics(app as unknown as Hono<never>, { config, db: deps.metricsDb });
  const publicRouter = makeRouter(publicDoc, '/api/v1');
  const adminRouter = makeRouter(adminDoc, '/admin/api');
  const publicParams = paramExtractor(publicOperations, '/api/v1');
  const adminParams = paramExtractor(adminOperations, '/admin/api');
  const servedPublicDoc = JSON.stringify(publicDoc);
  const servedAdminDoc = JSON.stringify(adminDoc);

  const problemResponse = (c: C, err: ProblemError) => {
    const headers = {
      ...(c.get('extraHeaders') ?? {}),
      ...(c.get('constantHeaders')?.[err.status] ?? {}),
      ...err.headers,
      'Content-Type': 'application/problem+json',
    };
    const instance = `${c.req.path}#${c.get('requestId')}`;
    return c.body(JSON.stringify(problemBody(config.publicBaseUrl, err, instance)), err.status as 400, headers);
  };

  app.use('*', async (c, next) => {
    const incoming = header(c as C, 'x-request-id');
    const requestId = incoming && /^[\w.-]{1,64}$/.test(incoming) ? incoming : crypto.randomUUID();
    c.set('requestId', requestId);
    const started = performance.now();
    // Set before the route runs, so the response is built with it. Set on a finished response,
    // Hono rebuilds that response as a stream the server then reads back chunk by chunk: a sixth
    // of the API node's busy time in the bench's profile (README, Performance).
    c.header('X-Request-Id', requestId);
    await next();
    if (!c.res.headers.has('X-Request-Id')) c.header('X-Request-Id', requestId);
    const status = c.res.status;
    const failed = status >= 500 && status !== 501;
    if (!failed && !log.isLevelEnabled('info')) return;
    const line = {
      requestId,
      method: c.req.method,
      path: c.req.path,
      operationId: c.get('operationId'),
      organizationId: c.get('organizationId'),
      status,
      durationMs: Math.round((performance.now() - started) * 10) / 10,
    };
    if (failed) log.error(line, 'request failed');
    else log.info(line, 'request');
  });

  app.onError((err, c) => {
    if (err instanceof ProblemError) return problemResponse(c as C, err);
    // Postgres data exceptions (class 22: out-of-range numbers and dates, invalid text) can only
    // come from values a client sent that validation let through; they are the client's 400.
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('22')) {
      log.warn({ requestId: c.get('requestId'), err: { message: err.message, code } }, 'input refused by the database');
      return problemResponse(
        c as C,
        new ProblemError('validation-failed', `A value in the request is out of range or malformed for storage (${err.message}).`),
      );
    }
    log.error({ requestId: c.get('requestId'), err: { message: err.message, stack: err.stack } }, 'unhandled error');
    return problemResponse(
      c as C,
      new ProblemError('internal-error', `An unexpected error occurred; quote request id ${c.get('requestId')}.`),
    );
  });
  app.notFound((c) => problemResponse(c as C, new ProblemError('not-found', `No route ${c.req.method} ${c.req.path}.`)));

  // Oversized bodies are read to the end (up to a bound) and discarded before the 413, so the
  // client, still sending, receives the answer instead of a reset connection.
  // An operation may set its own limit (x-body-limit-bytes: the CSV import), which it also
  // enforces while streaming a body sent without a length.
  const limitOf = (c: C): number => {
    if (!c.req.path.startsWith('/admin/api/')) return MAX_BODY_BYTES;
    try {
      return (
        matchOperation(adminRouter, adminOperations, c.req.method.toLowerCase(), rawPathname(c.req.url)).bodyLimitBytes ?? MAX_BODY_BYTES
      );
    } catch {
      return MAX_BODY_BYTES;
    }
  };
  const limitBody = async (c: C, next: () => Promise<void>) => {
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

  app.get('/healthz', async (c) => {
    const ok = await deps.health().catch(() => false);
    return ok ? c.json({ status: 'ok' }) : c.json({ status: 'unavailable' }, 503);
  });
  app.get('/api-docs/openapi.json', (c) => c.body(servedPublicDoc, 200, { 'Content-Type': 'application/json' }));
  app.get('/admin/api-docs/openapi.json', (c) => c.body(servedAdminDoc, 200, { 'Content-Type': 'application/json' }));
  // The reference pages (/docs, /admin/docs) and their security headers, also on problem pages.
  mountDocs(app as unknown as Hono<never>);
  app.get('/problems/:slug', (c) => {
    const html = problemPage(c.req.param('slug'));
    if (html === null) throw new ProblemError('not-found', 'No such problem type.');
    return c.html(html);
  });
  // The page the research crawler's User-Agent names, for site owners.
  app.get('/research-bot', (c) => c.html(botPage()));
  // Unsubscribe and tracking links of sent messages (no API key: their signed token is the proof).
  mountMailLinks(app as unknown as Hono<never>, { db, signer: services.signer, log });
  // Public lead form submissions (no API key: the form key in the path is the credential; any origin).
  mountLeadCapture(app as unknown as Hono, { db, config, services, log });
  app.get('/problems', (c) =>
    c.json({ data: Object.entries(PROBLEMS).map(([slug, p]) => ({ slug, ...p, type: `${config.publicBaseUrl}/problems/${slug}` })) }),
  );

  // CORS preflight for the one operation that needs no key.
  app.options('/api/v1/public-templates', (c) =>
    c.body(null, 204, {
      'Access-Control-Allow-Origin': '*',
      'Access-Control-Allow-Methods': 'GET, OPTIONS',
      'Access-Control-Max-Age': '86400',
      'Access-Control-Allow-Headers': c.req.header('access-control-request-headers') ?? 'Content-Type',
    }),
  );

  app.all('/api/v1/*', limitBody, async (c) => {
    const pathname = rawPathname(c.req.url);
    const op = matchOperation(publicRouter, publicOperations, c.req.method.toLowerCase(), pathname);
    c.set('operationId', op.operationId);
    c.set('constantHeaders', op.constantHeaders);
    const params = publicParams(op, pathname);

    if (op.requiredScope === 'public') {
      c.set('extraHeaders', { 'Access-Control-Allow-Origin': '*' });
      const req = await parseRequest(c, op, params);
      const reply = await handlerFor(deps.handlers, op)({ config, services, log, requestId: c.get('requestId'), db, query: req.query });
      return respond(c, reply, { 'Access-Control-Allow-Origin': '*' });
    }

    /** Authentication, rate limit, scope and input, on the request's connection. */
    const admit = async (conn: Db) => {
      const { auth, rate } = await authenticate(conn, header(c, 'authorization'), config.rateLimitPerMinute);
      c.set('organizationId', auth.organizationId);
      const headers = rateHeaders(rate);
      c.set('extraHeaders', headers);
      enforceRate(rate);
      if (!scopeAllows(auth, op.requiredScope)) {
        throw new ProblemError(
          'insufficient-scope',
          `This operation requires the scope ${op.requiredScope}, which the API key lacks (missing: ${op.requiredScope}).`,
        );
      }
      return { auth, headers, req: await parseRequest(c, op, params) };
    };

    // A long-running operation (research) gives its connection back before its slow work, so
    // waiting on the outside world holds no connection and no transaction.
    if (op.longRunning) {
      const { auth, headers, req } = await requestDb.connection().execute(admit);
      const reply = await handlerFor(deps.handlers, op)({ config, services, log, requestId: c.get('requestId'), db, auth, ...req });
      return respond(c, reply, headers);
    }

    // One connection serves the whole keyed request: the key lookup binds it to the key's
    // organization, reads then run on it directly, and writes in a transaction on it.
    const { reply, rh } = await requestDb.connection().execute(async (conn) => {
      const { auth, headers, req } = await admit(conn);
      const handler = handlerFor(deps.handlers, op);
      const run = () => handler({ config, services, log, requestId: c.get('requestId'), db, trx: conn, auth, ...req });
      if (op.method === 'get') return { reply: await run(), rh: headers };
      const idemKey = (req.headers as Record<string, string>)['idempotency-key'];
      const result = await transactionOn(conn, async () => {
        if (idemKey === undefined) return run();
        const replayAs200 = op.responseStatuses.includes('200');
        const r = await idempotent(conn, auth.organizationId, op.operationId, idemKey, req, replayAs200, run);
        return r.replayed ? { ...r, headers: { ...(r.headers ?? {}), 'Idempotent-Replayed': 'true' } } : r;
      });
      return { reply: result, rh: headers };
    });
    return respond(c, reply, rh);
  });

  app.all('/admin/api/*', limitBody, async (c) => {
    const token = bearerToken(header(c, 'authorization')) ?? '';
    if (!tokenMatches(token, config.adminToken))
      throw new ProblemError('unauthorized', 'Send the operator token as `Authorization: Bearer <ADMIN_TOKEN>`.');
    const pathname = rawPathname(c.req.url);
    const op = matchOperation(adminRouter, adminOperations, c.req.method.toLowerCase(), pathname);
    c.set('operationId', op.operationId);
    c.set('constantHeaders', op.constantHeaders);
    const params = adminParams(op, pathname);
    const req = await parseRequest(c, op, params);
    const stream = op.streamBody
      ? { bodyStream: c.req.raw.body as AsyncIterable<Uint8Array> | null, contentType: c.req.header('content-type') }
      : {};
    const reply = await handlerFor(deps.adminHandlers, op)({ config, services, log, requestId: c.get('requestId'), db, ...req, ...stream });
    return respond(c, reply, {});
  });

  return app;
}
