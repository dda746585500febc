// Research bench: POST /companies/{id}/research against a local company site with
// realistic page sizes (each HTML page padded to about 60 KB, as marketing pages are) and 50 ms of
// server latency per answer. A service process of its own reads sites from this bench's site
// server (RESEARCH_SITE_URL_TEMPLATE). Figures: time per company (median of 5, one at a time),
// and 20 companies in parallel (wall time, pages fetched per second). The reference in the same
// run is the critical path of a crawl: its sequential fetch rounds (robots.txt, home page, sales
// pages and feed, articles) times the latency. Targets: one company well under 5 s; 20 in
// parallel within 2x of one.
import { freePort } from '../../db/embedded.js';
import { companySite, startSiteServer } from '../../test/support/site-server.js';
import type { BenchArea, BenchContext } from './types.js';

const LATENCY_MS = 50;
const PAD_BYTES = 60 * 1024;
const PARALLEL = 20;
/** robots.txt, home page, the sales pages and feed (in parallel), the newest articles (in parallel). */
const SEQUENTIAL_ROUNDS = 4;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const area: BenchArea = {
  name: `research: one company and ${PARALLEL} in parallel, ${LATENCY_MS} ms per page`,
  async run(ctx: BenchContext) {
    const site = await startSiteServer({ latencyMs: LATENCY_MS });
    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    const child = ctx.startProcess('src/boot/main.ts', {
      ...ctx.serviceEnv,
      PORT: String(port),
      PUBLIC_BASE_URL: origin,
      RESEARCH_SITE_URL_TEMPLATE: site.template,
      RESEARCH_ALLOW_PRIVATE_TARGETS: 'true',
    });
    try {
      for (let i = 0; ; i += 1) {
        try {
          if ((await fetch(`${origin}/healthz`)).ok) break;
        } catch {
          /* starting */
        }
        if (i > 200 || child.exitCode !== null) throw new Error('research service did not start');
        await new Promise((r) => setTimeout(r, 100));
      }
      const { orgId, key } = await ctx.newOrg();
      const adm = await fetch(`${origin}/admin/api/organizations/${orgId}`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${ctx.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ researchBudget: 1000 }),
      });
      if (!adm.ok) throw new Error(`raise budget: ${adm.status}`);
      const call = async (method: string, path: string, body?: unknown) => {
        const res = await fetch(`${origin}/api/v1${path}`, {
          method,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const json = (await res.json()) as Record<string, unknown>;
        if (res.status >= 300) throw new Error(`${method} ${path} -> ${res.status}: ${JSON.stringify(json)}`);
        return json;
      };
      let n = 0;
      const newCompany = async () => {
        n += 1;
        const domain = `bench${n}-${Date.now().toString(36)}.example`;
        site.site(domain, companySite(domain, site.origin, { padBytes: PAD_BYTES }));
        return (await call('POST', '/companies', { domain })).id as string;
      };
      const researchOne = async (id: string) => {
        const t = performance.now();
        const r = await call('POST', `/companies/${id}/research`);
        const cov = r.coverage as { pagesFetched: number; requests: number; lowConfidence: boolean; durationMs: number };
        if (cov.lowConfidence) throw new Error(`research of ${id} came back low-confidence: ${JSON.stringify(cov)}`);
        return { ms: performance.now() - t, pages: cov.pagesFetched, requests: cov.requests, crawlMs: cov.durationMs };
      };

      await researchOne(await newCompany()); // warm-up
      const singles: number[] = [];
      let pagesPerCompany = 0;
      let requestsPerCompany = 0;
      for (let i = 0; i < 5; i += 1) {
        const r = await researchOne(await newCompany());
        singles.push(r.ms);
        pagesPerCompany = r.pages;
        requestsPerCompany = r.requests;
      }
      const one = median(singles);
      // A burst of the same size first, so connection pools and prepared statements are warm as
      // they are in a service that has been running.
      await Promise.all((await Promise.all(Array.from({ length: PARALLEL }, () => newCompany()))).map((id) => researchOne(id)));
      const ids = await Promise.all(Array.from({ length: PARALLEL }, () => newCompany()));
      const t0 = performance.now();
      const results = await Promise.all(ids.map((id) => researchOne(id)));
      const wall = performance.now() - t0;
      const pages = results.reduce((s, r) => s + r.pages, 0);
      const requests = results.reduce((s, r) => s + r.requests, 0);
      ctx.log(
        `crawl ms in parallel: median ${median(results.map((r) => r.crawlMs))}, max ${Math.max(...results.map((r) => r.crawlMs))}; request ms: median ${Math.round(median(results.map((r) => r.ms)))}`,
      );
      const floor = SEQUENTIAL_ROUNDS * LATENCY_MS;

      ctx.report({
        area: 'research',
        case: `one company (${pagesPerCompany} pages, ${requestsPerCompany} requests of ~${PAD_BYTES / 1024} KB, ${LATENCY_MS} ms latency each)`,
        figures: { 'median ms': Math.round(one), 'critical path ms': floor, 'ratio to critical path': (one / floor).toFixed(2) },
        target: 'well under 5 s',
        met: one < 5000,
      });
      ctx.report({
        area: 'research',
        case: `${PARALLEL} companies in parallel`,
        figures: {
          'wall ms': Math.round(wall),
          'pages/s': Math.round(pages / (wall / 1000)),
          'requests/s': Math.round(requests / (wall / 1000)),
          'ratio to one': (wall / one).toFixed(2),
        },
        target: 'within 2x of one company',
        met: wall <= 2 * one,
      });
    } finally {
      child.kill('SIGTERM');
      await site.close();
    }
  },
};

export default area;
