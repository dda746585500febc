// npm run worker: only the background worker, for deployments that scale workers apart from API
// nodes (give it the API's DATABASE_URL).
import { boot, openRuntime, runWorker } from './runtime.js';

async function main() {
  const { config, log, url, stopDb } = await boot();
  const rt = openRuntime(config, log, url);
  const worker = await runWorker(rt);
  console.log('worker running');
  const shutdown = async () => { await worker.stop(); await rt.close(); await stopDb(); process.exit(0); };
  process.on('SIGINT', () => void shutdown());
  process.on('SIGTERM', () => void shutdown());
}

main().catch((e) => { console.error(`worker failed: ${e instanceof Error ? e.message : String(e)}`); process.exit(1); });
