// Webhooks benchmark: two endpoints on one local receiver (in this process), both subscribed to
// suppression.added.
//   throughput  20,000 events written in one SQL transaction with their fan-out jobs (as emit
//               writes them); deliveries per second from the commit to the 40,000th arrival
//               (target >= 1,000/s on the 2-core machine);
//   latency     POST /suppression one at a time on an otherwise idle service; time from sending
//               the API call to the arrival of its event at the receiver (target p50 < 50 ms).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BenchArea, BenchContext } from './types.js';

const EVENTS = Number(process.env.BENCH_WEBHOOK_EVENTS ?? 20_000);
const LATENCY_SAMPLES = 300;

interface Receiver {
  url: string;
  arrivals: Map<string, number[]>;
  count: number;
  close(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const r: Receiver = { url: '', arrivals: new Map(), count: 0, close: async () => {} };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string; data: { email?: string } };
        const key = body.data.email ?? body.id;
        const list = r.arrivals.get(key);
        if (list) list.push(at);
        else r.arrivals.set(key, [at]);
      } catch {
        /* counted anyway */
      }
      r.count += 1;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  r.close = () =>
    new Promise<void>((ok) => {
      server.closeAllConnections();
      server.close(() => ok());
    });
  return r;
}

async function call(ctx: BenchContext, key: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${ctx.origin}/api/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path} -> ${res.status}: ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

async function until(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const round = (n: number) => Math.round(n * 10) / 10;

async function throughput(ctx: BenchContext, orgId: string, rx: Receiver): Promise<void> {
  const client = await ctx.pool.connect();
  let committedAt = 0;
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    await client.query('BEGIN');
    await client.query(
      `
      INSERT INTO events (organization_id, id, type, api_version, data, resource_type, resource_id)
      SELECT $1, 'evt_bench' || lpad(g::text, 8, '0'), 'suppression.added', '2026-07-21',
             jsonb_build_object('email', 'bench' || g || '@example.com', 'level', 'ADDRESS'), 'SuppressionEntry', 'sup_bench' || g
      FROM generate_series(1, $2::int) g`,
      [orgId, EVENTS],
    );
    await client.query(
      `
      SELECT enqueue_job('fanout_event', json_build_object('organizationId', $1::text, 'eventId', 'evt_bench' || lpad(g::text, 8, '0')))
      FROM generate_series(1, $2::int) g`,
      [orgId, EVENTS],
    );
    await client.query('COMMIT');
    committedAt = performance.now();
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    client.release();
  }
  const target = EVENTS * 2;
  await until(() => rx.count >= target, 600_000, `${target} deliveries`);
  const seconds = (performance.now() - committedAt) / 1000;
  const perSecond = Math.round(target / seconds);
  ctx.report({
    area: 'webhooks',
    case: `fan-out of ${EVENTS} events to 2 endpoints`,
    figures: { deliveries: target, seconds: round(seconds), deliveriesPerSecond: perSecond },
    target: '>= 1000 deliveries/s',
    met: perSecond >= 1000,
  });
}

async function latency(ctx: BenchContext, key: string, rx: Receiver): Promise<void> {
  const samples: number[] = [];
  for (let i = 0; i < LATENCY_SAMPLES; i += 1) {
    const email = `lat${i}-${Date.now()}@bench.example.com`;
    const sent = performance.now();
    await call(ctx, key, 'POST', '/suppression', { email, reason: 'bench' });
    await until(() => (rx.arrivals.get(email)?.length ?? 0) >= 2, 30_000, `the event of ${email}`);
    for (const at of rx.arrivals.get(email)!) samples.push(at - sent);
    await new Promise((r) => setTimeout(r, 10));
  }
  samples.sort((a, b) => a - b);
  const p50 = round(pct(samples, 50));
  const p99 = round(pct(samples, 99));
  ctx.report({
    area: 'webhooks',
    case: 'API call to webhook arrival (idle, 2 endpoints)',
    figures: { samples: samples.length, p50Ms: p50, p99Ms: p99 },
    target: 'p50 < 50 ms',
    met: p50 < 50,
  });
}

const area: BenchArea = {
  name: 'webhooks',
  async run(ctx) {
    const rx = await startReceiver();
    try {
      const { orgId, key } = await ctx.newOrg('growth');
      for (const path of ['/a', '/b']) {
        await call(ctx, key, 'POST', '/webhooks', { url: `${rx.url}${path}`, eventTypes: ['suppression.added'] });
      }
      ctx.log(`seeding ${EVENTS} events with their fan-out jobs`);
      await throughput(ctx, orgId, rx);
      await latency(ctx, key, rx);
    } finally {
      await rx.close();
    }
  },
};

export default area;
