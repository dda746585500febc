// Assembles the service from its parts; used by `npm start`, `npm run worker`, tests and bench.

import crypto from 'node:crypto';
import fs from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { type ServerType, serve } from '@hono/node-server';
import type { Runner } from 'graphile-worker';
import { sql } from 'kysely';
import type pg from 'pg';
import type { Logger } from 'pino';
import { APP_ROLE, createDb, createPool, type Db, migrate, roleUrl, SYSTEM_ROLE, WORKER_ROLE, withSystem } from '../../db/database.js';
import { adminHandlers } from '../../handlers/admin/index.js';
import { handlers } from '../../handlers/index.js';
import { reevaluateHeld } from '../dispatch/reevaluate.js';
import { createApp } from '../http/app.js';
import { installCursorKey } from '../http/paging.js';
import { applyServerTimeouts } from '../http/server-timeouts.js';
import { type InboundListener, startInboundSmtp } from '../inbound/smtp-listener.js';
import { createModelClient } from '../llm/client.js';
import { insecureLinksReason, insecureLinksWarning } from '../mail/link-safety.js';
import { createSigner } from '../mail/tokens.js';
import { createTransports } from '../mail/transports.js';
import { createIpHasher } from '../net/client-ip.js';
import { type Clock, systemClock } from '../platform/clock.js';
import type { Config } from '../platform/config.js';
import { ConfigError, loadConfig } from '../platform/config.js';
import { createLogger } from '../platform/logger.js';
import { createSecretBox, loadSecretKey } from '../platform/secret-box.js';
import type { Services } from '../platform/services.js';
import { checkDatabase, databaseFailure, dataDirFailure, StartError } from './startup.js';
import { startWorker } from './worker.js';

/** The handler registries, for the tests and the bench that build an app or call a handler themselves. */
export { adminHandlers, handlers };

/**
 * The service's connections, each logged in as its own role (db/roles.ts); none is the database
 * URL's user, and row-level security applies to every one.
 */
export interface Runtime {
  config: Config;
  log: Logger;
  appPool: pg.Pool;
  /** The keyed requests' pool (requestDb of src/http/pipeline.ts). */
  requestPool: pg.Pool;
  workerPool: pg.Pool;
  systemPool: pg.Pool;
  /** The API's role (outbound_app): public routes, mail links, lead capture, the operator's work on one organization. */
  db: Db;
  /** The worker's role (outbound_worker): graphile-worker and the jobs, each bound to its organization. */
  workerDb: Db;
  /** The cross-organization role (outbound_system): sweeps, the operator's cross-organization reads, lookups before an organization is known, metrics. */
  systemDb: Db;
  services: Services;
  app: ReturnType<typeof createApp>;
  close(): Promise<void>;
}

/** The operator token: ADMIN_TOKEN, or one generated once into DATA_DIR/admin-token. */
export function resolveAdminToken(config: Config): { token: string; file: string | null } {
  if (config.adminToken) return { token: config.adminToken, file: null };
  const file = path.join(path.resolve(config.dataDir), 'admin-token');
  if (!fs.existsSync(file)) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, `adm_${crypto.randomBytes(24).toString('hex')}\n`, { mode: 0o600 });
  }
  return { token: fs.readFileSync(file, 'utf8').trim(), file };
}

/** `opts.clock`: the clock of business dates (src/platform/clock.ts); the system clock unless a test sets one. */
export function openRuntime(config: Config, log: Logger, databaseUrl: string, opts: { poolSize?: number; clock?: Clock } = {}): Runtime {
  // Pools open their connections when first used: a process that runs no worker opens none as it.
  const appUrl = roleUrl(databaseUrl, APP_ROLE);
  const appPool = createPool(appUrl, { max: 10, name: 'outbound-api', prepare: true });
  const requestPool = createPool(appUrl, { max: opts.poolSize ?? 40, name: 'outbound-requests', prepare: true });
  const workerPool = createPool(roleUrl(databaseUrl, WORKER_ROLE), { max: 24, name: 'outbound-worker', prepare: true });
  const systemPool = createPool(roleUrl(databaseUrl, SYSTEM_ROLE), { max: 8, name: 'outbound-system', prepare: true });
  const db = createDb(appPool);
  const workerDb = createDb(workerPool);
  const systemDb = createDb(systemPool);
  const secretKey = loadSecretKey(config.webhookSecretKey, config.dataDir);
  installCursorKey(secretKey);
  const secretBox = createSecretBox(secretKey);
  const services: Services = {
    secretBox,
    faults: new Set(),
    model: createModelClient(config, log),
    signer: createSigner(secretKey),
    mail: createTransports(config, secretBox),
    ipHash: createIpHasher(secretKey),
    clock: opts.clock ?? systemClock,
  };
  const app = createApp({
    config,
    db,
    requestDb: createDb(requestPool),
    systemDb,
    services,
    log,
    handlers,
    adminHandlers,
    metricsDb: systemDb,
    health: async () => {
      const r = await sql<{ ok: boolean }>`select to_regclass('public.organizations') is not null as ok`.execute(db);
      return r.rows[0]?.ok === true;
    },
  });
  return {
    config,
    log,
    appPool,
    requestPool,
    workerPool,
    systemPool,
    db,
    workerDb,
    systemDb,
    services,
    app,
    async close() {
      services.mail.close();
      await Promise.allSettled([appPool.end(), requestPool.end(), workerPool.end(), systemPool.end()]);
    },
  };
}

export async function serveHttp(
  rt: Runtime,
  port: number,
  hostname?: string,
): Promise<{ server: ServerType; port: number; close(): Promise<void> }> {
  return new Promise((resolve) => {
    const server = serve({ fetch: rt.app.fetch, port, hostname }, (info: AddressInfo) => {
      applyServerTimeouts(server as Server);
      resolve({
        server,
        port: info.port,
        close: () =>
          new Promise<void>((r) => {
            server.close(() => r());
            // Idle keep-alive sockets would hold the drain open.
            if ('closeIdleConnections' in server) server.closeIdleConnections();
          }),
      });
    });
  });
}

export async function runWorker(rt: Runtime, concurrency?: number): Promise<Runner> {
  // A warning, never a stop: the steps wait (insecure_links) and everything else works.
  const warning = await insecureLinksWarning(rt.config, rt.services.mail, rt.systemDb);
  const runner = await startWorker({
    workerPool: rt.workerPool,
    systemDb: rt.systemDb,
    config: rt.config,
    services: rt.services,
    log: rt.log,
    concurrency,
  });
  if (warning) rt.log.warn(warning);
  // PUBLIC_BASE_URL fit for links now (set right and the service restarted): the steps its old
  // value held go at once, not at their next look 15 minutes later.
  else if (!insecureLinksReason(rt.config)) await withSystem(rt.systemDb, (trx) => reevaluateHeld(trx, { codes: ['insecure_links'] }));
  return runner;
}

/** The inbound SMTP listener when INBOUND_SMTP_PORT is set (by `npm start` and `npm run worker`), else null. */
export async function serveInbound(rt: Runtime): Promise<InboundListener | null> {
  const { config } = rt;
  if (config.inboundSmtpPort === null) return null;
  return startInboundSmtp(
    { db: rt.db, systemDb: rt.systemDb, config, services: rt.services, log: rt.log },
    { port: config.inboundSmtpPort, host: config.inboundSmtpHost },
  );
}

/**
 * Starts the embedded Postgres unless DATABASE_URL is set, checks the connection and migrates.
 * A failure stops the embedded Postgres again and is a StartError naming DATABASE_URL or DATA_DIR.
 */
export async function startDatabase(config: Config, log: Logger): Promise<{ url: string; stopDb: () => Promise<void> }> {
  let url = config.databaseUrl;
  let stopDb = async () => {};
  try {
    if (!url) {
      const { startEmbedded } = await import('../../db/embedded.js');
      const pg = await startEmbedded(config.dataDir, (m) => log.info(m));
      url = pg.url;
      stopDb = pg.stop;
    } else {
      await checkDatabase(url);
    }
    await migrate(url);
    return { url, stopDb };
  } catch (e) {
    await stopDb().catch(() => {});
    if (e instanceof StartError) throw e;
    throw dataDirFailure(e, config) ?? databaseFailure(e, config, url ?? '');
  }
}

/**
 * What `npm run worker` does first: read the configuration (a bad value ends the process with one
 * line naming the variable), start the embedded Postgres unless DATABASE_URL is set, migrate.
 */
export async function boot(): Promise<{ config: Config; log: Logger; url: string; stopDb: () => Promise<void> }> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`configuration error: ${e.message}`);
      process.exit(1);
    }
    throw e;
  }
  const log = createLogger(config.logLevel);
  return { config, log, ...(await startDatabase(config, log)) };
}
