// The two references every hot read is measured against in the same run:
//   (a) Postgres alone: pgbench (prepared statements, the same concurrency) running a script of
//       exactly the statements the service runs for the request, captured from the real code path;
//   (b) a bare Node route (node:http + pg + JSON.stringify; no framework, no validation) serving
//       the same page with the same statements (scripts/bench/bare-route-server.ts).
// `compare` measures the full pipeline and both references and reports the ratios.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Kysely, PostgresDialect } from 'kysely';
import { APP_ROLE, createPool, type Database, type Db, roleUrl } from '../../db/database.js';
import { freePort } from '../../db/embedded.js';
import { rolePassword } from '../../db/roles.js';
import { authenticate } from '../../src/http/auth.js';
import type { BenchContext, LoadResult } from './types.js';

/** One statement as the service sends it: text with $n placeholders and its values. */
export interface Statement {
  sql: string;
  params: unknown[];
}

const CONNECTIONS = 50;

/**
 * The statements one request runs, captured from the service's own code: the authentication
 * statement (src/http/auth.ts) then whatever `run` (a handler) executes on the same connection.
 */
export async function captureRequest(
  url: string,
  key: string,
  run?: (conn: Db, auth: Awaited<ReturnType<typeof authenticate>>['auth']) => Promise<unknown>,
): Promise<Statement[]> {
  const seen: Statement[] = [];
  const pool = createPool(roleUrl(url, APP_ROLE), { max: 1, name: 'bench-capture' });
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool }),
    log: (e) => {
      if (e.level === 'query') seen.push({ sql: e.query.sql, params: [...e.query.parameters] });
    },
  });
  try {
    await db.connection().execute(async (conn) => {
      const { auth } = await authenticate(conn, `Bearer ${key}`, 1e9);
      if (run) await run(conn, auth);
    });
  } finally {
    await db.destroy();
  }
  return seen;
}

function pgbenchBinary(): string {
  if (process.env.PGBENCH) return process.env.PGBENCH;
  for (const v of ['17', '16', '15', '14']) {
    const p = `/usr/lib/postgresql/${v}/bin/pgbench`;
    if (fs.existsSync(p)) return p;
  }
  return 'pgbench';
}

/** A parameter as pgbench's -D text (a bytea as \x hex, which Postgres reads back as bytea). */
const paramText = (v: unknown): string =>
  Buffer.isBuffer(v) ? `\\x${v.toString('hex')}` : v instanceof Date ? v.toISOString() : String(v);

export interface PgbenchResult {
  tps: number;
  latencyMs: number;
  failed: boolean;
  output: string;
}

/**
 * pgbench -M prepared with `clients` clients for `seconds` over a script holding `statements`
 * (placeholders become pgbench variables given with -D), connected as the application role and,
 * for statements that need it, bound to `orgId` from the start (the service binds the connection
 * in the authentication statement, which a script without it does not run).
 */
export async function pgbench(
  url: string,
  statements: Statement[],
  opts: { orgId?: string; clients?: number; seconds?: number } = {},
): Promise<PgbenchResult> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-pgbench-'));
  const defines: string[] = [];
  const script = statements
    .map((s, i) => {
      for (const [n, v] of s.params.entries()) defines.push('-D', `s${i}p${n + 1}=${paramText(v)}`);
      // One statement per script command: pgbench ends a command at the line end or a semicolon.
      return `${s.sql
        .replace(/\$(\d+)/g, (_m, n) => `:s${i}p${n}`)
        .replace(/\s+/g, ' ')
        .trim()};`;
    })
    .join('\n');
  // pgbench reads any `:name` as a variable, even inside a literal: such a statement cannot be run as it is.
  const stray = /:(?!s\d+p\d+\b)[A-Za-z_]\w*/.exec(script.replace(/::/g, ''));
  if (stray) throw new Error(`pgbench would read ${stray[0]} in the statement as a variable`);
  const file = path.join(dir, 'request.sql');
  fs.writeFileSync(file, `${script}\n`);
  const u = new URL(url);
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    PGOPTIONS: opts.orgId ? `-c app.org_id=${opts.orgId}` : '',
    PGHOST: u.searchParams.get('host') ?? u.hostname,
    PGPORT: u.port,
    PGUSER: APP_ROLE,
    PGPASSWORD: rolePassword(url, APP_ROLE),
    PGDATABASE: u.pathname.slice(1) || 'postgres',
  };
  const clients = opts.clients ?? CONNECTIONS;
  const args = ['-n', '-M', 'prepared', '-c', String(clients), '-j', '2', '-T', String(opts.seconds ?? 10), '-f', file, ...defines];
  const output = await new Promise<string>((resolve) => {
    const child = spawn(pgbenchBinary(), args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    child.on('error', (e) => resolve(`spawn failed: ${e.message}`));
    child.on('close', () => resolve(out));
  });
  fs.rmSync(dir, { recursive: true, force: true });
  const tps = /tps = ([\d.]+)/.exec(output);
  const lat = /latency average = ([\d.]+) ms/.exec(output);
  const failed = !tps || /failed transactions: [1-9]|aborted/.test(output);
  return { tps: tps ? Math.round(Number(tps[1])) : 0, latencyMs: lat ? Number(lat[1]) : 0, failed, output };
}

/** A reference case for the bare route server: the path it serves and the statements after authentication. */
export interface BareCase {
  path: string;
  statements: Statement[];
  limit?: number;
}

/** The bare route server: its origin and process id. */
export interface BareRoutes {
  origin: string;
  pid: number;
}

/** Starts the bare route server (its own process) serving `cases`; resolves once up. */
export async function startBareRoutes(ctx: BenchContext, cases: BareCase[], key: string): Promise<BareRoutes> {
  const port = await freePort();
  const encoded = cases.map((c) => ({ ...c, statements: c.statements.map((s) => ({ sql: s.sql, params: s.params.map(paramText) })) }));
  const child = ctx.startProcess('scripts/bench/bare-route-server.ts', {
    ...ctx.serviceEnv,
    PORT: String(port),
    BARE_CASES: JSON.stringify(encoded),
  });
  const origin = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i += 1) {
    try {
      if ((await fetch(`${origin}/bare${cases[0].path}`, { headers: { authorization: `Bearer ${key}` } })).ok) break;
    } catch {
      /* starting */
    }
    if (i > 200) throw new Error('bare route server did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
  return { origin, pid: child.pid ?? 0 };
}

/**
 * CPU time (user + system, ms) a process has used so far, from /proc (Linux); null elsewhere. CPU
 * per request barely moves with the machine's load, where requests per second on shared cores do.
 */
function cpuMs(pid: number): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return null;
  }
}

/** CPU microseconds per request the process `pid` spent on `load` (null without /proc). */
async function cpuPerRequest(
  pid: number,
  load: () => Promise<LoadResult>,
  seconds: number,
): Promise<{ load: LoadResult; cpuUs: number | null }> {
  const before = cpuMs(pid);
  const r = await load();
  const after = cpuMs(pid);
  const requests = r.requestsPerSecond * seconds;
  return { load: r, cpuUs: before === null || after === null || requests === 0 ? null : Math.round(((after - before) * 1000) / requests) };
}

const ROUNDS = 5;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const medianLoad = (rs: LoadResult[]): LoadResult => ({
  requestsPerSecond: median(rs.map((r) => r.requestsPerSecond)),
  p50Ms: median(rs.map((r) => r.p50Ms)),
  p99Ms: median(rs.map((r) => r.p99Ms)),
  errors: rs.reduce((a, r) => a + r.errors, 0),
  non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
});
const medianPg = (rs: PgbenchResult[]): PgbenchResult => ({
  tps: median(rs.map((r) => r.tps)),
  latencyMs: median(rs.map((r) => r.latencyMs)),
  failed: rs.some((r) => r.failed),
  output: rs.map((r) => r.output).join('\n'),
});
const pct = (a: number, b: number) => `${Math.round((a / Math.max(1, b)) * 100)}%`;
const figs = (r: LoadResult) => ({ 'req/s': r.requestsPerSecond, 'p50 ms': r.p50Ms, 'p99 ms': r.p99Ms, errors: r.errors + r.non2xx });

/**
 * Measures one case: the full pipeline at `path`, the bare route at `barePath`, and pgbench over
 * `request` (every statement of the request) and, when given, `alone` (the handler's statements
 * without authentication), all at 50 connections, in turns (ROUNDS rounds of `seconds`/ROUNDS, 4 s each);
 * reports each and the ratios against the targets.
 */
export async function compare(
  ctx: BenchContext,
  o: {
    area: string;
    label: string;
    key: string;
    path: string;
    bare: BareRoutes;
    barePath: string;
    request: Statement[];
    alone?: Statement[];
    orgId: string;
    pgTarget?: number;
    bareTarget?: number;
    seconds?: number;
  },
): Promise<void> {
  const headers = { authorization: `Bearer ${o.key}` };
  const url = ctx.serviceEnv.DATABASE_URL;
  await ctx.load({ path: o.path, headers, durationSeconds: 3 }); // warm-up
  await ctx.load({ path: `${o.bare.origin}${o.barePath}`, headers, durationSeconds: 3 });
  // The machine is shared: the three are measured in turns, ROUNDS times, and each figure is the
  // median of its rounds, so a burst of outside load does not fall on one of them alone.
  const seconds = Math.max(2, Math.round((o.seconds ?? 20) / ROUNDS));
  const fulls: LoadResult[] = [];
  const bares: LoadResult[] = [];
  const pgReqs: PgbenchResult[] = [];
  const pgAlones: PgbenchResult[] = [];
  const fullCpu: number[] = [];
  const bareCpu: number[] = [];
  for (let i = 0; i < ROUNDS; i += 1) {
    const f = await cpuPerRequest(ctx.servicePid, () => ctx.load({ path: o.path, headers, durationSeconds: seconds }), seconds);
    fulls.push(f.load);
    if (f.cpuUs !== null) fullCpu.push(f.cpuUs);
    const b = await cpuPerRequest(
      o.bare.pid,
      () => ctx.load({ path: `${o.bare.origin}${o.barePath}`, headers, durationSeconds: seconds }),
      seconds,
    );
    bares.push(b.load);
    if (b.cpuUs !== null) bareCpu.push(b.cpuUs);
    pgReqs.push(await pgbench(url, o.request, { seconds }));
    if (o.alone) pgAlones.push(await pgbench(url, o.alone, { orgId: o.orgId, seconds }));
  }
  const full = medianLoad(fulls);
  const bare = medianLoad(bares);
  const pgReq = medianPg(pgReqs);
  const pgAlone = o.alone ? medianPg(pgAlones) : null;
  for (const r of [pgReq, pgAlone]) if (r?.failed) ctx.log(`pgbench failed:\n${r.output}`);
  ctx.report({
    area: o.area,
    case: `${o.label}: Postgres alone, the request's ${o.request.length} statement(s) (pgbench -M prepared, 50 clients)`,
    figures: { tps: pgReq.tps, 'latency ms': pgReq.latencyMs, 'rounds tps': pgReqs.map((r) => r.tps).join('/') },
  });
  if (pgAlone)
    ctx.report({
      area: o.area,
      case: `${o.label}: Postgres alone, the handler's statement(s) only (pgbench -M prepared, 50 clients)`,
      figures: { tps: pgAlone.tps, 'latency ms': pgAlone.latencyMs, 'rounds tps': pgAlones.map((r) => r.tps).join('/') },
    });
  ctx.report({
    area: o.area,
    case: `${o.label}: bare Node route (node:http + pg + JSON.stringify, same statements)`,
    figures: {
      ...figs(bare),
      'rounds req/s': bares.map((r) => r.requestsPerSecond).join('/'),
      ...(bareCpu.length ? { 'node CPU us/req': median(bareCpu) } : {}),
    },
  });
  const toPg = full.requestsPerSecond / Math.max(1, pgReq.tps);
  const toBare = full.requestsPerSecond / Math.max(1, bare.requestsPerSecond);
  const tail = full.p99Ms < 4 * full.p50Ms;
  const met =
    (o.pgTarget === undefined || toPg >= o.pgTarget) &&
    (o.bareTarget === undefined || toBare >= o.bareTarget) &&
    tail &&
    full.errors + full.non2xx === 0;
  ctx.report({
    area: o.area,
    case: `${o.label}: full pipeline`,
    figures: {
      ...figs(full),
      'rounds req/s': fulls.map((r) => r.requestsPerSecond).join('/'),
      'of Postgres (request)': pct(full.requestsPerSecond, pgReq.tps),
      ...(pgAlone ? { 'of Postgres (handler only)': pct(full.requestsPerSecond, pgAlone.tps) } : {}),
      'of bare route': pct(full.requestsPerSecond, bare.requestsPerSecond),
      'p99/p50': (full.p99Ms / Math.max(1, full.p50Ms)).toFixed(1),
      // What the service's process spends per request against the bare route's: the throughput
      // ratio the machine's load cannot blur.
      ...(fullCpu.length ? { 'node CPU us/req': median(fullCpu) } : {}),
      ...(fullCpu.length && bareCpu.length ? { 'bare/full CPU': pct(median(bareCpu), median(fullCpu)) } : {}),
    },
    target: [
      ...(o.pgTarget !== undefined ? [`>= ${o.pgTarget * 100}% of Postgres`] : []),
      ...(o.bareTarget !== undefined ? [`>= ${o.bareTarget * 100}% of bare`] : []),
      'p99 < 4x p50',
    ].join(', '),
    met,
  });
}
