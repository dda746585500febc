// GET /analytics/funnel: window validation (every 400 carries the max-window header), unit names
// and null rates, the cohort and single-attribution rules on crafted data (seeded with SQL at
// chosen instants), the 5,000-deal scan, ratesTrusted, and the Postgres cache per window, per
// organization and across API nodes.

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { funnelQuery } from '../src/analytics/funnel.js';
import { handlers } from '../src/boot/runtime.js';
import { createApp } from '../src/http/app.js';
import { planOf, system, uid } from './crm-support.js';
import { type PublicClient, raw, startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

const WINDOW_HEADER = 'x-service-analytics-max-window-days';
const UNIT = /_(count|cents|pct|pp)$/;

async function analyticsOrg() {
  const { org, key, api } = await svc.orgWithKey(['analytics.read']);
  return { org, key, api };
}

const funnel = (api: PublicClient, from: string, to: string) => api.GET('/analytics/funnel', { params: { query: { from, to } } });

async function funnelOk(api: PublicClient, from: string, to: string) {
  const r = await funnel(api, from, to);
  if (r.response.status !== 200 || !r.data) throw new Error(`funnel ${r.response.status}: ${JSON.stringify(r.error)}`);
  return { body: r.data, cache: r.response.headers.get('x-service-cache'), window: r.response.headers.get(WINDOW_HEADER) };
}

/** Every numeric field, at any depth, ends in its unit. */
function unitlessNumbers(node: unknown, path = '$'): string[] {
  if (Array.isArray(node)) return node.flatMap((v, i) => unitlessNumbers(v, `${path}[${i}]`));
  if (!node || typeof node !== 'object') return [];
  return Object.entries(node).flatMap(([k, v]) => [
    ...(typeof v === 'number' && !UNIT.test(k) ? [`${path}.${k}`] : []),
    ...unitlessNumbers(v, `${path}.${k}`),
  ]);
}

/** Instant of a UTC day of 2025 (`03-05`) at an hour. */
const at = (day: string, hour = 12) => `2025-${day}T${String(hour).padStart(2, '0')}:00:00.000Z`;

/** Seeds rows with SQL (row-level security in system mode) for one organization. */
function seeder(orgId: string, ownerId: string) {
  const run = (q: ReturnType<typeof sql>) => system(svc, (trx) => q.execute(trx));
  return {
    async stages() {
      await run(sql`INSERT INTO deal_stages (organization_id, id, slug, name, sort_order, category, is_terminal) VALUES
        (${orgId}, 'stg_open', 'open', 'Open', 1, 'active', false), (${orgId}, 'stg_more', 'more', 'Further', 2, 'active', false),
        (${orgId}, 'stg_won', 'won', 'Won', 3, 'closed_won', true), (${orgId}, 'stg_lost', 'lost', 'Lost', 4, 'closed_lost', true)`);
    },
    async product(id: string, name: string) {
      await run(sql`INSERT INTO products (organization_id, id, name) VALUES (${orgId}, ${id}, ${name})`);
    },
    async list(id: string, name: string, deleted = false) {
      await run(
        sql`INSERT INTO contact_lists (organization_id, id, name, deleted_at) VALUES (${orgId}, ${id}, ${name}, ${deleted ? sql`now()` : null})`,
      );
    },
    async contact(id: string, listId: string) {
      const email = `${id}@${uid('co')}.example`;
      await run(
        sql`INSERT INTO contacts (organization_id, id, list_id, email, email_normalized) VALUES (${orgId}, ${id}, ${listId}, ${email}, ${email})`,
      );
    },
    async sequence(id: string, contactId: string, created: string, o: { product?: string; list?: string } = {}) {
      await run(sql`INSERT INTO contact_sequences (organization_id, id, contact_id, template_id, product_id, list_id, status, created_at)
        VALUES (${orgId}, ${id}, ${contactId}, ${`tpl_${id}`}, ${o.product ?? null}, ${o.list ?? null}, 'ACTIVE', ${created})`);
    },
    async send(sequenceId: string, contactId: string, sentAt: string, status = 'sent') {
      await run(sql`INSERT INTO send_records (organization_id, id, contact_id, sequence_id, step, status, sent_at, created_at)
        VALUES (${orgId}, ${uid('snd_')}, ${contactId}, ${sequenceId}, 1, ${status}, ${sentAt}, ${sentAt})`);
    },
    async reply(sequenceId: string, contactId: string, createdAt: string, intent: string, automatic = false) {
      await run(sql`INSERT INTO messages (organization_id, id, contact_id, direction, sequence_id, intent, automatic, body, created_at)
        VALUES (${orgId}, ${uid('msg_')}, ${contactId}, 'INBOUND', ${sequenceId}, ${intent}, ${automatic}, 'text', ${createdAt})`);
    },
    async deal(id: string, created: string, o: { primary?: string; contacts?: string[]; stage?: string; value?: number } = {}) {
      await run(sql`INSERT INTO deals (organization_id, id, name, value_cents, owner_sales_person_id, primary_contact_id, stage_id, created_at)
        VALUES (${orgId}, ${id}, ${id}, ${o.value ?? null}, ${ownerId}, ${o.primary ?? null}, ${o.stage ?? 'stg_open'}, ${created})`);
      for (const c of o.contacts ?? [])
        await run(sql`INSERT INTO deal_contacts (organization_id, deal_id, contact_id) VALUES (${orgId}, ${id}, ${c})`);
    },
    async meeting(dealId: string, contactId: string, occurred: string) {
      await run(sql`INSERT INTO deal_activities (organization_id, id, deal_id, contact_id, kind, summary, occurred_at)
        VALUES (${orgId}, ${uid('act_')}, ${dealId}, ${contactId}, 'meeting', 'Intro call', ${occurred})`);
    },
  };
}

describe('GET /analytics/funnel window', () => {
  it('answers 400 validation-failed with X-Service-Analytics-Max-Window-Days: 366 for every bad window, changing nothing', async () => {
    const { org, key } = await analyticsOrg();
    const bad = [
      '',
      '?from=2025-01-01',
      '?to=2025-01-31',
      '?from=2025/01/01&to=2025-01-31',
      '?from=2025-01-01&to=soon',
      '?from=&to=2025-01-31',
      '?from=2025-01-01&to=',
      '?from=2025-1-01&to=2025-01-31',
      '?from=2025-02-30&to=2025-03-01',
      '?from=2025-01-01T00:00:00Z&to=2025-01-31',
      '?from=2025-02-01&to=2025-01-31',
      '?from=2024-01-01&to=2025-01-01',
    ];
    for (const q of bad) {
      const r = await raw(svc.baseUrl, 'GET', `/api/v1/analytics/funnel${q}`, { key });
      expect(r.status, q).toBe(400);
      expect(r.headers.get('content-type'), q).toMatch(/^application\/problem\+json/);
      expect(r.body.type, q).toBe(`${svc.baseUrl}/problems/validation-failed`);
      expect(r.headers.get(WINDOW_HEADER), q).toBe('366');
      expect(r.headers.get('x-service-cache'), q).toBeNull();
    }
    const rows = await system(svc, (trx) =>
      trx.selectFrom('analytics_cache').select('cache_key').where('organization_id', '=', org.id).execute(),
    );
    expect(rows).toEqual([]);
    // The typed client validates the 400 against the contract too.
    const typed = await funnel(svc.api(key), '2025-03-01', '2025-02-28');
    expect(typed.response.status).toBe(400);
    expect(typed.error?.detail).toMatch(/after/);
  });

  it('accepts one day and 366 inclusive days (a leap year), with the header on the 200', async () => {
    const { api } = await analyticsOrg();
    for (const [from, to] of [
      ['2024-01-01', '2024-12-31'],
      ['2025-06-01', '2025-06-01'],
      ['2025-01-01', '2026-01-01'],
    ]) {
      const r = await funnelOk(api, from, to);
      expect(r.window).toBe('366');
      expect(r.body.from).toBe(from);
      expect(r.body.to).toBe(to);
    }
  });

  it('is refused without analytics.read (403) and without a key (401)', async () => {
    const { key } = await svc.orgWithKey(['deals.read']);
    expect((await funnel(svc.api(key), '2025-01-01', '2025-01-31')).response.status).toBe(403);
    expect((await funnel(svc.api(), '2025-01-01', '2025-01-31')).response.status).toBe(401);
  });
});

describe('GET /analytics/funnel body', () => {
  it("names every numeric field's unit and answers null rates (never 0) in an empty organization", async () => {
    const { api } = await analyticsOrg();
    const { body } = await funnelOk(api, '2025-01-01', '2025-03-31');
    expect(unitlessNumbers(body)).toEqual([]);
    expect(body.totals).toEqual({
      key: null,
      label: null,
      sequencesStarted_count: 0,
      sequencesSent_count: 0,
      sequencesReplied_count: 0,
      sequencesWithMeeting_count: 0,
      dealsAttributed_count: 0,
      dealsWon_count: 0,
      wonValue_cents: 0,
      openValue_cents: 0,
      sentPerSequenceStarted_pct: null,
      repliedPerSequenceSent_pct: null,
      meetingPerSequenceSent_pct: null,
      dealsPerSequenceStarted_pct: null,
      wonPerDealAttributed_pct: null,
      ratesTrusted: false,
    });
    expect(body).toMatchObject({
      byProduct: [],
      byList: [],
      attribution: { dealsCreatedAllSources_count: 0 },
      truncation: { dealScanTruncated: false },
    });
  });

  it('counts the cohort and credits each deal to one sequence, by the rules of DECISIONS', async () => {
    const { org, api } = await analyticsOrg();
    const s = seeder(org.id, org.ownerId);
    await s.stages();
    await s.product('prd_a', 'Rockets');
    await s.product('prd_b', 'Satellites');
    await s.list('lst_x', 'Launch list');
    await s.list('lst_y', 'Old list', true);
    for (const [c, l] of [
      ['c1', 'lst_x'],
      ['c2', 'lst_x'],
      ['c3', 'lst_y'],
      ['c4', 'lst_x'],
      ['c5', 'lst_x'],
      ['c6', 'lst_x'],
      ['c7', 'lst_y'],
      ['c9', 'lst_x'],
    ]) {
      await s.contact(c, l);
    }
    // The window is March 2025. In the cohort: s1, s2, s2b, s2c, s3, s4, s7, s9.
    await s.sequence('seq_s1', 'c1', at('03-05'), { product: 'prd_a' });
    await s.send('seq_s1', 'c1', at('03-06'));
    await s.reply('seq_s1', 'c1', at('03-07'), 'interested');
    await s.sequence('seq_s2', 'c2', at('03-10'), { product: 'prd_a' });
    await s.send('seq_s2', 'c2', at('03-11'));
    await s.reply('seq_s2', 'c2', at('03-12'), 'out_of_office'); // never a reply
    await s.reply('seq_s2', 'c2', at('03-12'), 'other', true); // automatic mail: never a reply
    await s.reply('seq_s2', 'c2', at('03-12'), 'bounce');
    await s.reply('seq_s2', 'c2', at('03-12'), 'complaint');
    // Two sequences of c2 started at the same instant: the smaller id wins a deal.
    await s.sequence('seq_t2', 'c2', at('03-18'), { product: 'prd_a' });
    await s.send('seq_t2', 'c2', at('03-18', 13), 'possibly_sent');
    await s.sequence('seq_t1', 'c2', at('03-18'), { product: 'prd_b' });
    await s.send('seq_t1', 'c2', at('03-19'));
    await s.sequence('seq_s3', 'c3', at('03-12'), { product: 'prd_b' });
    await s.send('seq_s3', 'c3', at('03-13'), 'bounced');
    await s.reply('seq_s3', 'c3', at('04-15'), 'meeting_request'); // after the window: counted all the same
    await s.sequence('seq_s4', 'c4', at('03-15'));
    await s.send('seq_s4', 'c4', at('03-16'), 'failed'); // nothing went out
    await s.reply('seq_s4', 'c4', at('03-17'), 'interested'); // not sent: neither replied nor credited
    await s.sequence('seq_s7', 'c7', at('03-20'), { list: 'lst_x' }); // generated from list x, contact on list y
    await s.sequence('seq_s9', 'c9', at('03-01', 0), { product: 'prd_a' });
    await s.send('seq_s9', 'c9', at('03-26'));
    // Outside the cohort.
    await s.sequence('seq_s5', 'c5', at('02-20'), { product: 'prd_a' });
    await s.send('seq_s5', 'c5', at('02-21'));
    await s.sequence('seq_s6', 'c6', at('04-02'), { product: 'prd_b' });
    await s.send('seq_s6', 'c6', at('04-03'));

    await s.deal('deal_d1', at('03-20'), { primary: 'c1', stage: 'stg_won', value: 100_000 }); // s1, won
    await s.meeting('deal_d1', 'c1', at('03-21'));
    await s.deal('deal_d2', at('03-25'), { contacts: ['c3'], value: 50_000 }); // s3 through the deal-contact link, open
    await s.deal('deal_d3', at('03-06'), { primary: 'c5', value: 30_000 }); // s5: before the window, so no cohort credit
    await s.deal('deal_d4', at('03-20'), { primary: 'c4', value: 20_000 }); // s4 sent nothing: no credit
    await s.deal('deal_d5', at('04-10'), { primary: 'c1', value: 1 }); // after the window: in no count
    await s.deal('deal_d6', at('03-28')); // no contact
    await s.deal('deal_d7', at('03-22'), { primary: 'c2', value: 40_000 }); // s2, t2, t1: t1 (latest start, smaller id), product b
    await s.deal('deal_d8', at('03-27'), { primary: 'c3', stage: 'stg_lost', value: 7_000 }); // s3, lost
    await s.deal('deal_d10', at('03-25'), { primary: 'c9', value: 9_000 }); // s9's first send came after it: no credit

    const { body, cache } = await funnelOk(api, '2025-03-01', '2025-03-31');
    expect(cache).toBe('miss');
    expect(body.totals).toEqual({
      key: null,
      label: null,
      sequencesStarted_count: 8,
      sequencesSent_count: 6,
      sequencesReplied_count: 2,
      sequencesWithMeeting_count: 2,
      dealsAttributed_count: 4,
      dealsWon_count: 1,
      wonValue_cents: 100_000,
      openValue_cents: 90_000,
      sentPerSequenceStarted_pct: 75,
      repliedPerSequenceSent_pct: 33.3,
      meetingPerSequenceSent_pct: 33.3,
      dealsPerSequenceStarted_pct: 50,
      wonPerDealAttributed_pct: 25,
      ratesTrusted: false,
    });
    expect(body.attribution).toEqual({ dealsCreatedAllSources_count: 8 });
    expect(body.truncation).toEqual({ dealScanTruncated: false });
    const brief = (b: (typeof body.byProduct)[number]) => [
      b.key,
      b.label,
      b.sequencesStarted_count,
      b.sequencesSent_count,
      b.sequencesReplied_count,
      b.sequencesWithMeeting_count,
      b.dealsAttributed_count,
      b.dealsWon_count,
      b.wonValue_cents,
      b.openValue_cents,
    ];
    expect(body.byProduct.map(brief)).toEqual([
      ['prd_a', 'Rockets', 4, 4, 1, 1, 1, 1, 100_000, 0],
      ['prd_b', 'Satellites', 2, 2, 1, 1, 3, 0, 0, 90_000],
      [null, null, 2, 0, 0, 0, 0, 0, 0, 0],
    ]);
    expect(body.byProduct[2]).toMatchObject({
      sentPerSequenceStarted_pct: 0,
      repliedPerSequenceSent_pct: null,
      wonPerDealAttributed_pct: null,
    });
    expect(body.byList.map(brief)).toEqual([
      ['lst_x', 'Launch list', 7, 5, 1, 1, 2, 1, 100_000, 40_000],
      ['lst_y', null, 1, 1, 1, 1, 2, 0, 0, 50_000],
    ]);
    expect(body.byList[1].dealsPerSequenceStarted_pct).toBe(200); // not clamped
    expect(unitlessNumbers(body)).toEqual([]);
  });

  it("keeps single attribution on crowded data: every bucket set adds up to the totals, and never beyond the window's deals", async () => {
    const { org, api } = await analyticsOrg();
    const s = seeder(org.id, org.ownerId);
    await s.stages();
    await s.product('prd_p', 'P');
    await s.product('prd_q', 'Q');
    await s.list('lst_1', 'One');
    await s.list('lst_2', 'Two');
    // 12 contacts with three sequences each (both products, two lists), every one sent; 30 deals
    // each linking two to four of the contacts, so many sequences compete for each deal.
    await system(svc, async (trx) => {
      await sql`INSERT INTO contacts (organization_id, id, list_id, email, email_normalized)
        SELECT ${org.id}, 'cc' || g, CASE WHEN g % 2 = 0 THEN 'lst_1' ELSE 'lst_2' END, 'cc' || g || '@x.example', 'cc' || g || '@x.example'
        FROM generate_series(1, 12) g`.execute(trx);
      await sql`INSERT INTO contact_sequences (organization_id, id, contact_id, template_id, product_id, status, created_at)
        SELECT ${org.id}, 'seq_' || g || '_' || k, 'cc' || g, 'tpl_' || k, CASE WHEN k = 2 THEN 'prd_q' ELSE 'prd_p' END, 'ACTIVE',
               timestamptz '2025-05-01T00:00:00Z' + (g * 7 + k * 3) * interval '1 hour'
        FROM generate_series(1, 12) g, generate_series(1, 3) k`.execute(trx);
      await sql`INSERT INTO send_records (organization_id, id, contact_id, sequence_id, status, sent_at)
        SELECT organization_id, 'snd_' || id, contact_id, id, 'sent', created_at + interval '10 minutes' FROM contact_sequences WHERE organization_id = ${org.id}`.execute(
        trx,
      );
      await sql`INSERT INTO deals (organization_id, id, name, value_cents, owner_sales_person_id, primary_contact_id, stage_id, created_at)
        SELECT ${org.id}, 'deal_' || g, 'Deal ' || g, 1000 * g, ${org.ownerId}, 'cc' || (1 + g % 12),
               CASE WHEN g % 3 = 0 THEN 'stg_won' ELSE 'stg_open' END, timestamptz '2025-05-02T00:00:00Z' + g * interval '5 hours'
        FROM generate_series(1, 30) g`.execute(trx);
      await sql`INSERT INTO deal_contacts (organization_id, deal_id, contact_id)
        SELECT ${org.id}, 'deal_' || g, 'cc' || (1 + (g * j) % 12) FROM generate_series(1, 30) g, generate_series(2, 1 + g % 4) j
        ON CONFLICT DO NOTHING`.execute(trx);
    });
    const { body } = await funnelOk(api, '2025-05-01', '2025-05-31');
    const sum = (
      rows: typeof body.byProduct,
      f: 'dealsAttributed_count' | 'dealsWon_count' | 'wonValue_cents' | 'openValue_cents' | 'sequencesStarted_count',
    ) => rows.reduce((a, b) => a + b[f], 0);
    expect(body.totals.sequencesStarted_count).toBe(36);
    expect(body.totals.dealsAttributed_count).toBeGreaterThan(0);
    expect(body.totals.dealsAttributed_count).toBeLessThanOrEqual(body.attribution.dealsCreatedAllSources_count);
    expect(body.attribution.dealsCreatedAllSources_count).toBe(30);
    for (const rows of [body.byProduct, body.byList]) {
      for (const f of ['dealsAttributed_count', 'dealsWon_count', 'wonValue_cents', 'openValue_cents', 'sequencesStarted_count'] as const) {
        expect(sum(rows, f), f).toBe(body.totals[f]);
      }
    }
    // The same credit computed independently: per deal, the latest-started sequence of its contacts before it.
    const credited = await system(
      svc,
      async (trx) =>
        (
          await sql<{ n: number }>`
      SELECT count(DISTINCT d.id)::int AS n FROM deals d
      WHERE d.organization_id = ${org.id} AND EXISTS (
        SELECT 1 FROM contact_sequences cs
        WHERE cs.organization_id = d.organization_id AND cs.created_at + interval '10 minutes' <= d.created_at
          AND (cs.contact_id = d.primary_contact_id OR cs.contact_id IN (SELECT contact_id FROM deal_contacts dc WHERE dc.organization_id = d.organization_id AND dc.deal_id = d.id)))`.execute(
            trx,
          )
        ).rows[0].n,
    );
    expect(body.totals.dealsAttributed_count).toBe(credited);
  });

  it('sets ratesTrusted from 10 replied and 10 unreplied sent sequences', async () => {
    const trusted = async (replied: number, silent: number) => {
      const { org, api } = await analyticsOrg();
      await system(svc, async (trx) => {
        await sql`INSERT INTO contact_lists (organization_id, id, name) VALUES (${org.id}, 'lst', 'L')`.execute(trx);
        await sql`INSERT INTO contacts (organization_id, id, list_id, email, email_normalized)
          SELECT ${org.id}, 'c' || g, 'lst', 'c' || g || '@x.example', 'c' || g || '@x.example' FROM generate_series(1, ${replied + silent}::int) g`.execute(
          trx,
        );
        await sql`INSERT INTO contact_sequences (organization_id, id, contact_id, template_id, status, created_at)
          SELECT ${org.id}, 'seq_' || g, 'c' || g, 'tpl', 'ACTIVE', timestamptz '2025-07-02T00:00:00Z' FROM generate_series(1, ${replied + silent}::int) g`.execute(
          trx,
        );
        await sql`INSERT INTO send_records (organization_id, id, contact_id, sequence_id, status, sent_at)
          SELECT ${org.id}, 'snd_' || g, 'c' || g, 'seq_' || g, 'sent', timestamptz '2025-07-03T00:00:00Z' FROM generate_series(1, ${replied + silent}::int) g`.execute(
          trx,
        );
        await sql`INSERT INTO messages (organization_id, id, contact_id, direction, sequence_id, intent)
          SELECT ${org.id}, 'msg_' || g, 'c' || g, 'INBOUND', 'seq_' || g, 'not_interested' FROM generate_series(1, ${replied}::int) g`.execute(
          trx,
        );
      });
      const { body } = await funnelOk(api, '2025-07-01', '2025-07-31');
      expect(body.totals.sequencesReplied_count).toBe(replied);
      return [body.totals.ratesTrusted, body.byList[0].ratesTrusted, body.byProduct[0].ratesTrusted];
    };
    expect(await trusted(10, 10)).toEqual([true, true, true]);
    expect(await trusted(9, 40)).toEqual([false, false, false]);
    expect(await trusted(40, 9)).toEqual([false, false, false]);
  });

  it('reads at most 5,000 deals: the 5,001st sets dealScanTruncated and attributed numbers become floors', async () => {
    const { org, api } = await analyticsOrg();
    const s = seeder(org.id, org.ownerId);
    await s.stages();
    await s.list('lst', 'L');
    await s.contact('ct', 'lst');
    await s.sequence('seq_t', 'ct', '2025-09-01T00:00:00Z');
    await s.send('seq_t', 'ct', '2025-09-01T01:00:00Z');
    // 4,999 deals without contacts, then the one credited to seq_t as the 5,000th, oldest first.
    await system(svc, (trx) =>
      sql`
      INSERT INTO deals (organization_id, id, name, owner_sales_person_id, stage_id, created_at)
      SELECT ${org.id}, 'deal_f' || g, 'Filler ' || g, ${org.ownerId}, 'stg_open', timestamptz '2025-09-02T00:00:00Z' + g * interval '1 minute'
      FROM generate_series(1, 4999) g`.execute(trx),
    );
    await s.deal('deal_last', '2025-09-20T00:00:00Z', { primary: 'ct', value: 5_000 });
    let r = await funnelOk(api, '2025-09-01', '2025-09-30');
    expect(r.body.attribution.dealsCreatedAllSources_count).toBe(5000);
    expect(r.body.truncation.dealScanTruncated).toBe(false);
    expect(r.body.totals.dealsAttributed_count).toBe(1);
    // One more deal, older than the credited one: the credited deal is now the 5,001st.
    await s.deal('deal_extra', '2025-09-03T00:00:00Z');
    await system(svc, (trx) =>
      sql`UPDATE analytics_cache SET computed_at = computed_at - interval '6 minutes' WHERE organization_id = ${org.id}`.execute(trx),
    );
    r = await funnelOk(api, '2025-09-01', '2025-09-30');
    expect(r.cache).toBe('miss');
    expect(r.body.attribution.dealsCreatedAllSources_count).toBe(5001);
    expect(r.body.truncation.dealScanTruncated).toBe(true);
    expect(r.body.totals).toMatchObject({
      dealsAttributed_count: 0,
      openValue_cents: 0,
      sequencesStarted_count: 1,
      sequencesSent_count: 1,
    });
  });
});

describe('GET /analytics/funnel statement', () => {
  it('can read every table through an index that leads with the organization (no sequential scan needed)', async () => {
    const { org } = await analyticsOrg();
    const q = funnelQuery(org.id, '2025-01-01', '2025-12-31');
    const literal = (v: unknown): string => (Array.isArray(v) ? `ARRAY[${v.map(literal).join(', ')}]` : `'${String(v)}'`);
    const plan = await planOf(
      svc,
      org.id,
      q.text.replace(/\$(\d+)/g, (_, i: string) => literal(q.values[Number(i) - 1])),
    );
    expect(plan).not.toMatch(/Seq Scan/);
    const used = [...new Set([...plan.matchAll(/(?:using|Index Scan on) (\w+)/g)].map((m) => m[1]))];
    expect(used.length).toBeGreaterThan(8);
    const defs = await system(
      svc,
      async (trx) =>
        (
          await sql<{ indexname: string; indexdef: string }>`
      SELECT indexname, indexdef FROM pg_indexes WHERE indexname = ANY(${used}::text[])`.execute(trx)
        ).rows,
    );
    expect(defs.map((d) => d.indexname).sort()).toEqual([...used].sort());
    for (const d of defs) expect(d.indexdef, d.indexname).toMatch(/\(organization_id[,)]/);
  });
});

describe('GET /analytics/funnel cache', () => {
  it('memoizes per organization and window for 5 minutes: miss, hit (the same bytes, even after the data changed), miss once expired', async () => {
    const { org, key, api } = await analyticsOrg();
    const other = await analyticsOrg();
    const s = seeder(org.id, org.ownerId);
    await s.list('lst', 'L');
    await s.contact('ca', 'lst');
    await s.sequence('seq_a', 'ca', '2025-10-05T00:00:00Z');
    const first = await raw(svc.baseUrl, 'GET', '/api/v1/analytics/funnel?from=2025-10-01&to=2025-10-31', { key });
    expect(first.headers.get('x-service-cache')).toBe('miss');
    await s.contact('cb', 'lst');
    await s.sequence('seq_b', 'cb', '2025-10-06T00:00:00Z');
    const second = await raw(svc.baseUrl, 'GET', '/api/v1/analytics/funnel?from=2025-10-01&to=2025-10-31', { key });
    expect(second.headers.get('x-service-cache')).toBe('hit');
    expect(second.headers.get(WINDOW_HEADER)).toBe('366');
    expect(second.text).toBe(first.text);
    expect((second.body.totals as { sequencesStarted_count: number }).sequencesStarted_count).toBe(1);
    // Another window of the same organization, the same window of another organization: misses.
    expect((await funnelOk(api, '2025-10-01', '2025-10-30')).cache).toBe('miss');
    const theirs = await funnelOk(other.api, '2025-10-01', '2025-10-31');
    expect(theirs.cache).toBe('miss');
    expect(theirs.body.totals.sequencesStarted_count).toBe(0);
    expect((await funnelOk(other.api, '2025-10-01', '2025-10-31')).cache).toBe('hit');
    // Expired: computed anew, with the new sequence.
    await system(svc, (trx) =>
      sql`UPDATE analytics_cache SET computed_at = computed_at - interval '301 seconds' WHERE organization_id = ${org.id}`.execute(trx),
    );
    const fresh = await funnelOk(api, '2025-10-01', '2025-10-31');
    expect(fresh.cache).toBe('miss');
    expect(fresh.body.totals.sequencesStarted_count).toBe(2);
    expect((await funnelOk(api, '2025-10-01', '2025-10-31')).cache).toBe('hit');
    // The expired entry of the other window went with that write.
    const keys = await system(svc, (trx) =>
      trx.selectFrom('analytics_cache').select('cache_key').where('organization_id', '=', org.id).orderBy('cache_key').execute(),
    );
    expect(keys.map((k) => k.cache_key)).toEqual(['funnel:2025-10-01:2025-10-31']);
  });

  it('is shared by every API node: a second node answers hit for what the first computed', async () => {
    const { key } = await analyticsOrg();
    const { config, db, systemDb, services, log } = svc.rt;
    const secondNode = createApp({
      config,
      db,
      requestDb: db,
      systemDb,
      services,
      log,
      handlers,
      adminHandlers: {},
      health: async () => true,
    });
    const path = '/api/v1/analytics/funnel?from=2025-11-01&to=2025-11-30';
    const a = await raw(svc.baseUrl, 'GET', path, { key });
    expect(a.headers.get('x-service-cache')).toBe('miss');
    const b = await secondNode.request(path, { headers: { authorization: `Bearer ${key}` } });
    expect(b.status).toBe(200);
    expect(b.headers.get('x-service-cache')).toBe('hit');
    expect(await b.text()).toBe(a.text);
  });
});
