// Bench: GET /api/v1/me through the full pipeline against a bare Hono route doing the
// same key lookup, in the same run. Target: full pipeline >= 50% of the bare route, p99 < 20 ms.
import net from 'node:net';
import type { BenchArea, BenchContext } from './types.js';

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}

const area: BenchArea = {
  name: 'platform: GET /me',
  async run(ctx: BenchContext) {
    const { key } = await ctx.newOrg();
    const port = await freePort();
    ctx.startProcess('scripts/bench/bare-server.ts', { ...ctx.serviceEnv, PORT: String(port) });
    const bareUrl = `http://127.0.0.1:${port}/bare/me`;
    for (let i = 0; i < 100; i += 1) {
      try {
        if ((await fetch(bareUrl, { headers: { authorization: `Bearer ${key}` } })).ok) break;
      } catch {
        /* starting */
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    const headers = { authorization: `Bearer ${key}` };
    await ctx.load({ path: '/api/v1/me', headers, durationSeconds: 3 }); // warm-up
    await ctx.load({ path: bareUrl, headers, durationSeconds: 3 });
    const full = await ctx.load({ path: '/api/v1/me', headers });
    const bare = await ctx.load({ path: bareUrl, headers });
    const ratio = full.requestsPerSecond / bare.requestsPerSecond;
    ctx.report({
      area: 'platform',
      case: 'GET /me bare Hono route (same key lookup)',
      figures: { 'req/s': bare.requestsPerSecond, p50: `${bare.p50Ms} ms`, p99: `${bare.p99Ms} ms` },
    });
    ctx.report({
      area: 'platform',
      case: 'GET /me full pipeline',
      figures: {
        'req/s': full.requestsPerSecond,
        p50: `${full.p50Ms} ms`,
        p99: `${full.p99Ms} ms`,
        ratio: `${Math.round(ratio * 100)}%`,
        errors: full.errors + full.non2xx,
      },
      target: '>= 50% of bare, p99 < 20 ms',
      met: ratio >= 0.5 && full.p99Ms < 20,
    });
  },
};
export default area;
