// GET /events (the platform event log) and how events are emitted: once, with the change, in
// the organization that caused them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withOrg } from '../db/database.js';
import { emit } from '../src/platform/events.js';
import { ALL_SCOPES, startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService({ RATE_LIMIT_PER_MINUTE: '100000' });
});
afterAll(async () => {
  await svc?.close();
});

async function client(scopes: readonly string[] = ['events.read', 'webhooks.manage']) {
  const org = await svc.newOrg();
  return { org, api: svc.api(await org.key(scopes)) };
}

/** Inserts events with chosen times (the log's order and filters are about createdAt). */
async function seed(orgId: string, rows: Array<{ id: string; type: string; at: string; resource?: [string, string] }>) {
  await withOrg(svc.rt.db, orgId, (trx) =>
    trx
      .insertInto('events')
      .values(
        rows.map((r) => ({
          organization_id: orgId,
          id: r.id,
          type: r.type,
          api_version: '2026-07-21',
          data: JSON.stringify({ n: r.id }),
          resource_type: r.resource?.[0] ?? 'Deal',
          resource_id: r.resource?.[1] ?? 'deal_1',
          created_at: new Date(r.at),
        })),
      )
      .execute(),
  );
}

async function suppressDomain(orgId: string, domain: string) {
  const r = await svc.admin.POST('/organizations/{orgId}/suppression-domains', { params: { path: { orgId } }, body: { domain } });
  expect(r.response.status).toBe(201);
  return r.data!;
}

describe('GET /events', () => {
  it('lists envelopes with resource, newest first, cursor-paged without repeats', async () => {
    const { org, api } = await client();
    await seed(org.id, [
      { id: 'evt_a', type: 'deal.won', at: '2026-07-01T10:00:00.000Z' },
      { id: 'evt_b', type: 'deal.lost', at: '2026-07-01T11:00:00.000Z' },
      { id: 'evt_c', type: 'deal.won', at: '2026-07-01T11:00:00.000Z' },
      { id: 'evt_d', type: 'contact.deleted', at: '2026-07-01T12:00:00.000Z', resource: ['Contact', 'con_1'] },
    ]);
    const p1 = await api.GET('/events', { params: { query: { limit: 2 } } });
    expect(p1.data!.data[0]).toEqual({
      apiVersion: '2026-07-21',
      id: 'evt_d',
      type: 'contact.deleted',
      createdAt: '2026-07-01T12:00:00.000Z',
      organizationId: org.id,
      data: { n: 'evt_d' },
      resource: { type: 'Contact', id: 'con_1' },
    });
    expect(p1.data!.data.map((e) => e.id)).toEqual(['evt_d', 'evt_c']);
    const p2 = await api.GET('/events', { params: { query: { limit: 2, cursor: p1.data!.nextCursor! } } });
    expect(p2.data!.data.map((e) => e.id)).toEqual(['evt_b', 'evt_a']);
    expect(p2.data!.nextCursor).toBeNull();
    const all = await api.GET('/events');
    expect(all.data!.data.map((e) => e.id)).toEqual(['evt_d', 'evt_c', 'evt_b', 'evt_a']);
  });

  it('filters by type list, resource and time range (AND-combined)', async () => {
    const { org, api } = await client();
    await seed(org.id, [
      { id: 'evt_1', type: 'deal.won', at: '2026-07-01T10:00:00.000Z', resource: ['Deal', 'deal_1'] },
      { id: 'evt_2', type: 'deal.lost', at: '2026-07-02T10:00:00.000Z', resource: ['Deal', 'deal_2'] },
      { id: 'evt_3', type: 'deal.won', at: '2026-07-03T10:00:00.000Z', resource: ['Deal', 'deal_2'] },
      { id: 'evt_4', type: 'contact.deleted', at: '2026-07-04T10:00:00.000Z', resource: ['Contact', 'deal_2'] },
    ]);
    const ids = async (query: Record<string, string>) => (await api.GET('/events', { params: { query } })).data!.data.map((e) => e.id);
    expect(await ids({ type: 'deal.won' })).toEqual(['evt_3', 'evt_1']);
    expect(await ids({ type: 'deal.won,deal.lost' })).toEqual(['evt_3', 'evt_2', 'evt_1']);
    expect(await ids({ type: 'payment.failed' })).toEqual([]);
    expect(await ids({ resourceType: 'Deal' })).toEqual(['evt_3', 'evt_2', 'evt_1']);
    expect(await ids({ resourceId: 'deal_2' })).toEqual(['evt_4', 'evt_3', 'evt_2']);
    expect(await ids({ resourceType: 'Deal', resourceId: 'deal_2' })).toEqual(['evt_3', 'evt_2']);
    expect(await ids({ createdAfter: '2026-07-02T10:00:00.000Z' })).toEqual(['evt_4', 'evt_3', 'evt_2']);
    expect(await ids({ createdBefore: '2026-07-03T10:00:00Z' })).toEqual(['evt_2', 'evt_1']);
    expect(await ids({ createdAfter: '2026-07-02T12:00:00+02:00', createdBefore: '2026-07-04T00:00:00Z', type: 'deal.won' })).toEqual([
      'evt_3',
    ]);
  });

  it('refuses unknown types, bad dates, an empty window, over-long values and forged cursors with 400', async () => {
    const { api } = await client();
    const bad: Array<Record<string, string>> = [
      { type: 'deal.exploded' },
      { type: 'deal.won,,deal.lost' },
      { type: 'deal.won, deal.lost' },
      { type: '' },
      { createdAfter: 'yesterday' },
      { createdBefore: '2026-13-01T00:00:00Z' },
      { createdAfter: '2026-07-02T00:00:00Z', createdBefore: '2026-07-02T00:00:00Z' },
      { createdAfter: '2026-07-03T00:00:00Z', createdBefore: '2026-07-02T00:00:00Z' },
      { resourceId: 'x'.repeat(65) },
      { cursor: 'abc.def' },
      { limit: '0' },
      { limit: '201' },
    ];
    for (const query of bad) {
      const r = await api.GET('/events', { params: { query: query as never } });
      expect(r.response.status, JSON.stringify(query)).toBe(400);
    }
  });

  it('needs events.read', async () => {
    const org = await svc.newOrg();
    const r = await svc.api(await org.key(ALL_SCOPES.filter((s) => s !== 'events.read'))).GET('/events');
    expect(r.response.status).toBe(403);
    expect(r.error?.detail).toContain('events.read');
  });

  it("one organization never sees another organization's events", async () => {
    const a = await client();
    const b = await client();
    await suppressDomain(a.org.id, 'a-only.example');
    await suppressDomain(b.org.id, 'b-only.example');
    const la = (await a.api.GET('/events')).data!.data;
    const lb = (await b.api.GET('/events')).data!.data;
    expect(la).toHaveLength(1);
    expect(lb).toHaveLength(1);
    expect(la[0].organizationId).toBe(a.org.id);
    expect(JSON.stringify(lb)).not.toContain('a-only');
    expect((await b.api.GET('/events', { params: { query: { resourceId: la[0].resource.id } } })).data!.data).toEqual([]);
  });
});

describe('emission', () => {
  it('an operation emits its event once, with the change (operator DOMAIN suppression emits suppression.added)', async () => {
    const { org, api } = await client();
    const entry = await suppressDomain(org.id, 'blocked.example');
    const { data } = await api.GET('/events');
    expect(data!.data).toEqual([
      expect.objectContaining({
        type: 'suppression.added',
        organizationId: org.id,
        resource: { type: 'SuppressionEntry', id: entry.id },
      }),
    ]);
  });

  it('a transaction that fails after emitting leaves no event and no job', async () => {
    const { org, api } = await client();
    await api.POST('/webhooks', { body: { url: 'https://h.example.com/x', eventTypes: ['deal.won'] } });
    let id = '';
    await expect(
      withOrg(svc.rt.db, org.id, async (trx) => {
        id = await emit(trx, org.id, { type: 'deal.won', resource: { type: 'Deal', id: 'd' }, data: {} });
        throw new Error('the change failed');
      }),
    ).rejects.toThrow('the change failed');
    expect((await api.GET('/events')).data!.data).toEqual([]);
    const jobs = await svc.pool.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE payload->>'eventId' = $1`, [id]);
    expect(jobs.rows[0].n).toBe(0);
  });

  it('enqueues a fan-out only when an active endpoint subscribes to the type', async () => {
    const { org, api } = await client();
    const { data: ep } = await api.POST('/webhooks', { body: { url: 'https://h.example.com/x', eventTypes: ['deal.won'] } });
    const fanouts = async (eventId: string) =>
      (await svc.pool.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE payload->>'eventId' = $1`, [eventId]))
        .rows[0].n;
    const e = (type: string) =>
      withOrg(svc.rt.db, org.id, (trx) => emit(trx, org.id, { type, resource: { type: 'Deal', id: 'd' }, data: {} }));
    expect(await fanouts(await e('deal.won'))).toBe(1);
    expect(await fanouts(await e('deal.lost'))).toBe(0);
    await api.PATCH('/webhooks/{id}', { params: { path: { id: ep!.id } }, body: { status: 'paused' } });
    expect(await fanouts(await e('deal.won'))).toBe(0);
    // Never-emitted catalogue types cannot be emitted at all.
    await expect(e('payment.failed')).rejects.toThrow(/not an emitted event type/);
  });
});
