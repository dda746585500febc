// Deals: create, list, get, PATCH and activities (stage moves, gates, history and the sweep are
// in test/deal-stages.test.ts).

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withOrg } from '../db/database.js';
import { type DealOrg, dealOrg, eventsOf, insertCompany, insertContact } from './deal-support.js';
import { ALL_SCOPES, raw, startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

async function create(o: DealOrg, body: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  const r = await o.api.POST('/deals', { body: { name: 'Acme deal', ...body } as never, headers });
  if (r.response.status !== 200) throw new Error(`POST /deals ${r.response.status}: ${JSON.stringify(r.error)}`);
  return r.data!;
}

const dealCount = (orgId: string) =>
  withOrg(svc.rt.db, orgId, async (trx) =>
    Number(
      (
        await trx
          .selectFrom('deals')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('organization_id', '=', orgId)
          .executeTakeFirstOrThrow()
      ).n,
    ),
  );

describe('POST /deals', () => {
  it('creates a deal in the first default stage and answers 200 with the full Deal', async () => {
    const o = await dealOrg(svc);
    const contact = await insertContact(svc, o.id);
    const company = await insertCompany(svc, o.id);
    const r = await o.api.POST('/deals', {
      body: {
        name: 'Acme platform',
        valueCents: 125000,
        probability: 40,
        closeDate: '2030-06-30',
        primaryContactId: contact,
        companyId: company,
      },
    });
    expect(r.response.status).toBe(200);
    const d = r.data!;
    expect(d).toMatchObject({
      organizationId: o.id,
      name: 'Acme platform',
      valueCents: 125000,
      probability: 40,
      closeDate: '2030-06-30',
      actualCloseDate: null,
      ownerSalesPersonId: o.ownerId,
      primaryContactId: contact,
      companyId: company,
      stageSlug: 'prospecting',
      stageName: 'Prospecting',
      forecastCategory: 'pipeline',
      readinessScore: null,
      lossReason: null,
    });
    expect(d.id).toMatch(/^deal_/);
    expect('meddpic' in d).toBe(false);
    // GET answers the same object.
    expect((await o.api.GET('/deals/{id}', { params: { path: { id: d.id } } })).data).toEqual(d);
    // The deal-contact link, the creation history row and deal.created.
    const links = await withOrg(svc.rt.db, o.id, (trx) =>
      trx.selectFrom('deal_contacts').selectAll().where('deal_id', '=', d.id).execute(),
    );
    expect(links.map((l) => l.contact_id)).toEqual([contact]);
    const hist = await o.api.GET('/deals/{id}/history', { params: { path: { id: d.id } } });
    expect(hist.data!.data).toEqual([
      expect.objectContaining({
        dealId: d.id,
        fromStageId: null,
        fromStageName: null,
        toStageId: d.stageId,
        toStageName: 'Prospecting',
        reason: null,
        transitionedBy: o.ownerId,
      }),
    ]);
    const events = await eventsOf(svc, o.id, 'deal.created');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ resource_type: 'Deal', resource_id: d.id, data: { dealId: d.id, dealName: 'Acme platform' } });
  });

  it('defaults the owner to the organization owner for an unattributed key and records the key id as actor', async () => {
    const o = await dealOrg(svc);
    const { id: keyId, key } = await o.org.keyWithId(ALL_SCOPES);
    const r = await svc.api(key).POST('/deals', { body: { name: 'Unattributed' } });
    expect(r.response.status).toBe(200);
    expect(r.data!.ownerSalesPersonId).toBe(o.ownerId);
    const hist = await o.api.GET('/deals/{id}/history', { params: { path: { id: r.data!.id } } });
    expect(hist.data!.data[0].transitionedBy).toBe(keyId);
  });

  it('defaults the owner to the key user, and stores a given owner of the organization', async () => {
    const o = await dealOrg(svc);
    const rep = await o.org.user('REP');
    const repKey = await o.org.key(ALL_SCOPES, { userId: rep.id });
    expect((await svc.api(repKey).POST('/deals', { body: { name: 'Mine' } })).data!.ownerSalesPersonId).toBe(rep.id);
    const other = await o.org.user('MANAGER');
    expect((await create(o, { ownerSalesPersonId: other.id })).ownerSalesPersonId).toBe(other.id);
  });

  it('refuses invalid fields with 400 and creates nothing', async () => {
    const o = await dealOrg(svc);
    const bodies = [
      {},
      { name: '' },
      { name: ' \t ' },
      { name: 'x'.repeat(201) },
      { name: 'n', valueCents: -1 },
      { name: 'n', valueCents: 10.5 },
      { name: 'n', probability: -1 },
      { name: 'n', probability: 101 },
      { name: 'n', probability: 0.5 },
      { name: 'n', closeDate: '2030-02-30x' },
      { name: 'n', closeDate: '2030-06-30T00:00:00Z' },
      { name: 'n', colour: 'blue' },
      { name: 'n', valueCents: '100' },
      { name: 'n', valueCents: 10_000_000_000_001 },
      { name: 'n', closeDate: '0000-01-01' },
      { name: 'n\u0000' },
    ];
    for (const body of bodies) {
      const r = await o.api.POST('/deals', { body: body as never });
      expect(r.response.status, JSON.stringify(body)).toBe(400);
      expect(r.error?.type).toMatch(/\/problems\/validation-failed$/);
    }
    expect(await dealCount(o.id)).toBe(0);
    // Nothing was seeded by the refused requests either.
    expect((await o.api.GET('/deal-stages')).data!.data).toEqual([]);
  });

  it('validates primaryContactId, companyId and ownerSalesPersonId against the organization', async () => {
    const o = await dealOrg(svc);
    const other = await dealOrg(svc);
    const foreignContact = await insertContact(svc, other.id);
    const deleted = await insertContact(svc, o.id, 'deleted');
    const erased = await insertContact(svc, o.id, 'erased');
    const foreignCompany = await insertCompany(svc, other.id);
    const cases: [Record<string, unknown>, string][] = [
      [{ primaryContactId: 'con_nope' }, 'body.primaryContactId'],
      [{ primaryContactId: foreignContact }, 'body.primaryContactId'],
      [{ primaryContactId: deleted }, 'body.primaryContactId'],
      [{ primaryContactId: erased }, 'body.primaryContactId'],
      [{ companyId: foreignCompany }, 'body.companyId'],
      [{ ownerSalesPersonId: other.ownerId }, 'body.ownerSalesPersonId'],
    ];
    for (const [extra, field] of cases) {
      const r = await o.api.POST('/deals', { body: { name: 'Refs', ...extra } as never });
      expect(r.response.status).toBe(400);
      expect((r.error as { errors?: { field: string }[] }).errors?.[0]?.field).toBe(field);
    }
    expect(await dealCount(o.id)).toBe(0);
    expect((await o.api.GET('/deal-stages')).data!.data).toEqual([]);
  });

  it('assigns a stage named by slug or id; refuses unknown, conflicting and closed stages', async () => {
    const o = await dealOrg(svc);
    // Before the board is opened a named stage is unknown (naming a stage never seeds).
    const early = await o.api.POST('/deals', { body: { name: 'Early', stage: 'discovery' } });
    expect(early.response.status).toBe(400);
    expect(early.error?.type).toMatch(/\/problems\/unknown-stage$/);
    await create(o);
    const stages = (await o.api.GET('/deal-stages')).data!.data;
    const discovery = stages.find((s) => s.slug === 'discovery')!;
    const proposal = stages.find((s) => s.slug === 'proposal')!;
    expect((await create(o, { stage: 'discovery' })).stageId).toBe(discovery.id);
    expect((await create(o, { stageId: proposal.id })).stageSlug).toBe('proposal');
    expect((await create(o, { stageId: proposal.id, stage: 'proposal' })).stageId).toBe(proposal.id);
    // Stage gates are not evaluated at creation: a late stage needs no value or contact.
    const d = await create(o, { stage: 'negotiation' });
    expect(d.forecastCategory).toBe('commit');
    const bad: [Record<string, unknown>, string][] = [
      [{ stage: 'no-such-stage' }, 'unknown-stage'],
      [{ stageId: 'stg_nope' }, 'unknown-stage'],
      [{ stageId: discovery.id, stage: 'proposal' }, 'validation-failed'],
      [{ stage: 'closed_won' }, 'validation-failed'],
      [{ stage: 'closed_lost' }, 'validation-failed'],
    ];
    for (const [extra, slug] of bad) {
      const r = await o.api.POST('/deals', { body: { name: 'Bad', ...extra } as never });
      expect(r.response.status, JSON.stringify(extra)).toBe(400);
      expect(r.error?.type).toMatch(new RegExp(`/problems/${slug}$`));
    }
    // Another organization's stage id is unknown here.
    const other = await dealOrg(svc);
    await create(other);
    const foreign = (await other.api.GET('/deal-stages')).data!.data[1];
    expect((await o.api.POST('/deals', { body: { name: 'F', stageId: foreign.id } })).response.status).toBe(400);
  });

  it('replays an Idempotency-Key with the first response and creates one deal and one event', async () => {
    const o = await dealOrg(svc);
    const headers = { 'Idempotency-Key': 'deal-create-1' };
    const a = await o.api.POST('/deals', { body: { name: 'Once', valueCents: 700 }, headers });
    const b = await o.api.POST('/deals', { body: { name: 'Once', valueCents: 700 }, headers });
    expect(a.response.status).toBe(200);
    expect(b.response.status).toBe(200);
    expect(b.data).toEqual(a.data);
    expect(b.response.headers.get('idempotent-replayed')).toBe('true');
    const reused = await o.api.POST('/deals', { body: { name: 'Other' }, headers });
    expect(reused.response.status).toBe(422);
    expect(reused.error?.type).toMatch(/idempotency-key-reused$/);
    expect(await dealCount(o.id)).toBe(1);
    expect(await eventsOf(svc, o.id, 'deal.created')).toHaveLength(1);
    // Without the header every call creates.
    await create(o, { name: 'Once' });
    await create(o, { name: 'Once' });
    expect(await dealCount(o.id)).toBe(3);
  });

  it('needs deals.write to create and deals.read to read', async () => {
    const o = await dealOrg(svc);
    const reader = svc.api(await o.org.key(['deals.read']));
    const w = await reader.POST('/deals', { body: { name: 'No' } });
    expect(w.response.status).toBe(403);
    expect(w.error?.detail).toContain('deals.write');
    const none = svc.api(await o.org.key(['contacts.read']));
    for (const r of [await none.GET('/deals'), await none.GET('/deal-stages')]) {
      expect(r.response.status).toBe(403);
      expect(r.error?.detail).toContain('deals.read');
    }
    expect((await reader.GET('/deals')).response.status).toBe(200);
    expect((await svc.api().GET('/deals')).response.status).toBe(401);
  });
});

describe('GET /deals and GET /deals/{id}', () => {
  it('lists newest first with keyset pages, list items identical to GET by id', async () => {
    const o = await dealOrg(svc);
    const made = [];
    for (let i = 0; i < 5; i += 1) made.push(await create(o, { name: `D${i}`, valueCents: i * 100 }));
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const r = await o.api.GET('/deals', { params: { query: { limit: 2, cursor } } });
      expect(r.response.status).toBe(200);
      for (const item of r.data!.data) {
        expect((await o.api.GET('/deals/{id}', { params: { path: { id: item.id } } })).data).toEqual(item);
      }
      seen.push(...r.data!.data.map((d) => d.id));
      if (!r.data!.nextCursor) break;
      cursor = r.data!.nextCursor;
    }
    expect(seen).toEqual(made.map((d) => d.id).reverse());
    // Another organization sees none of them.
    const other = await dealOrg(svc);
    expect((await other.api.GET('/deals')).data!.data).toEqual([]);
    expect((await other.api.GET('/deals/{id}', { params: { path: { id: made[0].id } } })).response.status).toBe(404);
  });

  it('filters by stageSlug, minValueCents and maxValueCents (AND), leaving out null values', async () => {
    const o = await dealOrg(svc);
    const none = await create(o);
    const small = await create(o, { valueCents: 100 });
    const mid = await create(o, { valueCents: 500, stage: 'discovery' });
    const big = await create(o, { valueCents: 1000, stage: 'discovery' });
    const ids = async (query: Record<string, unknown>) =>
      (await o.api.GET('/deals', { params: { query: query as never } })).data!.data.map((d) => d.id);
    expect(await ids({ minValueCents: 400 })).toEqual([big.id, mid.id]);
    expect(await ids({ maxValueCents: 600 })).toEqual([mid.id, small.id]);
    expect(await ids({ minValueCents: 100, maxValueCents: 100 })).toEqual([small.id]);
    expect(await ids({ stageSlug: 'discovery' })).toEqual([big.id, mid.id]);
    expect(await ids({ stageSlug: 'discovery', maxValueCents: 600 })).toEqual([mid.id]);
    expect(await ids({ stageSlug: 'prospecting' })).toEqual([small.id, none.id]);
    expect(await ids({ stageSlug: 'nowhere' })).toEqual([]);
    for (const query of [
      { minValueCents: 5, maxValueCents: 4 },
      { minValueCents: -1 },
      { minValueCents: 'x' },
      { minValueCents: '99999999999999999999' },
      { minValueCents: '9223372036854775807' },
      { maxValueCents: '1e21' },
      { maxValueCents: 10_000_000_000_001 },
      { stageSlug: 'a\u0000b' },
      { limit: 0 },
      { limit: 201 },
      { cursor: 'bogus' },
    ]) {
      const r = await o.api.GET('/deals', { params: { query: query as never } });
      expect(r.response.status, JSON.stringify(query)).toBe(400);
    }
  });

  it('adds meddpic only with include=meddpic: the stored object, else null', async () => {
    const o = await dealOrg(svc);
    const plain = await create(o);
    const withBlob = await create(o);
    const withArray = await create(o);
    await withOrg(svc.rt.db, o.id, async (trx) => {
      await trx
        .updateTable('deals')
        .set({ meddpic: JSON.stringify({ fields: { metrics: 'ROI' }, confidence: 0.7 }) })
        .where('id', '=', withBlob.id)
        .execute();
      await trx
        .updateTable('deals')
        .set({ meddpic: JSON.stringify([1, 2]) })
        .where('id', '=', withArray.id)
        .execute();
    });
    const get = async (id: string, include?: string) =>
      (await o.api.GET('/deals/{id}', { params: { path: { id }, query: include === undefined ? {} : { include } } })).data!;
    expect('meddpic' in (await get(plain.id))).toBe(false);
    expect((await get(plain.id, 'meddpic')).meddpic).toBeNull();
    expect((await get(withBlob.id, 'research,meddpic')).meddpic).toEqual({ fields: { metrics: 'ROI' }, confidence: 0.7 });
    expect((await get(withArray.id, 'meddpic')).meddpic).toBeNull();
    expect('meddpic' in (await get(withBlob.id, 'unknown'))).toBe(false);
    const list = (await o.api.GET('/deals', { params: { query: { include: 'meddpic' } } })).data!.data;
    expect(list.map((d) => d.meddpic)).toEqual([null, { fields: { metrics: 'ROI' }, confidence: 0.7 }, null]);
    const bare = (await o.api.GET('/deals')).data!.data;
    expect(bare.every((d) => !('meddpic' in d))).toBe(true);
  });
});

describe('PATCH /deals/{id}', () => {
  it('updates fields, answers {id, updated}, emits amount and close-date events only on change', async () => {
    const o = await dealOrg(svc);
    const d = await create(o, { valueCents: 100, probability: 10, closeDate: '2030-01-01' });
    const r = await o.api.PATCH('/deals/{id}', {
      params: { path: { id: d.id } },
      body: { name: 'Renamed', valueCents: 2500, probability: 75, closeDate: '2031-01-31' },
    });
    expect(r.response.status).toBe(200);
    expect(r.data).toEqual({ id: d.id, updated: true });
    const after = (await o.api.GET('/deals/{id}', { params: { path: { id: d.id } } })).data!;
    expect(after).toMatchObject({ name: 'Renamed', valueCents: 2500, probability: 75, closeDate: '2031-01-31', stageId: d.stageId });
    expect(Date.parse(after.updatedAt)).toBeGreaterThanOrEqual(Date.parse(d.updatedAt));
    expect((await eventsOf(svc, o.id, 'deal.amount_changed')).map((e) => e.data)).toEqual([
      { dealId: d.id, previousValueCents: 100, valueCents: 2500 },
    ]);
    expect((await eventsOf(svc, o.id, 'deal.close_date_changed')).map((e) => e.data)).toEqual([
      { dealId: d.id, previousCloseDate: '2030-01-01', closeDate: '2031-01-31' },
    ]);
    // The same values again: nothing changes, no event.
    const same = await o.api.PATCH('/deals/{id}', { params: { path: { id: d.id } }, body: { valueCents: 2500, closeDate: '2031-01-31' } });
    expect(same.data).toEqual({ id: d.id, updated: false });
    expect(await eventsOf(svc, o.id, 'deal.amount_changed')).toHaveLength(1);
    // A probability change alone emits neither.
    await o.api.PATCH('/deals/{id}', { params: { path: { id: d.id } }, body: { probability: 80 } });
    expect(await eventsOf(svc, o.id, 'deal.close_date_changed')).toHaveLength(1);
  });

  it('clears nullable fields with null and links a new primary contact', async () => {
    const o = await dealOrg(svc);
    const c1 = await insertContact(svc, o.id);
    const c2 = await insertContact(svc, o.id);
    const d = await create(o, { valueCents: 300, probability: 30, closeDate: '2030-03-03', primaryContactId: c1 });
    expect((await o.api.PATCH('/deals/{id}', { params: { path: { id: d.id } }, body: { primaryContactId: c2 } })).data!.updated).toBe(true);
    const links = await withOrg(svc.rt.db, o.id, (trx) =>
      trx.selectFrom('deal_contacts').select('contact_id').where('deal_id', '=', d.id).orderBy('contact_id').execute(),
    );
    expect(links.map((l) => l.contact_id).sort()).toEqual([c1, c2].sort());
    const r = await o.api.PATCH('/deals/{id}', {
      params: { path: { id: d.id } },
      body: { primaryContactId: null, valueCents: null, probability: null, closeDate: null },
    });
    expect(r.data).toEqual({ id: d.id, updated: true });
    expect((await o.api.GET('/deals/{id}', { params: { path: { id: d.id } } })).data).toMatchObject({
      primaryContactId: null,
      valueCents: null,
      probability: null,
      closeDate: null,
    });
    expect((await eventsOf(svc, o.id, 'deal.amount_changed')).map((e) => e.data)).toEqual([
      { dealId: d.id, previousValueCents: 300, valueCents: null },
    ]);
  });

  it('refuses unknown fields (stage included), empty bodies, bad values and non-live contacts with 400; 404 for another org', async () => {
    const o = await dealOrg(svc);
    const other = await dealOrg(svc);
    const d = await create(o, { name: 'Keep', valueCents: 5 });
    const deleted = await insertContact(svc, o.id, 'deleted');
    const foreign = await insertContact(svc, other.id);
    const bodies = [
      { colour: 'blue' },
      { stage: 'discovery' },
      { stageId: d.stageId },
      {},
      { name: '' },
      { name: '   ' },
      { valueCents: -1 },
      { probability: 101 },
      { probability: 0.5 },
      { closeDate: 'soon' },
      { closeDate: '0000-12-31' },
      { name: 'a\u0000b' },
      { primaryContactId: deleted },
      { primaryContactId: foreign },
      { primaryContactId: 'con_nope' },
      { ownerSalesPersonId: o.ownerId },
    ];
    for (const body of bodies) {
      const r = await o.api.PATCH('/deals/{id}', { params: { path: { id: d.id } }, body: body as never });
      expect(r.response.status, JSON.stringify(body)).toBe(400);
    }
    const after = (await o.api.GET('/deals/{id}', { params: { path: { id: d.id } } })).data!;
    expect(after).toEqual(d);
    const foreignPatch = await other.api.PATCH('/deals/{id}', { params: { path: { id: d.id } }, body: { name: 'Mine now' } });
    expect(foreignPatch.response.status).toBe(404);
    const bad = await raw(svc.baseUrl, 'PATCH', `/api/v1/deals/${d.id}`, {
      key: o.key,
      body: '{"name":',
      headers: { 'content-type': 'application/json' },
    });
    expect(bad.status).toBe(400);
    expect((await o.api.GET('/deals/{id}', { params: { path: { id: d.id } } })).data!.name).toBe('Keep');
  });
});

describe('POST /deals/{id}/activities', () => {
  async function dealWithContact(o: DealOrg) {
    const contact = await insertContact(svc, o.id);
    return { contact, deal: await create(o, { primaryContactId: contact }) };
  }

  it('logs note, call and meeting with a trimmed summary and a default occurredAt of now', async () => {
    const o = await dealOrg(svc);
    const { contact, deal } = await dealWithContact(o);
    for (const kind of ['note', 'call', 'meeting'] as const) {
      const before = Date.now();
      const r = await o.api.POST('/deals/{id}/activities', {
        params: { path: { id: deal.id } },
        body: { kind, summary: `  ${kind} summary \n` },
      });
      expect(r.response.status).toBe(201);
      expect(r.data).toMatchObject({ dealId: deal.id, kind, summary: `${kind} summary` });
      expect(r.data!.id).toMatch(/^dact_/);
      const at = Date.parse(r.data!.occurredAt);
      expect(at).toBeGreaterThanOrEqual(before - 1000);
      expect(at).toBeLessThanOrEqual(Date.now() + 1000);
    }
    const rows = await withOrg(svc.rt.db, o.id, (trx) =>
      trx.selectFrom('deal_activities').selectAll().where('deal_id', '=', deal.id).execute(),
    );
    expect(rows).toHaveLength(3);
    expect(rows.every((r) => r.contact_id === contact && r.created_by === o.ownerId)).toBe(true);
    // Activities emit no event.
    const types = (await eventsOf(svc, o.id)).map((e) => e.type);
    expect(types).toEqual(['deal.created']);
  });

  it('keeps a past occurredAt, accepts the clock-skew window, refuses the future', async () => {
    const o = await dealOrg(svc);
    const { deal } = await dealWithContact(o);
    const path = { params: { path: { id: deal.id } } };
    const past = await o.api.POST('/deals/{id}/activities', {
      ...path,
      body: { kind: 'call', summary: 'Old', occurredAt: '2024-02-03T04:05:06+02:00' },
    });
    expect(past.response.status).toBe(201);
    expect(past.data!.occurredAt).toBe('2024-02-03T02:05:06.000Z');
    const skew = await o.api.POST('/deals/{id}/activities', {
      ...path,
      body: { kind: 'call', summary: 'Now-ish', occurredAt: new Date(Date.now() + 5_000).toISOString() },
    });
    expect(skew.response.status).toBe(201);
    const future = await o.api.POST('/deals/{id}/activities', {
      ...path,
      body: { kind: 'meeting', summary: 'Tomorrow', occurredAt: new Date(Date.now() + 86_400_000).toISOString() },
    });
    expect(future.response.status).toBe(400);
    expect(future.error?.type).toMatch(/validation-failed$/);
  });

  it('refuses unknown kinds, missing, empty, blank and over-long summaries and invalid dates with 400', async () => {
    const o = await dealOrg(svc);
    const { deal } = await dealWithContact(o);
    const bodies = [
      { kind: 'carrier_pigeon', summary: 'x' },
      { kind: 'call' },
      { kind: 'note', summary: '' },
      { kind: 'note', summary: '   \n\t' },
      { kind: 'note', summary: 'x'.repeat(2001) },
      { kind: 'note', summary: 'x', occurredAt: 'yesterday' },
      { summary: 'x' },
      { kind: 'note', summary: 'x', extra: 1 },
    ];
    for (const body of bodies) {
      const r = await o.api.POST('/deals/{id}/activities', { params: { path: { id: deal.id } }, body: body as never });
      expect(r.response.status, JSON.stringify(body).slice(0, 80)).toBe(400);
    }
    const max = await o.api.POST('/deals/{id}/activities', {
      params: { path: { id: deal.id } },
      body: { kind: 'note', summary: 'y'.repeat(2000) },
    });
    expect(max.response.status).toBe(201);
    const n = await withOrg(svc.rt.db, o.id, (trx) =>
      trx.selectFrom('deal_activities').select('id').where('deal_id', '=', deal.id).execute(),
    );
    expect(n).toHaveLength(1);
  });

  it('replays an Idempotency-Key with 200 and the first activity', async () => {
    const o = await dealOrg(svc);
    const { deal } = await dealWithContact(o);
    const opts = { params: { path: { id: deal.id } }, headers: { 'Idempotency-Key': 'act-1' } };
    const first = await o.api.POST('/deals/{id}/activities', { ...opts, body: { kind: 'call', summary: 'Discussed pricing' } });
    const replay = await o.api.POST('/deals/{id}/activities', { ...opts, body: { kind: 'call', summary: 'Discussed pricing' } });
    expect(first.response.status).toBe(201);
    expect(replay.response.status).toBe(200);
    expect(replay.data).toEqual(first.data);
    const reused = await o.api.POST('/deals/{id}/activities', { ...opts, body: { kind: 'note', summary: 'Different' } });
    expect(reused.response.status).toBe(422);
    const rows = await withOrg(svc.rt.db, o.id, (trx) =>
      trx.selectFrom('deal_activities').select('id').where('deal_id', '=', deal.id).execute(),
    );
    expect(rows).toHaveLength(1);
    // The key stands for this deal's request: on another deal it is a different request.
    const { deal: second } = await dealWithContact(o);
    const elsewhere = await o.api.POST('/deals/{id}/activities', {
      ...opts,
      params: { path: { id: second.id } },
      body: { kind: 'call', summary: 'Discussed pricing' },
    });
    expect(elsewhere.response.status).toBe(422);
    expect(elsewhere.error?.type).toMatch(/idempotency-key-reused$/);
    const onSecond = await withOrg(svc.rt.db, o.id, (trx) =>
      trx.selectFrom('deal_activities').select('id').where('deal_id', '=', second.id).execute(),
    );
    expect(onSecond).toHaveLength(0);
  });

  it('answers 422 for a deal without a primary contact and 404 for another organization', async () => {
    const o = await dealOrg(svc);
    const bare = await create(o);
    const r = await o.api.POST('/deals/{id}/activities', { params: { path: { id: bare.id } }, body: { kind: 'note', summary: 'Nobody' } });
    expect(r.response.status).toBe(422);
    expect(r.error?.type).toMatch(/deal-without-primary-contact$/);
    // A soft-deleted primary contact is no contact to log against either.
    const { contact, deal: orphaned } = await dealWithContact(o);
    expect((await o.api.DELETE('/contacts/{id}', { params: { path: { id: contact } } })).response.status).toBe(200);
    const gone = await o.api.POST('/deals/{id}/activities', {
      params: { path: { id: orphaned.id } },
      body: { kind: 'note', summary: 'Deleted' },
    });
    expect(gone.response.status).toBe(422);
    expect(gone.error?.type).toMatch(/deal-without-primary-contact$/);
    const other = await dealOrg(svc);
    const { deal } = await dealWithContact(o);
    const foreign = await other.api.POST('/deals/{id}/activities', {
      params: { path: { id: deal.id } },
      body: { kind: 'note', summary: 'x' },
    });
    expect(foreign.response.status).toBe(404);
    const count = await withOrg(svc.rt.db, o.id, (trx) => sql<{ n: number }>`select count(*)::int as n from deal_activities`.execute(trx));
    expect(count.rows[0].n).toBe(0);
  });
});
