import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withOrg } from '../db/database.js';
import { resumeSequences } from '../src/sequences/lifecycle.js';
import { eventsOf, system, uid } from './crm-support.js';
import {
  contact,
  draftingOrg,
  draftsOf,
  getSequence,
  product,
  STEP_ONE,
  STEP_TWO,
  sequence,
  settle,
  template,
} from './drafting-support.js';
import { raw, startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
  await svc.startWorker();
});
afterAll(async () => {
  await svc?.close();
});

describe('POST /sequences', () => {
  it('creates a NEW sequence (200), then a job writes one draft per step and it becomes DRAFTED; a repeat answers it unchanged', async () => {
    const s = await draftingOrg(svc);
    const prod = await product(svc, s.org.id);
    const tpl = await template(svc, s.org.id, [STEP_ONE, STEP_TWO], prod);
    const c = await contact(s.api);
    const before = Date.now();
    const created = await s.api.POST('/sequences', { body: { contactId: c.id, templateId: tpl } });
    expect(created.response.status).toBe(200);
    const seq = created.data!;
    expect(seq).toMatchObject({
      organizationId: s.org.id,
      contactId: c.id,
      templateId: tpl,
      status: 'NEW',
      currentStep: 0,
      productId: prod,
      pausedFrom: null,
    });
    expect(Date.parse(seq.anchorAtUtc!)).toBeGreaterThanOrEqual(before - 1000);

    const again = await s.api.POST('/sequences', { body: { contactId: c.id, templateId: tpl, anchorAtUtc: '2030-01-01T00:00:00Z' } });
    expect(again.response.status).toBe(200);
    expect(again.data).toEqual(seq);

    await settle(svc);
    const drafted = await getSequence(s.api, seq.id);
    expect(drafted.status).toBe('DRAFTED');
    const drafts = await draftsOf(s.api, c.id);
    expect(drafts.map((d) => [d.step, d.status, d.version, d.sequenceId])).toEqual([
      [1, 'DRAFT_GENERATED', 1, seq.id],
      [2, 'DRAFT_GENERATED', 1, seq.id],
    ]);
    // Each step is due at the anchor plus its day offset.
    expect(Date.parse(drafts[0].scheduledAt!)).toBe(Date.parse(seq.anchorAtUtc!));
    expect(Date.parse(drafts[1].scheduledAt!)).toBe(Date.parse(seq.anchorAtUtc!) + 3 * 86_400_000);
    expect(drafts[0].subject).toBe('A quick idea for your team'); // no company: a neutral word

    const created_ = await eventsOf(svc, s.org.id, 'draft.created');
    expect(created_.map((e) => e.data.step).sort()).toEqual([1, 2]);
    const pending = await eventsOf(svc, s.org.id, 'draft.pending_approval');
    expect(pending).toHaveLength(1);
    expect(pending[0]).toMatchObject({ resource_type: 'Sequence', resource_id: seq.id, data: { sequenceId: seq.id, contactId: c.id } });
    expect((pending[0].data.draftIds as string[]).sort()).toEqual(drafts.map((d) => d.id).sort());
  });

  it('keeps the anchor given, copies the template steps into the sequence and uses active public templates', async () => {
    const s = await draftingOrg(svc);
    const pub = await svc.admin.POST('/public-templates', {
      body: { name: uid('Pub '), useCase: uid('uc'), industry: null, steps: [STEP_ONE] },
    });
    const c = await contact(s.api);
    const seq = await sequence(s.api, c.id, pub.data!.id, { anchorAtUtc: '2031-05-04T09:30:00.000Z' });
    expect(seq).toMatchObject({ anchorAtUtc: '2031-05-04T09:30:00.000Z', productId: null, templateId: pub.data!.id });
    await settle(svc);
    const [d] = await draftsOf(s.api, c.id);
    expect(d.scheduledAt).toBe('2031-05-04T09:30:00.000Z');
  });

  it('answers 404 for an unknown, foreign or deleted contact, template or product, and 400 for bad fields; nothing is created', async () => {
    const s = await draftingOrg(svc);
    const other = await draftingOrg(svc);
    const tpl = await template(svc, s.org.id);
    const foreignTpl = await template(svc, other.org.id);
    const c = await contact(s.api);
    const foreignContact = await contact(other.api);
    const post = (body: Record<string, unknown>) => s.api.POST('/sequences', { body: body as never });
    for (const body of [
      { contactId: 'con_000000000000000000000000', templateId: tpl },
      { contactId: foreignContact.id, templateId: tpl },
      { contactId: c.id, templateId: 'tpl_000000000000000000000000' },
      { contactId: c.id, templateId: foreignTpl },
      { contactId: c.id, templateId: tpl, productId: 'prd_000000000000000000000000' },
    ]) {
      const r = await post(body);
      expect(r.response.status, JSON.stringify(body)).toBe(404);
    }
    for (const body of [
      { templateId: tpl },
      { contactId: c.id },
      { contactId: c.id, templateId: tpl, anchorAtUtc: 'soon' },
      { contactId: c.id, templateId: tpl, extra: 1 },
    ]) {
      expect((await post(body)).response.status, JSON.stringify(body)).toBe(400);
    }
    await s.api.DELETE('/contacts/{id}', { params: { path: { id: c.id } } });
    expect((await post({ contactId: c.id, templateId: tpl })).response.status).toBe(404);
    const n = await system(svc, (trx) =>
      trx
        .selectFrom('contact_sequences')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('organization_id', '=', s.org.id)
        .executeTakeFirstOrThrow(),
    );
    expect(Number(n.n)).toBe(0);
  });

  it('refuses a second product while one is active (400 product-collision), also under concurrent creates; sequences without a product never collide', async () => {
    const s = await draftingOrg(svc);
    const [p1, p2] = [await product(svc, s.org.id), await product(svc, s.org.id)];
    const [t1, t2, t3] = [
      await template(svc, s.org.id, [STEP_ONE], p1),
      await template(svc, s.org.id, [STEP_ONE], p2),
      await template(svc, s.org.id, [STEP_ONE]),
    ];
    const c = await contact(s.api);
    await sequence(s.api, c.id, t1);
    const refused = await s.api.POST('/sequences', { body: { contactId: c.id, templateId: t2 } });
    expect(refused.response.status).toBe(400);
    expect(refused.error?.type).toMatch(/product-collision$/);
    expect((await s.api.POST('/sequences', { body: { contactId: c.id, templateId: t3 } })).response.status).toBe(200);
    expect((await s.api.POST('/sequences', { body: { contactId: c.id, templateId: t3, productId: p1 } })).response.status).toBe(200);

    const d = await contact(s.api);
    const rs = await Promise.all([t1, t2, t1, t2].map((t) => s.api.POST('/sequences', { body: { contactId: d.id, templateId: t } })));
    const statuses = rs.map((r) => r.response.status);
    expect(statuses.filter((x) => x === 200)).toHaveLength(2);
    expect(new Set(rs.filter((r) => r.response.status === 200).map((r) => r.data!.id)).size).toBe(1);

    // Once the first is paused, the other product may start.
    await settle(svc);
    await s.api.POST('/contacts/{id}/pause-sequence', { params: { path: { id: c.id } } });
    expect((await s.api.POST('/sequences', { body: { contactId: c.id, templateId: t2 } })).response.status).toBe(200);
  });
});

describe('GET /sequences', () => {
  it("lists newest first with contactId and status filters and keyset paging; another organization's sequence is a 404", async () => {
    const s = await draftingOrg(svc);
    const tpl = await template(svc, s.org.id, [STEP_ONE]);
    const made = [];
    for (let i = 0; i < 5; i += 1) made.push(await sequence(s.api, (await contact(s.api)).id, tpl));
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const p = await s.api.GET('/sequences', { params: { query: { limit: 2, ...(cursor ? { cursor } : {}) } } });
      seen.push(...p.data!.data.map((x) => x.id));
      if (!p.data!.nextCursor) break;
      cursor = p.data!.nextCursor;
    }
    expect(seen).toEqual(made.map((m) => m.id).reverse());
    const one = await s.api.GET('/sequences', { params: { query: { contactId: made[2].contactId } } });
    expect(one.data!.data.map((x) => x.id)).toEqual([made[2].id]);
    await settle(svc);
    await s.api.POST('/contacts/{id}/pause-sequence', { params: { path: { id: made[1].contactId } } });
    const paused = await s.api.GET('/sequences', { params: { query: { status: 'PAUSED' } } });
    expect(paused.data!.data.map((x) => x.id)).toEqual([made[1].id]);
    expect(paused.data!.data[0]).toMatchObject({ status: 'PAUSED', pausedFrom: 'DRAFTED' });
    const other = await draftingOrg(svc);
    expect((await other.api.GET('/sequences/{id}', { params: { path: { id: made[0].id } } })).response.status).toBe(404);
    expect((await other.api.GET('/sequences', {})).data!.data).toEqual([]);
    expect((await raw(svc.baseUrl, 'GET', '/api/v1/sequences?status=paused', { key: s.key })).status).toBe(400);
  });
});

describe('pause and resume', () => {
  it('pause keeps the status it left; resume regenerates every unsent step as REGENERATED, keeps sent steps, and returns to DRAFTED', async () => {
    const s = await draftingOrg(svc);
    const tpl = await template(svc, s.org.id);
    const c = await contact(s.api);
    const seq = await sequence(s.api, c.id, tpl);
    await settle(svc);
    const [d1, d2] = await draftsOf(s.api, c.id);
    await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d1.id } } });
    await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d2.id } } });
    expect((await getSequence(s.api, seq.id)).status).toBe('APPROVED');
    // Step 1 went out (the dispatcher's part, simulated here).
    await system(svc, (trx) => trx.updateTable('drafts').set({ sent_at: new Date() }).where('id', '=', d1.id).execute());

    const paused = await s.api.POST('/contacts/{id}/pause-sequence', {
      params: { path: { id: c.id } },
      body: { reason: 'asked for a pause' },
    });
    expect(paused.data).toEqual({ contactId: c.id, pausedCount: 1 });
    expect(await getSequence(s.api, seq.id)).toMatchObject({ status: 'PAUSED', pausedFrom: 'APPROVED' });
    const pe = await eventsOf(svc, s.org.id, 'sequence.paused');
    expect(pe[0].data).toEqual({ sequenceId: seq.id, contactId: c.id, reason: 'asked for a pause', pausedFrom: 'APPROVED' });

    const resumed = await withOrg(svc.rt.db, s.org.id, (trx) => resumeSequences(trx, s.org.id, c.id, 'prospect came back'));
    expect(resumed).toEqual([seq.id]);
    expect(await getSequence(s.api, seq.id)).toMatchObject({ status: 'DRAFTED', pausedFrom: 'APPROVED' });
    await settle(svc);
    const all = await draftsOf(s.api, c.id, true);
    expect(all.map((d) => [d.step, d.version, d.status, d.supersededAt === null])).toEqual([
      [1, 1, 'APPROVED', true],
      [2, 1, 'APPROVED', false],
      [2, 2, 'REGENERATED', true],
    ]);
    // The superseded version can no longer be approved; the new one awaits approval.
    const stale = await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d2.id } } });
    expect(stale.response.status).toBe(400); // superseded, though approved before
    expect((await getSequence(s.api, seq.id)).status).toBe('DRAFTED');
    const fresh = all.find((d) => d.version === 2)!;
    const ok = await s.api.POST('/drafts/{id}/approve', { params: { path: { id: fresh.id } } });
    expect(ok.data).toMatchObject({ status: 'approved', allApproved: true });
    expect((await getSequence(s.api, seq.id)).status).toBe('APPROVED');
    const re = await eventsOf(svc, s.org.id, 'sequence.resumed');
    expect(re.map((e) => e.data)).toEqual([{ sequenceId: seq.id, contactId: c.id, reason: 'prospect came back', pausedFrom: 'APPROVED' }]);
    expect(await withOrg(svc.rt.db, s.org.id, (trx) => resumeSequences(trx, s.org.id, c.id, null))).toEqual([]);
  });

  it('pauses nothing that is not in flight (a NEW sequence is still generating)', async () => {
    const s = await draftingOrg(svc);
    const tpl = await template(svc, s.org.id);
    const c = await contact(s.api);
    const seq = await sequence(s.api, c.id, tpl);
    await system(svc, (trx) => sql`UPDATE contact_sequences SET status = 'NEW' WHERE id = ${seq.id}`.execute(trx));
    const r = await s.api.POST('/contacts/{id}/pause-sequence', { params: { path: { id: c.id } } });
    expect(r.data?.pausedCount).toBe(0);
  });
});
