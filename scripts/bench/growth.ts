// Bench: how each hot path's cost grows with the data, 10,000 to 10,000,000 rows. For each
// size N a fresh organization is seeded with set-based SQL: N contacts; N/3 sequences started over
// 2025 with three sends each (N send records), N/15 replies and N/6 deals; N send-queue rows, half
// of them due; N events over the last 360 days, in the event log's monthly partitions
// (src/platform/retention.ts). Then, at each size:
//   GET /contacts?limit=50           first page (50 connections, 5 s);
//   GET /events?limit=50             first page of the event log (50 connections);
//   GET /contacts?q=<surname>        a rare term, N/5,000 matches (10 connections, 5 s);
//   GET /analytics/funnel            the year, cache cold (its entry deleted before each; median of 3);
//   send queue claim                 the dispatcher's batch lock (src/dispatch/claim.ts lockBatch) in a
//                                    rolled-back transaction (median of 20).
import crypto from 'node:crypto';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { APP_ROLE, createPool, type Database, type Db, roleUrl } from '../../db/database.js';
import { funnelQuery } from '../../src/analytics/funnel.js';
import { handlers } from '../../src/boot/runtime.js';
import { lockBatch } from '../../src/dispatch/claim.js';
import { installCursorKey } from '../../src/http/paging.js';
import { captureRequest, type Statement } from './references.js';
import type { BenchArea, BenchContext } from './types.js';

const SIZES = (process.env.BENCH_GROWTH_SIZES ?? '10000,100000,1000000,10000000').split(',').map(Number);
const SURNAMES = 5_000;
const surname = (g: number) =>
  crypto
    .createHash('md5')
    .update(`l${g % SURNAMES}`)
    .digest('hex')
    .slice(0, 8);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function seed(ctx: BenchContext, orgId: string, ownerId: string, n: number): Promise<void> {
  const client = await ctx.pool.connect();
  const seqs = Math.floor(n / 3);
  const spacing = Math.floor(31_536_000 / seqs); // sequences spread over 2025, in seconds
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    const q = (text: string, values: unknown[] = []) => client.query(text, [orgId, ...values]);
    await q(`INSERT INTO contact_lists (organization_id, id, user_id, name) VALUES ($1, 'lst_growth', $2, 'Growth')`, [ownerId]);
    await q(`INSERT INTO deal_stages (organization_id, id, slug, name, sort_order, category, is_terminal) VALUES
      ($1, 'stg_g1', 'prospecting', 'Prospecting', 1, 'active', false), ($1, 'stg_gw', 'closed_won', 'Closed won', 2, 'closed_won', true)`);
    for (let lo = 1; lo <= n; lo += 250_000) {
      await q(
        `
        INSERT INTO contacts (organization_id, id, list_id, owner_user_id, email, email_normalized, name, created_at, updated_at)
        SELECT $1, 'con_g' || g, 'lst_growth', $2, 'p' || g || '@co' || (g % 50000) || '.example.com', 'p' || g || '@co' || (g % 50000) || '.example.com',
               initcap(substr(md5('f' || (g % 300)), 1, 6)) || ' ' || initcap(substr(md5('l' || (g % ${SURNAMES})), 1, 8)),
               timestamptz '2025-01-01' + g * interval '30 seconds', timestamptz '2025-01-01' + g * interval '30 seconds'
        FROM generate_series($3::int, $4::int) g`,
        [ownerId, lo, Math.min(n, lo + 249_999)],
      );
    }
    await q(
      `INSERT INTO contact_sequences (organization_id, id, contact_id, template_id, status, created_at, updated_at)
      SELECT $1, 'seq_g' || g, 'con_g' || g, 'tpl_g', 'ACTIVE', timestamptz '2025-01-01' + g * $3 * interval '1 second', timestamptz '2025-01-01' + g * $3 * interval '1 second'
      FROM generate_series(1, $2::int) g`,
      [seqs, spacing],
    );
    await q(
      `INSERT INTO send_records (organization_id, id, contact_id, sequence_id, step, status, sent_at, created_at)
      SELECT $1, 'snd_g' || g || '_' || k, 'con_g' || g, 'seq_g' || g, k, 'sent',
             timestamptz '2025-01-01' + g * $3 * interval '1 second' + k * interval '2 days', timestamptz '2025-01-01' + g * $3 * interval '1 second' + k * interval '2 days'
      FROM generate_series(1, $2::int) g, generate_series(1, 3) k`,
      [seqs, spacing],
    );
    await q(
      `INSERT INTO messages (organization_id, id, contact_id, direction, sequence_id, intent, automatic, body, created_at)
      SELECT $1, 'msg_g' || g, 'con_g' || (g * 5), 'INBOUND', 'seq_g' || (g * 5), (ARRAY['interested', 'not_interested', 'meeting_request', 'other'])[1 + g % 4],
             false, 'Reply', timestamptz '2025-01-01' + g * 5 * $3 * interval '1 second' + interval '3 days'
      FROM generate_series(1, $2::int) g`,
      [Math.floor(seqs / 5), spacing],
    );
    await q(
      `INSERT INTO deals (organization_id, id, name, value_cents, owner_sales_person_id, primary_contact_id, stage_id, created_at, updated_at)
      SELECT $1, 'deal_g' || g, 'Deal ' || g, 100000, $3, 'con_g' || (g * 2), (ARRAY['stg_g1', 'stg_gw'])[1 + g % 2],
             timestamptz '2025-01-01' + g * 2 * $4 * interval '1 second' + interval '4 days', timestamptz '2025-01-01' + g * 2 * $4 * interval '1 second' + interval '4 days'
      FROM generate_series(1, $2::int) g`,
      [Math.floor(seqs / 2), ownerId, spacing],
    );
    await q(
      `INSERT INTO deal_contacts (organization_id, deal_id, contact_id) SELECT $1, 'deal_g' || g, 'con_g' || (g * 2) FROM generate_series(1, $2::int) g`,
      [Math.floor(seqs / 2)],
    );
    // The queue: every sequence's three steps; odd sequences due now, even ones next year.
    await q(
      `INSERT INTO send_queue (organization_id, id, sequence_id, step, contact_id, draft_id, scheduled_at, next_attempt_at, state)
      SELECT $1, 'sq_g' || g || '_' || k, 'seq_g' || g, k, 'con_g' || g, 'drf_g' || g || '_' || k,
             CASE WHEN g % 2 = 1 THEN now() - interval '1 hour' ELSE now() + interval '1 year' END,
             CASE WHEN g % 2 = 1 THEN now() - interval '1 hour' + g * interval '1 millisecond' ELSE now() + interval '1 year' END, 'queued'
      FROM generate_series(1, $2::int) g, generate_series(1, 3) k`,
      [seqs],
    );
    // The event log: N events over the last 360 days, newest now, in the monthly partitions the
    // sweep keeps (made here for the months back, as the migration does for existing rows).
    await client.query(`SELECT retention_ensure_partitions('events', (now() - interval '13 months')::date, now()::date)`);
    for (let lo = 1; lo <= n; lo += 1_000_000) {
      await q(
        `INSERT INTO events (organization_id, id, type, api_version, data, resource_type, resource_id, created_at)
        SELECT $1, 'evt_g' || g, (ARRAY['draft.sent', 'email.opened', 'reply.received', 'deal.stage_changed'])[1 + g % 4], '2026-07-21',
               jsonb_build_object('contactId', 'con_g' || g), 'Contact', 'con_g' || g,
               date_trunc('milliseconds', now()) - (g::float8 * 31104000000 / $4::int8) * interval '1 millisecond'
        FROM generate_series($2::int, $3::int) g`,
        [lo, Math.min(n, lo + 999_999), n],
      );
    }
    await client.query(`SELECT gin_clean_pending_list('contacts_search_trgm_idx')`);
    await client.query('VACUUM ANALYZE contacts, contact_sequences, send_records, messages, deals, deal_contacts, send_queue, events');
  } finally {
    client.release();
  }
}

interface Org {
  n: number;
  orgId: string;
  key: string;
  auth: Record<string, string>;
}

/**
 * The statement's own cost, which the machine's other load does not move: buffers touched
 * (shared hits + reads) and execution time, from EXPLAIN (ANALYZE, BUFFERS) as the application
 * role bound to the organization, in a rolled-back transaction; the second of two runs (warm).
 */
async function planCost(url: string, orgId: string, stmt: Statement): Promise<{ buffers: number; ms: number }> {
  const client = new pg.Client({ connectionString: roleUrl(url, APP_ROLE) });
  await client.connect();
  try {
    let out = { buffers: 0, ms: 0 };
    for (let i = 0; i < 2; i += 1) {
      await client.query('BEGIN');
      await client.query(`SELECT set_config('app.org_id', $1, true)`, [orgId]);
      const r = await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${stmt.sql}`, stmt.params);
      const plan = (r.rows[0] as Record<string, [{ Plan: Record<string, number>; 'Execution Time': number }]>)['QUERY PLAN'][0];
      out = { buffers: plan.Plan['Shared Hit Blocks'] + plan.Plan['Shared Read Blocks'], ms: plan['Execution Time'] };
      await client.query('ROLLBACK');
    }
    return out;
  } finally {
    await client.end();
  }
}

/** The last statement the handler ran that reads (the page's), captured from the service's code. */
async function handlerStatement(
  url: string,
  key: string,
  op: 'listContacts' | 'listEvents',
  query: Record<string, unknown>,
): Promise<Statement> {
  const all = await captureRequest(url, key, (conn: Db, auth) =>
    (handlers[op] as (c: unknown) => Promise<unknown>)({ trx: conn, auth, query }),
  );
  return all
    .slice(1)
    .filter((s) => /^\s*(select|with)\b/i.test(s.sql))
    .at(-1)!;
}
type Sample = { rps: number; p50: number; p99: number; errors: number };
const ROUNDS = 2;

const area: BenchArea = {
  name: `growth: hot paths at ${SIZES.map((s) => s.toLocaleString('en')).join(', ')} rows`,
  async run(ctx) {
    const url = ctx.serviceEnv.DATABASE_URL;
    // The list handlers run in this process to capture their statements; any key pages them (no cursor is decoded).
    installCursorKey(crypto.randomBytes(32));
    const claimSql: Statement[] = [];
    const owner = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: createPool(url, { max: 2, name: 'bench-growth' }) }),
      log: (e) => {
        if (e.level === 'query' && /FOR UPDATE SKIP LOCKED/.test(e.query.sql))
          claimSql.push({ sql: e.query.sql, params: [...e.query.parameters] });
      },
    });
    const orgs: Org[] = [];
    for (const n of SIZES) {
      const { orgId, key, ownerId } = await ctx.newOrg('growth');
      const t0 = performance.now();
      await seed(ctx, orgId, ownerId, n);
      ctx.log(`growth: seeded ${n.toLocaleString('en')} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      orgs.push({ n, orgId, key, auth: { authorization: `Bearer ${key}` } });
    }
    // The sizes are measured in turns, ROUNDS times, medians reported: the machine is shared, and
    // a burst of outside load should not fall on one size alone.
    const lists = new Map<number, Sample[]>();
    const eventPages = new Map<number, Sample[]>();
    const searches = new Map<number, Sample[]>();
    const funnels = new Map<number, number[]>();
    const claims = new Map<number, number[]>();
    const push = <T>(m: Map<number, T[]>, n: number, v: T) => m.set(n, [...(m.get(n) ?? []), v]);
    const sample = (r: { requestsPerSecond: number; p50Ms: number; p99Ms: number; errors: number; non2xx: number }): Sample => ({
      rps: r.requestsPerSecond,
      p50: r.p50Ms,
      p99: r.p99Ms,
      errors: r.errors + r.non2xx,
    });
    let batchRows = 0;
    try {
      for (const o of orgs) await ctx.load({ path: '/api/v1/contacts?limit=50', headers: o.auth, durationSeconds: 2 }); // warm-up
      for (let round = 0; round < ROUNDS; round += 1) {
        for (const o of orgs) {
          push(lists, o.n, sample(await ctx.load({ path: '/api/v1/contacts?limit=50', headers: o.auth, durationSeconds: 4 })));
          push(eventPages, o.n, sample(await ctx.load({ path: '/api/v1/events?limit=50', headers: o.auth, durationSeconds: 4 })));
          push(
            searches,
            o.n,
            sample(
              await ctx.load({
                path: `/api/v1/contacts?limit=50&q=${surname(1234)}`,
                headers: o.auth,
                connections: 10,
                durationSeconds: 4,
              }),
            ),
          );
          for (let i = 0; i < 3; i += 1) {
            await ctx.pool.query(`DELETE FROM analytics_cache WHERE organization_id = $1`, [o.orgId]);
            const s = performance.now();
            const res = await fetch(`${ctx.origin}/api/v1/analytics/funnel?from=2025-01-01&to=2025-12-31`, { headers: o.auth });
            await res.text();
            if (res.status !== 200) throw new Error(`funnel ${res.status}`);
            if (round > 0 || i > 0) push(funnels, o.n, performance.now() - s); // the first warms buffers and statements
          }
          for (let i = 0; i < 11; i += 1) {
            await owner.connection().execute(async (conn) => {
              await sql.raw(`BEGIN; SELECT set_config('app.org_id', '${o.orgId}', true)`).execute(conn);
              const s = performance.now();
              batchRows = (await lockBatch(conn, o.orgId, null)).rows.length;
              if (round > 0 || i > 0) push(claims, o.n, performance.now() - s);
              await sql.raw('ROLLBACK').execute(conn);
            });
          }
        }
      }
      // Each path's statement at each size, as EXPLAIN (ANALYZE, BUFFERS) sees it.
      for (const o of orgs) {
        claimSql.length = 0;
        await owner.connection().execute(async (conn) => {
          await sql.raw(`BEGIN; SELECT set_config('app.org_id', '${o.orgId}', true)`).execute(conn);
          await lockBatch(conn, o.orgId, null);
          await sql.raw('ROLLBACK').execute(conn);
        });
        const funnel = funnelQuery(o.orgId, '2025-01-01', '2025-12-31');
        const stmts: [string, Statement][] = [
          ['GET /contacts?limit=50', await handlerStatement(url, o.key, 'listContacts', { limit: 50 })],
          ['GET /events?limit=50', await handlerStatement(url, o.key, 'listEvents', { limit: 50 })],
          ['GET /contacts?q=<surname>', await handlerStatement(url, o.key, 'listContacts', { limit: 50, q: surname(1234) })],
          ['GET /analytics/funnel', { sql: funnel.text, params: funnel.values as unknown[] }],
          ['send queue claim (batch lock)', claimSql.at(-1)!],
        ];
        for (const [label, st] of stmts) {
          const c = await planCost(url, o.orgId, st);
          ctx.report({
            area: 'growth',
            case: `${label}: its statement alone (${o.n.toLocaleString('en')} rows; EXPLAIN ANALYZE, warm)`,
            figures: { buffers: c.buffers, 'execution ms': c.ms.toFixed(2) },
          });
        }
      }
    } finally {
      await owner.destroy();
    }
    const med = (xs: Sample[]) => ({
      'req/s': median(xs.map((x) => x.rps)),
      'p50 ms': median(xs.map((x) => x.p50)),
      'p99 ms': median(xs.map((x) => x.p99)),
      errors: xs.reduce((a, x) => a + x.errors, 0),
    });
    for (const o of orgs) {
      const size = `${o.n.toLocaleString('en')} rows`;
      ctx.report({ area: 'growth', case: `GET /contacts?limit=50 (${size}, 50 connections)`, figures: med(lists.get(o.n)!) });
    }
    for (const o of orgs) {
      const size = `${o.n.toLocaleString('en')} events`;
      ctx.report({ area: 'growth', case: `GET /events?limit=50 (${size}, 50 connections)`, figures: med(eventPages.get(o.n)!) });
    }
    for (const o of orgs) {
      ctx.report({
        area: 'growth',
        case: `GET /contacts?q=<surname> (${o.n.toLocaleString('en')} rows, ~${Math.round(o.n / SURNAMES)} matches, 10 connections)`,
        figures: med(searches.get(o.n)!),
      });
    }
    for (const o of orgs) {
      ctx.report({
        area: 'growth',
        case: `GET /analytics/funnel, a year, cache cold (${Math.floor(o.n / 3).toLocaleString('en')} sequences, ${o.n.toLocaleString('en')} sends)`,
        figures: { 'median ms': median(funnels.get(o.n)!).toFixed(1), runs: funnels.get(o.n)!.length },
      });
    }
    for (const o of orgs) {
      ctx.report({
        area: 'growth',
        case: `send queue claim: lock a batch of due steps (${o.n.toLocaleString('en')} queued, half due)`,
        figures: { 'median ms': median(claims.get(o.n)!).toFixed(2), 'batch rows': batchRows, runs: claims.get(o.n)!.length },
      });
    }
  },
};

export default area;
