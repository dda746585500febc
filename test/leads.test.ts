// Inbound leads through the public API: GET /leads, POST /leads/{id}/convert and /spam, the
// qualification and conversion sweep (called directly and through the real worker), and erasure
// of an address's leads. Capture itself is in test/lead-capture.test.ts.

import { parseCrontab } from 'graphile-worker';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withSystem } from '../db/database.js';
import { runLeadSweep, SWEEP_ACTOR } from '../src/leads/sweep.js';
import type { SystemDeps } from '../src/platform/services.js';
import { CRONTAB } from '../src/tasks/index.js';
import { eventsOf, mkContact, uid, uniqueEmail } from './crm-support.js';
import { backdate, businessEmail, leadRow, leadRows, mkLead } from './lead-support.js';
import { ALL_SCOPES, raw, startService, type TestService, waitFor } from './support/harness.js';

let svc: TestService;
let deps: SystemDeps;
beforeAll(async () => {
  svc = await startService();
  deps = { db: svc.rt.workerDb, systemDb: svc.rt.systemDb, config: svc.rt.config, services: svc.rt.services, log: svc.rt.log };
});
afterAll(async () => {
  await svc?.close();
});

const LEAD_KEYS = [
  'id',
  'email',
  'name',
  'companyName',
  'source',
  'status',
  'fitScore',
  'intentConfidence',
  'contactId',
  'dealId',
  'capturedAt',
  'convertedAt',
  'updatedAt',
];

/** An organization with an all-scope key attributed to its owner. */
async function setup() {
  const org = await svc.newOrg();
  const key = await org.key(ALL_SCOPES, { userId: org.ownerId });
  return { org, key, api: svc.api(key) };
}
type Setup = Awaited<ReturnType<typeof setup>>;

const convert = (s: Setup, id: string, body?: { createDeal?: boolean; dealName?: string }) =>
  s.api.POST('/leads/{id}/convert', { params: { path: { id } }, ...(body ? { body } : {}) });
const spam = (s: Setup, id: string) => s.api.POST('/leads/{id}/spam', { params: { path: { id } } });

/** Sets capture times directly, so the order under test does not rest on request timing. */
async function setCapturedAt(orgId: string, id: string, at: string) {
  await withSystem(svc.ownerDb, (trx) =>
    sql`UPDATE inbound_leads SET captured_at = ${at}::timestamptz WHERE organization_id = ${orgId} AND id = ${id}`.execute(trx),
  );
}

async function count(table: 'contacts' | 'deals' | 'companies', orgId: string): Promise<number> {
  return withSystem(svc.ownerDb, async (trx) =>
    Number(
      (
        await trx
          .selectFrom(table)
          .select((eb) => eb.fn.countAll().as('n'))
          .where('organization_id', '=', orgId)
          .executeTakeFirstOrThrow()
      ).n,
    ),
  );
}

describe('GET /leads', () => {
  it('lists newest first by capturedAt (then id), keyset paged, with exactly the InboundLead keys', async () => {
    const s = await setup();
    const ids = [];
    for (let i = 0; i < 5; i += 1) ids.push(await mkLead(svc, s.org.id, { payload: { n: i, message: 'secret words' } }));
    await setCapturedAt(s.org.id, ids[0], '2026-01-01T10:00:00.000Z');
    await setCapturedAt(s.org.id, ids[1], '2026-01-01T12:00:00.000Z');
    await setCapturedAt(s.org.id, ids[2], '2026-01-01T11:00:00.000Z');
    // Two leads captured in the same millisecond are ordered by id, descending.
    await setCapturedAt(s.org.id, ids[3], '2026-01-01T09:00:00.000Z');
    await setCapturedAt(s.org.id, ids[4], '2026-01-01T09:00:00.000Z');
    const tied = [ids[3], ids[4]].sort().reverse();
    const expected = [ids[1], ids[2], ids[0], ...tied];

    const all = await s.api.GET('/leads');
    expect(all.response.status).toBe(200);
    expect(all.data!.data.map((l) => l.id)).toEqual(expected);
    expect(all.data!.nextCursor).toBeNull();
    for (const l of all.data!.data) expect(Object.keys(l).sort()).toEqual([...LEAD_KEYS].sort());
    expect(all.data!.data[0]).toMatchObject({
      name: 'Riley Inbound',
      companyName: 'Northwind Labs',
      source: 'website',
      status: 'NEW',
      contactId: null,
      dealId: null,
      convertedAt: null,
    });
    expect(JSON.stringify(all.data)).not.toMatch(/secret words|payload|ipHash|qualSnapshot/);

    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const p = await s.api.GET('/leads', { params: { query: { limit: 2, ...(cursor ? { cursor } : {}) } } });
      expect(p.data!.data.length).toBeLessThanOrEqual(2);
      seen.push(...p.data!.data.map((l) => l.id));
      if (!p.data!.nextCursor) break;
      cursor = p.data!.nextCursor;
    }
    expect(seen).toEqual(expected);
  });

  it("filters by status, leaves out erased leads and other organizations' leads; 400 for a bad status, limit or cursor", async () => {
    const s = await setup();
    const a = await mkLead(svc, s.org.id);
    const b = await mkLead(svc, s.org.id);
    const c = await mkLead(svc, s.org.id);
    expect((await spam(s, b)).response.status).toBe(200);
    await withSystem(svc.ownerDb, (trx) =>
      trx.updateTable('inbound_leads').set({ erased_at: new Date() }).where('organization_id', '=', s.org.id).where('id', '=', c).execute(),
    );
    const other = await setup();
    await mkLead(svc, other.org.id);

    expect((await s.api.GET('/leads')).data!.data.map((l) => l.id).sort()).toEqual([a, b].sort());
    expect((await s.api.GET('/leads', { params: { query: { status: 'SPAM' } } })).data!.data.map((l) => l.id)).toEqual([b]);
    expect((await s.api.GET('/leads', { params: { query: { status: 'NEW' } } })).data!.data.map((l) => l.id)).toEqual([a]);
    expect((await s.api.GET('/leads', { params: { query: { status: 'CONVERTED' } } })).data!.data).toEqual([]);
    for (const path of ['/api/v1/leads?status=new', '/api/v1/leads?limit=0', '/api/v1/leads?limit=201', '/api/v1/leads?cursor=abc.def']) {
      const r = await raw(svc.baseUrl, 'GET', path, { key: s.key });
      expect(r.status, path).toBe(400);
    }
  });

  it('needs contacts.read (403 naming it)', async () => {
    const s = await setup();
    await mkLead(svc, s.org.id);
    const k = await s.org.key(['drafts.read', 'actions.read']);
    const r = await svc.api(k).GET('/leads');
    expect(r.response.status).toBe(403);
    expect(r.error?.type).toMatch(/insufficient-scope$/);
    expect(r.error?.detail).toContain('contacts.read');
    expect((await svc.api(await s.org.key(['contacts.read'])).GET('/leads')).response.status).toBe(200);
  });
});

describe('POST /leads/{id}/convert', () => {
  it('creates the contact on the CRM import list with the company of a business domain, and a deal on the first stage (deal.created)', async () => {
    const s = await setup();
    const email = businessEmail('ada');
    const domain = email.split('@')[1];
    const id = await mkLead(svc, s.org.id, {
      email,
      name: 'Ada Lovelace',
      companyName: 'Analytical Engines',
      fitScore: 85,
      payload: { title: 'VP Engineering', message: 'demo please' },
    });
    const r = await convert(s, id);
    expect(r.response.status).toBe(200);
    const result = r.data!;
    expect(result).toMatchObject({ leadId: id, status: 'CONVERTED', alreadyConverted: false });
    expect(result.dealId).toEqual(expect.any(String));

    const contact = (await s.api.GET('/contacts/{id}', { params: { path: { id: result.contactId } } })).data!;
    expect(contact).toMatchObject({
      email,
      name: 'Ada Lovelace',
      title: 'VP Engineering',
      fitScore: 85,
      leadSource: 'website',
      list: { name: 'CRM import' },
      company: { name: 'Analytical Engines', domain },
    });
    const deal = (await s.api.GET('/deals/{id}', { params: { path: { id: result.dealId! } } })).data!;
    expect(deal).toMatchObject({
      name: 'Analytical Engines (inbound)',
      stageSlug: 'prospecting',
      primaryContactId: contact.id,
      companyId: contact.company!.id,
      ownerSalesPersonId: s.org.ownerId,
    });
    const stages = (await s.api.GET('/deal-stages')).data!.data;
    expect(stages[0].id).toBe(deal.stageId);
    const created = await eventsOf(svc, s.org.id, 'deal.created');
    expect(created.map((e) => e.data)).toEqual([{ dealId: deal.id, dealName: 'Analytical Engines (inbound)' }]);

    const listed = (await s.api.GET('/leads')).data!.data[0];
    expect(listed).toMatchObject({ id, status: 'CONVERTED', contactId: contact.id, dealId: deal.id });
    expect(Date.parse(listed.convertedAt!)).toBeGreaterThanOrEqual(Date.parse(listed.capturedAt));
    const row = await leadRow(svc, s.org.id, id);
    expect(row.qual_snapshot).toMatchObject({ conversion: { via: 'api', contact: 'created', dealCreated: true } });

    // A second convert answers the first result and changes nothing, whatever its body.
    const again = await convert(s, id, { createDeal: false, dealName: 'Ignored' });
    expect(again.data).toEqual({ ...result, alreadyConverted: true });
    expect(await count('deals', s.org.id)).toBe(1);
    expect(await count('contacts', s.org.id)).toBe(1);
    expect(await eventsOf(svc, s.org.id, 'deal.created')).toHaveLength(1);
  });

  it('links no company for a free mail address, names the deal after the person, then the address', async () => {
    const s = await setup();
    const free = await mkLead(svc, s.org.id, { email: `${uid('bo')}@gmail.com`, name: 'Bo Ek', companyName: undefined });
    const r = await convert(s, free);
    const contact = (await s.api.GET('/contacts/{id}', { params: { path: { id: r.data!.contactId } } })).data!;
    expect(contact.company).toBeNull();
    const deal = (await s.api.GET('/deals/{id}', { params: { path: { id: r.data!.dealId! } } })).data!;
    expect(deal).toMatchObject({ name: 'Bo Ek (inbound)', companyId: null });
    expect(await count('companies', s.org.id)).toBe(0);

    const bare = await svc.admin.POST('/organizations/{orgId}/inbound-leads', {
      params: { path: { orgId: s.org.id } },
      body: { email: `${uid('cy')}@yahoo.com` },
    });
    const r2 = await convert(s, bare.data!.id);
    const deal2 = (await s.api.GET('/deals/{id}', { params: { path: { id: r2.data!.dealId! } } })).data!;
    expect(deal2.name).toMatch(/@yahoo\.com \(inbound\)$/);
  });

  it('reuses a live contact with the address (and an existing company of the domain); createDeal=false opens no deal; dealName names it', async () => {
    const s = await setup();
    const email = businessEmail('kim');
    const existing = await mkContact(s.api, { email, name: 'Kim Existing' });
    const id = await mkLead(svc, s.org.id, { email: email.toUpperCase() });
    const r = await convert(s, id, { createDeal: false });
    expect(r.data).toEqual({ leadId: id, status: 'CONVERTED', contactId: existing.id, dealId: null, alreadyConverted: false });
    expect(await count('contacts', s.org.id)).toBe(1);
    expect(await count('deals', s.org.id)).toBe(0);
    expect(await eventsOf(svc, s.org.id, 'deal.created')).toEqual([]);
    expect((await leadRow(svc, s.org.id, id)).qual_snapshot).toMatchObject({ conversion: { contact: 'reused', dealCreated: false } });

    // Two leads at one domain share its company.
    const domain = `${uid('shared')}.example.com`;
    const one = await convert(s, await mkLead(svc, s.org.id, { email: `a@${domain}` }), { dealName: 'Named by the client' });
    const two = await convert(s, await mkLead(svc, s.org.id, { email: `b@${domain}` }));
    const c1 = (await s.api.GET('/contacts/{id}', { params: { path: { id: one.data!.contactId } } })).data!;
    const c2 = (await s.api.GET('/contacts/{id}', { params: { path: { id: two.data!.contactId } } })).data!;
    expect(c1.company!.id).toBe(c2.company!.id);
    expect((await s.api.GET('/deals/{id}', { params: { path: { id: one.data!.dealId! } } })).data!.name).toBe('Named by the client');
  });

  it('gives one contact and one deal for concurrent converts of one lead', async () => {
    const s = await setup();
    const id = await mkLead(svc, s.org.id, { fitScore: 85 });
    const results = await Promise.all(Array.from({ length: 5 }, () => convert(s, id)));
    for (const r of results) expect(r.response.status).toBe(200);
    expect(new Set(results.map((r) => r.data!.contactId)).size).toBe(1);
    expect(new Set(results.map((r) => r.data!.dealId)).size).toBe(1);
    expect(results.filter((r) => !r.data!.alreadyConverted)).toHaveLength(1);
    expect(await count('contacts', s.org.id)).toBe(1);
    expect(await count('deals', s.org.id)).toBe(1);
    expect(await eventsOf(svc, s.org.id, 'deal.created')).toHaveLength(1);
  });

  it('accepts an absent, empty or {} body; refuses unknown or malformed fields with 400 and changes nothing', async () => {
    const s = await setup();
    for (const [body, type] of [
      ['{"createDeal":"yes"}', 'application/json'],
      ['{"dealName":""}', 'application/json'],
      ['{"extra":1}', 'application/json'],
      ['[]', 'application/json'],
      ['{', 'application/json'],
      ['createDeal=false', 'application/x-www-form-urlencoded'],
    ] as const) {
      const id = await mkLead(svc, s.org.id);
      const r = await raw(svc.baseUrl, 'POST', `/api/v1/leads/${id}/convert`, { key: s.key, body, headers: { 'content-type': type } });
      expect(r.status, body).toBe(400);
      expect((await leadRow(svc, s.org.id, id)).status).toBe('NEW');
    }
    for (const body of [undefined, '', '  ', '{}']) {
      const id = await mkLead(svc, s.org.id);
      const r = await raw(svc.baseUrl, 'POST', `/api/v1/leads/${id}/convert`, {
        key: s.key,
        body,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
      });
      expect(r.status, JSON.stringify(body)).toBe(200);
      expect(r.body).toMatchObject({ leadId: id, status: 'CONVERTED', alreadyConverted: false });
    }
  });

  it("409 lead-is-spam for a SPAM lead; 404 for unknown, erased and other organizations' leads; 403 without contacts.write", async () => {
    const s = await setup();
    const id = await mkLead(svc, s.org.id);
    expect((await spam(s, id)).response.status).toBe(200);
    const r = await convert(s, id);
    expect(r.response.status).toBe(409);
    expect(r.error?.type).toMatch(/lead-is-spam$/);
    expect((await leadRow(svc, s.org.id, id)).status).toBe('SPAM');

    const other = await setup();
    const foreign = await mkLead(svc, other.org.id);
    const erased = await mkLead(svc, s.org.id);
    await withSystem(svc.ownerDb, (trx) =>
      trx
        .updateTable('inbound_leads')
        .set({ erased_at: new Date() })
        .where('organization_id', '=', s.org.id)
        .where('id', '=', erased)
        .execute(),
    );
    for (const ghost of ['lead_nope', foreign, erased, 'x'.repeat(65)]) {
      const c = await convert(s, ghost);
      expect(c.response.status, ghost).toBe(404);
      expect(c.error?.type).toMatch(/not-found$/);
    }
    expect((await leadRow(svc, other.org.id, foreign)).status).toBe('NEW');

    const readOnly = svc.api(await s.org.key(['contacts.read']));
    const fresh = await mkLead(svc, s.org.id);
    const denied = await readOnly.POST('/leads/{id}/convert', { params: { path: { id: fresh } } });
    expect(denied.response.status).toBe(403);
    expect(denied.error?.type).toMatch(/insufficient-scope$/);
    expect(denied.error?.detail).toContain('contacts.write');
    expect((await leadRow(svc, s.org.id, fresh)).status).toBe('NEW');
  });
});

describe('POST /leads/{id}/spam', () => {
  it('marks NEW and QUALIFIED leads SPAM, is idempotent, refuses a CONVERTED lead with 409', async () => {
    const s = await setup();
    const id = await mkLead(svc, s.org.id);
    const first = await spam(s, id);
    expect(first.data).toEqual({ leadId: id, status: 'SPAM', alreadySpam: false });
    const spamAt = (await leadRow(svc, s.org.id, id)).spam_at;
    expect(spamAt).not.toBeNull();
    expect((await spam(s, id)).data).toEqual({ leadId: id, status: 'SPAM', alreadySpam: true });
    expect((await leadRow(svc, s.org.id, id)).spam_at).toEqual(spamAt);

    const qualified = await mkLead(svc, s.org.id, { fitScore: 90 });
    await runLeadSweep(deps);
    expect((await leadRow(svc, s.org.id, qualified)).status).toBe('QUALIFIED');
    expect((await spam(s, qualified)).data).toMatchObject({ status: 'SPAM', alreadySpam: false });

    const converted = await mkLead(svc, s.org.id);
    await convert(s, converted);
    const refused = await spam(s, converted);
    expect(refused.response.status).toBe(409);
    expect(refused.error?.type).toMatch(/lead-already-converted$/);
    expect((await leadRow(svc, s.org.id, converted)).status).toBe('CONVERTED');
  });

  it('accepts an absent, empty or {} body, refuses any other body; 404 unknown, erased or foreign; 403 without contacts.write', async () => {
    const s = await setup();
    for (const body of [undefined, '', '{}']) {
      const id = await mkLead(svc, s.org.id);
      const r = await raw(svc.baseUrl, 'POST', `/api/v1/leads/${id}/spam`, {
        key: s.key,
        body,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
      });
      expect(r.status, JSON.stringify(body)).toBe(200);
    }
    const id = await mkLead(svc, s.org.id);
    const bad = await raw(svc.baseUrl, 'POST', `/api/v1/leads/${id}/spam`, {
      key: s.key,
      body: '{"reason":"x"}',
      headers: { 'content-type': 'application/json' },
    });
    expect(bad.status).toBe(400);
    expect((await leadRow(svc, s.org.id, id)).status).toBe('NEW');

    const other = await setup();
    const foreign = await mkLead(svc, other.org.id);
    for (const ghost of ['lead_nope', foreign]) expect((await spam(s, ghost)).response.status).toBe(404);
    expect((await leadRow(svc, other.org.id, foreign)).status).toBe('NEW');

    const denied = await svc.api(await s.org.key(['contacts.read'])).POST('/leads/{id}/spam', { params: { path: { id } } });
    expect(denied.response.status).toBe(403);
    expect(denied.error?.detail).toContain('contacts.write');
  });
});

describe('qualification and conversion sweep', () => {
  it('qualifies NEW leads at fit >= 60 and intent >= 0.5, converts QUALIFIED ones 15 minutes after capture, across organizations', async () => {
    const a = await setup();
    const b = await setup();
    const hot = await mkLead(svc, a.org.id, { fitScore: 85, payload: { message: 'We would like a demo next week' } });
    const cold = await mkLead(svc, a.org.id, { fitScore: 40, payload: { message: 'We would like a demo next week' } });
    const notBuying = await mkLead(svc, a.org.id, { fitScore: 90, payload: { message: 'Please see my resume for the internship' } });
    const edge = await mkLead(svc, b.org.id, { fitScore: 60, intentConfidence: 0.5 });
    const marked = await mkLead(svc, a.org.id, { fitScore: 95 });
    await spam(a, marked);

    await runLeadSweep(deps);
    expect(await leadRow(svc, a.org.id, hot)).toMatchObject({ status: 'QUALIFIED', contact_id: null });
    expect((await leadRow(svc, a.org.id, hot)).qualified_at).not.toBeNull();
    expect((await leadRow(svc, a.org.id, hot)).qual_snapshot).toMatchObject({
      qualification: { rule: 'fitScore >= 60 and intentConfidence >= 0.5', fitScore: 85, intentConfidence: 0.9, qualified: true },
    });
    expect((await leadRow(svc, b.org.id, edge)).status).toBe('QUALIFIED');
    expect((await leadRow(svc, a.org.id, cold)).status).toBe('NEW');
    expect(await leadRow(svc, a.org.id, notBuying)).toMatchObject({ status: 'NEW', intent_confidence: 0.1 });
    expect((await leadRow(svc, a.org.id, marked)).status).toBe('SPAM');
    // Not converted yet: too young.
    expect(await count('deals', a.org.id)).toBe(0);

    await backdate(svc, a.org.id, hot, 16);
    await backdate(svc, b.org.id, edge, 16);
    await backdate(svc, a.org.id, cold, 60);
    await backdate(svc, a.org.id, marked, 60);
    await runLeadSweep(deps);
    const converted = await leadRow(svc, a.org.id, hot);
    expect(converted).toMatchObject({ status: 'CONVERTED' });
    expect(converted.qual_snapshot).toMatchObject({ conversion: { via: 'sweep', contact: 'created', dealCreated: true } });
    const deal = (await a.api.GET('/deals/{id}', { params: { path: { id: converted.deal_id! } } })).data!;
    expect(deal).toMatchObject({
      name: 'Northwind Labs (inbound)',
      primaryContactId: converted.contact_id,
      ownerSalesPersonId: a.org.ownerId,
      stageSlug: 'prospecting',
    });
    const history = (await a.api.GET('/deals/{id}/history', { params: { path: { id: deal.id } } })).data!.data;
    expect(history[0].transitionedBy).toBe(SWEEP_ACTOR);
    expect((await eventsOf(svc, a.org.id, 'deal.created')).map((e) => e.resource_id)).toEqual([deal.id]);
    expect((await leadRow(svc, b.org.id, edge)).status).toBe('CONVERTED');
    expect((await leadRow(svc, a.org.id, cold)).status).toBe('NEW');
    expect((await leadRow(svc, a.org.id, marked)).status).toBe('SPAM');

    // The API answers the sweep's result; a second sweep changes nothing.
    expect((await convert(a, hot)).data).toEqual({
      leadId: hot,
      status: 'CONVERTED',
      contactId: converted.contact_id,
      dealId: converted.deal_id,
      alreadyConverted: true,
    });
    await runLeadSweep(deps);
    expect(await count('deals', a.org.id)).toBe(1);
    expect(await count('contacts', a.org.id)).toBe(1);
  });

  it('deletes capture windows that have ended', async () => {
    const s = await setup();
    await withSystem(svc.ownerDb, (trx) =>
      trx
        .insertInto('lead_capture_windows')
        .values([
          { organization_id: s.org.id, ip_hash: 'old', window_start: new Date(Date.now() - 3_600_000), count: 5 },
          { organization_id: s.org.id, ip_hash: 'current', window_start: new Date(), count: 1 },
        ])
        .execute(),
    );
    await runLeadSweep(deps);
    const left = await withSystem(svc.ownerDb, (trx) =>
      trx.selectFrom('lead_capture_windows').select('ip_hash').where('organization_id', '=', s.org.id).execute(),
    );
    expect(left.map((w) => w.ip_hash)).toEqual(['current']);
  });

  it('is on the worker crontab every 5 minutes and runs as the graphile-worker task sweep_leads', async () => {
    const [item] = parseCrontab(CRONTAB).filter((c) => c.task === 'sweep_leads');
    expect(item).toBeDefined();
    expect(item.match({ min: 0, hour: 3, date: 1, month: 1, dow: 0 })).toBe(true);
    expect(item.match({ min: 35, hour: 3, date: 1, month: 1, dow: 0 })).toBe(true);
    expect(item.match({ min: 7, hour: 3, date: 1, month: 1, dow: 0 })).toBe(false);

    const s = await setup();
    const id = await mkLead(svc, s.org.id, { fitScore: 80 });
    await backdate(svc, s.org.id, id, 20);
    const worker = await svc.startWorker();
    try {
      await worker.addJob('sweep_leads', {});
      await waitFor(async () => (await leadRow(svc, s.org.id, id)).status === 'CONVERTED', 20_000, 'the sweep to convert the lead');
    } finally {
      await worker.stop();
    }
  });
});

describe('erasure covers leads', () => {
  it('redacts every lead of the erased address in place, drops them from the list, and redacts their events and default-named deals', async () => {
    const s = await setup();
    const email = uniqueEmail('ada');
    const f = await svc.admin.POST('/organizations/{orgId}/lead-forms', { params: { path: { orgId: s.org.id } }, body: { name: 'site' } });
    await fetch(f.data!.captureUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, name: 'Ada Lovelace', message: 'call me' }),
    });
    const [captured] = await leadRows(svc, s.org.id);
    // An older lead of the same address (past the dedupe window), converted under the person's name.
    await backdate(svc, s.org.id, captured.id, 8 * 24 * 60);
    const second = await mkLead(svc, s.org.id, {
      email: email.toUpperCase(),
      name: 'Ada Lovelace',
      companyName: undefined,
      payload: { phone: '+44 1' },
    });
    const conv = await convert(s, second);
    expect(conv.response.status).toBe(200);
    const bystander = await mkLead(svc, s.org.id, { email: `other.${email}`, name: 'Someone Else' });

    const r = await s.api.POST('/contacts/{id}/erase', {
      params: { path: { id: conv.data!.contactId } },
      body: { requesterRef: uid('DSR-'), reason: 'GDPR' },
    });
    expect(r.response.status).toBe(200);

    for (const id of [captured.id, second]) {
      const row = await leadRow(svc, s.org.id, id);
      expect(row.erased_at).not.toBeNull();
      expect(row).toMatchObject({
        email: `erased+${id}@erased.invalid`,
        email_normalized: `erased+${id}@erased.invalid`,
        name: null,
        company_name: null,
        payload: {},
        ip_hash: null,
        qual_snapshot: null,
      });
    }
    expect(await leadRow(svc, s.org.id, bystander)).toMatchObject({ name: 'Someone Else', erased_at: null });
    expect((await s.api.GET('/leads')).data!.data.map((l) => l.id)).toEqual([bystander]);
    expect((await convert(s, captured.id)).response.status).toBe(404);
    expect((await spam(s, captured.id)).response.status).toBe(404);

    const leadEvents = await eventsOf(svc, s.org.id, 'inbound.lead_received');
    expect(leadEvents.find((e) => e.resource_id === captured.id)!.data).toEqual({ leadId: captured.id });
    expect(leadEvents.find((e) => e.resource_id === bystander)!.data).toMatchObject({ leadId: bystander, source: 'website' });
    const deal = (await s.api.GET('/deals/{id}', { params: { path: { id: conv.data!.dealId! } } })).data!;
    expect(deal).toMatchObject({ name: 'Inbound lead (erased)', primaryContactId: null });
    const dealEvents = await eventsOf(svc, s.org.id, 'deal.created');
    expect(dealEvents.map((e) => e.data)).toEqual([{ dealId: deal.id, dealName: 'Inbound lead (erased)' }]);

    const everything = await withSystem(svc.ownerDb, async (trx) =>
      JSON.stringify([
        await trx.selectFrom('inbound_leads').selectAll().where('organization_id', '=', s.org.id).where('id', '<>', bystander).execute(),
        await trx.selectFrom('events').selectAll().where('organization_id', '=', s.org.id).execute(),
        await trx.selectFrom('deals').selectAll().where('organization_id', '=', s.org.id).execute(),
      ]).toLowerCase(),
    );
    expect(everything).not.toContain(email);
    expect(everything).not.toContain('ada lovelace');
    expect(everything).not.toContain('+44 1');
  });
});
