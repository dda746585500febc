// Analytics bench: organizations whose year (2025) holds 100,000 and 10,000,000 sends (sizes
// configurable: BENCH_ANALYTICS_SENDS, comma-separated), each with a sequence per three sends, a
// reply per fifth sequence and a deal per second one (seeded with set-based SQL, the funnel's
// rollups then built by funnel_rollups_rebuild, the function the migration backfills with), then
// at each size
//   1. GET /analytics/funnel over the whole year with the cache cold (its entry deleted before each
//      request), against the very same statement (src/analytics/funnel.ts funnelQuery) run bare
//      over pg, bound to the organization as the service's is, in the same run, interleaved.
//      Target: the service within 2x of the bare statement.
//   2. the same request answered from the cache, against the cold one. Target: a hit at least 20x
//      faster than a miss.
// and, across sizes, the cold funnel of the largest against the smallest. Target: within 2x (the
// rollups make the funnel's cost follow the window, not the history). The raw computation
// (src/analytics/funnel-reference.ts) is timed once per size up to 1,000,000 sends, for reference.
// Medians of sequential requests after one warm-up each (buffers and prepared statements warm, as
// in a running service: "cold" is the cache entry, not the machine).
import pg from 'pg';
import { APP_ROLE, roleUrl } from '../../db/database.js';
import { funnelQuery } from '../../src/analytics/funnel.js';
import { referenceFunnelQuery } from '../../src/analytics/funnel-reference.js';
import type { BenchArea, BenchContext } from './types.js';

const SIZES = (process.env.BENCH_ANALYTICS_SENDS ?? '100000,10000000').split(',').map((x) => Number(x.trim()));
const SENDS_PER_SEQUENCE = 3;
/** The raw computation is timed only up to this many sends (it grows with them: minutes beyond). */
const REFERENCE_MAX_SENDS = 1_000_000;
const FROM = '2025-01-01';
const TO = '2025-12-31';
const COLD_RUNS = Number(process.env.BENCH_ANALYTICS_RUNS ?? 7);
const HIT_RUNS = 200;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

interface Size {
  sends: number;
  sequences: number;
  replies: number;
  deals: number;
}

const sizeOf = (sends: number): Size => {
  const sequences = Math.round(sends / SENDS_PER_SEQUENCE);
  return { sends: sequences * SENDS_PER_SEQUENCE, sequences, replies: Math.floor(sequences / 5), deals: Math.floor(sequences / 2) };
};

/**
 * Seeds the organization in one transaction of set-based statements, the rollup triggers off
 * (a bulk load), then builds its rollups with funnel_rollups_rebuild as the migration does.
 */
async function seed(ctx: BenchContext, orgId: string, ownerId: string, size: Size): Promise<void> {
  const { sequences: SEQUENCES, replies: REPLIES, deals: DEALS } = size;
  // Sequence g starts at 2025-01-01 + g x step (the year).
  const step = `${(365 * 86_400) / SEQUENCES} seconds`;
  const client = await ctx.pool.connect();
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    await client.query('BEGIN');
    await client.query('SET LOCAL session_replication_role = replica');
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
             'Person ' || g, timestamptz '2025-01-01' + g * interval '${step}', timestamptz '2025-01-01' + g * interval '${step}'
      FROM generate_series(1, $2::int) g`,
      [SEQUENCES],
    );
    await q(
      `INSERT INTO contact_sequences (organization_id, id, contact_id, template_id, product_id, status, created_at, updated_at)
      SELECT $1, 'seq_b' || g, 'con_b' || g, 'tpl_b', CASE WHEN g % 6 = 0 THEN NULL ELSE 'prd_b' || (1 + g % 5) END, 'ACTIVE',
             timestamptz '2025-01-01' + g * interval '${step}', timestamptz '2025-01-01' + g * interval '${step}'
      FROM generate_series(1, $2::int) g`,
      [SEQUENCES],
    );
    // Three steps each: an hour, three days and a week after the start.
    await q(
      `INSERT INTO send_records (organization_id, id, contact_id, sequence_id, step, status, sent_at, created_at)
      SELECT $1, 'snd_b' || g || '_' || k, 'con_b' || g, 'seq_b' || g, k, CASE WHEN (g + k) % 50 = 0 THEN 'bounced' ELSE 'sent' END,
             timestamptz '2025-01-01' + g * interval '${step}' + (ARRAY[interval '1 hour', interval '3 days', interval '7 days'])[k],
             timestamptz '2025-01-01' + g * interval '${step}' + (ARRAY[interval '1 hour', interval '3 days', interval '7 days'])[k]
      FROM generate_series(1, $2::int) g, generate_series(1, $3::int) k`,
      [SEQUENCES, SENDS_PER_SEQUENCE],
    );
    // Replies to every fifth sequence, of every kind (out-of-office, bounces and automatic mail among them).
    await q(
      `INSERT INTO messages (organization_id, id, contact_id, direction, sequence_id, intent, automatic, body, created_at)
      SELECT $1, 'msg_b' || g, 'con_b' || (g * 5), 'INBOUND', 'seq_b' || (g * 5),
             (ARRAY['interested', 'not_interested', 'meeting_request', 'out_of_office', 'other', 'bounce', 'unsubscribe', 'other'])[1 + g % 8],
             g % 8 = 7, 'Reply', timestamptz '2025-01-01' + g * 5 * interval '${step}' + interval '2 days'
      FROM generate_series(1, $2::int) g`,
      [REPLIES],
    );
    // Deals for every second sequence's contact, two days after its start; a tenth with a meeting.
    await q(
      `INSERT INTO deals (organization_id, id, name, value_cents, owner_sales_person_id, primary_contact_id, stage_id, created_at, updated_at)
      SELECT $1, 'deal_b' || g, 'Deal ' || g, 100000 + (g % 50) * 1000, $3, 'con_b' || (g * 2),
             (ARRAY['stg_b1', 'stg_b2', 'stg_bw', 'stg_bl'])[1 + g % 4],
             timestamptz '2025-01-01' + g * 2 * interval '${step}' + interval '2 days', timestamptz '2025-01-01' + g * 2 * interval '${step}' + interval '2 days'
      FROM generate_series(1, $2::int) g`,
      [DEALS, ownerId],
    );
    await q(
      `INSERT INTO deal_contacts (organization_id, deal_id, contact_id) SELECT $1, 'deal_b' || g, 'con_b' || (g * 2) FROM generate_series(1, $2::int) g`,
      [DEALS],
    );
    await q(
      `INSERT INTO deal_activities (organization_id, id, deal_id, contact_id, kind, summary, occurred_at)
      SELECT $1, 'dac_b' || g, 'deal_b' || g, 'con_b' || (g * 2), 'meeting', 'Discovery call', timestamptz '2025-01-01' + g * 2 * interval '${step}' + interval '4 days'
      FROM generate_series(1, $2::int) g WHERE g % 10 = 0`,
      [DEALS],
    );
    await client.query('SET LOCAL session_replication_role = origin');
    await q('SELECT funnel_rollups_rebuild($1)');
    await client.query('COMMIT');
    // Vacuumed as well, as autovacuum leaves a settled table (index-only scans need the visibility map).
    await client.query(
      'VACUUM ANALYZE products, contact_lists, deal_stages, contacts, contact_sequences, send_records, messages, deals, deal_contacts, deal_activities, funnel_sequences, funnel_days, deal_days',
    );
  } finally {
    client.release();
  }
}

/** One size: seeds an organization, then times the cold funnel (bare and served) and the hit; returns the cold median. */
async function runSize(ctx: BenchContext, size: Size): Promise<number> {
  const label = `${size.sends.toLocaleString('en')} sends, ${size.sequences.toLocaleString('en')} sequences, ${size.replies.toLocaleString('en')} replies, ${size.deals.toLocaleString('en')} deals`;
  const { orgId, key, ownerId } = await ctx.newOrg('growth');
  const t0 = performance.now();
  await seed(ctx, orgId, ownerId, size);
  ctx.log(`${label}: seeded (rollups built) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  // The bare statement on a connection of its own, as the application role (row-level security
  // applies, as to the service) bound to the organization as a request's connection is.
  const bare = new pg.Client({ connectionString: roleUrl(ctx.pool.options.connectionString!, APP_ROLE) });
  await bare.connect();
  await bare.query(`select set_config('app.org_id', $1, false)`, [orgId]);
  const stmt = funnelQuery(orgId, FROM, TO);
  const runBare = async (q = stmt) => {
    const s = performance.now();
    const r = await bare.query(q.text, q.values);
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
    `${label}: totals: started ${totals.totals.sequencesStarted_count}, sent ${totals.totals.sequencesSent_count}, replied ${totals.totals.sequencesReplied_count}, meetings ${totals.totals.sequencesWithMeeting_count}, deals ${totals.totals.dealsAttributed_count}, truncated ${totals.truncation.dealScanTruncated}`,
  );
  if (size.sends <= REFERENCE_MAX_SENDS) {
    // The raw computation, once warm: what a cold funnel cost before the rollups.
    const ref = referenceFunnelQuery(orgId, FROM, TO);
    await runBare(ref);
    const r = await runBare(ref);
    ctx.report({
      area: 'analytics',
      case: `raw computation of the funnel (src/analytics/funnel-reference.ts) run bare, a year of ${label} (reference)`,
      figures: { ms: r.ms.toFixed(1) },
    });
  }

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
    case: `funnel statement run bare over pg (a year of ${label}; reference)`,
    figures: {
      'median ms': bareMedian.toFixed(1),
      'min ms': Math.min(...bareMs).toFixed(1),
      'max ms': Math.max(...bareMs).toFixed(1),
      runs: COLD_RUNS,
    },
  });
  ctx.report({
    area: 'analytics',
    case: `GET /analytics/funnel over the year (${size.sends.toLocaleString('en')} sends), cache cold (miss)`,
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
    case: `GET /analytics/funnel over the year (${size.sends.toLocaleString('en')} sends), cache hit (${HIT_RUNS} sequential requests)`,
    figures: {
      'median ms': hitMedian.toFixed(2),
      'p99 ms': [...hitMs].sort((a, b) => a - b)[Math.floor(HIT_RUNS * 0.99)].toFixed(2),
      'miss / hit': speedup.toFixed(0),
    },
    target: 'a hit at least 20x faster than a miss',
    met: speedup >= 20,
  });
  return coldMedian;
}

const sizes = SIZES.map(sizeOf).sort((a, b) => a.sends - b.sends);

const area: BenchArea = {
  name: `analytics: funnel over a year at ${sizes.map((x) => x.sends.toLocaleString('en')).join(' and ')} sends`,
  async run(ctx: BenchContext) {
    const cold: number[] = [];
    for (const size of sizes) cold.push(await runSize(ctx, size));
    if (sizes.length > 1) {
      const ratio = cold.at(-1)! / cold[0];
      ctx.report({
        area: 'analytics',
        case: `GET /analytics/funnel over the year, cache cold: ${sizes.at(-1)!.sends.toLocaleString('en')} sends against ${sizes[0].sends.toLocaleString('en')}`,
        figures: { 'median ms': `${cold.at(-1)!.toFixed(1)} / ${cold[0].toFixed(1)}`, ratio: ratio.toFixed(2) },
        target: 'within 2x',
        met: ratio <= 2,
      });
    }
  },
};

export default area;
