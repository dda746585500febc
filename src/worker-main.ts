// npm run worker: only the background worker, for deployments that scale workers apart from API
// nodes. Needs DATABASE_URL unless it shares DATA_DIR's embedded Postgres with nothing else.
import { ConfigError, loadConfig } from './config.js';
import { createLogger } from './logger.js';
import { migrate } from '../db/database.js';
import { openRuntime, runWorker } from './runtime.js';

async function main() {
  let config;
  try { config = loadConfig(); } catch (e) {
    if (e instanceof ConfigError) { console.error(`configuration error: ${e.message}`); process.exit(1); }
    throw e;
  }
  const log = createLogger(config.logLevel);
  let stopDb = async () => {};
  let url = config.databaseUrl;
  if (!url) {
    const { startEmbedded } = await import('../db/embedded.js');
    const pg = await startEmbedded(config.dataDir, (m) => log.info(m));
    url = pg.url;
    stopDb = pg.stop;
  }
  await migrate(url);
  const rt = openRuntime(config, log, url);
  const worker = await runWorker(rt);
  console.log('worker running');
  const shutdown = async () => { await worker.stop(); await rt.close(); await stopDb(); process.exit(0); };
  process.on('SIGINT', () => void shutdown());
  process.on('SIGTERM', () => void shutdown());
}

main().catch((e) => { console.error(`worker failed: ${e instanceof Error ? e.message : String(e)}`); process.exit(1); });
