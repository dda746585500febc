// A real service per test file: its own database cloned from the migrated template, the Hono app
// on a loopback port, optionally the worker, and typed clients (openapi-fetch over the generated
// paths) that validate every response against the spec.
import crypto from 'node:crypto';
import type { Runner } from 'graphile-worker';
import createClient, { type Middleware } from 'openapi-fetch';
import pg from 'pg';
import { expect, inject, onTestFinished } from 'vitest';
import { createDb, type Db } from '../../db/database.js';
import type { paths as adminPaths } from '../../generated/admin.js';
import bodyValidators from '../../generated/bodies.cjs';
import type { paths } from '../../generated/openapi.js';
import { openRuntime, type Runtime, runWorker, serveHttp } from '../../src/boot/runtime.js';
import { SettableClock } from '../../src/platform/clock.js';
import { type Config, loadConfig } from '../../src/platform/config.js';
import { createLogger } from '../../src/platform/logger.js';
import type { OperationInfo } from '../../src/platform/openapi-doc.js';
import { ALL_SCOPES, adminOperations, publicOperations } from '../../src/platform/spec.js';
import { storedDraftProblems } from './citations.js';

export { ALL_SCOPES };

function opFor(ops: Map<string, OperationInfo>, method: string, schemaPath: string): OperationInfo | undefined {
  for (const op of ops.values()) if (op.method === method && op.path === schemaPath) return op;
  return undefined;
}

/** Checks a response against the operation's documented statuses and body schema. */
export async function checkResponse(
  ops: Map<string, OperationInfo>,
  method: string,
  schemaPath: string,
  response: Response,
): Promise<void> {
  const op = opFor(ops, method.toLowerCase(), schemaPath);
  if (!op) throw new Error(`no operation ${method} ${schemaPath} in the spec`);
  const status = String(response.status);
  if (!op.responseStatuses.includes(status)) {
    throw new Error(
      `${op.operationId} answered ${status}, which the spec does not document (${op.responseStatuses.join(', ')}): ${await response.clone().text()}`,
    );
  }
  const ct = response.headers.get('content-type') ?? '';
  if (response.status >= 400 && !ct.startsWith('application/problem+json'))
    throw new Error(`${op.operationId} ${status} content-type ${ct}`);
  const validate = bodyValidators[`${op.operationId}_r${status}`];
  if (!validate) return;
  const body = await response.clone().json();
  if (!validate(body)) {
    throw new Error(
      `${op.operationId} ${status} body does not match the spec: ${JSON.stringify(validate.errors?.slice(0, 5))}\nbody: ${JSON.stringify(body).slice(0, 800)}`,
    );
  }
  if (response.headers.get('x-request-id') === null) throw new Error(`${op.operationId} ${status} lacks X-Request-Id`);
}

const validating = (ops: Map<string, OperationInfo>): Middleware => ({
  async onResponse({ request, response, schemaPath }) {
    await checkResponse(ops, request.method, schemaPath, response);
    return undefined;
  },
});

export function publicClient(baseUrl: string, key?: string | null, headers: Record<string, string> = {}) {
  const client = createClient<paths>({
    baseUrl: `${baseUrl}/api/v1`,
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
  });
  client.use(validating(publicOperations));
  return client;
}
export type PublicClient = ReturnType<typeof publicClient>;

function listPatcher(admin: ReturnType<typeof createClient<adminPaths>>) {
  return (orgId: string, listId: string, body: { archived?: boolean; isTest?: boolean }) =>
    admin.PATCH('/organizations/{orgId}/lists/{listId}', { params: { path: { orgId, listId } }, body });
}

/** The typed clients of one service (in this process or another), by its base URL and operator token. */
export interface ServiceClients {
  baseUrl: string;
  admin: ReturnType<typeof createClient<adminPaths>>;
  api(key?: string | null, headers?: Record<string, string>): PublicClient;
  newOrg(opts?: { plan?: 'free' | 'starter' | 'growth' }): Promise<TestOrg>;
  /** A fresh organization, a key of it and a client with that key. */
  orgWithKey(
    scopes?: readonly string[],
    keyOpts?: Parameters<TestOrg['key']>[1],
  ): Promise<{ org: TestOrg; key: string; api: PublicClient }>;
  /** Archives or test-flags a list through the operator API. */
  patchList: ReturnType<typeof listPatcher>;
}

export interface TestService extends ServiceClients {
  config: Config;
  rt: Runtime;
  /**
   * The migrating user's pool of the file's database (a superuser with the embedded database; the
   * service itself never connects as it): for set-up and inspection only.
   */
  pool: pg.Pool;
  /** `pool` as a Kysely connection: withSystem on it sees every organization, for set-up and inspection. */
  ownerDb: Db;
  /**
   * The service's clock of business dates (src/platform/clock.ts), the wall clock until a test
   * sets it; the worker a test starts has the same one. Set it with `setClock`, which resets it
   * when the test ends.
   */
  clock: SettableClock;
  startWorker(): Promise<Runner>;
  close(): Promise<void>;
}

export interface TestOrg {
  id: string;
  ownerId: string;
  key(
    scopes?: readonly string[],
    opts?: { role?: 'REP' | 'MANAGER' | 'ADMIN' | 'OWNER'; userId?: string; expiresAt?: string },
  ): Promise<string>;
  keyWithId(
    scopes?: readonly string[],
    opts?: { role?: 'REP' | 'MANAGER' | 'ADMIN' | 'OWNER'; expiresAt?: string },
  ): Promise<{ id: string; key: string }>;
  user(role?: 'REP' | 'MANAGER' | 'ADMIN' | 'OWNER'): Promise<{ id: string }>;
}

/**
 * A database of its own for a test file, cloned from the migrated template (or `empty`: not
 * migrated, as a first deployment finds it); drop() removes it.
 */
export async function createTestDatabase(opts: { empty?: boolean } = {}): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const pgUrl = inject('pgUrl');
  const template = inject('templateDb');
  const dbName = `t_${crypto.randomBytes(6).toString('hex')}`;
  const adminConn = new pg.Client({ connectionString: pgUrl });
  await adminConn.connect();
  // Cloning a template fails while another session is connected to it; retry briefly.
  for (let i = 0; ; i += 1) {
    try {
      await adminConn.query(`CREATE DATABASE ${dbName} TEMPLATE ${opts.empty ? 'template0' : template}`);
      break;
    } catch (e) {
      if (i > 50) throw e;
      await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
    }
  }
  await adminConn.end();
  const u = new URL(pgUrl);
  u.pathname = `/${dbName}`;
  return {
    name: dbName,
    url: u.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: pgUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {});
      await c.end();
    },
  };
}

/** Typed, validating clients of the service at baseUrl (public API and operator API). */
export function serviceClients(baseUrl: string, adminToken: string): ServiceClients {
  const admin = createClient<adminPaths>({ baseUrl: `${baseUrl}/admin/api`, headers: { authorization: `Bearer ${adminToken}` } });
  admin.use(validating(adminOperations));

  async function newOrg(opts: { plan?: 'free' | 'starter' | 'growth' } = {}): Promise<TestOrg> {
    const { data, error } = await admin.POST('/organizations', { body: { name: `Org ${crypto.randomBytes(4).toString('hex')}`, ...opts } });
    if (!data) throw new Error(`create org failed: ${JSON.stringify(error)}`);
    const orgId = data.id;
    const user = async (role: 'REP' | 'MANAGER' | 'ADMIN' | 'OWNER' = 'REP') => {
      const r = await admin.POST('/organizations/{orgId}/users', {
        params: { path: { orgId } },
        body: { name: 'Test User', email: `u${crypto.randomBytes(4).toString('hex')}@example.com`, role },
      });
      if (!r.data) throw new Error(JSON.stringify(r.error));
      return { id: r.data.id };
    };
    const keyWithId: TestOrg['keyWithId'] = async (scopes = ALL_SCOPES, o = {}) => {
      const userId = o.role ? (await user(o.role)).id : undefined;
      const r = await admin.POST('/organizations/{orgId}/api-keys', {
        params: { path: { orgId } },
        body: { scopes: scopes as never, ...(userId ? { userId } : {}), ...(o.expiresAt ? { expiresAt: o.expiresAt } : {}) },
      });
      if (!r.data) throw new Error(JSON.stringify(r.error));
      return { id: r.data.id, key: r.data.key };
    };
    return {
      id: orgId,
      ownerId: data.owner.id,
      user,
      keyWithId,
      key: async (scopes = ALL_SCOPES, o = {}) => {
        if (o.userId) {
          const r = await admin.POST('/organizations/{orgId}/api-keys', {
            params: { path: { orgId } },
            body: { scopes: scopes as never, userId: o.userId },
          });
          if (!r.data) throw new Error(JSON.stringify(r.error));
          return r.data.key;
        }
        return (await keyWithId(scopes, o)).key;
      },
    };
  }

  return {
    baseUrl,
    admin,
    newOrg,
    api: (key, headers) => publicClient(baseUrl, key, headers),
    async orgWithKey(scopes = ALL_SCOPES, keyOpts = {}) {
      const org = await newOrg();
      const key = await org.key(scopes, keyOpts);
      return { org, key, api: publicClient(baseUrl, key) };
    },
    patchList: listPatcher(admin),
  };
}

export async function startService(env: Record<string, string> = {}): Promise<TestService> {
  const database = await createTestDatabase();
  const { url, name: dbName } = database;
  const adminToken = `adm_${crypto.randomBytes(16).toString('hex')}`;
  const dataDir = `${process.cwd()}/.test-data/files-${dbName}`;
  let config = loadConfig({
    ERASURE_HASH_SECRET: 'test-erasure-secret-0123456789abcdef0123',
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    // Tests send through loopback SMTP with links on the loopback origin: allowed for testing only.
    ALLOW_INSECURE_LINKS: 'true',
    // The run's loopback DNS server (test/support/global-setup.ts), never the system's resolver.
    ...(process.env.INBOUND_DNS_SERVERS ? { INBOUND_DNS_SERVERS: process.env.INBOUND_DNS_SERVERS } : {}),
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ...env,
    ADMIN_TOKEN: adminToken,
    DATA_DIR: dataDir,
    PORT: '0',
  });
  const clock = new SettableClock();
  const rt = openRuntime(config, createLogger(config.logLevel), url, { poolSize: 10, clock });
  const http = await serveHttp(rt, 0, '127.0.0.1');
  const baseUrl = `http://127.0.0.1:${http.port}`;
  config = { ...config, publicBaseUrl: baseUrl };
  (rt.config as Config).publicBaseUrl = baseUrl;
  const pool = new pg.Pool({ connectionString: url, max: 3 });
  // The database is dropped WITH (FORCE) at close, which ends any connection still open; an idle
  // one ending is no test failure (the service's own pools ignore it the same way).
  pool.on('error', () => {});
  const ownerDb = createDb(pool);
  const clients = serviceClients(baseUrl, adminToken);
  const workers: Runner[] = [];

  return {
    ...clients,
    config,
    rt,
    pool,
    ownerDb,
    clock,
    async startWorker() {
      const w = await runWorker(rt, 4);
      workers.push(w);
      return w;
    },
    async close() {
      for (const w of workers) await w.stop().catch(() => {});
      await http.close();
      await rt.close();
      await recordObservedTypes(pool, dbName);
      // Every draft the file's tests generated, read or not: a cited sentence states only what
      // its snippet or source title does (test/support/citations.ts). Reported after clean-up.
      const unsupported = await storedDraftProblems(pool);
      await ownerDb.destroy();
      await database.drop();
      const fs = await import('node:fs');
      fs.rmSync(dataDir, { recursive: true, force: true });
      if (unsupported.length > 0)
        throw new Error(`cited sentences their citation does not support:\n${unsupported.slice(0, 20).join('\n')}`);
    },
  };
}

/**
 * Writes the distinct event types this database's event log holds to the run's observed-events
 * directory (set by global-setup), named by test file, for the catalogue check of
 * test/catalogue.test.ts.
 */
async function recordObservedTypes(pool: pg.Pool, dbName: string): Promise<void> {
  const dir = process.env.OBSERVED_EVENTS_DIR;
  if (!dir) return;
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(`SELECT set_config('app.system', 'on', true)`);
    const { rows } = await client.query<{ type: string }>('SELECT DISTINCT type FROM events ORDER BY type');
    await client.query('COMMIT');
    const fs = await import('node:fs');
    const file = expect.getState().testPath ?? 'unknown';
    fs.writeFileSync(`${dir}/${dbName}.json`, JSON.stringify({ file, types: rows.map((r) => r.type) }));
  } finally {
    client.release();
  }
}

/** Raw HTTP for what a typed client cannot send (malformed JSON, wrong content types, huge bodies). */
export async function raw(
  baseUrl: string,
  method: string,
  path: string,
  init: { key?: string; body?: string; headers?: Record<string, string> } = {},
) {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    body: init.body,
    headers: { ...(init.key ? { authorization: `Bearer ${init.key}` } : {}), ...(init.headers ?? {}) },
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, body: json as Record<string, unknown> };
}

export { waitFor } from './wait.js';

/**
 * Sets the service's clock to `instant` for the running test, and back to the wall clock when the
 * test ends (passed or failed). A test that computes dates ("today", two days ago, this month)
 * reads them from the clock it set, so it and the service agree whenever it runs; an instant at
 * noon UTC leaves twelve hours before that day ends. Returns the clock.
 */
export function setClock(svc: TestService, instant: Date | string): SettableClock {
  svc.clock.set(instant);
  onTestFinished(() => svc.clock.reset());
  return svc.clock;
}

/**
 * Turns the kill switch off behind the service's back: the steps it held stay held (their jobs
 * later), for a test to run them itself. The operator's switch would release them at once.
 */
export async function killSwitchOffQuietly(svc: Pick<TestService, 'pool'>): Promise<void> {
  await svc.pool.query('UPDATE platform_settings SET email_kill_switch = false');
}

/**
 * The jobs that ended failed (attempts exhausted; what the operator's queue counts as failed), with
 * their task and last error, so an assertion that there are none says which one failed and why.
 */
export async function failedJobs(svc: Pick<TestService, 'pool'>): Promise<{ task: string; last_error: string | null }[]> {
  const r = await svc.pool.query(`SELECT t.identifier AS task, j.last_error FROM graphile_worker._private_jobs j
    JOIN graphile_worker._private_tasks t ON t.id = j.task_id
    WHERE j.locked_at IS NULL AND j.attempts >= j.max_attempts AND t.identifier NOT LIKE 'sweep\\_%' AND t.identifier NOT LIKE 'purge\\_%'`);
  return r.rows;
}
