// npm run worker: only the background worker, for deployments that scale workers apart from API
// nodes (give it the API's DATABASE_URL), and the inbound SMTP listener when INBOUND_SMTP_PORT is set.
import { boot, openRuntime, runWorker, serveInbound } from './runtime.js';

async function main() {
  const { config, log, url, stopDb } = await boot();
  const rt = openRuntime(config, log, url);
  const worker = await runWorker(rt);
  const inbound = await serveInbound(rt);
  console.log(`worker running${inbound ? `; inbound SMTP on port ${inbound.port}` : ''}`);
  const shutdown = async () => {
    await inbound?.close();
    await worker.stop();
    await rt.close();
    await stopDb();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown());
  process.on('SIGTERM', () => void shutdown());
}

main().catch((e) => {
  console.error(`worker failed: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
