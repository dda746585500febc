// Start failures and stops, as an operator meets them: each case runs `src/boot/main.ts` as a child
// process with its environment. A failed start ends non-zero with one line naming the variable or
// file to fix and leaves no Postgres behind; Ctrl-C (SIGINT to the process group) and SIGTERM stop
// everything with exit code 0 and no error-level line; HOST chooses the listen address.

import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { waitFor } from './support/wait.js';

const root = new URL('..', import.meta.url).pathname;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'outbound-startup-'));
const children: ChildProcess[] = [];
// A test that failed half-way leaves nothing running: its service is stopped as an operator
// would (SIGTERM), and a Postgres that outlived it gets an immediate shutdown.
afterAll(async () => {
  for (const c of children) {
    if (c.exitCode !== null || c.signalCode !== null) continue;
    const gone = new Promise((r) => c.once('exit', r));
    c.kill('SIGTERM');
    const late = setTimeout(() => c.kill('SIGKILL'), 15_000);
    await gone;
    clearTimeout(late);
  }
  for (const dir of fs.readdirSync(tmp)) for (const pid of postgresOf(path.join(tmp, dir))) process.kill(pid, 'SIGQUIT');
  fs.rmSync(tmp, { recursive: true, force: true });
});

// The services under test listen on PORT=0 (a port the system picks, printed in the `Listening on`
// line) or on a port this file holds: never on one probed free and let go, which a test file
// running in parallel could take in between.

/** Holds a port as another program would; `connected` settles at the first connection to it. */
async function occupy(): Promise<{ port: number; connected: Promise<void>; close(): Promise<void> }> {
  const s = net.createServer((c) => c.destroy());
  const connected = new Promise<void>((r) => s.once('connection', () => r()));
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  return { port: (s.address() as net.AddressInfo).port, connected, close: () => new Promise((r) => s.close(() => r())) };
}

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
}

/** `node --import tsx src/boot/main.ts` in a process group of its own, as a terminal runs it. */
function start(env: Record<string, string>): Run {
  let stdout = '';
  let stderr = '';
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/boot/main.ts'], {
    cwd: root,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, DATABASE_URL: '', ADMIN_TOKEN: '', HOST: '', LOG_LEVEL: 'info', INBOUND_SMTP_PORT: '', ...env },
  });
  children.push(child);
  child.stdout!.on('data', (d) => {
    stdout += d;
  });
  child.stderr!.on('data', (d) => {
    stderr += d;
  });
  // A start that hangs instead of failing is a failure, not a slow pass.
  const limit = setTimeout(() => child.kill('SIGKILL'), 45_000);
  const exit = new Promise<number | null>((r) =>
    child.once('exit', (code) => {
      clearTimeout(limit);
      r(code);
    }),
  );
  return { child, stdout: () => stdout, stderr: () => stderr, exit };
}

/** Lines a person reads, without npm's notes about the machine's npm configuration. */
const lines = (text: string) =>
  text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !/nodedir|npm warn/.test(l));

/** Postgres processes serving a data directory, from the process list. */
function postgresOf(dataDir: string): number[] {
  const pgDir = path.join(dataDir, 'pg');
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (path.basename(argv[0]) === 'postgres' && argv.includes(pgDir)) pids.push(Number(entry));
    } catch {
      /* gone meanwhile */
    }
  }
  return pids;
}

async function failsWith(run: Run, dataDir: string): Promise<string> {
  expect(await run.exit).toBe(1);
  const out = lines(run.stderr());
  expect(out, run.stderr()).toHaveLength(1);
  expect(out[0]).not.toMatch(/\n| {4}at /);
  expect(postgresOf(dataDir)).toEqual([]);
  expect(fs.existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
  return out[0];
}

/** Waits until the service answers /healthz at `host` on the port it printed; returns the port. */
async function healthy(run: Run, host: string): Promise<number> {
  return waitFor(
    async () => {
      if (run.child.exitCode !== null) throw new Error(`service exited: ${run.stdout()}${run.stderr()}`);
      const m = /Listening on \S+ port (\d+)/.exec(run.stdout());
      try {
        if (m && (await fetch(`http://${host}:${m[1]}/healthz`)).ok) return Number(m[1]);
      } catch {
        /* starting */
      }
      return null;
    },
    60_000,
    'the service to become healthy',
    100,
  );
}

/** Whether something accepts TCP connections at host:port. */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Runs a bash script in `cwd` (whose `.data` links to `dataDir` when given). */
async function bash(script: string, cwd: string, dataDir?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  fs.mkdirSync(cwd, { recursive: true });
  if (dataDir && !fs.existsSync(path.join(cwd, '.data'))) fs.symlinkSync(dataDir, path.join(cwd, '.data'));
  const child = spawn('bash', ['-c', script], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    stdout += d;
  });
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  const code = await new Promise<number | null>((r) => child.once('close', (c) => r(c)));
  return { code, stdout, stderr };
}

/** No pino line at error level or above (50+), and nothing on stderr. */
function expectNoErrorLines(run: Run): void {
  const levels = lines(run.stdout())
    .filter((l) => l.startsWith('{'))
    .map((l) => (JSON.parse(l) as { level: number }).level);
  expect(levels.filter((l) => l >= 50)).toEqual([]);
  expect(lines(run.stderr())).toEqual([]);
}

describe.concurrent('start failures', () => {
  it('a taken PORT: exits 1 with one line naming PORT, before any Postgres starts', async () => {
    const held = await occupy();
    const dataDir = path.join(tmp, 'port-taken');
    try {
      const line = await failsWith(start({ PORT: String(held.port), DATA_DIR: dataDir }), dataDir);
      expect(line).toBe(
        `start failed: PORT ${held.port} is already in use on 127.0.0.1: stop the other process or set PORT to a free port`,
      );
      // The port was checked before Postgres: no cluster was even created.
      expect(fs.existsSync(path.join(dataDir, 'pg'))).toBe(false);
    } finally {
      await held.close();
    }
  });

  it('a taken INBOUND_SMTP_PORT: names INBOUND_SMTP_PORT, before any Postgres starts', async () => {
    const held = await occupy();
    const dataDir = path.join(tmp, 'smtp-taken');
    try {
      const line = await failsWith(
        start({ PORT: '0', DATA_DIR: dataDir, INBOUND_SMTP_PORT: String(held.port), INBOUND_SMTP_HOST: '127.0.0.1' }),
        dataDir,
      );
      expect(line).toMatch(new RegExp(`^start failed: INBOUND_SMTP_PORT ${held.port} is already in use`));
      expect(fs.existsSync(path.join(dataDir, 'pg'))).toBe(false);
    } finally {
      await held.close();
    }
  });

  it('a HOST that is not an address of this machine: names HOST', async () => {
    const dataDir = path.join(tmp, 'bad-host');
    const line = await failsWith(start({ PORT: '0', DATA_DIR: dataDir, HOST: '192.0.2.1' }), dataDir);
    expect(line).toMatch(/^start failed: HOST 192\.0\.2\.1 is not an address of this machine/);
  });

  it('an unreachable DATABASE_URL: names DATABASE_URL and the address', async () => {
    // A privileged port: the system never hands it to another program's bind(0), and nothing
    // listens there.
    const dead = 1;
    const dataDir = path.join(tmp, 'db-unreachable');
    const line = await failsWith(
      start({ PORT: '0', DATA_DIR: dataDir, DATABASE_URL: `postgres://postgres:x@127.0.0.1:${dead}/postgres` }),
      dataDir,
    );
    expect(line).toBe(
      `start failed: DATABASE_URL: cannot reach Postgres at 127.0.0.1:${dead} (ECONNREFUSED): check the host and port, and that Postgres is running`,
    );
  });

  it('wrong DATABASE_URL credentials: names DATABASE_URL and the user', async () => {
    const url = new URL(inject('pgUrl'));
    url.password = 'not-the-password';
    const dataDir = path.join(tmp, 'db-credentials');
    const line = await failsWith(start({ PORT: '0', DATA_DIR: dataDir, DATABASE_URL: url.toString() }), dataDir);
    expect(line).toMatch(
      /^start failed: DATABASE_URL: Postgres at .+ refused user "postgres" \(.*password.*\): check the user name and password$/,
    );
  });

  it('a DATA_DIR that cannot be a directory: names DATA_DIR', async () => {
    const file = path.join(tmp, 'a-file');
    fs.writeFileSync(file, 'not a directory');
    const dataDir = path.join(file, 'data');
    const run = start({ PORT: '0', DATA_DIR: dataDir });
    expect(await run.exit).toBe(1);
    expect(lines(run.stderr())).toEqual([
      `start failed: DATA_DIR ${dataDir} is not usable: ENOTDIR on ${dataDir} (it must be a writable directory)`,
    ]);
  });

  it('an invalid ADMIN_TOKEN: names ADMIN_TOKEN', async () => {
    const dataDir = path.join(tmp, 'bad-token');
    const line = await failsWith(start({ PORT: '0', DATA_DIR: dataDir, ADMIN_TOKEN: 'short' }), dataDir);
    expect(line).toBe('configuration error: ADMIN_TOKEN must be at least 16 characters');
  });
});

describe('stopping', () => {
  it('SIGTERM during the start (Postgres being created) stops what was started: exit 0, no error line, no Postgres left', async () => {
    const own = path.join(tmp, 'interrupted');
    const run = start({ PORT: '0', DATA_DIR: own });
    const pidFile = path.join(own, 'pg', 'postmaster.pid');
    await waitFor(() => fs.existsSync(pidFile) || run.child.exitCode !== null, 60_000, 'the postmaster pid file', 20);
    run.child.kill('SIGTERM');
    expect(await run.exit).toBe(0);
    expectNoErrorLines(run);
    expect(run.stdout()).not.toContain('Listening on');
    expect(postgresOf(own)).toEqual([]);
    expect(fs.existsSync(pidFile)).toBe(false);
  });

  // One data directory: the first start creates the cluster, the second reuses it.
  const dataDir = path.join(tmp, 'served');

  it('Ctrl-C (SIGINT to the process group) stops HTTP, the worker and Postgres: exit 0, no error line; HOST is honoured', async () => {
    // 127.0.0.2 is loopback too, but a server bound to it alone does not answer on 127.0.0.1. This
    // test holds 127.0.0.1 on the same port (so no other program can be there): the service starts
    // beside it, and a connection to 127.0.0.1 reaches the holder.
    const held = await occupy();
    const port = held.port;
    const run = start({ PORT: String(port), DATA_DIR: dataDir, HOST: '127.0.0.2' });
    try {
      expect(await healthy(run, '127.0.0.2')).toBe(port);
      expect(await accepts('127.0.0.1', port)).toBe(true);
      await held.connected;
    } finally {
      await held.close();
    }
    expect(run.stdout()).toContain(`Listening on 127.0.0.2 port ${port}`);
    const postgres = postgresOf(dataDir);
    expect(postgres.length).toBeGreaterThan(0);
    // Postgres is not in the service's process group: the terminal's SIGINT does not reach it.
    const group = Number(fs.readFileSync(`/proc/${run.child.pid}/stat`, 'utf8').split(') ')[1].split(' ')[2]);
    const postmaster = Number(fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
    const postmasterGroup = Number(fs.readFileSync(`/proc/${postmaster}/stat`, 'utf8').split(') ')[1].split(' ')[2]);
    expect(postmasterGroup).not.toBe(group);

    process.kill(-run.child.pid!, 'SIGINT');
    expect(await run.exit).toBe(0);
    expectNoErrorLines(run);
    expect(run.stdout()).toContain('"msg":"shutting down"');
    expect(postgresOf(dataDir)).toEqual([]);
    expect(fs.existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
  });

  it('SIGTERM stops everything: exit 0, no error line; by default only loopback 127.0.0.1 listens', async () => {
    const run = start({ PORT: '0', DATA_DIR: dataDir });
    const port = await healthy(run, '127.0.0.1');
    expect(run.stdout()).toContain(`Listening on 127.0.0.1 port ${port}`);
    // Not on every interface: another loopback address gets no answer.
    expect(await accepts('127.0.0.2', port)).toBe(false);
    expect(postgresOf(dataDir).length).toBeGreaterThan(0);

    // The README's first-key recipe, against this service: it stops at a failing step with the
    // service's answer, and runs through with the right token.
    const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## A first API key'));
    const recipe = /```sh\n([\s\S]*?)```/.exec(section)![1].replaceAll('localhost:3000', `127.0.0.1:${port}`);
    const wrong = path.join(tmp, 'wrong-token');
    fs.mkdirSync(path.join(wrong, '.data'), { recursive: true });
    fs.writeFileSync(path.join(wrong, '.data', 'admin-token'), 'adm_not-the-token\n');
    const refused = await bash(recipe, wrong);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr.trim().split('\n').at(-1)).toMatch(/^failed: \{"type":"http:\/\/localhost:\d+\/problems\/unauthorized"/);
    expect(refused.stderr).not.toContain('undefined');
    const ok = await bash(recipe, path.dirname(dataDir).concat('/served-cwd'), dataDir);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ organization: { name: 'Acme', plan: 'starter' } });

    run.child.kill('SIGTERM');
    expect(await run.exit).toBe(0);
    expectNoErrorLines(run);
    expect(postgresOf(dataDir)).toEqual([]);
    expect(fs.existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
  });
  it('a real SMTP_URL with PUBLIC_BASE_URL unset (http://localhost): one warning line naming PUBLIC_BASE_URL and ALLOW_INSECURE_LINKS, and the service runs on', async () => {
    // SMTP_URL is never connected to here: nothing is sent.
    const run = start({
      PORT: '0',
      DATA_DIR: dataDir,
      SMTP_URL: 'smtp://smtp.example.com:587',
      ALLOW_INSECURE_LINKS: '',
      PUBLIC_BASE_URL: '',
    });
    await healthy(run, '127.0.0.1');
    const warnings = lines(run.stdout())
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: number; msg: string })
      .filter((l) => l.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0].msg).toMatch(
      /^PUBLIC_BASE_URL http:\/\/localhost:\d+ names a local host name: .*SMTP_URL is set.*\(insecure_links\).*ALLOW_INSECURE_LINKS=true/,
    );
    run.child.kill('SIGTERM');
    expect(await run.exit).toBe(0);
    expectNoErrorLines(run);
  });
});
