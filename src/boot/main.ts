// npm start: embedded Postgres (unless DATABASE_URL), migrations, the API and the worker in one
// process (and the inbound SMTP listener when INBOUND_SMTP_PORT is set). RUN_WORKER=false leaves
// the worker out: API nodes scaled apart from `npm run worker` processes on the same DATABASE_URL.
// The HTTP port is bound first (answering 503 until the service is ready), so a port in use costs
// no database start. A start failure stops whatever was started and ends the process with one
// line naming what to fix. SIGINT/SIGTERM stop HTTP, the inbound listener, the worker, the pools,
// then Postgres (which runs in its own process group, so a terminal's Ctrl-C reaches only us).
// Only the configuration and the port checks are loaded up front; the service's modules are
// loaded after the port is held, so a taken port or a bad variable answers at once.
import type { Runner } from 'graphile-worker';
import type { Logger } from 'pino';
import type { InboundListener } from '../inbound/smtp-listener.js';
import { ConfigError, loadConfig } from '../platform/config.js';
import { createLogger } from '../platform/logger.js';
import type { Runtime } from './runtime.js';
import { bindHttp, dataDirFailure, type HttpListener, probeInboundPort, startFailureLine } from './startup.js';

/** What a SIGTERM must finish within; past it the process exits (taking Postgres along, see db/embedded.ts). */
const STOP_LIMIT_MS = 9000;

const parts: { http?: HttpListener; inbound?: InboundListener | null; worker?: Runner; rt?: Runtime; stopDb?: () => Promise<void> } = {};
let log: Logger | null = null;
let stopping = false;

class Interrupted extends Error {}
const checkpoint = () => {
  if (stopping) throw new Interrupted();
};

/** Each part stops before what it depends on; one failing stop does not skip the others. */
async function stopAll(): Promise<void> {
  const steps = [
    () => parts.http?.close(),
    () => parts.inbound?.close(),
    () => parts.worker?.stop(),
    () => parts.rt?.close(),
    () => parts.stopDb?.(),
  ];
  for (const step of steps) {
    try {
      await step();
    } catch (e) {
      log?.warn({ err: startFailureLine(e) }, 'stopping a part failed');
    }
  }
}

let running = false;
let embedded = false;
function onSignal(signal: NodeJS.Signals): void {
  if (stopping) return;
  stopping = true;
  log?.info({ signal }, 'shutting down');
  setTimeout(() => {
    console.error(`stop took longer than ${STOP_LIMIT_MS / 1000} s; exiting`);
    process.exit(1);
  }, STOP_LIMIT_MS).unref();
  if (running) {
    void stopAll().then(() => process.exit(0));
    return;
  }
  // While starting, the start sees `stopping` at its next step and stops what it started; a step
  // waiting on the embedded Postgres is cut short by stopping it now.
  if (embedded) void import('../../db/embedded.js').then((m) => m.interruptStart());
}
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

async function main(): Promise<void> {
  let config = loadConfig();
  embedded = !config.databaseUrl;
  log = createLogger(config.logLevel);
  parts.http = await bindHttp(config, config.publicBaseUrl);
  // PORT=0 lets the system pick a free port: the default base URL names the port picked, not 0.
  if (config.port === 0 && !process.env.PUBLIC_BASE_URL) config = { ...config, publicBaseUrl: `http://localhost:${parts.http.port}` };
  checkpoint();
  await probeInboundPort(config);
  const { openRuntime, resolveAdminToken, runWorker, serveInbound, startDatabase } = await import('./runtime.js');
  checkpoint();
  let admin: ReturnType<typeof resolveAdminToken>;
  try {
    // Written before Postgres starts: an unwritable DATA_DIR fails here, in a moment.
    admin = resolveAdminToken(config);
  } catch (e) {
    throw dataDirFailure(e, config) ?? e;
  }
  const db = await startDatabase(config, log);
  parts.stopDb = db.stopDb;
  checkpoint();
  const runConfig = { ...config, adminToken: admin.token };
  try {
    parts.rt = openRuntime(runConfig, log, db.url);
  } catch (e) {
    throw dataDirFailure(e, config) ?? e;
  }
  // The worker is up before requests are served: a healthy service has both (unless it runs apart).
  if (runConfig.runWorker) parts.worker = await runWorker(parts.rt);
  checkpoint();
  parts.inbound = await serveInbound(parts.rt);
  checkpoint();
  parts.http.ready(parts.rt.app.fetch);
  running = true;

  const base = config.publicBaseUrl;
  console.log(`API:        ${base}/api/v1`);
  console.log(`API docs:   ${base}/docs (operator API: ${base}/admin/docs)`);
  console.log(admin.file ? `Operator token: in ${admin.file}` : 'Operator token: from ADMIN_TOKEN');
  console.log(
    `Listening on ${config.host} port ${parts.http.port}${config.databaseUrl ? '' : ` with embedded Postgres in ${config.dataDir}`}`,
  );
  if (!parts.worker) console.log('Worker: not in this process (RUN_WORKER=false); run `npm run worker` against the same database');
  if (parts.inbound)
    console.log(
      `Inbound SMTP: port ${parts.inbound.port}${config.inboundReplyDomain ? ` (reply addresses at ${config.inboundReplyDomain})` : ''}`,
    );
}

main().catch(async (e) => {
  await stopAll();
  // A stop asked for during the start ends it, and whatever failed because of it is no error.
  if (e instanceof Interrupted || stopping) process.exit(0);
  console.error(e instanceof ConfigError ? `configuration error: ${e.message}` : `start failed: ${startFailureLine(e)}`);
  process.exit(1);
});
