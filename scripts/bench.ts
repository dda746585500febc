// npm run bench [area ...]: starts the service as its own process on a fresh embedded Postgres
// (or DATABASE_URL), with the rate limit raised, and runs the area modules of scripts/bench/
// against it with autocannon. Prints every figure with its target.
import { type ChildProcess, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { migrate } from '../db/database.js';
import { freePort } from '../db/embedded.js';
import type { BenchArea, BenchContext, LoadOptions, LoadResult } from './bench/types.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const AREAS = [
  'platform',
  'crm',
  'webhooks',
  'deals',
  'research',
  'drafts',
  'guardrails',
  'sending',
  'inbound',
  'analytics',
  'ratios',
  'growth',
];

async function waitHealthy(origin: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 240; i += 1) {
    if (child.exitCode !== null) throw new Error('service exited during start');
    try {
      if ((await fetch(`${origin}/healthz`)).ok) return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error('service did not become healthy');
}

export function startProcess(script: string, env: Record<string, string>): ChildProcess {
  // The same runtime flags as `npm start` (package.json); BENCH_CPU_PROF_DIR=<dir> also writes a
  // CPU profile of each started process there (node --cpu-prof), read when it exits.
  const prof = process.env.BENCH_CPU_PROF_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF_DIR}`] : [];
  const child = spawn(process.execPath, [...prof, '--max-semi-space-size=32', '--import', 'tsx', script], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return child;
}

/**
 * The areas asked for, each with its arguments: the flags (`--list`), paths and names of things on
 * disk that follow its name (`mail-corpus ../corpora --list`). No area: the default set, plus
 * `mail-corpus` when BENCH_MAIL_CORPUS names its folder.
 */
function areasOf(argv: string[]): { name: string; args: string[] }[] {
  const asked: { name: string; args: string[] }[] = [];
  for (const a of argv) {
    const last = asked.at(-1);
    if (last && (a.startsWith('-') || a.includes(path.sep) || fs.existsSync(a))) last.args.push(a);
    else if (!a.startsWith('-')) asked.push({ name: a, args: [] });
  }
  if (asked.length) return asked;
  const all = AREAS.map((name) => ({ name, args: [] as string[] }));
  if (process.env.BENCH_MAIL_CORPUS) all.push({ name: 'mail-corpus', args: [process.env.BENCH_MAIL_CORPUS] });
  return all;
}

async function main() {
  const modules: { name: string; args: string[]; mod: BenchArea | null }[] = [];
  for (const { name, args } of areasOf(process.argv.slice(2))) {
    const file = path.join(root, 'scripts/bench', `${name}.ts`);
    const mod = fs.existsSync(file) ? ((await import(file)) as { default: BenchArea }).default : null;
    // An area that cannot run with what it was given says how to run it (or throws), before anything starts.
    const usage = mod?.usage?.(args) ?? null;
    if (usage !== null) console.log(usage);
    else modules.push({ name, args, mod });
  }
  if (modules.length === 0) process.exit(0);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'outbound-bench-'));
  let url = process.env.DATABASE_URL;
  let stopDb = async () => {};
  if (!url) {
    const { startEmbedded } = await import('../db/embedded.js');
    // The settings `npm start` runs with (durable commits): the references of the ratios area
    // (pgbench, the bare route) run against the same server.
    const db = await startEmbedded(path.join(work, 'data'), () => {});
    url = db.url;
    stopDb = db.stop;
  }
  await migrate(url);
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const adminToken = `adm_${crypto.randomBytes(16).toString('hex')}`;
  const serviceEnv = {
    DATABASE_URL: url,
    PORT: String(port),
    ADMIN_TOKEN: adminToken,
    DATA_DIR: path.join(work, 'files'),
    // Known to the bench too: the crm area signs the cursors of deep pages with it.
    WEBHOOK_SECRET_KEY: crypto.randomBytes(32).toString('hex'),
    RATE_LIMIT_PER_MINUTE: '10000000',
    LOG_LEVEL: 'warn',
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    PUBLIC_BASE_URL: origin,
    // The bench sends through a loopback SMTP sink with links on the loopback origin.
    ALLOW_INSECURE_LINKS: 'true',
  };
  const service = startProcess('src/boot/main.ts', serviceEnv);
  const children: ChildProcess[] = [service];
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  // Postgres stopping after a failed case ends the idle connections: the case's error is the one to report.
  pool.on('error', () => {});
  const rows: Parameters<BenchContext['report']>[0][] = [];
  try {
    await waitHealthy(origin, service);
    const adminCall = async (method: string, p: string, body?: unknown) => {
      const r = await fetch(`${origin}/admin/api${p}`, {
        method,
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        body: body ? JSON.stringify(body) : undefined,
      });
      if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${await r.text()}`);
      return r.json() as Promise<Record<string, unknown>>;
    };
    const ctx: BenchContext = {
      origin,
      adminToken,
      pool,
      async newOrg(plan = 'growth') {
        const org = await adminCall('POST', '/organizations', { name: `Bench ${crypto.randomBytes(3).toString('hex')}`, plan });
        const key = await adminCall('POST', `/organizations/${org.id}/api-keys`, { scopes: ['*'] });
        return { orgId: org.id as string, key: key.key as string, ownerId: (org.owner as { id: string }).id };
      },
      async load(o: LoadOptions): Promise<LoadResult> {
        const r = await autocannon({
          url: `${o.path.startsWith('http') ? '' : origin}${o.path}`,
          method: o.method ?? 'GET',
          headers: { 'content-type': 'application/json', ...(o.headers ?? {}) },
          body: o.body,
          connections: o.connections ?? 50,
          duration: o.durationSeconds ?? 10,
          ...(o.makeBody ? { requests: [{ setupRequest: (req: Record<string, unknown>) => ({ ...req, body: o.makeBody!() }) }] } : {}),
        } as autocannon.Options);
        return {
          requestsPerSecond: Math.round(r.requests.average),
          p50Ms: r.latency.p50,
          p99Ms: r.latency.p99,
          errors: r.errors,
          non2xx: r.non2xx,
        };
      },
      report(row) {
        rows.push(row);
        const figures = Object.entries(row.figures)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ');
        console.log(`[${row.area}] ${row.case}: ${figures}${row.target ? ` (target ${row.target}: ${row.met ? 'met' : 'NOT met'})` : ''}`);
      },
      log: (m) => console.log(`  ${m}`),
      serviceEnv,
      servicePid: service.pid ?? 0,
      startProcess: (s, e) => {
        const c = startProcess(s, e);
        children.push(c);
        return c;
      },
    };
    for (const { name, args, mod } of modules) {
      if (mod === null) {
        console.log(`[${name}] no bench module`);
        continue;
      }
      console.log(`== ${mod.name}`);
      await mod.run(ctx, args);
    }
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 1500));
    await pool.end();
    await stopDb();
    fs.rmSync(work, { recursive: true, force: true });
  }
  console.log('\n| area | case | figures | target | met |\n|---|---|---|---|---|');
  for (const r of rows) {
    console.log(
      `| ${r.area} | ${r.case} | ${Object.entries(r.figures)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')} | ${r.target ?? ''} | ${r.target ? (r.met ? 'yes' : 'no') : ''} |`,
    );
  }
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
