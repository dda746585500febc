// The one event emitter: the event row and its fan-out job commit with the change or not at all.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withOrg } from '../db/database.js';
import { emit } from '../src/platform/events.js';
import { startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

const fanoutJobs = async (eventId: string) =>
  (
    await sql<{ n: number }>`
  select count(*)::int as n from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
  where t.identifier = 'fanout_event' and j.payload->>'eventId' = ${eventId}`.execute(svc.ownerDb)
  ).rows[0].n;

async function subscribe(orgId: string, types: string[]) {
  await withOrg(svc.rt.db, orgId, (trx) =>
    trx
      .insertInto('webhook_endpoints')
      .values({
        organization_id: orgId,
        id: `whe_${Math.random().toString(16).slice(2)}`,
        url: 'https://example.com/hook',
        event_types: types,
        secret_ciphertext: svc.rt.services.secretBox.seal('whs_x'),
      })
      .execute(),
  );
}

describe('emit', () => {
  it('writes the envelope with an evt_ id, the API version and the resource', async () => {
    const org = await svc.newOrg();
    const r = await svc.admin.POST('/organizations/{orgId}/suppression-domains', {
      params: { path: { orgId: org.id } },
      body: { domain: 'rival.example' },
    });
    expect(r.response.status).toBe(201);
    const rows = await withOrg(svc.rt.db, org.id, (trx) => trx.selectFrom('events').selectAll().execute());
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      type: 'suppression.added',
      api_version: '2026-07-21',
      resource_type: 'SuppressionEntry',
      resource_id: r.data!.id,
    });
    expect(rows[0].id).toMatch(/^evt_[0-9a-f]{24}$/);
    expect(await fanoutJobs(rows[0].id)).toBe(0); // nobody subscribes: no job
  });

  it('enqueues a fan-out job only when an active endpoint subscribes to the type, in the same transaction', async () => {
    const org = await svc.newOrg();
    await subscribe(org.id, ['suppression.added']);
    const id = await withOrg(svc.rt.db, org.id, (trx) =>
      emit(trx, org.id, { type: 'suppression.added', resource: { type: 'SuppressionEntry', id: 'sup_1' }, data: {} }),
    );
    expect(await fanoutJobs(id)).toBe(1);
    const other = await withOrg(svc.rt.db, org.id, (trx) =>
      emit(trx, org.id, { type: 'contact.deleted', resource: { type: 'Contact', id: 'con_1' }, data: {} }),
    );
    expect(await fanoutJobs(other)).toBe(0);
    const queue = await svc.admin.GET('/queue');
    expect(queue.data!.pending).toBeGreaterThanOrEqual(1);
  });

  it('leaves neither event nor job behind when the transaction fails', async () => {
    const org = await svc.newOrg();
    await subscribe(org.id, ['suppression.added']);
    let id = '';
    await expect(
      withOrg(svc.rt.db, org.id, async (trx) => {
        id = await emit(trx, org.id, { type: 'suppression.added', resource: { type: 'SuppressionEntry', id: 'sup_2' }, data: {} });
        throw new Error('half-way failure');
      }),
    ).rejects.toThrow('half-way failure');
    expect(id).toMatch(/^evt_/);
    expect(await withOrg(svc.rt.db, org.id, (trx) => trx.selectFrom('events').select('id').where('id', '=', id).execute())).toEqual([]);
    expect(await fanoutJobs(id)).toBe(0);
  });

  it('keeps the order of emission in the log: separate emits of one transaction, and transactions one after another', async () => {
    const { org, api } = await svc.orgWithKey();
    const sent: string[] = [];
    // Sub-millisecond apart: without the ordering, most of these would tie on time.
    await withOrg(svc.rt.db, org.id, async (trx) => {
      for (let i = 0; i < 10; i += 1)
        sent.push(await emit(trx, org.id, { type: 'contact.deleted', resource: { type: 'Contact', id: `con_${i}` }, data: {} }));
    });
    for (let i = 10; i < 20; i += 1) {
      sent.push(
        await withOrg(svc.rt.db, org.id, (trx) =>
          emit(trx, org.id, { type: 'contact.deleted', resource: { type: 'Contact', id: `con_${i}` }, data: {} }),
        ),
      );
    }
    const log = await api.GET('/events', { params: { query: { limit: 50 } } });
    expect(log.data!.data.map((e) => e.id)).toEqual([...sent].reverse());
    const times = log.data!.data.map((e) => Date.parse(e.createdAt));
    times.forEach((t, i) => {
      if (i > 0) expect(t).toBeLessThan(times[i - 1]);
    });
  });

  it('refuses types outside the emitted catalogue', async () => {
    const org = await svc.newOrg();
    await expect(
      withOrg(svc.rt.db, org.id, (trx) =>
        emit(trx, org.id, { type: 'org.created', resource: { type: 'Organization', id: org.id }, data: {} }),
      ),
    ).rejects.toThrow(/not an emitted event type/);
    await expect(
      withOrg(svc.rt.db, org.id, (trx) => emit(trx, org.id, { type: 'no.such', resource: { type: 'X', id: 'x' }, data: {} })),
    ).rejects.toThrow();
  });
});
