// The HTTP application: one Hono app serving the public API (/api/v1), the operator API
// (/admin/api), health, documents and problem pages. Every error leaves through onError as a
// problem; every response carries X-Request-Id. The assembly: request ids and the request log,
// the error handler, and the routes; an API request goes through src/http/pipeline.ts.
import crypto from 'node:crypto';
import { Hono } from 'hono';
import type { Db } from '../../db/database.js';
import { mountLeadCapture } from '../leads/endpoint.js';
import { mountMailLinks } from '../mail/links.js';
import { mountMetrics } from '../metrics/index.js';
import { adminDoc, publicDoc } from '../platform/spec.js';
import { botPage } from '../research/robots.js';
import { authThrottle } from './auth-throttle.js';
import { mountDesk } from './desk.js';
import { mountDocs } from './docs.js';
import { mountOperatorApi, mountPublicApi, type PipelineDeps } from './pipeline.js';
import { PROBLEMS, ProblemError, problemBody, problemPage } from './problems.js';
import { type C, header, type Vars } from './request.js';
import { servedDocument } from './served-docs.js';

export interface AppDeps extends PipelineDeps {
  /** Reports whether the database is reachable and migrated (GET /healthz). */
  health: () => Promise<boolean>;
  /** The cross-organization connection GET /metrics reads the job queue and stored series on; without it they are left out. */
  metricsDb?: Db;
}

export function createApp(deps: AppDeps): Hono<{ Variables: Vars }> {
  const { config, db, services, log } = deps;
  const app = new Hono<{ Variables: Vars }>();
  // Failed authentications with the operator token, on the operator API and GET /metrics alike.
  const throttle = authThrottle({ trustProxy: config.trustProxy });
  mountMetrics(app, { config, db: deps.metricsDb, throttle });
  const servedPublicDoc = servedDocument(publicDoc, '/api/v1', config);
  const servedAdminDoc = servedDocument(adminDoc, '/admin/api', config);

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
    // Set before the route runs, so the response is built with it: every response of this app is
    // made by the context (c.body, c.json, problemResponse), which adds the prepared headers. Set
    // on a finished response, Hono rebuilds that response as a stream the server then reads back
    // chunk by chunk (a sixth of the API node's busy time in the bench's profile); even asking a
    // finished response whether it has the header turns its plain header object into a Headers
    // object the server must convert back (docs/performance.md).
    c.header('X-Request-Id', requestId);
    await next();
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

  app.get('/healthz', async (c) => {
    const ok = await deps.health().catch(() => false);
    return ok ? c.json({ status: 'ok' }) : c.json({ status: 'unavailable' }, 503);
  });
  app.get('/api-docs/openapi.json', (c) => c.body(servedPublicDoc(), 200, { 'Content-Type': 'application/json' }));
  app.get('/admin/api-docs/openapi.json', (c) => c.body(servedAdminDoc(), 200, { 'Content-Type': 'application/json' }));
  // The reference pages (/docs, /admin/docs) and their security headers, also on problem pages.
  mountDocs(app);
  // The review desk (/desk): a page on the public API, with the same headers.
  mountDesk(app);
  app.get('/problems/:slug', (c) => {
    const html = problemPage(c.req.param('slug'));
    if (html === null) throw new ProblemError('not-found', 'No such problem type.');
    return c.html(html);
  });
  // The page the research crawler's User-Agent names, for site owners.
  app.get('/research-bot', (c) => c.html(botPage()));
  // Unsubscribe and tracking links of sent messages (no API key: their signed token is the proof).
  mountMailLinks(app, { db, signer: services.signer, log });
  // Public lead form submissions (no API key: the form key in the path is the credential; any origin).
  mountLeadCapture(app, { db, systemDb: deps.systemDb, config, services, log });
  app.get('/problems', (c) =>
    c.json({ data: Object.entries(PROBLEMS).map(([slug, p]) => ({ slug, ...p, type: `${config.publicBaseUrl}/problems/${slug}` })) }),
  );

  // The API operations: the public API (keyed, and the one operation without a key) and the operator API.
  mountPublicApi(app, deps);
  mountOperatorApi(app, deps, throttle);

  return app;
}
