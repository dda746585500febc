// Analytics bench: an organization with 100,000 sequences started over 2025, 300,000
// sends, 20,000 replies and 50,000 deals (seeded with SQL), then
//   1. GET /analytics/funnel over the whole year with the cache cold (its entry deleted before each
//      request), against the very same statement (src/analytics/funnel.ts funnelQuery) run bare
//      over pg, bound to the organization as the service's is, in the same run, interleaved.
//      Target: the service within 2x of the bare statement.
//   2. the same request answered from the cache, against the cold one. Target: a hit at least 20x
//      faster than a miss.
// Medians of sequential requests after one warm-up each (buffers and prepared statements warm, as
// in a running service: "cold" is the cache entry, not the machine).
import pg from 'pg';
import { APP_ROLE, roleUrl } from '../../db/database.js';
import { funnelQuery } from '../../src/analytics/funnel.js';
import type { BenchArea, BenchContext } from './types.js';

const SEQUENCES = 100_000;
const SENDS_PER_SEQUENCE = 3;
const REPLIES = 20_000;
const DEALS = 50_000;
const FROM = '2025-01-01';
const TO = '2025-12-31';
const COLD_RUNS = Number(process.env.BENCH_ANALYTICS_RUNS ?? 7);
const HIT_RUNS = 200;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Seeds the organization in one transaction of set-based statements. */
async function seed(ctx: BenchContext, orgId: string, ownerId: string): Promise<void> {
  const client = await ctx.pool.connect();
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    await client.query('BEGIN');
    const q = (text: string, values: unknown[] = []) => client.query(text, [orgId, ...values]);
    await q(`INSERT INTO products (organization_id, id, name) SELECT $1, 'prd_b' || g, 'Product ' || g FROM generate_series(1, 5) g`);
    await q(`INSERT INTO contact_lists (organization_id, id, name) SELECT $1, 'lst_b' || g, 'List ' || g FROM generate_series(1, 20) g`);
    await q(`INSERT INTO deal_stages (organization_id, id, slug, name, sort_order, category, is_terminal) VALUES
      ($1, 'stg_b1', 'prospecting', 'Prospecting', 1, 'active', false), ($1, 'stg_b2', 'proposal', 'Proposal', 2, 'active', false),
      ($1, 'stg_bw', 'closed_won', 'Closed won', 3, 'closed_won', true), ($1, 'stg_bl', 'closed_lost', 'Closed lost', 4, 'closed_lost', true)`);
    // Sequence g starts at 2025-01-01 + g x 315 s (the year), one contact each.
    await q(
      `INSERT INTO contacts (organization_id, id, list_id, email, email_normalized, name, created_at, updated_at)
      SELECT $1, 'con_b' || g, 'lst_b' || (1 + g % 20), 'p' || g || '@co' || (g % 500) || '.example.com', 'p' || g || '@co' || (g % 500) || '.example.com',
             'Person ' || g, timestamptz '2025-01-01' + g * interval '315 seconds', timestamptz '2025-01-01' + g * interval '315 seconds'
      FROM generate_series(1, $2::int) g`,
      [SEQUENCES],
    );
    await q(
      `INSERT INTO contact_sequences (organization_id, id, contact_id, template_id, product_id, status, created_at, updated_at)
      SELECT $1, 'seq_b' || g, 'con_b' || g, 'tpl_b', CASE WHEN g % 6 = 0 THEN NULL ELSE 'prd_b' || (1 + g % 5) END, 'ACTIVE',
             timestamptz '2025-01-01' + g * interval '315 seconds', timestamptz '2025-01-01' + g * interval '315 seconds'
      FROM generate_series(1, $2::int) g`,
      [SEQUENCES],
    );
    // Three steps each: an hour, three days and a week after the start.
    await q(
      `INSERT INTO send_records (organization_id, id, contact_id, sequence_id, step, status, sent_at, created_at)
      SELECT $1, 'snd_b' || g || '_' || k, 'con_b' || g, 'seq_b' || g, k, CASE WHEN (g + k) % 50 = 0 THEN 'bounced' ELSE 'sent' END,
             timestamptz '2025-01-01' + g * interval '315 seconds' + (ARRAY[interval '1 hour', interval '3 days', interval '7 days'])[k],
             timestamptz '2025-01-01' + g * interval '315 seconds' + (ARRAY[interval '1 hour', interval '3 days', interval '7 days'])[k]
      FROM generate_series(1, $2::int) g, generate_series(1, $3::int) k`,
      [SEQUENCES, SENDS_PER_SEQUENCE],
    );
    // Replies to every fifth sequence, of every kind (out-of-office, bounces and automatic mail among them).
    await q(
      `INSERT INTO messages (organization_id, id, contact_id, direction, sequence_id, intent, automatic, body, created_at)
      SELECT $1, 'msg_b' || g, 'con_b' || (g * 5), 'INBOUND', 'seq_b' || (g * 5),
             (ARRAY['interested', 'not_interested', 'meeting_request', 'out_of_office', 'other', 'bounce', 'unsubscribe', 'other'])[1 + g % 8],
             g % 8 = 7, 'Reply', timestamptz '2025-01-01' + g * 5 * interval '315 seconds' + interval '2 days'
      FROM generate_series(1, $2::int) g`,
      [REPLIES],
    );
    // Deals for every second sequence's contact, two days after its start; a tenth with a meeting.
    await q(
      `INSERT INTO deals (organization_id, id, name, value_cents, owner_sales_person_id, primary_contact_id, stage_id, created_at, updated_at)
      SELECT $1, 'deal_b' || g, 'Deal ' || g, 100000 + (g % 50) * 1000, $3, 'con_b' || (g * 2),
             (ARRAY['stg_b1', 'stg_b2', 'stg_bw', 'stg_bl'])[1 + g % 4],
             timestamptz '2025-01-01' + g * 2 * interval '315 seconds' + interval '2 days', timestamptz '2025-01-01' + g * 2 * interval '315 seconds' + interval '2 days'
      FROM generate_series(1, $2::int) g`,
      [DEALS, ownerId],
    );
    await q(
      `INSERT INTO deal_contacts (organization_id, deal_id, contact_id) SELECT $1, 'deal_b' || g, 'con_b' || (g * 2) FROM generate_series(1, $2::int) g`,
      [DEALS],
    );
    await q(
      `INSERT INTO deal_activities (organization_id, id, deal_id, contact_id, kind, summary, occurred_at)
      SELECT $1, 'dac_b' || g, 'deal_b' || g, 'con_b' || (g * 2), 'meeting', 'Discovery call', timestamptz '2025-01-01' + g * 2 * interval '315 seconds' + interval '4 days'
      FROM generate_series(1, $2::int) g WHERE g % 10 = 0`,
      [DEALS],
    );
    await client.query('COMMIT');
    // Vacuumed as well, as autovacuum leaves a settled table (index-only scans need the visibility map).
    await client.query(
      'VACUUM ANALYZE products, contact_lists, deal_stages, contacts, contact_sequences, send_records, messages, deals, deal_contacts, deal_activities',
    );
  } finally {
    client.release();
  }
}

const area: BenchArea = {
  name: `analytics: funnel over a year (${SEQUENCES.toLocaleString('en')} sequences, ${(SEQUENCES * SENDS_PER_SEQUENCE).toLocaleString('en')} sends, ${REPLIES.toLocaleString('en')} replies, ${DEALS.toLocaleString('en')} deals)`,
  async run(ctx: BenchContext) {
    const { orgId, key, ownerId } = await ctx.newOrg('growth');
    const t0 = performance.now();
    await seed(ctx, orgId, ownerId);
    ctx.log(`seeded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    // The bare statement on a connection of its own, as the application role (row-level security
    // applies, as to the service) bound to the organization as a request's connection is.
    const bare = new pg.Client({
      connectionString: roleUrl(ctx.pool.options.connectionString!, APP_ROLE),
    });
    await bare.connect();
    await bare.query(`select set_config('app.org_id', $1, false)`, [orgId]);
    const stmt = funnelQuery(orgId, FROM, TO);
    const runBare = async () => {
      const s = performance.now();
      const r = await bare.query(stmt.text, stmt.values);
      return { ms: performance.now() - s, rows: r.rowCount };
    };
    const path = `/api/v1/analytics/funnel?from=${FROM}&to=${TO}`;
    const request = async () => {
      const s = performance.now();
      const res = await fetch(`${ctx.origin}${path}`, { headers: { authorization: `Bearer ${key}` } });
      const text = await res.text();
      const ms = performance.now() - s;
      if (res.status !== 200) throw new Error(`funnel ${res.status}: ${text.slice(0, 300)}`);
      return { ms, cache: res.headers.get('x-service-cache'), text };
    };
    const evict = () => ctx.pool.query(`DELETE FROM analytics_cache WHERE organization_id = $1`, [orgId]);

    // Warm-up: one of each. BENCH_ANALYTICS_EXPLAIN=1 prints the statement's plan with timings.
    await runBare();
    if (process.env.BENCH_ANALYTICS_EXPLAIN) {
      for (const q of [stmt, funnelQuery(orgId, '2025-01-01', '2025-01-31')]) {
        const plan = await bare.query(`EXPLAIN (ANALYZE, BUFFERS) ${q.text}`, q.values);
        ctx.log(plan.rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n  '));
      }
    }
    await evict();
    const warm = await request();
    const totals = JSON.parse(warm.text) as { totals: Record<string, unknown>; truncation: { dealScanTruncated: boolean } };
    ctx.log(
      `totals: started ${totals.totals.sequencesStarted_count}, sent ${totals.totals.sequencesSent_count}, replied ${totals.totals.sequencesReplied_count}, meetings ${totals.totals.sequencesWithMeeting_count}, deals ${totals.totals.dealsAttributed_count}, truncated ${totals.truncation.dealScanTruncated}`,
    );

    const bareMs: number[] = [];
    const coldMs: number[] = [];
    for (let i = 0; i < COLD_RUNS; i += 1) {
      bareMs.push((await runBare()).ms);
      await evict();
      const r = await request();
      if (r.cache !== 'miss') throw new Error(`expected a miss, got ${r.cache}`);
      coldMs.push(r.ms);
    }
    const hitMs: number[] = [];
    await request(); // fills the cache
    for (let i = 0; i < HIT_RUNS; i += 1) {
      const r = await request();
      if (r.cache !== 'hit') throw new Error(`expected a hit, got ${r.cache}`);
      hitMs.push(r.ms);
    }
    await bare.end();

    const bareMedian = median(bareMs);
    const coldMedian = median(coldMs);
    const hitMedian = median(hitMs);
    const ratio = coldMedian / bareMedian;
    const speedup = coldMedian / hitMedian;
    ctx.report({
      area: 'analytics',
      case: `funnel statement run bare over pg (a year: ${SEQUENCES} sequences, ${SEQUENCES * SENDS_PER_SEQUENCE} sends, ${REPLIES} replies, ${DEALS} deals; reference)`,
      figures: {
        'median ms': bareMedian.toFixed(1),
        'min ms': Math.min(...bareMs).toFixed(1),
        'max ms': Math.max(...bareMs).toFixed(1),
        runs: COLD_RUNS,
      },
    });
    ctx.report({
      area: 'analytics',
      case: 'GET /analytics/funnel over the year, cache cold (miss)',
      figures: {
        'median ms': coldMedian.toFixed(1),
        'min ms': Math.min(...coldMs).toFixed(1),
        'max ms': Math.max(...coldMs).toFixed(1),
        'ratio to bare': ratio.toFixed(2),
      },
      target: 'within 2x of the bare statement',
      met: ratio <= 2,
    });
    ctx.report({
      area: 'analytics',
      case: `GET /analytics/funnel over the year, cache hit (${HIT_RUNS} sequential requests)`,
      figures: {
        'median ms': hitMedian.toFixed(2),
        'p99 ms': [...hitMs].sort((a, b) => a - b)[Math.floor(HIT_RUNS * 0.99)].toFixed(2),
        'miss / hit': speedup.toFixed(0),
      },
      target: 'a hit at least 20x faster than a miss',
      met: speedup >= 20,
    });
  },
};

export default area;
