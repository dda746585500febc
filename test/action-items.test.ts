// The action-item work queue: the list (order, paging, filters, fields), one item, the verbs with
// their resulting state, bodies, events and role rules, the operator row, the expiry and snooze
// sweeps, and the items opened by signals (an overdue deal next step, an out-of-office return).
import type { UpdateObject } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../db/database.js';
import { runDealSweep } from '../src/deals/sweep.js';
import type { SystemDeps } from '../src/platform/services.js';
import { publicDoc } from '../src/platform/spec.js';
import { runActionItemSweep } from '../src/work/action-item-sweep.js';
import { eventsOf, insertSequence, mkContact, planOf, system, uid } from './crm-support.js';
import { ALL_SCOPES, type PublicClient, raw, setClock, startService, type TestOrg, type TestService } from './support/harness.js';

let svc: TestService;
let deps: SystemDeps;
beforeAll(async () => {
  svc = await startService();
  deps = { db: svc.rt.workerDb, systemDb: svc.rt.systemDb, config: svc.rt.config, services: svc.rt.services, log: svc.rt.log };
});
afterAll(async () => {
  await svc?.close();
});

type Priority = 'urgent' | 'high' | 'medium' | 'low';
interface NewItem {
  priority?: Priority;
  description?: string;
  entityType?: string;
  entityId?: string;
  expectedImpactCents?: number;
  expiresAt?: string;
  actionType?: string;
  title?: string;
}

async function newItem(org: TestOrg, salesPersonId: string, extra: NewItem = {}): Promise<string> {
  const r = await svc.admin.POST('/organizations/{orgId}/action-items', {
    params: { path: { orgId: org.id } },
    body: { actionType: 'follow_up', title: uid('Call '), salesPersonId, priority: 'high', ...extra },
  });
  if (r.response.status !== 201 || !r.data) throw new Error(`item: ${r.response.status} ${JSON.stringify(r.error)}`);
  return r.data.id;
}

/** An organization, a person of the role with a key (actions.read + contacts.write) and its client. */
async function person(
  org: TestOrg,
  role: 'REP' | 'MANAGER' | 'ADMIN' | 'OWNER',
  scopes: readonly string[] = ['actions.read', 'contacts.write'],
) {
  const user = role === 'OWNER' ? { id: org.ownerId } : await org.user(role);
  return { user, api: svc.api(await org.key(scopes, { userId: user.id })) };
}

const verb = (api: PublicClient, id: string, v: string, body?: Record<string, unknown>) =>
  api.POST('/action-items/{id}/{verb}', { params: { path: { id, verb: v } }, ...(body ? { body: body as never } : {}) });
const getItem = async (api: PublicClient, id: string) => (await api.GET('/action-items/{id}', { params: { path: { id } } })).data!;
const list = (api: PublicClient, query: Record<string, unknown> = {}) => api.GET('/action-items', { params: { query: query as never } });
const setRow = (orgId: string, id: string, values: UpdateObject<Database, 'action_items'>) =>
  system(svc, (trx) => trx.updateTable('action_items').set(values).where('organization_id', '=', orgId).where('id', '=', id).execute());
const rowOf = (orgId: string, id: string) =>
  system(svc, (trx) =>
    trx.selectFrom('action_items').selectAll().where('organization_id', '=', orgId).where('id', '=', id).executeTakeFirstOrThrow(),
  );
const itemsOf = (orgId: string) =>
  system(svc, (trx) => trx.selectFrom('action_items').selectAll().where('organization_id', '=', orgId).orderBy('created_at').execute());
const DAY = 86_400_000;

describe('GET /action-items', () => {
  it("lists every owner's items newest first (createdAt DESC, id DESC) with every ActionItem field", async () => {
    const org = await svc.newOrg();
    const mgr = await person(org, 'MANAGER');
    const rep = await org.user('REP');
    const expiresAt = new Date(Date.now() + 5 * DAY).toISOString();
    const a = await newItem(org, rep.id, {
      priority: 'urgent',
      description: 'Renewal call',
      entityType: 'Deal',
      entityId: 'deal_x',
      expectedImpactCents: 250000,
      expiresAt,
    });
    const b = await newItem(org, mgr.user.id);
    const c = await newItem(org, rep.id);
    // b and c share a creation time: the id breaks the tie, descending.
    const at = new Date(Date.now() - 1000);
    await setRow(org.id, b, { created_at: at });
    await setRow(org.id, c, { created_at: at });
    await setRow(org.id, a, { created_at: new Date(at.getTime() - 1000) });
    const r = await list(mgr.api);
    expect(r.response.status).toBe(200);
    expect(r.data!.data.map((i) => i.id)).toEqual([...[b, c].sort().reverse(), a]);
    expect(r.data!.nextCursor).toBeNull();
    const item = r.data!.data.find((i) => i.id === a)!;
    expect(item).toEqual({
      id: a,
      actionType: 'follow_up',
      title: expect.stringMatching(/^Call /),
      description: 'Renewal call',
      priority: 'urgent',
      status: 'pending',
      entityType: 'Deal',
      entityId: 'deal_x',
      salesPersonId: rep.id,
      aiGenerated: false,
      expectedImpactCents: 250000,
      createdAt: new Date(at.getTime() - 1000).toISOString(),
      expiresAt,
      completedAt: null,
      dismissedAt: null,
      snoozedUntilAt: null,
      snoozedAt: null,
      dismissReason: null,
      snoozeReason: null,
    });
    // The list item and the single item are the same shape, key for key.
    expect(await getItem(mgr.api, a)).toEqual(item);
  });

  it('pages with limit and cursor, every item once, and refuses a cursor it did not issue', async () => {
    const org = await svc.newOrg();
    const mgr = await person(org, 'MANAGER');
    const made: string[] = [];
    for (let i = 0; i < 5; i += 1) made.push(await newItem(org, mgr.user.id));
    const seen: string[] = [];
    let cursor: string | undefined;
    const sizes: number[] = [];
    do {
      const r = await list(mgr.api, { limit: 2, ...(cursor ? { cursor } : {}) });
      sizes.push(r.data!.data.length);
      seen.push(...r.data!.data.map((i) => i.id));
      cursor = r.data!.nextCursor ?? undefined;
    } while (cursor);
    expect(sizes).toEqual([2, 2, 1]);
    expect([...seen].sort()).toEqual([...made].sort());
    expect(new Set(seen).size).toBe(5);
    const bad = await list(mgr.api, { cursor: 'abc.def' });
    expect(bad.response.status).toBe(400);
    expect(bad.error).toMatchObject({ type: expect.stringMatching(/invalid-cursor$/) });
    expect((await list(mgr.api, { limit: 0 })).response.status).toBe(400);
    expect((await list(mgr.api, { limit: 201 })).response.status).toBe(400);
  });

  it('filters by status, priority and salesPersonId, alone and combined', async () => {
    const org = await svc.newOrg();
    const mgr = await person(org, 'MANAGER');
    const rep = await org.user('REP');
    const repHigh = await newItem(org, rep.id, { priority: 'high' });
    const repLow = await newItem(org, rep.id, { priority: 'low' });
    const mgrHigh = await newItem(org, mgr.user.id, { priority: 'high' });
    const done = await newItem(org, rep.id, { priority: 'high' });
    expect((await verb(mgr.api, done, 'complete')).response.status).toBe(200);
    const ids = async (q: Record<string, unknown>) => (await list(mgr.api, q)).data!.data.map((i) => i.id).sort();
    expect(await ids({ status: 'completed' })).toEqual([done]);
    expect(await ids({ status: 'pending' })).toEqual([repHigh, repLow, mgrHigh].sort());
    expect(await ids({ priority: 'low' })).toEqual([repLow]);
    expect(await ids({ salesPersonId: rep.id })).toEqual([repHigh, repLow, done].sort());
    expect(await ids({ salesPersonId: rep.id, priority: 'high', status: 'pending' })).toEqual([repHigh]);
    expect(await ids({ salesPersonId: 'usr_nobody' })).toEqual([]);
    expect((await list(mgr.api, { status: 'open' })).response.status).toBe(400);
    expect((await list(mgr.api, { priority: 'critical' })).response.status).toBe(400);
    expect((await list(mgr.api, { salesPersonId: '' })).response.status).toBe(400);
  });

  it("walks an index in list order for the page and for each filter (no sort of the organization's items)", async () => {
    const org = await svc.newOrg();
    const plan = (where: string) =>
      planOf(
        svc,
        org.id,
        `SELECT a.id FROM action_items a WHERE a.organization_id = '${org.id}' ${where}
      ORDER BY a.created_at DESC, a.id DESC LIMIT 51`,
      );
    expect(await plan('')).toMatch(/action_items_page_idx/);
    expect(await plan(`AND a.status = 'pending'`)).toMatch(/action_items_status_page_idx/);
    expect(await plan(`AND a.priority = 'high'`)).toMatch(/action_items_priority_page_idx/);
    expect(await plan(`AND a.sales_person_id = 'usr_x'`)).toMatch(/action_items_owner_page_idx/);
    for (const where of ['', `AND a.status = 'pending'`, `AND a.sales_person_id = 'usr_x'`]) expect(await plan(where)).not.toMatch(/Sort/);
  });

  it("needs actions.read, and never shows another organization's items", async () => {
    const org = await svc.newOrg();
    const other = await svc.newOrg();
    const mine = await newItem(org, org.ownerId);
    const theirs = await newItem(other, other.ownerId);
    const noRead = await person(org, 'MANAGER', ['contacts.read', 'contacts.write']);
    const r = await list(noRead.api);
    expect(r.response.status).toBe(403);
    expect(r.error).toMatchObject({ type: expect.stringMatching(/insufficient-scope$/), detail: expect.stringContaining('actions.read') });
    expect((await noRead.api.GET('/action-items/{id}', { params: { path: { id: mine } } })).response.status).toBe(403);
    const mgr = await person(org, 'MANAGER');
    expect((await list(mgr.api)).data!.data.map((i) => i.id)).toEqual([mine]);
    expect((await mgr.api.GET('/action-items/{id}', { params: { path: { id: theirs } } })).response.status).toBe(404);
    expect((await mgr.api.GET('/action-items/{id}', { params: { path: { id: 'act_000000000000000000000000' } } })).response.status).toBe(
      404,
    );
  });
});

describe('POST /action-items/{id}/{verb}', () => {
  it('complete: completed with completedAt, action.resolved once; a repeat changes nothing and emits nothing', async () => {
    const org = await svc.newOrg();
    const rep = await person(org, 'REP');
    const id = await newItem(org, rep.user.id, { entityType: 'Contact', entityId: 'con_x' });
    const r = await verb(rep.api, id, 'complete');
    expect(r.response.status).toBe(200);
    expect(r.data).toMatchObject({
      actionId: id,
      status: 'complete',
      item: { id, status: 'completed', completedAt: expect.any(String), dismissedAt: null },
    });
    const completedAt = r.data!.item.completedAt;
    const events = await eventsOf(svc, org.id, 'action.resolved');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      resource_type: 'ActionItem',
      resource_id: id,
      data: {
        actionItemId: id,
        actionType: 'follow_up',
        status: 'completed',
        entityType: 'Contact',
        entityId: 'con_x',
        salesPersonId: rep.user.id,
        resolvedByUserId: rep.user.id,
      },
    });
    const again = await verb(rep.api, id, 'complete', {});
    expect(again.response.status).toBe(200);
    expect(again.data!.item.completedAt).toBe(completedAt);
    expect(await eventsOf(svc, org.id, 'action.resolved')).toHaveLength(1);
  });

  it('dismiss: dismissed with the reason (or null); a repeat keeps the first timestamp and reason', async () => {
    const org = await svc.newOrg();
    const rep = await person(org, 'REP');
    const id = await newItem(org, rep.user.id);
    const r = await verb(rep.api, id, 'dismiss', { reason: 'Handled by phone' });
    expect(r.data!.item).toMatchObject({
      status: 'dismissed',
      dismissReason: 'Handled by phone',
      dismissedAt: expect.any(String),
      completedAt: null,
    });
    const again = await verb(rep.api, id, 'dismiss', { reason: 'Something else' });
    expect(again.data!.item).toMatchObject({ dismissReason: 'Handled by phone', dismissedAt: r.data!.item.dismissedAt });
    expect((await eventsOf(svc, org.id, 'action.resolved')).map((e) => e.data.status)).toEqual(['dismissed']);
    const plain = await newItem(org, rep.user.id);
    expect((await verb(rep.api, plain, 'dismiss')).data!.item).toMatchObject({ status: 'dismissed', dismissReason: null });
  });

  it('reopen: back to pending with every state field cleared, no event; resolving it again emits again', async () => {
    const org = await svc.newOrg();
    const rep = await person(org, 'REP');
    const id = await newItem(org, rep.user.id);
    await verb(rep.api, id, 'dismiss', { reason: 'Not now' });
    const r = await verb(rep.api, id, 'reopen');
    expect(r.data).toMatchObject({
      status: 'reopen',
      item: {
        status: 'pending',
        completedAt: null,
        dismissedAt: null,
        dismissReason: null,
        snoozedUntilAt: null,
        snoozedAt: null,
        snoozeReason: null,
      },
    });
    await verb(rep.api, id, 'snooze', { days: 2, reason: 'Later' });
    const reopened = await verb(rep.api, id, 'reopen');
    expect(reopened.data!.item).toMatchObject({ status: 'pending', snoozedUntilAt: null, snoozedAt: null, snoozeReason: null });
    expect(await eventsOf(svc, org.id, 'action.resolved')).toHaveLength(1);
    await verb(rep.api, id, 'complete');
    expect((await eventsOf(svc, org.id, 'action.resolved')).map((e) => e.data.status)).toEqual(['dismissed', 'completed']);
  });

  it('snooze: pending until now + days (default 1), or until a time, with its reason; from any status; no event', async () => {
    const org = await svc.newOrg();
    const rep = await person(org, 'REP');
    const id = await newItem(org, rep.user.id);
    const before = Date.now();
    const one = (await verb(rep.api, id, 'snooze')).data!.item;
    expect(one).toMatchObject({ status: 'pending', snoozeReason: null, snoozedAt: expect.any(String) });
    const until1 = Date.parse(one.snoozedUntilAt!);
    expect(until1 - Date.parse(one.snoozedAt!)).toBe(DAY);
    expect(until1).toBeGreaterThanOrEqual(before + DAY - 1000);
    const week = (await verb(rep.api, id, 'snooze', { days: 7, reason: 'Budget decision' })).data!.item;
    expect(Date.parse(week.snoozedUntilAt!) - Date.parse(week.snoozedAt!)).toBe(7 * DAY);
    expect(week.snoozeReason).toBe('Budget decision');
    const until = new Date(Date.now() + 3 * DAY).toISOString();
    expect((await verb(rep.api, id, 'snooze', { until })).data!.item).toMatchObject({ snoozedUntilAt: until, snoozeReason: null });
    // From completed: pending again, completedAt gone.
    await verb(rep.api, id, 'complete');
    const fromDone = (await verb(rep.api, id, 'snooze', { days: 1 })).data!.item;
    expect(fromDone).toMatchObject({ status: 'pending', completedAt: null, snoozedUntilAt: expect.any(String) });
    // From expired.
    const old = await newItem(org, rep.user.id);
    await setRow(org.id, old, { status: 'expired' });
    expect((await verb(rep.api, old, 'snooze', { days: 1 })).data!.item.status).toBe('pending');
    expect((await eventsOf(svc, org.id, 'action.resolved')).map((e) => e.data.status)).toEqual(['completed']);
  });

  it('refuses a field the verb does not use, until with days, a past until, bad numbers and an unknown verb, changing nothing', async () => {
    const org = await svc.newOrg();
    const rep = await person(org, 'REP');
    const id = await newItem(org, rep.user.id);
    const refusals: Array<[string, Record<string, unknown>, string]> = [
      ['complete', { reason: 'x' }, 'body.reason'],
      ['reopen', { days: 1 }, 'body.days'],
      ['dismiss', { until: new Date(Date.now() + DAY).toISOString() }, 'body.until'],
      ['dismiss', { days: 2 }, 'body.days'],
      ['snooze', { until: new Date(Date.now() - 60_000).toISOString() }, 'body.until'],
    ];
    for (const [v, body, field] of refusals) {
      const r = await verb(rep.api, id, v, body);
      expect(r.response.status, `${v} ${JSON.stringify(body)}`).toBe(400);
      expect(r.error).toMatchObject({ type: expect.stringMatching(/validation-failed$/), errors: [expect.objectContaining({ field })] });
    }
    for (const body of [
      { until: new Date(Date.now() + DAY).toISOString(), days: 2 },
      { days: 0 },
      { days: 91 },
      { reason: '' },
      { reason: 'x'.repeat(501) },
      { other: 1 },
      { until: 'tomorrow' },
    ]) {
      expect((await verb(rep.api, id, 'snooze', body)).response.status, JSON.stringify(body)).toBe(400);
    }
    const unknown = await verb(rep.api, id, 'archive');
    expect(unknown.response.status).toBe(400);
    expect(unknown.error!.detail).toMatch(/complete, reopen, dismiss or snooze/);
    expect(await getItem(rep.api, id)).toMatchObject({ status: 'pending', snoozedUntilAt: null, dismissedAt: null, completedAt: null });
    expect(await eventsOf(svc, org.id, 'action.resolved')).toHaveLength(0);
  });

  it('accepts no body, an empty body or {} alike', async () => {
    const org = await svc.newOrg();
    const rep = await person(org, 'REP');
    const key = await org.key(['contacts.write'], { userId: rep.user.id });
    for (const init of [
      {},
      { body: '', headers: { 'content-type': 'application/json' } },
      { body: '{}', headers: { 'content-type': 'application/json' } },
    ]) {
      const id = await newItem(org, rep.user.id);
      const r = await raw(svc.baseUrl, 'POST', `/api/v1/action-items/${id}/complete`, { key, ...init });
      expect(r.status, JSON.stringify(init)).toBe(200);
      expect(r.body).toMatchObject({ actionId: id, status: 'complete', item: { status: 'completed' } });
    }
  });

  it("documents a body example per verb, named after it, and each is accepted for that verb (the schema's own example by every verb)", async () => {
    const op = (publicDoc.paths['/action-items/{id}/{verb}'] as Record<string, any>).post;
    const verbParam = (publicDoc.paths['/action-items/{id}/{verb}'] as Record<string, any>).parameters.find(
      (p: { name: string }) => p.name === 'verb',
    );
    const bodyExamples = op.requestBody.content['application/json'].examples as Record<string, { value: Record<string, unknown> }>;
    const verbs = Object.values(verbParam.examples as Record<string, { value: string }>).map((e) => e.value);
    expect(verbs.sort()).toEqual(['complete', 'dismiss', 'reopen', 'snooze']);
    expect(Object.keys(bodyExamples).sort()).toEqual(verbs);
    const schemaExamples = (publicDoc.components!.schemas as Record<string, any>).ActionItemVerbRequest.examples as Record<
      string,
      unknown
    >[];
    const org = await svc.newOrg();
    const rep = await person(org, 'REP');
    const tries = [
      ...verbs.map((v) => [v, bodyExamples[v].value] as const),
      ...verbs.flatMap((v) => schemaExamples.map((b) => [v, b] as const)),
    ];
    for (const [v, body] of tries) {
      const id = await newItem(org, rep.user.id);
      const r = await verb(rep.api, id, v, body);
      expect([v, body, r.response.status]).toEqual([v, body, 200]);
    }
  });

  it("lets the owner act, and a MANAGER, ADMIN or OWNER act on anyone's item; a REP on another's item and an unattributed key get 403", async () => {
    const org = await svc.newOrg();
    const rep = await person(org, 'REP');
    const otherRep = await person(org, 'REP');
    const id = await newItem(org, rep.user.id);
    const denied = await verb(otherRep.api, id, 'complete');
    expect(denied.response.status).toBe(403);
    expect(denied.error).toMatchObject({ type: expect.stringMatching(/role-required$/) });
    const unattributed = svc.api(await org.key(['actions.read', 'contacts.write']));
    const none = await verb(unattributed, id, 'dismiss');
    expect(none.response.status).toBe(403);
    expect(none.error!.detail).toMatch(/attributed to no sales person/);
    expect(await getItem(rep.api, id)).toMatchObject({ status: 'pending' });
    expect((await verb(rep.api, id, 'snooze', { days: 1 })).response.status).toBe(200);
    for (const role of ['MANAGER', 'ADMIN', 'OWNER'] as const) {
      const boss = await person(org, role);
      expect((await verb(boss.api, id, 'reopen')).response.status, role).toBe(200);
    }
    const mgr = await person(org, 'MANAGER');
    const done = await verb(mgr.api, id, 'complete');
    expect(done.data!.item.status).toBe('completed');
    expect((await eventsOf(svc, org.id, 'action.resolved'))[0].data.resolvedByUserId).toBe(mgr.user.id);
  });

  it("answers 404 for an unknown item or another organization's, before ownership; needs contacts.write", async () => {
    const org = await svc.newOrg();
    const other = await svc.newOrg();
    const rep = await person(org, 'REP');
    const theirs = await newItem(other, other.ownerId);
    expect((await verb(rep.api, theirs, 'complete')).response.status).toBe(404);
    expect((await verb(rep.api, 'act_000000000000000000000000', 'complete')).response.status).toBe(404);
    expect((await rowOf(other.id, theirs)).status).toBe('pending');
    const readOnly = await person(org, 'MANAGER', ['actions.read', 'contacts.read']);
    const mine = await newItem(org, readOnly.user.id);
    const r = await verb(readOnly.api, mine, 'complete');
    expect(r.response.status).toBe(403);
    expect(r.error).toMatchObject({
      type: expect.stringMatching(/insufficient-scope$/),
      detail: expect.stringContaining('contacts.write'),
    });
  });
});

describe('POST /admin/api/organizations/{orgId}/action-items', () => {
  it('creates a pending item owned by the person, aiGenerated false, with no event', async () => {
    const org = await svc.newOrg();
    const rep = await org.user('REP');
    const id = await newItem(org, rep.id, { priority: 'low', description: 'd', expectedImpactCents: 0 });
    const row = await rowOf(org.id, id);
    expect(row).toMatchObject({
      status: 'pending',
      sales_person_id: rep.id,
      ai_generated: false,
      priority: 'low',
      description: 'd',
      expected_impact_cents: 0,
      source_key: null,
    });
    // Only the person's joining (team.member_added): the item itself emits nothing.
    expect((await eventsOf(svc, org.id)).map((e) => e.type)).toEqual(['team.member_added']);
  });

  it('answers 404 for an unknown organization or a person of another, 400 for a past expiresAt or a bad body', async () => {
    const org = await svc.newOrg();
    const other = await svc.newOrg();
    const post = (orgId: string, body: Record<string, unknown>) =>
      svc.admin.POST('/organizations/{orgId}/action-items', {
        params: { path: { orgId } },
        body: { actionType: 'x', title: 't', salesPersonId: org.ownerId, priority: 'high', ...body } as never,
      });
    expect((await post('org_nope', {})).response.status).toBe(404);
    expect((await post(org.id, { salesPersonId: other.ownerId })).response.status).toBe(404);
    expect((await post(org.id, { expiresAt: new Date(Date.now() - 1000).toISOString() })).response.status).toBe(400);
    expect((await post(org.id, { priority: 'critical' })).response.status).toBe(400);
    expect((await post(org.id, { status: 'completed' })).response.status).toBe(400);
    expect((await post(org.id, { title: '' })).response.status).toBe(400);
    expect(await itemsOf(org.id)).toEqual([]);
  });
});

describe('sweeps', () => {
  it('expires pending items past expiresAt (clearing their snooze), leaves the rest, emits nothing', async () => {
    const org = await svc.newOrg();
    const mgr = await person(org, 'MANAGER');
    const soon = new Date(Date.now() + DAY).toISOString();
    const due = await newItem(org, mgr.user.id, { expiresAt: soon });
    const snoozedDue = await newItem(org, mgr.user.id, { expiresAt: soon });
    const later = await newItem(org, mgr.user.id, { expiresAt: new Date(Date.now() + 2 * DAY).toISOString() });
    const never = await newItem(org, mgr.user.id);
    const done = await newItem(org, mgr.user.id, { expiresAt: soon });
    await verb(mgr.api, done, 'complete');
    await verb(mgr.api, snoozedDue, 'snooze', { days: 5 });
    for (const id of [due, snoozedDue, done]) await setRow(org.id, id, { expires_at: new Date(Date.now() - 1000) });
    const eventsBefore = (await eventsOf(svc, org.id)).length;
    await runActionItemSweep(deps);
    expect((await getItem(mgr.api, due)).status).toBe('expired');
    expect(await getItem(mgr.api, snoozedDue)).toMatchObject({ status: 'expired', snoozedUntilAt: null, snoozedAt: null });
    expect((await getItem(mgr.api, later)).status).toBe('pending');
    expect((await getItem(mgr.api, never)).status).toBe('pending');
    expect((await getItem(mgr.api, done)).status).toBe('completed');
    expect((await eventsOf(svc, org.id)).length).toBe(eventsBefore);
    expect((await list(mgr.api, { status: 'expired' })).data!.data.map((i) => i.id).sort()).toEqual([due, snoozedDue].sort());
  });

  it('brings a snoozed item back when its time is up: the snooze fields are cleared and it stays pending', async () => {
    const org = await svc.newOrg();
    const mgr = await person(org, 'MANAGER');
    const up = await newItem(org, mgr.user.id);
    const notYet = await newItem(org, mgr.user.id);
    await verb(mgr.api, up, 'snooze', { days: 1, reason: 'Waiting' });
    await verb(mgr.api, notYet, 'snooze', { days: 3 });
    await setRow(org.id, up, { snoozed_until_at: new Date(Date.now() - 1000) });
    await runActionItemSweep(deps);
    expect(await getItem(mgr.api, up)).toMatchObject({ status: 'pending', snoozedUntilAt: null, snoozedAt: null, snoozeReason: null });
    expect((await getItem(mgr.api, notYet)).snoozedUntilAt).not.toBeNull();
  });

  it('opens one item for the owner of a deal whose next step is overdue, with the expected impact', async () => {
    const clock = setClock(svc, '2030-11-01T12:00:00Z');
    const org = await svc.newOrg();
    const rep = await org.user('REP');
    const api = svc.api(await org.key(ALL_SCOPES, { userId: org.ownerId }));
    const closeDate = new Date(clock.now().getTime() - 2 * DAY).toISOString().slice(0, 10);
    const deal = (
      await api.POST('/deals', {
        body: { name: 'Rocket fuel', valueCents: 1_000_000, probability: 40, closeDate, ownerSalesPersonId: rep.id },
      })
    ).data!;
    const unpriced = (await api.POST('/deals', { body: { name: 'Unpriced', closeDate } })).data!;
    await runDealSweep(deps);
    await runDealSweep(deps);
    const items = await itemsOf(org.id);
    expect(items).toHaveLength(2);
    const item = items.find((i) => i.entity_id === deal.id)!;
    expect(item).toMatchObject({
      action_type: 'deal_next_step_overdue',
      title: 'Next step overdue: Rocket fuel',
      priority: 'high',
      status: 'pending',
      entity_type: 'Deal',
      sales_person_id: rep.id,
      ai_generated: true,
      expected_impact_cents: 400_000,
      source_key: `deal-overdue:${deal.id}:${closeDate}`,
    });
    expect(items.find((i) => i.entity_id === unpriced.id)).toMatchObject({ expected_impact_cents: null, sales_person_id: org.ownerId });
    expect(await eventsOf(svc, org.id, 'deal.next_step_overdue')).toHaveLength(2);
  });

  it('opens one follow-up per out-of-office return for a contact with a sequence in flight', async () => {
    const org = await svc.newOrg();
    const rep = await org.user('REP');
    const api = svc.api(await org.key(ALL_SCOPES, { userId: rep.id }));
    const back = await mkContact(api, { name: 'Dana Back' });
    const noSequence = await mkContact(api);
    const stillAway = await mkContact(api);
    const longAgo = await mkContact(api);
    const paused = await mkContact(api);
    await insertSequence(svc, org.id, back.id, 'ACTIVE');
    await insertSequence(svc, org.id, stillAway.id, 'ACTIVE');
    await insertSequence(svc, org.id, longAgo.id, 'QUEUED');
    await insertSequence(svc, org.id, paused.id, 'PAUSED');
    const ooo = (id: string, at: Date) =>
      system(svc, (trx) =>
        trx.updateTable('contacts').set({ out_of_office_until: at }).where('organization_id', '=', org.id).where('id', '=', id).execute(),
      );
    const returned = new Date(Date.now() - 3600_000);
    await ooo(back.id, returned);
    await ooo(noSequence.id, returned);
    await ooo(paused.id, returned);
    await ooo(stillAway.id, new Date(Date.now() + DAY));
    await ooo(longAgo.id, new Date(Date.now() - 10 * DAY));
    await runActionItemSweep(deps);
    await runActionItemSweep(deps);
    const items = await itemsOf(org.id);
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({
      action_type: 'follow_up_ooo_return',
      title: 'Follow up with Dana Back: back from out of office',
      priority: 'medium',
      entity_type: 'Contact',
      entity_id: back.id,
      sales_person_id: rep.id,
      ai_generated: true,
      expected_impact_cents: null,
      source_key: `ooo-return:${back.id}:${returned.getTime()}`,
    });
    expect(items[0].expires_at!.getTime()).toBe(returned.getTime() + 14 * DAY);
    // A later absence is a new signal.
    const again = new Date(Date.now() - 60_000);
    await ooo(back.id, again);
    await runActionItemSweep(deps);
    expect((await itemsOf(org.id)).map((i) => i.source_key)).toEqual([
      `ooo-return:${back.id}:${returned.getTime()}`,
      `ooo-return:${back.id}:${again.getTime()}`,
    ]);
  });
});
