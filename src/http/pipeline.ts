// The request pipelines from a matched operation to its handler's reply. The public API (/api/v1):
// a keyed request is authenticated, rate limited and scope checked, its input parsed, and its
// handler run on the one connection the key lookup bound to the key's organization (writes in a
// transaction, with idempotency); a long-running operation gives the connection back first; the
// one operation that needs no key (GET /public-templates) answers any origin, its CORS preflight
// included. The operator API (/admin/api): the operator token, then the handler.
import type { Hono } from 'hono';
import type { Logger } from 'pino';
import { type Db, transactionOn } from '../../db/database.js';
import type { Config } from '../platform/config.js';
import type { OperationInfo } from '../platform/openapi-doc.js';
import type { Services } from '../platform/services.js';
import { adminOperations, publicOperations } from '../platform/spec.js';
import { authenticate, bearerToken, enforceRate, rateHeaders, scopeAllows, tokenMatches } from './auth.js';
import type { AuthThrottle } from './auth-throttle.js';
import { deferredRead } from './deferred-auth.js';
import type { AdminHandlers, Handlers } from './handler.js';
import { idempotent } from './idempotency.js';
import { JsonText } from './paging.js';
import { ProblemError } from './problems.js';
import { type C, header, limitBody, parseRequest, receiveBody, type Vars } from './request.js';
import { apiRoutes, matchOperation, rawPathname } from './routing.js';

/** What the pipelines run handlers with. */
export interface PipelineDeps {
  config: Config;
  /** The application role's pool, bound to no organization. */
  db: Db;
  /** The pool keyed requests run on: each checkout is bound to its key's organization by authentication. */
  requestDb: Db;
  /** The cross-organization role's connection (outbound_system): the operator's work across organizations, the lead capture's form lookup. */
  systemDb: Db;
  services: Services;
  log: Logger;
  /**
   * The registries: complete as src/boot passes them (handlers/index.ts); an app built with fewer
   * (a test of this path) answers 501 for an operation that has none.
   */
  handlers: Partial<Handlers>;
  adminHandlers: Partial<AdminHandlers>;
}

type AnyReply = { status: number; body: unknown; headers?: Record<string, string> };
type AnyHandler = (ctx: unknown) => Promise<AnyReply>;

/** A handler's reply as the HTTP response (a body the handler serialized itself goes out as it is). */
function respond(c: C, reply: AnyReply, headers: Record<string, string>): Response {
  const all = { ...headers, ...(c.get('constantHeaders')?.[reply.status] ?? {}), ...(reply.headers ?? {}) };
  if (reply.body instanceof JsonText) return c.body(reply.body.text, reply.status as 200, { ...all, 'Content-Type': 'application/json' });
  return c.json(reply.body as object, reply.status as 200, all);
}

/** The operation's handler, or 501 for an operation the registry lacks (only a partial one, built by a test, can). */
function handlerFor(map: object, op: OperationInfo): AnyHandler {
  const handler = (map as Record<string, AnyHandler | undefined>)[op.operationId];
  if (!handler) throw new ProblemError('not-implemented', `${op.operationId} is not implemented yet.`);
  return handler;
}

/** The public API: each request to the operation it names, keyed or (the one operation that needs no key) public. */
export function mountPublicApi(app: Hono<{ Variables: Vars }>, deps: PipelineDeps): void {
  const api = apiRoutes(publicOperations, '/api/v1');
  app.options('/api/v1/public-templates', publicPreflight);
  // Not async: the pipeline's promise is the route's, with no further one around it (a route's
  // synchronous throw reaches onError like a rejection).
  app.all('/api/v1/*', limitBody(), (c) => {
    const pathname = rawPathname(c.req.url);
    const op = matchOperation(api, c.req.method.toLowerCase(), pathname);
    c.set('operationId', op.operationId);
    c.set('constantHeaders', op.constantHeaders);
    const params = api.params(op, pathname);
    return op.requiredScope === 'public' ? publicOperation(deps, c, op, params) : keyedRequest(deps, c, op, params);
  });
}

/** CORS preflight for the one operation that needs no key. */
function publicPreflight(c: C): Response {
  return c.body(null, 204, {
    'Access-Control-Allow-Origin': '*',
    'Access-Control-Allow-Methods': 'GET, OPTIONS',
    'Access-Control-Max-Age': '86400',
    'Access-Control-Allow-Headers': c.req.header('access-control-request-headers') ?? 'Content-Type',
  });
}

/** The operation that needs no key: no connection of its own, any origin. */
async function publicOperation(deps: PipelineDeps, c: C, op: OperationInfo, params: Record<string, string>): Promise<Response> {
  const { config, services, log, db } = deps;
  c.set('extraHeaders', { 'Access-Control-Allow-Origin': '*' });
  const req = await parseRequest(c, op, params);
  const reply = await handlerFor(deps.handlers, op)({ config, services, log, requestId: c.get('requestId'), db, query: req.query });
  return respond(c, reply, { 'Access-Control-Allow-Origin': '*' });
}

/** Authentication, rate limit, scope and input, on the request's connection. */
async function admit(deps: PipelineDeps, c: C, op: OperationInfo, params: Record<string, string>, conn: Db) {
  const { auth, rate } = await authenticate(conn, header(c, 'authorization'), deps.config.rateLimitPerMinute);
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
}

/** A request with an API key. */
async function keyedRequest(deps: PipelineDeps, c: C, op: OperationInfo, params: Record<string, string>): Promise<Response> {
  const { config, requestDb, services, log, db } = deps;
  await receiveBody(c, op);
  // A long-running operation (research) gives its connection back before its slow work, so
  // waiting on the outside world holds no connection and no transaction.
  if (op.longRunning) {
    const { auth, headers, req } = await requestDb.connection().execute((conn) => admit(deps, c, op, params, conn));
    const reply = await handlerFor(deps.handlers, op)({ config, services, log, requestId: c.get('requestId'), db, auth, ...req });
    return respond(c, reply, headers);
  }

  // One connection serves the whole keyed request: the key lookup binds it to the key's
  // organization, reads then run on it directly, and writes in a transaction on it.
  const { reply, rh } = await requestDb.connection().execute(async (conn) => {
    // A read's authentication travels with its first statement when it can (deferred-auth.ts).
    if (op.method === 'get') {
      const read = await deferredRead(c, op, params, conn, config.rateLimitPerMinute, (auth, req) =>
        handlerFor(deps.handlers, op)({ config, services, log, requestId: c.get('requestId'), db, trx: conn, auth, ...req }),
      );
      if (read) return { reply: read.reply, rh: read.headers };
    }
    const { auth, headers, req } = await admit(deps, c, op, params, conn);
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
}

/**
 * The operator API: the operator token (a failure slowed and limited per address by `throttle`),
 * the operation, its input (a CSV import's body as a stream, within its own limit), its handler.
 */
export function mountOperatorApi(app: Hono<{ Variables: Vars }>, deps: PipelineDeps, throttle: AuthThrottle): void {
  const { config, services, log, db, systemDb } = deps;
  const api = apiRoutes(adminOperations, '/admin/api');
  app.all('/admin/api/*', limitBody(api), async (c) => {
    const token = bearerToken(header(c, 'authorization')) ?? '';
    if (!tokenMatches(token, config.adminToken))
      await throttle.refuse(c, new ProblemError('unauthorized', 'Send the operator token as `Authorization: Bearer <ADMIN_TOKEN>`.'));
    const pathname = rawPathname(c.req.url);
    const op = matchOperation(api, c.req.method.toLowerCase(), pathname);
    c.set('operationId', op.operationId);
    c.set('constantHeaders', op.constantHeaders);
    const params = api.params(op, pathname);
    const req = await parseRequest(c, op, params);
    const stream = op.streamBody
      ? { bodyStream: c.req.raw.body as AsyncIterable<Uint8Array> | null, contentType: c.req.header('content-type') }
      : {};
    const reply = await handlerFor(
      deps.adminHandlers,
      op,
    )({ config, services, log, requestId: c.get('requestId'), db, systemDb, ...req, ...stream });
    return respond(c, reply, {});
  });
}
