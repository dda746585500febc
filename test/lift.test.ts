// Holdout lift: Newcombe's published vectors, GET /analytics/lift (no parameters, the
// arms and endpoints on crafted assignments, the cache), the operator's experiments settings, and
// the two holdouts at work: a held-out account's sequence runs on the plain template with no model
// call, a held-out deal gets no AI action item; an organization that did not opt in sees nothing
// change.

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withOrg } from '../db/database.js';
import { assignmentBucket, type Experiment } from '../src/analytics/holdout.js';
import { newcombeDifference, pct, wilson } from '../src/analytics/stats.js';
import { openActionItem } from '../src/work/action-items.js';
import { system, uid } from './crm-support.js';
import { type DraftingOrg, draftingOrg, draftsOf, STEP_ONE, settle, template } from './drafting-support.js';
import { type FakeModel, startFakeModel } from './support/fake-llm.js';
import { type PublicClient, raw, startService, type TestService } from './support/harness.js';

let svc: TestService;
let model: FakeModel;
const MODEL_SENTENCE = 'The model wrote this sentence for you.';

beforeAll(async () => {
  model = await startFakeModel();
  // A model that keeps the template and adds one sentence of its own (no claims, no citations).
  model.answer((call) => {
    const p = JSON.parse(String(call.body.messages[1].content).split('\n\n')[0]) as { template: { subject: string; body: string } };
    return { content: JSON.stringify({ subject: p.template.subject, body: `${p.template.body}\n\n${MODEL_SENTENCE}`, citations: [] }) };
  });
  svc = await startService({ LLM_BASE_URL: model.baseUrl, LLM_MODEL: 'gpt-4o-mini', LLM_API_KEY: 'sk-test' });
  await svc.startWorker();
});
afterAll(async () => {
  await svc?.close();
  await model?.close();
});

describe('Newcombe hybrid score interval', () => {
  it('reproduces the published vectors (Newcombe 1998, method 10)', () => {
    const vectors: Array<[number, number, number, number, number, number, number]> = [
      [56, 70, 48, 80, 0.2, 0.0524, 0.3339],
      [9, 10, 3, 10, 0.6, 0.1705, 0.809],
      [10, 10, 0, 20, 1, 0.6791, 1],
      [84, 101, 89, 105, -0.0159, -0.1177, 0.0851],
    ];
    for (const [x1, n1, x2, n2, d, low, high] of vectors) {
      const r = newcombeDifference(x1, n1, x2, n2)!;
      expect(r.d, `${x1}/${n1} - ${x2}/${n2}`).toBeCloseTo(d, 4);
      expect(r.low, `${x1}/${n1} - ${x2}/${n2} low`).toBeCloseTo(low, 4);
      expect(r.high, `${x1}/${n1} - ${x2}/${n2} high`).toBeCloseTo(high, 4);
    }
  });

  it('has no interval when an arm is empty, Wilson limits inside [0, 1], and null rates over 0', () => {
    expect(newcombeDifference(3, 10, 0, 0)).toBeNull();
    expect(newcombeDifference(0, 0, 3, 10)).toBeNull();
    for (const [x, n] of [
      [0, 1],
      [1, 1],
      [0, 50],
      [50, 50],
      [7, 13],
    ]) {
      const w = wilson(x, n);
      expect(w.low).toBeGreaterThanOrEqual(-1e-12);
      expect(w.high).toBeLessThanOrEqual(1 + 1e-12);
      expect(w.low).toBeLessThanOrEqual(x / n);
      expect(w.high).toBeGreaterThanOrEqual(x / n);
    }
    expect(pct(0, 0)).toBeNull();
    expect(pct(0, 7)).toBe(0);
    expect(pct(1, 3)).toBe(33.3);
  });
});

const lift = (api: PublicClient) => api.GET('/analytics/lift', {});

async function liftOk(api: PublicClient) {
  const r = await lift(api);
  if (r.response.status !== 200 || !r.data) throw new Error(`lift ${r.response.status}: ${JSON.stringify(r.error)}`);
  return { body: r.data, cache: r.response.headers.get('x-service-cache') };
}

const setExperiments = (orgId: string, experiments: Partial<Record<Experiment, { holdoutPercent: number }>>) =>
  svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId } }, body: { experiments } });

describe('GET /analytics/lift', () => {
  it('takes no parameters: from or to is 400, anything else is ignored; empty arms answer null rates and no lift', async () => {
    const { key, api } = await svc.orgWithKey(['analytics.read']);
    for (const q of ['?from=2025-01-01', '?to=2025-01-31', '?from=2025-01-01&to=2025-01-31', '?from=']) {
      const r = await raw(svc.baseUrl, 'GET', `/api/v1/analytics/lift${q}`, { key });
      expect(r.status, q).toBe(400);
      expect(r.body.type).toBe(`${svc.baseUrl}/problems/validation-failed`);
    }
    const ignored = await raw(svc.baseUrl, 'GET', '/api/v1/analytics/lift?verbose=1', { key });
    expect(ignored.status).toBe(200);
    const { body } = await liftOk(api);
    const empty = (keys: [string, string]) => ({
      assigned_count: 0,
      endpoints: keys.map((k) => ({ key: k, hits_count: 0, perAssigned_pct: null })),
    });
    expect(body.experiments.ai_email_lift).toMatchObject({
      unit: 'account',
      horizonDays_count: 30,
      control: empty(['meeting', 'positive']),
      treatment: empty(['meeting', 'positive']),
      lift_pp: null,
      ci95Low_pp: null,
      ci95High_pp: null,
    });
    expect(body.experiments.ai_actions).toMatchObject({
      unit: 'deal',
      horizonDays_count: 90,
      control: empty(['won', 'advanced']),
      treatment: empty(['won', 'advanced']),
      lift_pp: null,
      ci95Low_pp: null,
      ci95High_pp: null,
    });
    expect(Math.abs(Date.parse(body.experiments.ai_actions.horizonAt) - Date.now())).toBeLessThan(60_000);
  });

  it("counts each arm's units once their horizon has passed, and their outcomes within it", async () => {
    const { org, api } = await svc.orgWithKey(['analytics.read']);
    const o = org.id;
    const daysAgo = (d: number) => new Date(Date.now() - d * 86_400_000).toISOString();
    await system(svc, async (trx) => {
      const run = (q: ReturnType<typeof sql>) => q.execute(trx);
      await run(sql`INSERT INTO contact_lists (organization_id, id, name) VALUES (${o}, 'lst', 'L')`);
      await run(sql`INSERT INTO deal_stages (organization_id, id, slug, name, sort_order, category) VALUES
        (${o}, 'st1', 'one', 'One', 1, 'active'), (${o}, 'st2', 'two', 'Two', 2, 'active'), (${o}, 'st3', 'three', 'Three', 3, 'active'),
        (${o}, 'stw', 'won', 'Won', 4, 'closed_won'), (${o}, 'stl', 'lost', 'Lost', 5, 'closed_lost')`);
      // Accounts: t1..t10 treatment, c1..c8 control, assigned 60 days ago; tNew assigned 10 days ago.
      const account = async (id: string, arm: string, assignedDaysAgo: number) => {
        await run(
          sql`INSERT INTO companies (organization_id, id, domain, domain_normalized) VALUES (${o}, ${id}, ${`${id}.example`}, ${`${id}.example`})`,
        );
        await run(sql`INSERT INTO contacts (organization_id, id, list_id, email, email_normalized, company_id)
          VALUES (${o}, ${`p_${id}`}, 'lst', ${`p@${id}.example`}, ${`p@${id}.example`}, ${id})`);
        await run(
          sql`INSERT INTO experiment_assignments (organization_id, experiment, unit_id, arm, assigned_at) VALUES (${o}, 'ai_email_lift', ${id}, ${arm}, ${daysAgo(assignedDaysAgo)})`,
        );
      };
      for (let i = 1; i <= 10; i += 1) await account(`t${i}`, 'treatment', 60);
      for (let i = 1; i <= 8; i += 1) await account(`c${i}`, 'control', 60);
      await account('tnew', 'treatment', 10);
      const reply = (company: string, intent: string, d: number, automatic = false) =>
        run(sql`
        INSERT INTO messages (organization_id, id, contact_id, direction, intent, automatic, created_at)
        VALUES (${o}, ${uid('msg_')}, ${`p_${company}`}, 'INBOUND', ${intent}, ${automatic}, ${daysAgo(d)})`);
      await reply('t1', 'meeting_request', 55);
      await reply('t2', 'meeting_request', 50);
      await reply('t2', 'interested', 52);
      await reply('t3', 'interested', 45);
      await reply('t4', 'interested', 40);
      await reply('t5', 'meeting_request', 50, true); // automatic: no outcome
      await reply('t6', 'not_interested', 50);
      await reply('c1', 'meeting_request', 20); // 40 days after assignment: beyond the horizon
      await reply('c2', 'interested', 58);
      await reply('tnew', 'meeting_request', 5); // not counted: its horizon has not passed
      // A meeting logged on a deal with t7's contact, inside the horizon; one with c3's contact.
      await run(
        sql`INSERT INTO deals (organization_id, id, name, owner_sales_person_id, stage_id) VALUES (${o}, 'deal_m', 'M', ${org.ownerId}, 'st1')`,
      );
      await run(sql`INSERT INTO deal_activities (organization_id, id, deal_id, contact_id, kind, summary, occurred_at) VALUES
        (${o}, 'act1', 'deal_m', 'p_t7', 'meeting', 'Demo', ${daysAgo(45)}), (${o}, 'act2', 'deal_m', 'p_c3', 'meeting', 'Demo', ${daysAgo(59)}),
        (${o}, 'act3', 'deal_m', 'p_t8', 'call', 'Call', ${daysAgo(45)})`);

      // Deals: dt1..dt5 treatment, dc1..dc4 control, assigned 120 days ago; dnew 30 days ago.
      const deal = async (id: string, arm: string, assignedDaysAgo: number, moves: Array<[string, number]>) => {
        await run(
          sql`INSERT INTO deals (organization_id, id, name, owner_sales_person_id, stage_id) VALUES (${o}, ${id}, ${id}, ${org.ownerId}, 'st2')`,
        );
        await run(
          sql`INSERT INTO deal_stage_history (organization_id, id, deal_id, to_stage_id, created_at) VALUES (${o}, ${uid('h_')}, ${id}, 'st2', ${daysAgo(assignedDaysAgo + 5)})`,
        );
        for (const [stage, d] of moves) {
          await run(
            sql`INSERT INTO deal_stage_history (organization_id, id, deal_id, to_stage_id, created_at) VALUES (${o}, ${uid('h_')}, ${id}, ${stage}, ${daysAgo(d)})`,
          );
        }
        await run(
          sql`INSERT INTO experiment_assignments (organization_id, experiment, unit_id, arm, assigned_at) VALUES (${o}, 'ai_actions', ${id}, ${arm}, ${daysAgo(assignedDaysAgo)})`,
        );
      };
      await deal('dt1', 'treatment', 120, [
        ['st3', 110],
        ['stw', 100],
      ]); // won (and advanced)
      await deal('dt2', 'treatment', 120, [['stw', 60]]); // won
      await deal('dt3', 'treatment', 120, [['st3', 90]]); // advanced
      await deal('dt4', 'treatment', 120, [['st1', 90]]); // backwards: neither
      await deal('dt5', 'treatment', 120, [['stl', 90]]); // lost: neither
      await deal('dc1', 'control', 120, [['stw', 20]]); // won 100 days after assignment: beyond the horizon
      await deal('dc2', 'control', 120, [['st3', 50]]); // advanced
      await deal('dc3', 'control', 120, []);
      await deal('dc4', 'control', 120, []);
      await deal('dnew', 'treatment', 30, [['stw', 10]]); // not counted yet
    });

    const { body, cache } = await liftOk(api);
    expect(cache).toBe('miss');
    const email = body.experiments.ai_email_lift;
    // Treatment: meeting t1, t2, t7 (3 of 10); positive t1, t2, t3, t4 (4). Control: meeting c3 (1 of 8); positive c2 (1).
    expect(email.treatment).toEqual({
      assigned_count: 10,
      endpoints: [
        { key: 'meeting', hits_count: 3, perAssigned_pct: 30 },
        { key: 'positive', hits_count: 4, perAssigned_pct: 40 },
      ],
    });
    expect(email.control).toEqual({
      assigned_count: 8,
      endpoints: [
        { key: 'meeting', hits_count: 1, perAssigned_pct: 12.5 },
        { key: 'positive', hits_count: 1, perAssigned_pct: 12.5 },
      ],
    });
    const e = newcombeDifference(3, 10, 1, 8)!;
    expect(email).toMatchObject({ lift_pp: 17.5, ci95Low_pp: Math.round(e.low * 1000) / 10, ci95High_pp: Math.round(e.high * 1000) / 10 });
    expect(email.ci95Low_pp!).toBeLessThan(0);
    const actions = body.experiments.ai_actions;
    // Treatment: won dt1, dt2 (2 of 5); advanced dt1, dt2, dt3 (3). Control: won none (0 of 4); advanced dc2 (1).
    expect(actions.treatment).toEqual({
      assigned_count: 5,
      endpoints: [
        { key: 'won', hits_count: 2, perAssigned_pct: 40 },
        { key: 'advanced', hits_count: 3, perAssigned_pct: 60 },
      ],
    });
    expect(actions.control).toEqual({
      assigned_count: 4,
      endpoints: [
        { key: 'won', hits_count: 0, perAssigned_pct: 0 },
        { key: 'advanced', hits_count: 1, perAssigned_pct: 25 },
      ],
    });
    const a = newcombeDifference(2, 5, 0, 4)!;
    expect(actions).toMatchObject({ lift_pp: 40, ci95Low_pp: Math.round(a.low * 1000) / 10, ci95High_pp: Math.round(a.high * 1000) / 10 });
    expect(actions.horizonAt).toBe(email.horizonAt);

    // Memoized per organization: a hit now, a miss for another organization.
    expect((await liftOk(api)).cache).toBe('hit');
    const other = await svc.orgWithKey(['analytics.read']);
    const theirs = await liftOk(other.api);
    expect(theirs.cache).toBe('miss');
    expect(theirs.body.experiments.ai_email_lift.treatment.assigned_count).toBe(0);
  });
});

describe('operator experiments settings', () => {
  it('are off by default, set per experiment, bounded to 0-50 percent', async () => {
    const created = await svc.admin.POST('/organizations', { body: { name: uid('Org ') } });
    expect(created.data!.experiments).toEqual({ ai_email_lift: { holdoutPercent: 0 }, ai_actions: { holdoutPercent: 0 } });
    const orgId = created.data!.id;
    const r = await setExperiments(orgId, { ai_actions: { holdoutPercent: 20 } });
    expect(r.data!.experiments).toEqual({ ai_email_lift: { holdoutPercent: 0 }, ai_actions: { holdoutPercent: 20 } });
    const r2 = await setExperiments(orgId, { ai_email_lift: { holdoutPercent: 50 } });
    expect(r2.data!.experiments).toEqual({ ai_email_lift: { holdoutPercent: 50 }, ai_actions: { holdoutPercent: 20 } });
    for (const bad of [
      { ai_email_lift: { holdoutPercent: 51 } },
      { ai_email_lift: { holdoutPercent: -1 } },
      { ai_email_lift: {} },
      { other: { holdoutPercent: 5 } },
      { ai_actions: { holdoutPercent: 5, extra: 1 } },
    ]) {
      const res = await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId } }, body: { experiments: bad as never } });
      expect(res.response.status, JSON.stringify(bad)).toBe(400);
    }
    const after = await setExperiments(orgId, {});
    expect(after.data!.experiments).toEqual({ ai_email_lift: { holdoutPercent: 50 }, ai_actions: { holdoutPercent: 20 } });
  });
});

/** Contacts at distinct companies until one account of each arm is found (the arm is a hash of the ids). */
async function contactsByArm(s: DraftingOrg, holdoutPercent: number) {
  const found: {
    control?: { id: string; email: string; name: string; companyId: string };
    treatment?: { id: string; email: string; name: string; companyId: string };
  } = {};
  for (let i = 0; i < 40 && !(found.control && found.treatment); i += 1) {
    const name = `${uid('Dana')} Whitfield`;
    const domain = `${uid('acct')}.example`;
    const r = await s.api.POST('/contacts', { body: { email: `dana@${domain}`, name, company: { domain, name: 'Acme Rockets' } } });
    const c = r.data!;
    const arm = assignmentBucket(s.org.id, 'ai_email_lift', c.company!.id) < holdoutPercent * 100 ? 'control' : 'treatment';
    found[arm] ??= { id: c.id, email: c.email, name, companyId: c.company!.id };
  }
  return { control: found.control!, treatment: found.treatment! };
}

async function draftBody(api: PublicClient, contactId: string) {
  const [d] = await draftsOf(api, contactId);
  return (await api.GET('/drafts/{id}', { params: { path: { id: d.id }, query: { include: 'evidence' } } })).data!;
}

const assignments = (orgId: string) =>
  system(svc, (trx) =>
    trx
      .selectFrom('experiment_assignments')
      .select(['experiment', 'unit_id', 'arm'])
      .where('organization_id', '=', orgId)
      .orderBy('unit_id')
      .execute(),
  );

describe('the AI email holdout', () => {
  it('a held-out account gets no model call and a plain template draft, and its sequence still runs; the other account gets the model', async () => {
    const s = await draftingOrg(svc);
    await svc.admin.PATCH('/organizations/{orgId}', {
      params: { path: { orgId: s.org.id } },
      body: { flags: { v1_2_api_send: true }, experiments: { ai_email_lift: { holdoutPercent: 50 } } },
    });
    const { control, treatment } = await contactsByArm(s, 50);
    const tpl = await template(svc, s.org.id, [STEP_ONE]);
    const callsBefore = model.calls.length;
    for (const c of [control, treatment]) {
      const r = await s.api.POST('/sequences', { body: { contactId: c.id, templateId: tpl } });
      expect(r.response.status).toBe(200);
    }
    await settle(svc);
    const prompts = model.calls.slice(callsBefore).map((c) => String(c.body.messages[1].content));
    expect(prompts.some((p) => p.includes(treatment.name))).toBe(true);
    expect(prompts.some((p) => p.includes(control.name) || p.includes(control.email))).toBe(false);

    const heldFull = await draftBody(s.api, control.id);
    const held = heldFull;
    expect(heldFull.provider).toBe('fallback');
    expect(heldFull.body).not.toContain(MODEL_SENTENCE);
    expect(heldFull.body).toContain('We help revenue teams book more qualified meetings');
    const aiFull = await draftBody(s.api, treatment.id);
    expect(aiFull.provider).toBe('gpt-4o-mini');
    expect(aiFull.body).toContain(MODEL_SENTENCE);
    expect(await assignments(s.org.id)).toEqual(
      [
        { experiment: 'ai_email_lift', unit_id: control.companyId, arm: 'control' },
        { experiment: 'ai_email_lift', unit_id: treatment.companyId, arm: 'treatment' },
      ].sort((a, b) => (a.unit_id < b.unit_id ? -1 : 1)),
    );

    // The held-out account's sequence runs: approved and sent, the plain template goes out.
    expect((await s.api.POST('/drafts/{id}/approve', { params: { path: { id: held.id } } })).response.status).toBe(200);
    expect((await s.api.POST('/drafts/{id}/send', { params: { path: { id: held.id } } })).data).toMatchObject({ queued: true });
    await settle(svc);
    const out = (await svc.admin.GET('/outbox', { params: { query: { organizationId: s.org.id } } })).data!.data;
    const mine = out.filter((m) => (m.to ?? '').toLowerCase().includes(control.email.toLowerCase()));
    expect(mine).toHaveLength(1);
    expect(mine[0].text).toContain('We help revenue teams book more qualified meetings');
    expect(mine[0].text).not.toContain(MODEL_SENTENCE);

    // The arm is stable: another contact of the same account, after the share changed, is still held out.
    await setExperiments(s.org.id, { ai_email_lift: { holdoutPercent: 1 } });
    const domain = control.email.split('@')[1];
    const colleague = (await s.api.POST('/contacts', { body: { email: `sam@${domain}`, name: 'Sam Colleague', company: { domain } } }))
      .data!;
    expect(colleague.company!.id).toBe(control.companyId);
    await s.api.POST('/sequences', { body: { contactId: colleague.id, templateId: tpl } });
    await settle(svc);
    expect((await draftBody(s.api, colleague.id)).body).not.toContain(MODEL_SENTENCE);
    expect((await assignments(s.org.id)).filter((a) => a.unit_id === control.companyId)).toEqual([
      { experiment: 'ai_email_lift', unit_id: control.companyId, arm: 'control' },
    ]);
  });

  it('changes nothing for an organization that did not opt in: the model writes for every account, nothing is recorded', async () => {
    const s = await draftingOrg(svc);
    const domain = `${uid('acct')}.example`;
    const c = (await s.api.POST('/contacts', { body: { email: `kim@${domain}`, name: 'Kim Example', company: { domain, name: 'Acme' } } }))
      .data!;
    await s.api.POST('/sequences', { body: { contactId: c.id, templateId: await template(svc, s.org.id, [STEP_ONE]) } });
    await settle(svc);
    expect((await draftBody(s.api, c.id)).body).toContain(MODEL_SENTENCE);
    expect(await assignments(s.org.id)).toEqual([]);
  });
});

describe('the AI actions holdout', () => {
  it("opens no AI item about a held-out deal, opens the others, and records each deal's arm once", async () => {
    const s = await draftingOrg(svc);
    await setExperiments(s.org.id, { ai_actions: { holdoutPercent: 50 } });
    const deals: Record<'control' | 'treatment', string | undefined> = { control: undefined, treatment: undefined };
    while (!deals.control || !deals.treatment) {
      const d = (await s.api.POST('/deals', { body: { name: uid('Deal ') } })).data!;
      deals[assignmentBucket(s.org.id, 'ai_actions', d.id) < 5000 ? 'control' : 'treatment'] ??= d.id;
    }
    const open = (entityId: string, aiGenerated: boolean, entityType = 'Deal') =>
      withOrg(svc.rt.db, s.org.id, (trx) =>
        openActionItem(trx, s.org.id, {
          actionType: 'follow_up',
          title: 'Follow up',
          priority: 'medium',
          salesPersonId: s.org.ownerId,
          aiGenerated,
          entityType,
          entityId,
        }),
      );
    expect(await open(deals.control!, true)).toBeNull();
    expect(await open(deals.control!, true)).toBeNull();
    expect(await open(deals.control!, false)).toMatch(/^act_/); // an item a person or a rule opens is not AI's to withhold
    expect(await open(deals.treatment!, true)).toMatch(/^act_/);
    expect(await open(deals.control!, true, 'Contact')).toMatch(/^act_/); // the unit is the deal
    const items = await system(svc, (trx) =>
      trx.selectFrom('action_items').select(['entity_id', 'ai_generated']).where('organization_id', '=', s.org.id).execute(),
    );
    expect(items.filter((i) => i.entity_id === deals.control && i.ai_generated)).toHaveLength(1); // the Contact-typed one
    expect(items).toHaveLength(3);
    expect((await assignments(s.org.id)).map((a) => [a.unit_id, a.arm]).sort()).toEqual(
      [
        [deals.control, 'control'],
        [deals.treatment, 'treatment'],
      ].sort(),
    );

    // Turned off, nobody is held out any more, and recorded arms stay.
    await setExperiments(s.org.id, { ai_actions: { holdoutPercent: 0 } });
    expect(await open(deals.control!, true)).toMatch(/^act_/);
    expect(await assignments(s.org.id)).toHaveLength(2);
  });

  it('opens AI items as before in an organization without the experiment, recording nothing', async () => {
    const s = await draftingOrg(svc);
    const d = (await s.api.POST('/deals', { body: { name: uid('Deal ') } })).data!;
    const id = await withOrg(svc.rt.db, s.org.id, (trx) =>
      openActionItem(trx, s.org.id, {
        actionType: 'follow_up',
        title: 'Follow up',
        priority: 'high',
        salesPersonId: s.org.ownerId,
        aiGenerated: true,
        entityType: 'Deal',
        entityId: d.id,
      }),
    );
    expect(id).toMatch(/^act_/);
    expect(await assignments(s.org.id)).toEqual([]);
  });
});
