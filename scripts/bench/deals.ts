// Deals benchmark: an organization with 100,000 deals (seeded in SQL), then
//   GET /deals?limit=50                 first page, the board's default read (target p99 < 30 ms at 50 connections);
//   POST /deals/{id}/stage              one client moving one deal round the active stages.
import type { BenchArea, BenchContext } from './types.js';

const DEALS = 100_000;
const ACTIVE_SLUGS = ['qualification', 'discovery', 'proposal', 'negotiation', 'prospecting'];

async function api(ctx: BenchContext, key: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${ctx.origin}/api/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status >= 300) throw new Error(`${method} ${path} -> ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

/** Seeds the deals (and their creation history rows) with set-based SQL. */
async function seed(ctx: BenchContext, orgId: string, ownerId: string, stageIds: string[]): Promise<void> {
  const client = await ctx.pool.connect();
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    await client.query('BEGIN');
    // Deals spread over the five active stages, values and close dates varied, created one
    // second apart so pages and cursors behave as in real use.
    await client.query(
      `
      INSERT INTO deals (organization_id, id, name, value_cents, probability, close_date, owner_sales_person_id,
                         stage_id, forecast_category, created_at, updated_at)
      SELECT $1, 'deal_bench' || lpad(g::text, 8, '0'), 'Bench deal ' || g, (g % 1000) * 10000, g % 101,
             current_date + 30 + (g % 300), $2, ($3::text[])[1 + g % 5], 'pipeline',
             date_trunc('milliseconds', now() - g * interval '1 second'), date_trunc('milliseconds', now() - g * interval '1 second')
      FROM generate_series(1, $4::int) g`,
      [orgId, ownerId, stageIds, DEALS],
    );
    await client.query(
      `
      INSERT INTO deal_stage_history (organization_id, id, deal_id, from_stage_id, from_stage_name, to_stage_id, to_stage_name,
                                      reason, transitioned_by, created_at)
      SELECT d.organization_id, 'dsh_bench' || substr(d.id, 11), d.id, NULL, NULL, d.stage_id, s.name, NULL, $2, d.created_at
      FROM deals d JOIN deal_stages s ON s.organization_id = d.organization_id AND s.id = d.stage_id
      WHERE d.organization_id = $1 AND d.id LIKE 'deal_bench%'`,
      [orgId, ownerId],
    );
    await client.query('COMMIT');
    await client.query('ANALYZE deals');
    await client.query('ANALYZE deal_stage_history');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}

async function insertContact(ctx: BenchContext, orgId: string): Promise<string> {
  const client = await ctx.pool.connect();
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    const id = `con_bench${Date.now().toString(16)}`;
    await client.query(
      `INSERT INTO contacts (organization_id, id, list_id, email, email_normalized, name)
      VALUES ($1, $2, 'lst_bench', 'bench@example.com', 'bench@example.com', 'Bench Buyer')`,
      [orgId, id],
    );
    return id;
  } finally {
    client.release();
  }
}

const area: BenchArea = {
  name: 'deals',
  async run(ctx) {
    const { orgId, key, ownerId } = await ctx.newOrg('growth');
    // The first stage-less deal opens the board (seeds the default stages) through the API.
    const contactId = await insertContact(ctx, orgId);
    const mover = (await api(ctx, key, 'POST', '/deals', {
      name: 'Bench mover',
      valueCents: 5_000_000,
      closeDate: '2031-01-31',
      primaryContactId: contactId,
    })) as { id: string };
    const stages = (await api(ctx, key, 'GET', '/deal-stages')).data as { id: string; slug: string; category: string }[];
    const active = stages.filter((s) => s.category === 'active').map((s) => s.id);
    const started = Date.now();
    await seed(ctx, orgId, ownerId, active);
    ctx.log(`deals: seeded ${DEALS} deals in ${((Date.now() - started) / 1000).toFixed(1)} s`);

    const auth = { authorization: `Bearer ${key}` };
    await ctx.load({ path: '/api/v1/deals?limit=50', headers: auth, connections: 50, durationSeconds: 3 }); // warm-up
    const list = await ctx.load({ path: '/api/v1/deals?limit=50', headers: auth, connections: 50, durationSeconds: 10 });
    ctx.report({
      area: 'deals',
      case: `GET /deals?limit=50 (${DEALS.toLocaleString('en')} deals, 50 connections)`,
      figures: {
        'req/s': Math.round(list.requestsPerSecond),
        'p50 ms': list.p50Ms,
        'p99 ms': list.p99Ms,
        non2xx: list.non2xx,
        errors: list.errors,
      },
      target: 'p99 < 30 ms',
      met: list.p99Ms < 30 && list.non2xx === 0 && list.errors === 0,
    });

    // One client moving one deal round the active stages: the latency of a board drag. The deal
    // meets every gate, so each move is a plain 200. (Concurrent moves of one deal serialize on
    // its row lock, and one aimed at the stage the deal already reached is a correct 400, so a
    // many-connection run on a single deal measures lock contention, not the operation.)
    let n = 0;
    const move = await ctx.load({
      path: `/api/v1/deals/${mover.id}/stage`,
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      makeBody: () => JSON.stringify({ stage: ACTIVE_SLUGS[n++ % ACTIVE_SLUGS.length], reason: 'bench move' }),
      connections: 1,
      durationSeconds: 10,
    });
    ctx.report({
      area: 'deals',
      case: `POST /deals/{id}/stage (${DEALS.toLocaleString('en')} deals, 1 connection)`,
      figures: {
        'req/s': Math.round(move.requestsPerSecond),
        'p50 ms': move.p50Ms,
        'p99 ms': move.p99Ms,
        non2xx: move.non2xx,
        errors: move.errors,
      },
    });
  },
};

export default area;
