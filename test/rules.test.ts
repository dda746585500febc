// Custom rules through the operator API and real jobs: rules are refused at creation when they
// could not run (each refusal names the bad part and creates nothing); the four ready-made rules
// fire on the real operations that emit their triggers (an inbound reply classified by the rules,
// a captured lead, the deal sweep) and stay quiet otherwise; rule.* events reach a subscribed
// webhook endpoint; a rule fires once per event however often its job runs; rules never trigger
// on rule.* events; one organization's rules never see another's events.

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withOrg } from '../db/database.js';
import { runDealSweep } from '../src/deals/sweep.js';
import { emit } from '../src/platform/events.js';
import type { SystemDeps } from '../src/platform/services.js';
import { runRules } from '../src/rules/rules.js';
import { runRulesTask } from '../src/tasks/run-rules.js';
import { eventsOf, system, uid } from './crm-support.js';
import { settle } from './drafting-support.js';
import { mkLead } from './lead-support.js';
import { ALL_SCOPES, raw, setClock, startService, type TestOrg, type TestService } from './support/harness.js';
import { type Receiver, startReceiver } from './support/receiver.js';

const DAY = 86_400_000;
let svc: TestService;
let deps: SystemDeps;
const receivers: Receiver[] = [];
beforeAll(async () => {
  svc = await startService();
  deps = { db: svc.rt.workerDb, systemDb: svc.rt.systemDb, config: svc.rt.config, services: svc.rt.services, log: svc.rt.log };
  await svc.startWorker();
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await svc?.close();
});

type Body = Record<string, unknown>;
const rulesPath = '/organizations/{orgId}/rules' as const;
const ruleBody = (over: Body = {}): Body => ({
  name: 'Big lead',
  triggerEventType: 'inbound.lead_received',
  conditions: { field: 'data.fitScore', gte: 80 },
  actions: [{ type: 'call_webhook' }],
  ...over,
});

async function createRule(orgId: string, body: Body) {
  const r = await svc.admin.POST(rulesPath, { params: { path: { orgId } }, body: body as never });
  if (r.response.status !== 201 || !r.data) throw new Error(`create rule: ${r.response.status} ${JSON.stringify(r.error)}`);
  return r.data;
}
const rulesOf = async (orgId: string) => (await svc.admin.GET(rulesPath, { params: { path: { orgId } } })).data!.data;

/** An inbound message from an address of no contact, classified by the rules as it is stored. */
async function reply(orgId: string, body: string) {
  const r = await svc.admin.POST('/organizations/{orgId}/inbound-messages', {
    params: { path: { orgId } },
    body: { fromEmail: `${uid('p')}@${uid('co')}.example.com`, subject: 'Re: hello', body },
  });
  expect(r.response.status).toBe(201);
  return r.data!.id;
}

const ruleEvents = async (orgId: string) => (await eventsOf(svc, orgId)).filter((e) => e.type.startsWith('rule.'));

describe('rule templates', () => {
  it('lists the four ready-made rules, built on what their triggers carry', async () => {
    const org = await svc.newOrg();
    const r = await svc.admin.GET('/organizations/{orgId}/rule-templates', { params: { path: { orgId: org.id } } });
    expect(r.response.status).toBe(200);
    expect(r.data!.data.map((t) => [t.template, t.triggerEventType, t.actions])).toEqual([
      ['hot_reply', 'reply.classified', [{ type: 'call_webhook', emitType: 'rule.hot_reply' }]],
      ['objection', 'reply.classified', [{ type: 'call_webhook', emitType: 'rule.objection' }]],
      ['lead_qualified', 'inbound.lead_received', [{ type: 'call_webhook', emitType: 'rule.lead_qualified' }]],
      ['deal_at_risk', 'deal.next_step_overdue', [{ type: 'call_webhook', emitType: 'rule.deal_at_risk' }]],
    ]);
    expect(r.data!.data[0].conditions).toEqual({
      all: [
        { field: 'data.intent', in: ['interested', 'meeting_request'] },
        { field: 'data.confidence', gte: 0.7 },
        { field: 'data.authenticated', equals: true },
      ],
    });
    const unknown = await svc.admin.GET('/organizations/{orgId}/rule-templates', { params: { path: { orgId: 'org_nope' } } });
    expect(unknown.response.status).toBe(404);
  });
});

describe('operator rows', () => {
  it("creates, reads, lists, changes and deletes a rule; another organization's rule is not found", async () => {
    const org = await svc.newOrg();
    const other = await svc.newOrg();
    const a = await createRule(org.id, ruleBody());
    expect(a).toMatchObject({
      id: expect.stringMatching(/^rul_/),
      name: 'Big lead',
      triggerEventType: 'inbound.lead_received',
      conditions: { field: 'data.fitScore', gte: 80 },
      actions: [{ type: 'call_webhook' }],
      enabled: true,
      template: null,
    });
    const b = await createRule(org.id, { template: 'objection', enabled: false });
    expect(b).toMatchObject({ name: 'Objection', template: 'objection', enabled: false, triggerEventType: 'reply.classified' });
    const always = await createRule(org.id, {
      name: 'Every lead',
      triggerEventType: 'inbound.lead_received',
      actions: [{ type: 'call_webhook' }],
    });
    expect(always.conditions).toBeNull();
    expect((await rulesOf(org.id)).map((r) => r.id)).toEqual([a.id, b.id, always.id]);

    const got = await svc.admin.GET('/organizations/{orgId}/rules/{ruleId}', { params: { path: { orgId: org.id, ruleId: a.id } } });
    expect(got.data).toEqual(a);
    const patched = await svc.admin.PATCH('/organizations/{orgId}/rules/{ruleId}', {
      params: { path: { orgId: org.id, ruleId: a.id } },
      body: { name: 'Huge lead', enabled: false, conditions: { field: 'data.fitScore', gte: 95 } as never },
    });
    expect(patched.response.status).toBe(200);
    expect(patched.data).toMatchObject({
      name: 'Huge lead',
      enabled: false,
      conditions: { field: 'data.fitScore', gte: 95 },
      triggerEventType: 'inbound.lead_received',
    });
    const cleared = await svc.admin.PATCH('/organizations/{orgId}/rules/{ruleId}', {
      params: { path: { orgId: org.id, ruleId: a.id } },
      body: { conditions: null },
    });
    expect(cleared.data!.conditions).toBeNull();

    for (const ruleId of [a.id, 'rul_unknown']) {
      expect(
        (await svc.admin.GET('/organizations/{orgId}/rules/{ruleId}', { params: { path: { orgId: other.id, ruleId } } })).response.status,
      ).toBe(404);
      expect(
        (
          await svc.admin.PATCH('/organizations/{orgId}/rules/{ruleId}', {
            params: { path: { orgId: other.id, ruleId } },
            body: { enabled: true },
          })
        ).response.status,
      ).toBe(404);
      expect(
        (await svc.admin.DELETE('/organizations/{orgId}/rules/{ruleId}', { params: { path: { orgId: other.id, ruleId } } })).response
          .status,
      ).toBe(404);
    }
    expect(await rulesOf(other.id)).toEqual([]);
    expect((await svc.admin.POST(rulesPath, { params: { path: { orgId: 'org_nope' } }, body: ruleBody() as never })).response.status).toBe(
      404,
    );
    expect((await svc.admin.GET(rulesPath, { params: { path: { orgId: 'org_nope' } } })).response.status).toBe(404);

    const del = await svc.admin.DELETE('/organizations/{orgId}/rules/{ruleId}', { params: { path: { orgId: org.id, ruleId: a.id } } });
    expect(del.data).toEqual({ id: a.id, deleted: true });
    expect(
      (await svc.admin.GET('/organizations/{orgId}/rules/{ruleId}', { params: { path: { orgId: org.id, ruleId: a.id } } })).response.status,
    ).toBe(404);
    expect(
      (await svc.admin.DELETE('/organizations/{orgId}/rules/{ruleId}', { params: { path: { orgId: org.id, ruleId: a.id } } })).response
        .status,
    ).toBe(404);
    expect((await rulesOf(org.id)).map((r) => r.id)).toEqual([b.id, always.id]);
  });

  it('refuses a rule that could not run, naming the bad part, and creates nothing', async () => {
    const org = await svc.newOrg();
    const deep = { all: [{ any: [{ all: [{ any: [{ field: 'data.a', exists: true }] }] }] }] };
    const wide = {
      any: Array.from({ length: 3 }, () => ({ all: Array.from({ length: 11 }, (_, i) => ({ field: `data.f${i}`, equals: i })) })),
    };
    const cases: Array<[Body, string, string]> = [
      [{ triggerEventType: 'rule.triggered' }, 'invalid-rule-trigger', 'body.triggerEventType'],
      [{ triggerEventType: 'rule.hot_reply' }, 'invalid-rule-trigger', 'body.triggerEventType'],
      [{ triggerEventType: 'no.such_type' }, 'invalid-rule-trigger', 'body.triggerEventType'],
      [{ triggerEventType: 'payment.failed' }, 'invalid-rule-trigger', 'body.triggerEventType'],
      [{ conditions: { all: [] } }, 'invalid-rule-conditions', 'body.conditions.all'],
      [{ conditions: { field: 'fitScore', gte: 1 } }, 'invalid-rule-conditions', 'body.conditions.field'],
      [{ conditions: { field: 'data.a.b.c.d.e.f', exists: true } }, 'invalid-rule-conditions', 'body.conditions.field'],
      [{ conditions: { field: 'data.a..b', exists: true } }, 'invalid-rule-conditions', 'body.conditions.field'],
      [{ conditions: { field: 'data.fitScore', gte: 1, equals: 2 } }, 'invalid-rule-conditions', 'body.conditions'],
      [{ conditions: { field: 'data.fitScore' } }, 'invalid-rule-conditions', 'body.conditions'],
      [{ conditions: { field: 'data.fitScore', matches: 'x' } }, 'invalid-rule-conditions', 'body.conditions.matches'],
      [
        {
          conditions: {
            all: [
              { field: 'data.intent', equals: 'x' },
              { field: 'data.confidence', gte: 'high' },
            ],
          },
        },
        'invalid-rule-conditions',
        'body.conditions.all[1].gte',
      ],
      [{ conditions: { field: 'data.intent', in: [] } }, 'invalid-rule-conditions', 'body.conditions.in'],
      [{ conditions: { field: 'data.intent', in: ['a', { b: 1 }] } }, 'invalid-rule-conditions', 'body.conditions.in[1]'],
      [{ conditions: { field: 'data.intent', equals: { a: 1 } } }, 'invalid-rule-conditions', 'body.conditions.equals'],
      [{ conditions: { field: 'data.intent', equals: 'x'.repeat(501) } }, 'invalid-rule-conditions', 'body.conditions.equals'],
      [{ conditions: { field: 'data.intent', exists: 'yes' } }, 'invalid-rule-conditions', 'body.conditions.exists'],
      [{ conditions: { all: [{ field: 'data.a', exists: true }], field: 'data.b' } }, 'invalid-rule-conditions', 'body.conditions'],
      [{ conditions: { all: { field: 'data.a', exists: true } } }, 'invalid-rule-conditions', 'body.conditions.all'],
      [{ conditions: { any: [deep] } }, 'invalid-rule-conditions', 'body.conditions.any[0].all[0].any[0].all[0]'],
      [{ conditions: wide }, 'invalid-rule-conditions', 'body.conditions.any[2].all[6]'],
      [
        {
          actions: [
            { type: 'call_webhook', emitType: 'rule.objection' },
            { type: 'call_webhook', emitType: 'rule.objection' },
          ],
        },
        'invalid-rule-actions',
        'body.actions[1]',
      ],
      [{ actions: [{ type: 'call_webhook' }, { type: 'call_webhook' }] }, 'invalid-rule-actions', 'body.actions[1]'],
    ];
    for (const [over, slug, field] of cases) {
      const r = await raw(svc.baseUrl, 'POST', `/admin/api/organizations/${org.id}/rules`, {
        body: JSON.stringify(ruleBody(over)),
        headers: adminHeaders(),
      });
      expect([JSON.stringify(over).slice(0, 120), r.status, r.body.type]).toEqual([
        JSON.stringify(over).slice(0, 120),
        400,
        `${svc.baseUrl}/problems/${slug}`,
      ]);
      expect((r.body.errors as Array<{ field: string }>)[0].field, JSON.stringify(over).slice(0, 120)).toBe(field);
    }
    // What the schema itself refuses: validation-failed.
    const schemaCases: Body[] = [
      ruleBody({ actions: [{ type: 'send_email' }] }),
      ruleBody({ actions: [{ type: 'call_webhook', emitType: 'rule.triggered' }] }),
      ruleBody({ actions: [] }),
      ruleBody({ name: '' }),
      ruleBody({ colour: 'blue' }),
      ruleBody({ conditions: 'data.intent = x' }),
      { name: 'No actions', triggerEventType: 'inbound.lead_received' },
      { template: 'hot_reply', triggerEventType: 'reply.classified' },
      { template: 'hot_reply', actions: [{ type: 'call_webhook' }] },
      { template: 'warm_reply' },
      {},
    ];
    for (const b of schemaCases) {
      const r = await raw(svc.baseUrl, 'POST', `/admin/api/organizations/${org.id}/rules`, {
        body: JSON.stringify(b),
        headers: adminHeaders(),
      });
      expect([JSON.stringify(b), r.status, r.body.type]).toEqual([JSON.stringify(b), 400, `${svc.baseUrl}/problems/validation-failed`]);
    }
    expect(await rulesOf(org.id)).toEqual([]);

    // A change is checked as the rule will stand, and a refused change changes nothing.
    const rule = await createRule(org.id, ruleBody());
    for (const [body, slug] of [
      [{ triggerEventType: 'rule.objection' }, 'invalid-rule-trigger'],
      [{ conditions: { field: 'data.fitScore', gte: '80' } }, 'invalid-rule-conditions'],
      [{ name: 'Renamed', actions: [{ type: 'call_webhook' }, { type: 'call_webhook' }] }, 'invalid-rule-actions'],
    ] as Array<[Body, string]>) {
      const r = await raw(svc.baseUrl, 'PATCH', `/admin/api/organizations/${org.id}/rules/${rule.id}`, {
        body: JSON.stringify(body),
        headers: adminHeaders(),
      });
      expect([r.status, r.body.type]).toEqual([400, `${svc.baseUrl}/problems/${slug}`]);
    }
    const empty = await raw(svc.baseUrl, 'PATCH', `/admin/api/organizations/${org.id}/rules/${rule.id}`, {
      body: '{}',
      headers: adminHeaders(),
    });
    expect(empty.status).toBe(400);
    expect(await rulesOf(org.id)).toEqual([rule]);
  });

  it('holds at most 100 rules per organization: the 101st is 409 rule-limit-reached', async () => {
    const org = await svc.newOrg();
    await system(svc, (trx) =>
      trx
        .insertInto('rules')
        .values(
          Array.from({ length: 99 }, (_, i) => ({
            organization_id: org.id,
            id: `rul_fill${i}`,
            name: `Rule ${i}`,
            trigger_event_type: 'deal.won',
            conditions: null,
            actions: JSON.stringify([{ type: 'call_webhook' }]),
          })),
        )
        .execute(),
    );
    await createRule(org.id, { template: 'hot_reply' });
    const r = await raw(svc.baseUrl, 'POST', `/admin/api/organizations/${org.id}/rules`, {
      body: JSON.stringify({ template: 'objection' }),
      headers: adminHeaders(),
    });
    expect([r.status, r.body.type]).toEqual([409, `${svc.baseUrl}/problems/rule-limit-reached`]);
    expect(await rulesOf(org.id)).toHaveLength(100);
  });
});

describe('ready-made rules firing', () => {
  async function orgWithTemplates(...templates: string[]): Promise<TestOrg & { rules: Record<string, string> }> {
    const org = await svc.newOrg();
    const rules: Record<string, string> = {};
    for (const t of templates) rules[t] = (await createRule(org.id, { template: t })).id;
    return { ...org, rules };
  }

  it('hot_reply fires on an interested reply with high confidence, and delivers rule.triggered and rule.hot_reply to a subscribed endpoint', async () => {
    const org = await orgWithTemplates('hot_reply', 'objection');
    const rx = await startReceiver();
    receivers.push(rx);
    const api = svc.api(await org.key(['webhooks.manage', 'events.read']));
    expect((await api.POST('/webhooks', { body: { url: rx.url, eventTypes: ['rule.triggered', 'rule.hot_reply'] } })).response.status).toBe(
      201,
    );

    const messageId = await reply(org.id, 'Sounds interesting, tell me more.');
    const [classified] = await eventsOf(svc, org.id, 'reply.classified');
    expect(classified.data).toMatchObject({ messageId, intent: 'interested', confidence: 0.75 });
    const hits = await rx.waitFor(2);
    await settle(svc);
    const expected = {
      ruleId: org.rules.hot_reply,
      ruleName: 'Hot reply',
      triggerEventId: classified.id,
      triggerEventType: 'reply.classified',
      fields: { 'data.intent': 'interested', 'data.confidence': 0.75, 'data.authenticated': true },
    };
    const fired = await ruleEvents(org.id);
    expect(fired.map((e) => [e.type, e.data, e.resource_type, e.resource_id])).toEqual([
      ['rule.triggered', expected, 'Message', messageId],
      ['rule.hot_reply', expected, 'Message', messageId],
    ]);
    expect(hits.map((h) => [h.body!.type, h.body!.id, h.body!.data]).sort()).toEqual(fired.map((e) => [e.type, e.id, expected]).sort());
    // The public event log shows them too.
    const log = await api.GET('/events', { params: { query: { type: 'rule.hot_reply' } } });
    expect(log.data!.data.map((e) => e.id)).toEqual([fired[1].id]);
  });

  it('hot_reply stays quiet for an interested reply of lower confidence and for other intents; objection fires on a not-interested reply', async () => {
    const org = await orgWithTemplates('hot_reply', 'objection');
    // A long reply: phrases decide less of it, so the rules' confidence drops to 0.65.
    const long = `Sounds interesting. ${'The weather here has been mild this week and the team is busy. '.repeat(30)}`;
    await reply(org.id, long);
    await reply(org.id, 'Can you send me your pricing?');
    await settle(svc);
    const classified = await eventsOf(svc, org.id, 'reply.classified');
    expect(classified.map((e) => [e.data.intent, e.data.confidence])).toEqual([
      ['interested', 0.65],
      ['interested', 0.75],
    ]);
    const hot = await ruleEvents(org.id);
    expect(hot.map((e) => [e.type, e.data.triggerEventId])).toEqual([
      ['rule.triggered', classified[1].id],
      ['rule.hot_reply', classified[1].id],
    ]);

    const before = hot.length;
    await reply(org.id, 'We are not interested, thanks.');
    await settle(svc);
    const no = (await eventsOf(svc, org.id, 'reply.classified')).at(-1)!;
    expect(no.data.intent).toBe('not_interested');
    const after = (await ruleEvents(org.id)).slice(before);
    expect(after.map((e) => [e.type, e.data])).toEqual([
      [
        'rule.triggered',
        {
          ruleId: org.rules.objection,
          ruleName: 'Objection',
          triggerEventId: no.id,
          triggerEventType: 'reply.classified',
          fields: { 'data.intent': 'not_interested', 'data.authenticated': true },
        },
      ],
      [
        'rule.objection',
        {
          ruleId: org.rules.objection,
          ruleName: 'Objection',
          triggerEventId: no.id,
          triggerEventType: 'reply.classified',
          fields: { 'data.intent': 'not_interested', 'data.authenticated': true },
        },
      ],
    ]);
  });

  it('lead_qualified fires for a lead at or over the fit threshold only', async () => {
    const org = await orgWithTemplates('lead_qualified');
    const low = await mkLead(svc, org.id, { fitScore: 59, intentConfidence: 0.9 });
    const high = await mkLead(svc, org.id, { fitScore: 60, intentConfidence: 0.2 });
    await settle(svc);
    const fired = await ruleEvents(org.id);
    expect(fired.map((e) => [e.type, e.resource_type, e.resource_id, e.data.fields])).toEqual([
      ['rule.triggered', 'InboundLead', high, { 'data.fitScore': 60 }],
      ['rule.lead_qualified', 'InboundLead', high, { 'data.fitScore': 60 }],
    ]);
    expect(fired.some((e) => e.resource_id === low)).toBe(false);
  });

  it('deal_at_risk fires once per deal whose close date passed (overdue, or slipped as well), never for a deal still on time', async () => {
    const clock = setClock(svc, '2030-03-05T12:00:00Z');
    const org = await orgWithTemplates('deal_at_risk');
    const api = svc.api(await org.key(ALL_SCOPES, { userId: org.ownerId }));
    const day = (n: number) => new Date(clock.now().getTime() + n * DAY).toISOString().slice(0, 10);
    const overdue = (await api.POST('/deals', { body: { name: 'Overdue', closeDate: day(-2) } })).data!;
    const slipped = (await api.POST('/deals', { body: { name: 'Slipped', closeDate: day(-10) } })).data!;
    const onTime = (await api.POST('/deals', { body: { name: 'On time', closeDate: day(5) } })).data!;
    await runDealSweep(deps);
    await settle(svc);
    const kinds = (await eventsOf(svc, org.id))
      .filter((e) => e.type.startsWith('deal.') && e.type !== 'deal.created')
      .map((e) => [e.type, e.resource_id]);
    expect(kinds).toEqual(
      expect.arrayContaining([
        ['deal.next_step_overdue', overdue.id],
        ['deal.next_step_overdue', slipped.id],
        ['deal.slipped', slipped.id],
      ]),
    );
    const fired = await eventsOf(svc, org.id, 'rule.deal_at_risk');
    expect(fired.map((e) => e.resource_id).sort()).toEqual([overdue.id, slipped.id].sort());
    expect(fired.find((e) => e.resource_id === slipped.id)!.data.fields).toEqual({ 'data.daysOverdue': 10 });
    expect(fired.some((e) => e.resource_id === onTime.id)).toBe(false);
    expect(await eventsOf(svc, org.id, 'rule.triggered')).toHaveLength(2);
  });
});

describe('running rules', () => {
  it('a disabled or deleted rule fires nothing; enabled again, it fires on the next event', async () => {
    const org = await svc.newOrg();
    const rule = await createRule(org.id, { template: 'lead_qualified', enabled: false });
    const gone = await createRule(org.id, { template: 'lead_qualified', name: 'Deleted' });
    await svc.admin.DELETE('/organizations/{orgId}/rules/{ruleId}', { params: { path: { orgId: org.id, ruleId: gone.id } } });
    await mkLead(svc, org.id, { fitScore: 90 });
    await settle(svc);
    expect(await ruleEvents(org.id)).toEqual([]);
    await svc.admin.PATCH('/organizations/{orgId}/rules/{ruleId}', {
      params: { path: { orgId: org.id, ruleId: rule.id } },
      body: { enabled: true },
    });
    const lead = await mkLead(svc, org.id, { fitScore: 90 });
    await settle(svc);
    expect((await ruleEvents(org.id)).map((e) => [e.type, e.resource_id, e.data.ruleId])).toEqual([
      ['rule.triggered', lead, rule.id],
      ['rule.lead_qualified', lead, rule.id],
    ]);
  });

  it('evaluates the language on real event data: all/any, in, equals, gte only on numbers, exists (null present, missing absent)', async () => {
    const org = await svc.newOrg();
    const rule = await createRule(org.id, {
      name: 'Website or excellent',
      triggerEventType: 'inbound.lead_received',
      actions: [{ type: 'call_webhook', emitType: 'rule.lead_qualified' }],
      conditions: {
        all: [
          {
            any: [
              { field: 'data.source', in: ['webinar', 'website'] },
              { field: 'data.fitScore', gte: 99 },
            ],
          },
          { field: 'data.formId', exists: true },
          { field: 'data.nothing.deeper', exists: false },
          { field: 'data.status', equals: 'NEW' },
        ],
      },
    });
    const never = await createRule(org.id, {
      name: 'String is not >=',
      triggerEventType: 'inbound.lead_received',
      actions: [{ type: 'call_webhook' }],
      conditions: { field: 'data.status', gte: 0 },
    });
    const web = await mkLead(svc, org.id, { source: 'website', fitScore: 40 });
    const excellent = await mkLead(svc, org.id, { source: 'referral', fitScore: 99 });
    const neither = await mkLead(svc, org.id, { source: 'referral', fitScore: 98 });
    await settle(svc);
    const fired = await eventsOf(svc, org.id, 'rule.lead_qualified');
    expect(fired.map((e) => [e.resource_id, e.data.fields])).toEqual([
      [web, { 'data.source': 'website', 'data.fitScore': 40, 'data.formId': null, 'data.nothing.deeper': null, 'data.status': 'NEW' }],
      [
        excellent,
        { 'data.source': 'referral', 'data.fitScore': 99, 'data.formId': null, 'data.nothing.deeper': null, 'data.status': 'NEW' },
      ],
    ]);
    expect(fired.every((e) => e.data.ruleId === rule.id)).toBe(true);
    const triggered = await eventsOf(svc, org.id, 'rule.triggered');
    expect(triggered.some((e) => e.resource_id === neither || e.data.ruleId === never.id)).toBe(false);
  });

  it('fires at most once per (rule, event): the job run again (a retry) emits nothing more', async () => {
    const org = await svc.newOrg();
    const a = await createRule(org.id, {
      name: 'Any lead',
      triggerEventType: 'inbound.lead_received',
      actions: [{ type: 'call_webhook' }],
    });
    const b = await createRule(org.id, { template: 'lead_qualified' });
    const lead = await mkLead(svc, org.id, { fitScore: 70 });
    await settle(svc);
    const [received] = await eventsOf(svc, org.id, 'inbound.lead_received');
    const once = await ruleEvents(org.id);
    expect(once.map((e) => [e.type, e.data.ruleId])).toEqual([
      ['rule.triggered', a.id],
      ['rule.triggered', b.id],
      ['rule.lead_qualified', b.id],
    ]);
    expect(once[0].data.fields).toEqual({});
    const task = runRulesTask(deps);
    await task({ organizationId: org.id, eventId: received.id }, {} as never);
    await task({ organizationId: org.id, eventId: received.id }, {} as never);
    expect(await ruleEvents(org.id)).toEqual(once);
    const marks = await system(svc, (trx) =>
      trx.selectFrom('rule_firings').select(['rule_id', 'event_id']).where('organization_id', '=', org.id).orderBy('rule_id').execute(),
    );
    expect(marks).toEqual(
      [
        { rule_id: a.id, event_id: received.id },
        { rule_id: b.id, event_id: received.id },
      ].sort((x, y) => x.rule_id.localeCompare(y.rule_id)),
    );
    expect(lead).toBeTruthy();
  });

  it("never runs on rule.* events (no loops), and never on another organization's events", async () => {
    const org = await svc.newOrg();
    const other = await svc.newOrg();
    await createRule(org.id, { template: 'lead_qualified' });
    // The table itself refuses a rule on a rule.* type, whatever writes it.
    await expect(
      system(svc, (trx) =>
        trx
          .insertInto('rules')
          .values({
            organization_id: org.id,
            id: 'rul_loop',
            name: 'Loop',
            trigger_event_type: 'rule.triggered',
            conditions: null,
            actions: JSON.stringify([{ type: 'call_webhook' }]),
          })
          .execute(),
      ),
    ).rejects.toThrow(/check/i);
    await mkLead(svc, other.id, { fitScore: 95 });
    await mkLead(svc, org.id, { fitScore: 95 });
    await settle(svc);
    expect(await ruleEvents(other.id)).toEqual([]);
    const fired = await ruleEvents(org.id);
    expect(fired).toHaveLength(2);
    // Running the rules on a rule.* event does nothing, and none was queued for one.
    for (const e of fired) expect(await withOrg(svc.rt.db, org.id, (trx) => runRules(trx, org.id, e.id))).toBe(0);
    // Nor on an event id of another organization: it is unknown there.
    const [otherEvent] = await eventsOf(svc, other.id, 'inbound.lead_received');
    expect(await withOrg(svc.rt.db, org.id, (trx) => runRules(trx, org.id, otherEvent.id))).toBe(0);
    expect(await ruleEvents(org.id)).toHaveLength(2);
  });

  it('the emitter queues run_rules only for a type an enabled rule of the organization triggers on, never for rule.*, in the emitting transaction', async () => {
    const org = await svc.newOrg();
    const other = await svc.newOrg();
    await createRule(org.id, { name: 'Won', triggerEventType: 'deal.won', actions: [{ type: 'call_webhook' }] });
    await createRule(org.id, { name: 'Off', triggerEventType: 'deal.lost', actions: [{ type: 'call_webhook' }], enabled: false });
    await createRule(other.id, { name: 'Theirs', triggerEventType: 'deal.created', actions: [{ type: 'call_webhook' }] });
    const deal = (type: string) => ({ type, resource: { type: 'Deal', id: 'deal_x' }, data: { dealId: 'deal_x', dealName: 'X' } });
    // The owner connection can read the queue; the transaction is rolled back so nothing runs.
    await expect(
      withOrg(svc.ownerDb, org.id, async (trx) => {
        const jobs = async () =>
          (
            await sql<{ event_id: string }>`SELECT j.payload->>'eventId' AS event_id FROM graphile_worker._private_jobs j
        JOIN graphile_worker._private_tasks t ON t.id = j.task_id WHERE t.identifier = 'run_rules' AND j.payload->>'organizationId' = ${org.id}`.execute(
              trx,
            )
          ).rows.map((r) => r.event_id);
        const won = await emit(trx, org.id, deal('deal.won'));
        expect(await jobs()).toEqual([won]);
        for (const t of ['deal.lost', 'deal.created', 'rule.triggered', 'rule.deal_at_risk']) await emit(trx, org.id, deal(t));
        expect(await jobs()).toEqual([won]);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await eventsOf(svc, org.id)).toEqual([]);
  });
});

function adminHeaders(): Record<string, string> {
  return { 'content-type': 'application/json', authorization: `Bearer ${svc.config.adminToken}` };
}
