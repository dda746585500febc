// Drafts bench: POST /lists/{id}/generate over a 10,000-contact list (one step each),
// from the request to the last draft committed:
//   fallback   no model: the pipeline's own overhead (target >= 500 drafts/s);
//   model      a fake OpenAI-compatible model answering after 200 ms, LLM_CONCURRENCY=32 (target:
//              >= 80% of LLM_CONCURRENCY / 0.2 s, the most the model allows);
//   reads      GET /drafts?limit=50 against GET /contacts?limit=50 of the same organization, in the
//              same run (target: drafts within 1.5x of contacts).
// It runs on a database of its own in the bench cluster, with service processes of its own (one
// per case), so no other worker picks its jobs; the organization's draft allowance is raised by
// the operator (draftsPerMonth).
import pg from 'pg';
import { startFakeModel } from '../../test/support/fake-llm.js';
import { call, ownDatabase, startOwnService, stopProcess } from './own-service.js';
import type { BenchArea, BenchContext } from './types.js';

const CONTACTS = Number(process.env.BENCH_DRAFT_CONTACTS ?? 10_000);
const MODEL_DELAY_MS = 200;
const LLM_CONCURRENCY = 32;
const STEP = {
  dayOffset: 0,
  subject: 'A quick idea for {{company}}',
  body: 'Hi {{firstName}},\n\nWe help revenue teams book more meetings.\n\nWorth a call?\n\nBest,\nSam',
};

/** An organization with a 10,000-contact list on a one-step template, its key, and its list id. */
async function setup(origin: string, adminToken: string, pool: pg.Pool) {
  const org = await call(origin, adminToken, 'POST', '/admin/api/organizations', { name: 'Drafts bench', plan: 'growth' });
  const orgId = org.id as string;
  await call(origin, adminToken, 'PATCH', `/admin/api/organizations/${orgId}`, { draftsPerMonth: 10_000_000 });
  const key = (await call(origin, adminToken, 'POST', `/admin/api/organizations/${orgId}/api-keys`, { scopes: ['*'] })).key as string;
  const tpl = (
    await call(origin, adminToken, 'POST', `/admin/api/organizations/${orgId}/sequence-templates`, { name: 'One step', steps: [STEP] })
  ).id as string;
  const list = (await call(origin, key, 'POST', '/api/v1/lists', { name: 'Bench list', useCaseTemplateId: tpl })).id as string;
  const client = await pool.connect();
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    await client.query(
      `
      INSERT INTO contacts (organization_id, id, list_id, email, email_normalized, name, title, created_at, updated_at)
      SELECT $1, 'con_' || substr(md5($1 || g), 1, 24), $2, 'p' || g || '@co' || g || '.example.com', 'p' || g || '@co' || g || '.example.com',
             'Person ' || g, 'Head of Sales', now_ms() - g * interval '1 millisecond', now_ms()
      FROM generate_series(1, $3::int) g`,
      [orgId, list, CONTACTS],
    );
    await client.query('ANALYZE contacts');
  } finally {
    client.release();
  }
  return { orgId, key, list };
}

/** POST /lists/{id}/generate, then the time until every draft has committed. */
async function generateAll(origin: string, key: string, pool: pg.Pool, orgId: string, list: string): Promise<number> {
  const t0 = performance.now();
  await call(origin, key, 'POST', `/api/v1/lists/${list}/generate`);
  const client = await pool.connect();
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    for (;;) {
      const r = await client.query<{ n: string }>('SELECT count(*) AS n FROM drafts WHERE organization_id = $1', [orgId]);
      if (Number(r.rows[0].n) >= CONTACTS) break;
      await new Promise((res) => setTimeout(res, 100));
    }
  } finally {
    client.release();
  }
  return (performance.now() - t0) / 1000;
}

const area: BenchArea = {
  name: `drafts: list generation for ${CONTACTS.toLocaleString('en')} contacts, and list reads`,
  async run(ctx: BenchContext) {
    const url = await ownDatabase(ctx, 'bench_drafts');
    const pool = new pg.Pool({ connectionString: url, max: 3 });
    const model = await startFakeModel();
    model.answer(async (c) => {
      const p = JSON.parse(String(c.body.messages[1].content).split('\n\n')[0]) as { template: { subject: string; body: string } };
      return {
        delayMs: MODEL_DELAY_MS,
        content: JSON.stringify({ subject: p.template.subject, body: p.template.body, citations: [] }),
        usage: { prompt_tokens: 600, completion_tokens: 120 },
      };
    });
    try {
      // Fallback provider.
      let svc = await startOwnService(ctx, url);
      const a = await setup(svc.origin, ctx.adminToken, pool);
      const seconds = await generateAll(svc.origin, a.key, pool, a.orgId, a.list);
      const rate = CONTACTS / seconds;
      ctx.report({
        area: 'drafts',
        case: `list generation, fallback provider (${CONTACTS} contacts, 1 step)`,
        figures: { seconds: seconds.toFixed(1), 'drafts/s': Math.round(rate) },
        target: '>= 500 drafts/s',
        met: rate >= 500,
      });

      // Reads at 10,000 drafts, against contacts of the same organization, in the same run.
      const headers = { authorization: `Bearer ${a.key}` };
      await ctx.load({ path: `${svc.origin}/api/v1/drafts?limit=50`, headers, durationSeconds: 3 });
      const contacts = await ctx.load({ path: `${svc.origin}/api/v1/contacts?limit=50`, headers });
      const drafts = await ctx.load({ path: `${svc.origin}/api/v1/drafts?limit=50`, headers });
      const ratio = contacts.requestsPerSecond / drafts.requestsPerSecond;
      ctx.report({
        area: 'drafts',
        case: 'GET /contacts?limit=50 (same organization, reference)',
        figures: { 'req/s': contacts.requestsPerSecond, p50: `${contacts.p50Ms} ms`, p99: `${contacts.p99Ms} ms` },
      });
      ctx.report({
        area: 'drafts',
        case: `GET /drafts?limit=50 (${CONTACTS} drafts, 50 connections)`,
        figures: {
          'req/s': drafts.requestsPerSecond,
          p50: `${drafts.p50Ms} ms`,
          p99: `${drafts.p99Ms} ms`,
          'contacts/drafts': ratio.toFixed(2),
          errors: drafts.errors + drafts.non2xx,
        },
        target: 'within 1.5x of GET /contacts',
        met: ratio <= 1.5,
      });
      await stopProcess(svc.child);

      // A model answering after 200 ms.
      svc = await startOwnService(ctx, url, {
        LLM_BASE_URL: model.baseUrl,
        LLM_MODEL: 'bench-model',
        LLM_API_KEY: 'x',
        LLM_CONCURRENCY: String(LLM_CONCURRENCY),
      });
      const b = await setup(svc.origin, ctx.adminToken, pool);
      const mSeconds = await generateAll(svc.origin, b.key, pool, b.orgId, b.list);
      const mRate = CONTACTS / mSeconds;
      const ceiling = LLM_CONCURRENCY / (MODEL_DELAY_MS / 1000);
      ctx.report({
        area: 'drafts',
        case: `list generation, model answering after ${MODEL_DELAY_MS} ms (LLM_CONCURRENCY=${LLM_CONCURRENCY}, ${CONTACTS} contacts)`,
        figures: {
          seconds: mSeconds.toFixed(1),
          'drafts/s': Math.round(mRate),
          'ceiling drafts/s': ceiling,
          'share of ceiling': `${Math.round((100 * mRate) / ceiling)}%`,
          'model max in flight': model.maxInFlight,
        },
        target: '>= 80% of LLM_CONCURRENCY / 0.2 s',
        met: mRate >= 0.8 * ceiling,
      });
      await stopProcess(svc.child);
    } finally {
      await model.close();
      await pool.end();
    }
  },
};

export default area;
