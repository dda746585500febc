// The operator's view of the process: start on a fresh DATA_DIR, survive a crashed earlier run
// (orphaned postmaster), drain on SIGTERM, and refuse a bad configuration with one clear line.

import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from './support/wait.js';

const root = new URL('..', import.meta.url).pathname;
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'outbound-lifecycle-'));
afterAll(async () => {
  // A test that failed half-way leaves no service (and so no Postgres) running.
  for (const child of outOf.keys()) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    child.kill('SIGTERM');
    await exited(child);
  }
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const outOf = new Map<ChildProcess, () => string>();

function start(env: Record<string, string>): { child: ChildProcess; out: () => string } {
  let out = '';
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/boot/main.ts'], {
    cwd: root,
    env: { ...process.env, DATABASE_URL: '', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d) => {
    out += d;
  });
  child.stderr!.on('data', (d) => {
    out += d;
  });
  outOf.set(child, () => out);
  return { child, out: () => out };
}

/**
 * Waits until the service answers /healthz; returns its port. The service listens on PORT=0 (a
 * port the system picks and the service prints), never on one probed free beforehand, which a
 * parallel test file could take in between.
 */
async function healthy(child: ChildProcess): Promise<number> {
  return waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`service exited: ${outOf.get(child)?.() ?? ''}`);
      const m = /Listening on \S+ port (\d+)/.exec(outOf.get(child)?.() ?? '');
      try {
        if (m && (await fetch(`http://127.0.0.1:${m[1]}/healthz`)).ok) return Number(m[1]);
      } catch {
        /* starting */
      }
      return null;
    },
    30_000,
    'the service to become healthy',
    100,
  );
}

const exited = (child: ChildProcess) =>
  new Promise<number | null>((r) => {
    if (child.exitCode !== null) r(child.exitCode);
    else child.once('exit', (code) => r(code));
  });

function postmasterPid(): number | null {
  const f = path.join(dataDir, 'pg', 'postmaster.pid');
  return fs.existsSync(f) ? Number(fs.readFileSync(f, 'utf8').split('\n')[0]) : null;
}
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('process lifecycle', () => {
  it('starts on a fresh DATA_DIR, recovers from a killed run, and drains on SIGTERM', async () => {
    const env = { DATA_DIR: dataDir, PORT: '0' };
    const first = start(env);
    const port = await healthy(first.child);
    expect(first.out()).toMatch(new RegExp(`API: +http://localhost:${port}/api/v1`));
    expect(first.out()).toMatch(new RegExp(`API docs: +http://localhost:${port}/docs `));
    expect(first.out()).toContain(`Operator token: in ${path.join(dataDir, 'admin-token')}`);
    const token = fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim();
    const org = await fetch(`http://127.0.0.1:${port}/admin/api/organizations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"name":"Before crash"}',
    });
    expect(org.status).toBe(201);

    // A crash: the process dies without stopping its Postgres, which keeps running as an orphan.
    const orphan = postmasterPid();
    expect(orphan).not.toBeNull();
    first.child.kill('SIGKILL');
    await exited(first.child);
    expect(alive(orphan!)).toBe(true);

    const second = start(env);
    const again = await healthy(second.child);
    expect(alive(orphan!)).toBe(false);
    // The data of the earlier run survived.
    const key = await fetch(`http://127.0.0.1:${again}/admin/api/organizations/${((await org.json()) as { id: string }).id}/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"scopes":["*"]}',
    });
    expect(key.status).toBe(201);

    const pid = postmasterPid()!;
    second.child.kill('SIGTERM');
    expect(await exited(second.child)).toBe(0);
    expect(alive(pid)).toBe(false);
  });

  it('refuses a bad configuration with one line naming the variable', async () => {
    const bad = start({ DATA_DIR: dataDir, PORT: 'eighty' });
    expect(await exited(bad.child)).toBe(1);
    const lines = bad
      .out()
      .trim()
      .split('\n')
      .filter((l) => !/nodedir|npm warn/.test(l));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^configuration error: PORT /);
  });
});
