// npm start: embedded Postgres (unless DATABASE_URL), migrations, the API and the worker in one
// process (and the inbound SMTP listener when INBOUND_SMTP_PORT is set). SIGINT/SIGTERM drain
// HTTP, close the listener, stop the worker, then stop Postgres. RUN_WORKER=false leaves the
// worker out: API nodes scaled apart from `npm run worker` processes on the same DATABASE_URL.
import { boot, openRuntime, resolveAdminToken, runWorker, serveHttp, serveInbound } from './runtime.js';

async function main() {
  const booted = await boot();
  const { log, url, stopDb } = booted;
  const admin = resolveAdminToken(booted.config);
  const config = { ...booted.config, adminToken: admin.token };
  const rt = openRuntime(config, log, url);
  // The worker is up before the port opens: a healthy service has both (unless it runs apart).
  const worker = config.runWorker ? await runWorker(rt) : null;
  const inbound = await serveInbound(rt);
  const http = await serveHttp(rt, config.port);
  const base = config.publicBaseUrl;
  console.log(`API:        ${base}/api/v1`);
  console.log(`API docs:   ${base}/docs (operator API: ${base}/admin/docs)`);
  console.log(admin.file ? `Operator token: in ${admin.file}` : 'Operator token: from ADMIN_TOKEN');
  console.log(`Listening on port ${http.port}${config.databaseUrl ? '' : ` with embedded Postgres in ${config.dataDir}`}`);
  if (!worker) console.log('Worker: not in this process (RUN_WORKER=false); run `npm run worker` against the same database');
  if (inbound) console.log(`Inbound SMTP: port ${inbound.port}${config.inboundReplyDomain ? ` (reply addresses at ${config.inboundReplyDomain})` : ''}`);

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    await http.close();
    await inbound?.close();
    await worker?.stop();
    await rt.close();
    await stopDb();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

main().catch((e) => {
  console.error(`start failed: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
