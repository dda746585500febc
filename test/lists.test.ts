import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventsOf, insertSequence, mkContact, mkList, sequenceStatus, system, uid } from './crm-support.js';
import { ALL_SCOPES, startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

const setup = (opts: { attributed?: boolean } = {}) => svc.orgWithKey(ALL_SCOPES, opts.attributed ? { role: 'REP' } : {});
const patchList = (orgId: string, listId: string, body: { archived?: boolean; isTest?: boolean }) => svc.patchList(orgId, listId, body);

describe('POST /lists', () => {
  it("creates with defaults, owned by the key's person (or the owner for an unattributed key)", async () => {
    const { org, api } = await setup();
    const r = await api.POST('/lists', { body: { name: 'Expo' } });
    expect(r.response.status).toBe(201);
    expect(r.data).toEqual({
      id: expect.any(String),
      organizationId: org.id,
      userId: org.ownerId,
      name: 'Expo',
      sourceType: 'OTHER',
      description: null,
      connectionPoint: null,
      goal: null,
      archivedAt: null,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    const rep = await setup({ attributed: true });
    const me = await rep.api.GET('/me');
    const mine = await rep.api.POST('/lists', {
      body: {
        name: 'Mine',
        sourceType: 'CONFERENCE',
        description: 'd'.repeat(400),
        connectionPoint: 'c'.repeat(250),
        goal: 'g'.repeat(150),
      },
    });
    expect(mine.data).toMatchObject({ userId: me.data?.apiKey.userId, sourceType: 'CONFERENCE', goal: 'g'.repeat(150) });
  });

  it('refuses bad fields with 400, creating nothing', async () => {
    const { org, api } = await setup();
    const otherOrg = await svc.newOrg();
    const foreignProduct = await svc.admin.POST('/organizations/{orgId}/products', {
      params: { path: { orgId: otherOrg.id } },
      body: { name: 'P' },
    });
    for (const body of [
      {},
      { name: '' },
      { name: '   ' },
      { name: 'x', sourceType: 'TRADE_SHOW' },
      { name: 'x', description: 'd'.repeat(401) },
      { name: 'x', connectionPoint: 'c'.repeat(251) },
      { name: 'x', goal: 'g'.repeat(151) },
      { name: 'x', extra: true },
      { name: 'x', productId: foreignProduct.data!.id },
      { name: 'x', useCaseTemplateId: 'tpl_unknown' },
    ]) {
      const r = await api.POST('/lists', { body: body as never });
      expect(r.response.status, JSON.stringify(body)).toBe(400);
    }
    expect((await api.GET('/lists')).data?.data).toEqual([]);
    const product = await svc.admin.POST('/organizations/{orgId}/products', {
      params: { path: { orgId: org.id } },
      body: { name: 'Mine' },
    });
    const tpl = await svc.admin.POST('/organizations/{orgId}/sequence-templates', {
      params: { path: { orgId: org.id } },
      body: { name: 'T', steps: [{ dayOffset: 0, subject: 's', body: 'b' }] },
    });
    expect(
      (await api.POST('/lists', { body: { name: 'ok', productId: product.data!.id, useCaseTemplateId: tpl.data!.id } })).response.status,
    ).toBe(201);
  });

  it('Idempotency-Key replays the first list; another body under the key is 422', async () => {
    const { org, key } = await setup();
    const k = uid('idem-');
    const api = svc.api(key, { 'Idempotency-Key': k });
    const first = await api.POST('/lists', { body: { name: 'Once' } });
    const again = await api.POST('/lists', { body: { name: 'Once' } });
    expect(first.response.status).toBe(201);
    expect(again.response.status).toBe(201);
    expect(again.data).toEqual(first.data);
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
    expect((await api.POST('/lists', { body: { name: 'Different' } })).response.status).toBe(422);
    const n = await system(svc, (trx) => trx.selectFrom('contact_lists').select('id').where('organization_id', '=', org.id).execute());
    expect(n).toHaveLength(1);
  });
});

describe('GET /lists', () => {
  it('hides archived lists unless includeArchived=1 and never shows deleted ones; archived lists answer by id', async () => {
    const { org, api } = await setup();
    const [a, b, c] = [await mkList(api), await mkList(api), await mkList(api)];
    const archived = await patchList(org.id, a.id, { archived: true });
    expect(archived.data?.archivedAt).not.toBeNull();
    await api.DELETE('/lists/{id}', { params: { path: { id: c.id } } });
    const ids = async (includeArchived?: '1' | '0') =>
      (await api.GET('/lists', { params: { query: { includeArchived } } })).data!.data.map((x) => x.id);
    expect(await ids()).toEqual([b.id]);
    expect(await ids('0')).toEqual([b.id]);
    expect(await ids('1')).toEqual([b.id, a.id]);
    expect((await api.GET('/lists/{id}', { params: { path: { id: a.id } } })).data).toEqual(archived.data);
    expect((await api.GET('/lists/{id}', { params: { path: { id: c.id } } })).response.status).toBe(404);
    // Unarchiving brings it back; the operator's test flag is not a public field.
    await patchList(org.id, a.id, { archived: false, isTest: true });
    expect((await api.GET('/lists/{id}', { params: { path: { id: a.id } } })).data?.archivedAt).toBeNull();
    const p1 = await api.GET('/lists', { params: { query: { limit: 1 } } });
    const p2 = await api.GET('/lists', { params: { query: { limit: 1, cursor: p1.data!.nextCursor! } } });
    expect([p1.data!.data[0].id, p2.data!.data[0].id, p2.data!.nextCursor]).toEqual([b.id, a.id, null]);
  });

  it('404 for unknown and foreign lists, also through the operator API', async () => {
    const { org, api } = await setup();
    const other = await setup();
    const foreign = await mkList(other.api);
    expect((await api.GET('/lists/{id}', { params: { path: { id: foreign.id } } })).response.status).toBe(404);
    expect((await api.DELETE('/lists/{id}', { params: { path: { id: foreign.id } } })).response.status).toBe(404);
    expect((await patchList(org.id, foreign.id, { archived: true })).response.status).toBe(404);
    expect((await patchList('org.unknown', foreign.id, { archived: true })).response.status).toBe(404);
    expect((await api.GET('/lists/{id}', { params: { path: { id: foreign.id } } })).response.status).toBe(404);
    expect((await other.api.GET('/lists/{id}', { params: { path: { id: foreign.id } } })).data?.archivedAt).toBeNull();
  });
});

describe('DELETE /lists/{id}', () => {
  it('soft-deletes the list and its memberships, keeps contacts, audits without an event, and repeats', async () => {
    const { org, api } = await setup();
    const [list, home] = [await mkList(api), await mkList(api)];
    const own = await mkContact(api, { listId: list.id });
    const attached = await mkContact(api, { listId: home.id });
    await api.POST('/contacts', { body: { email: attached.email, listId: list.id } });
    const before = (await eventsOf(svc, org.id)).length;
    const r = await api.DELETE('/lists/{id}', { params: { path: { id: list.id } } });
    expect(r.data).toEqual({
      id: list.id,
      deleted: true,
      deletedAt: expect.any(String),
      alreadyDeleted: false,
      membershipsRemoved: 2,
      sequencesPaused: 0,
    });
    expect((await eventsOf(svc, org.id)).length).toBe(before);
    const audit = await system(svc, (trx) =>
      trx.selectFrom('audit_log').selectAll().where('organization_id', '=', org.id).where('resource_id', '=', list.id).execute(),
    );
    expect(audit.map((a) => [a.action, a.resource_type, a.details])).toEqual([
      ['list.deleted', 'ContactList', { force: false, membershipsRemoved: 2, sequencesPaused: 0 }],
    ]);
    // Contacts survive: the own contact lives on no list any more, the attached one keeps its own.
    expect((await api.GET('/contacts/{id}', { params: { path: { id: own.id } } })).data).toMatchObject({ email: own.email, list: null });
    expect((await api.GET('/contacts/{id}', { params: { path: { id: attached.id } } })).data?.list?.id).toBe(home.id);
    const again = await api.DELETE('/lists/{id}', { params: { path: { id: list.id } } });
    expect(again.data).toEqual({ ...r.data, alreadyDeleted: true, membershipsRemoved: 0 });
    expect(
      await system(svc, (trx) =>
        trx.selectFrom('audit_log').select('id').where('organization_id', '=', org.id).where('resource_id', '=', list.id).execute(),
      ),
    ).toHaveLength(1);
  });

  it('409 while own contacts have in-flight sequences; force=true pauses exactly those, attached contacts keep theirs', async () => {
    const { org, api } = await setup();
    const [list, home] = [await mkList(api), await mkList(api)];
    const own = await mkContact(api, { listId: list.id });
    const attached = await mkContact(api, { listId: home.id });
    await api.POST('/contacts', { body: { email: attached.email, listId: list.id } });
    const inFlight = [];
    for (const s of ['ACTIVE', 'QUEUED', 'DRAFTED', 'APPROVED']) inFlight.push(await insertSequence(svc, org.id, own.id, s));
    const done = await insertSequence(svc, org.id, own.id, 'COMPLETED');
    const attachedSeq = await insertSequence(svc, org.id, attached.id, 'ACTIVE');

    const refused = await api.DELETE('/lists/{id}', { params: { path: { id: list.id } } });
    expect(refused.response.status).toBe(409);
    expect(refused.error?.type).toMatch(/list-has-in-flight-sequences$/);
    expect((await api.GET('/lists/{id}', { params: { path: { id: list.id } } })).response.status).toBe(200);
    expect(await sequenceStatus(svc, org.id, inFlight[0])).toBe('ACTIVE');

    const forced = await api.DELETE('/lists/{id}', { params: { path: { id: list.id }, query: { force: 'true' } } });
    expect(forced.data).toMatchObject({ deleted: true, alreadyDeleted: false, sequencesPaused: 4, membershipsRemoved: 2 });
    for (const id of inFlight) expect(await sequenceStatus(svc, org.id, id)).toBe('PAUSED');
    expect(await sequenceStatus(svc, org.id, done)).toBe('COMPLETED');
    expect(await sequenceStatus(svc, org.id, attachedSeq)).toBe('ACTIVE');
    const paused = await eventsOf(svc, org.id, 'sequence.paused');
    expect(paused.map((e) => e.resource_id).sort()).toEqual([...inFlight].sort());
    expect(paused[0].data).toMatchObject({ contactId: own.id, reason: 'list_deleted' });
    expect((await eventsOf(svc, org.id)).filter((e) => e.type.startsWith('list.'))).toEqual([]);
  });

  it('force is harmless when nothing is in flight; archived lists can be deleted', async () => {
    const { org, api } = await setup();
    const list = await mkList(api);
    await patchList(org.id, list.id, { archived: true });
    const r = await api.DELETE('/lists/{id}', { params: { path: { id: list.id }, query: { force: 'true' } } });
    expect(r.data).toMatchObject({ deleted: true, alreadyDeleted: false, sequencesPaused: 0, membershipsRemoved: 0 });
    expect((await patchList(org.id, list.id, { archived: false })).response.status).toBe(404);
  });
});
