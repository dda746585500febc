import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erasureHmac } from '../src/compliance/suppression-match.js';
import { eventsOf, mkContact, mkList, system, uid, uniqueEmail } from './crm-support.js';
import { ALL_SCOPES, raw, startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

const SECRET = 'test-erasure-secret-0123456789abcdef0123'; // the harness's ERASURE_HASH_SECRET
const body = () => ({ requesterRef: uid('DSR-'), reason: 'Data subject request' });

async function setup(role: 'OWNER' | 'ADMIN' | 'MANAGER' = 'OWNER') {
  const org = await svc.newOrg();
  const key = role === 'OWNER' ? await org.key(ALL_SCOPES, { userId: org.ownerId }) : await org.key(ALL_SCOPES, { role });
  return { org, key, api: svc.api(key) };
}

const erase = (s: Awaited<ReturnType<typeof setup>>, id: string, b: { requesterRef: string; reason: string } = body()) =>
  s.api.POST('/contacts/{id}/erase', { params: { path: { id } }, body: b });

/** Every row of the organization that may hold personal data, as text, for "is the address anywhere?" checks. */
async function everything(orgId: string): Promise<string> {
  return system(svc, async (trx) => {
    const tables = [
      'contacts',
      'messages',
      'drafts',
      'send_records',
      'send_bodies',
      'inbound_raw_messages',
      'audit_log',
      'events',
      'suppression_entries',
      'erasure_evidence',
      'deals',
      'deal_activities',
      'idempotency_keys',
    ] as const;
    const out: unknown[] = [];
    for (const t of tables) out.push(await trx.selectFrom(t).selectAll().where('organization_id', '=', orgId).execute());
    return JSON.stringify(out).toLowerCase();
  });
}

async function contactRow(orgId: string, id: string) {
  return system(svc, (trx) =>
    trx.selectFrom('contacts').selectAll().where('organization_id', '=', orgId).where('id', '=', id).executeTakeFirstOrThrow(),
  );
}

/** Seeds the person's data around a contact: messages, a draft, a send record, a deal, audit and event rows. */
async function seedPersonalData(orgId: string, contactId: string, email: string) {
  await system(svc, async (trx) => {
    await trx
      .insertInto('messages')
      .values([
        {
          organization_id: orgId,
          id: uid('msg_'),
          contact_id: contactId,
          direction: 'INBOUND',
          from_email: email,
          subject: 'Re: hi',
          body: `Ada here, ${email}`,
        },
        {
          organization_id: orgId,
          id: uid('msg_'),
          contact_id: null,
          direction: 'INBOUND',
          from_email: email.toUpperCase(),
          subject: 'Unmatched',
          body: 'hello',
        },
      ])
      .execute();
    await trx
      .insertInto('drafts')
      .values({
        organization_id: orgId,
        id: uid('drf_'),
        contact_id: contactId,
        subject: 'Hi Ada',
        body: 'Dear Ada',
        evidence: JSON.stringify({ citations: [] }),
      })
      .execute();
    const sendId = uid('snd_');
    await trx
      .insertInto('send_records')
      .values({
        organization_id: orgId,
        id: sendId,
        contact_id: contactId,
        to_email: email,
        from_email: 'rep@us.example.com',
        subject: 'Hi Ada',
        headers: JSON.stringify({ To: email }),
      })
      .execute();
    await trx
      .insertInto('send_bodies')
      .values({ organization_id: orgId, send_record_id: sendId, text_body: 'Dear Ada', html_body: '<p>Dear Ada</p>' })
      .execute();
    await trx
      .insertInto('deals')
      .values({
        organization_id: orgId,
        id: uid('deal_'),
        name: 'Big deal',
        value_cents: 500000,
        owner_sales_person_id: 'usr_x',
        primary_contact_id: contactId,
      })
      .execute();
    await trx
      .insertInto('audit_log')
      .values([
        {
          organization_id: orgId,
          id: uid('aud_'),
          action: 'contact.updated',
          resource_type: 'Contact',
          resource_id: contactId,
          details: JSON.stringify({ name: 'Ada' }),
        },
        {
          organization_id: orgId,
          id: uid('aud_'),
          action: 'import',
          resource_type: 'ContactList',
          resource_id: 'lst_x',
          details: JSON.stringify({ row: `${email};Ada` }),
        },
        {
          organization_id: orgId,
          id: uid('aud_'),
          action: 'other',
          resource_type: 'ContactList',
          resource_id: 'lst_y',
          details: JSON.stringify({ row: `b${email}` }),
        },
      ])
      .execute();
    await trx
      .insertInto('events')
      .values([
        {
          organization_id: orgId,
          id: uid('evt_'),
          type: 'reply.received',
          api_version: 'v',
          resource_type: 'Message',
          resource_id: 'msg_x',
          data: JSON.stringify({ contactId, from: email }),
        },
        {
          organization_id: orgId,
          id: uid('evt_'),
          type: 'inbound.lead_received',
          api_version: 'v',
          resource_type: 'Lead',
          resource_id: 'lead_x',
          data: JSON.stringify({ email: email.toUpperCase() }),
        },
        {
          organization_id: orgId,
          id: uid('evt_'),
          type: 'inbound.lead_received',
          api_version: 'v',
          resource_type: 'Lead',
          resource_id: 'lead_y',
          data: JSON.stringify({ email: `other.${email}` }),
        },
      ])
      .execute();
  });
}

describe('POST /contacts/{id}/erase refusals', () => {
  it('400 for missing, blank or over-long fields and a non-JSON body; nothing erased', async () => {
    const s = await setup();
    const c = await mkContact(s.api);
    for (const b of [
      { reason: 'r' },
      { requesterRef: 'r' },
      { requesterRef: '   ', reason: 'r' },
      { requesterRef: 'r', reason: '\t' },
      { requesterRef: 'x'.repeat(201), reason: 'r' },
      { requesterRef: 'r', reason: 'x'.repeat(501) },
      { requesterRef: 'r', reason: 'r', extra: 1 },
    ]) {
      const r = await s.api.POST('/contacts/{id}/erase', { params: { path: { id: c.id } }, body: b as never });
      expect(r.response.status, JSON.stringify(b)).toBe(400);
    }
    for (const [text, type, contentType] of [
      ['requesterRef=r&reason=x', 'malformed-json', 'application/json'],
      ['', 'validation-failed', 'application/json'],
      ['requesterRef=r&reason=x', 'malformed-json', 'application/x-www-form-urlencoded'],
      ['requesterRef=r&reason=x', 'malformed-json', 'text/plain'],
    ]) {
      const r = await raw(svc.baseUrl, 'POST', `/api/v1/contacts/${c.id}/erase`, {
        key: s.key,
        body: text,
        headers: { 'content-type': contentType },
      });
      expect(r.status).toBe(400);
      expect(String(r.body.type)).toMatch(new RegExp(`${type}$`));
    }
    expect((await s.api.GET('/contacts/{id}', { params: { path: { id: c.id } } })).data?.email).toBe(c.email);
  });

  it('403 role-required for a REP or an unattributed key even with contacts.erase; 403 insufficient-scope without it', async () => {
    const org = await svc.newOrg();
    const writer = svc.api(await org.key());
    const c = await mkContact(writer);
    for (const key of [await org.key(ALL_SCOPES, { role: 'REP' }), await org.key(ALL_SCOPES)]) {
      const r = await svc.api(key).POST('/contacts/{id}/erase', { params: { path: { id: c.id } }, body: body() });
      expect(r.response.status).toBe(403);
      expect(r.error?.type).toMatch(/role-required$/);
    }
    const noScope = await org.key(
      ALL_SCOPES.filter((x) => x !== 'contacts.erase'),
      { userId: org.ownerId },
    );
    const r = await svc.api(noScope).POST('/contacts/{id}/erase', { params: { path: { id: c.id } }, body: body() });
    expect(r.error?.type).toMatch(/insufficient-scope$/);
    expect(r.error?.detail).toContain('contacts.erase');
    expect((await writer.GET('/contacts/{id}', { params: { path: { id: c.id } } })).data?.email).toBe(c.email);
    expect(await eventsOf(svc, org.id, 'contact.erased')).toEqual([]);
  });

  it('503 erasure-not-configured and nothing erased when the secret is unset or shorter than 32 characters', async () => {
    for (const secret of ['', 'too-short-secret-0123456789']) {
      const weak = await startService({ ERASURE_HASH_SECRET: secret });
      try {
        const org = await weak.newOrg();
        const api = weak.api(await org.key(ALL_SCOPES, { userId: org.ownerId }));
        const c = await mkContact(api);
        const r = await api.POST('/contacts/{id}/erase', { params: { path: { id: c.id } }, body: body() });
        expect(r.response.status).toBe(503);
        expect(r.error?.type).toMatch(/erasure-not-configured$/);
        expect((await api.GET('/contacts/{id}', { params: { path: { id: c.id } } })).data?.email).toBe(c.email);
      } finally {
        await weak.close();
      }
    }
  });
});

describe('POST /contacts/{id}/erase', () => {
  it('redacts the person everywhere in place, keeps revenue, writes evidence, a hash-only suppression and one id-only event', async () => {
    const s = await setup();
    const email = uniqueEmail('ada');
    const c = await mkContact(s.api, { email, name: 'Ada Lovelace' });
    await s.api.PATCH('/contacts/{id}', {
      params: { path: { id: c.id } },
      body: { phone: '+44 1', notes: 'likes maths', title: 'Countess' },
    });
    await s.api.POST('/suppression', { body: { email, reason: 'asked' } });
    await seedPersonalData(s.org.id, c.id, email);
    // Deal activities with the person or naming their address, and Idempotency-Key replies holding their data.
    const other = await mkContact(s.api);
    const adaDeal = (await s.api.POST('/deals', { body: { name: 'Ada deal', primaryContactId: c.id } })).data!;
    const otherDeal = (await s.api.POST('/deals', { body: { name: 'Other deal', primaryContactId: other.id } })).data!;
    const activity = (path: string, summary: string, key?: string) =>
      s.api.POST('/deals/{id}/activities', {
        params: { path: { id: path } },
        body: { kind: 'call', summary },
        headers: key ? { 'Idempotency-Key': key } : {},
      });
    await activity(adaDeal.id, 'Called Ada Lovelace about maths', 'act-ada');
    await activity(otherDeal.id, `cc ${email} next time`);
    await activity(otherDeal.id, 'Kept as it is', 'act-kept');
    await s.api.POST('/contacts', {
      body: { email, name: 'Ada Lovelace', listId: c.list!.id },
      headers: { 'Idempotency-Key': 'contact-ada' },
    });
    const ref = uid('DSR-');
    const r = await erase(s, c.id, { requesterRef: ref, reason: 'GDPR art. 17' });
    expect(r.response.status).toBe(200);
    expect(r.data).toMatchObject({ id: c.id, erased: true, alreadyErased: false, erasedContactIds: [c.id] });
    expect(r.data?.note).toMatch(/plus-tag/i);

    const dump = await everything(s.org.id);
    expect(dump).toContain(`other.${email}`); // other people's addresses are left alone
    expect(dump).toContain(`b${email}`);
    const rest = dump.replaceAll(`other.${email}`, '').replaceAll(`b${email}`, '');
    expect(rest).not.toContain(email.split('@')[0]); // not the address, not even its local part
    expect(rest).not.toContain('lovelace');

    const row = await contactRow(s.org.id, c.id);
    expect(row).toMatchObject({ name: '', title: null, phone: null, notes: null, lead_source: null, list_id: c.list!.id });
    expect(row.erased_at?.toISOString()).toBe(r.data!.erasedAt);
    expect(row.deleted_at).not.toBeNull();
    const deal = await system(svc, (trx) =>
      trx.selectFrom('deals').selectAll().where('organization_id', '=', s.org.id).where('name', '=', 'Big deal').executeTakeFirstOrThrow(),
    );
    expect(deal).toMatchObject({ primary_contact_id: null, value_cents: 500000, name: 'Big deal' });
    const acts = await system(svc, (trx) =>
      trx
        .selectFrom('deal_activities')
        .select(['deal_id', 'contact_id', 'kind', 'summary'])
        .where('organization_id', '=', s.org.id)
        .orderBy('created_at')
        .execute(),
    );
    expect(acts).toEqual([
      { deal_id: adaDeal.id, contact_id: null, kind: 'call', summary: '' },
      { deal_id: otherDeal.id, contact_id: other.id, kind: 'call', summary: '' },
      { deal_id: otherDeal.id, contact_id: other.id, kind: 'call', summary: 'Kept as it is' },
    ]);
    const keys = await system(svc, (trx) =>
      trx.selectFrom('idempotency_keys').select('key').where('organization_id', '=', s.org.id).orderBy('key').execute(),
    );
    expect(keys.map((k) => k.key)).toEqual(['act-kept']);

    const evidence = await system(svc, (trx) =>
      trx.selectFrom('erasure_evidence').selectAll().where('organization_id', '=', s.org.id).execute(),
    );
    expect(evidence).toHaveLength(1);
    expect(evidence[0]).toMatchObject({ contact_id: c.id, requester_ref: ref, reason: 'GDPR art. 17', erased_by_user_id: s.org.ownerId });

    const sup = await system(svc, (trx) =>
      trx.selectFrom('suppression_entries').selectAll().where('organization_id', '=', s.org.id).execute(),
    );
    expect(sup).toHaveLength(1);
    expect(sup[0]).toMatchObject({ email: null, email_hmac: erasureHmac(SECRET, email), reason: 'ERASURE', expires_at: null });
    const check = await s.api.GET('/suppression', { params: { query: { email: email.toUpperCase() } } });
    expect(check.data).toEqual({ email, suppressed: true, entry: null });

    const erasedEvents = await eventsOf(svc, s.org.id, 'contact.erased');
    expect(erasedEvents.map((e) => e.data)).toEqual([{ contactId: c.id }]);
    const reply = (await eventsOf(svc, s.org.id, 'reply.received'))[0];
    expect(reply.data).toEqual({ contactId: c.id });
    // No suppression event can carry the erased address.
    expect((await eventsOf(svc, s.org.id)).filter((e) => e.type.startsWith('suppression.') && JSON.stringify(e.data) !== '{}')).toEqual([]);
  });

  it('erases every record with the same whole address (any list, archived, deleted, other owner) but not plus-tag variants', async () => {
    const s = await setup('ADMIN');
    const rep = svc.api(await s.org.key(ALL_SCOPES, { role: 'REP' }));
    const email = uniqueEmail('twin');
    const [l1, l2, l3] = [await mkList(s.api), await mkList(s.api), await mkList(s.api)];
    const a = await mkContact(s.api, { email, listId: l1.id });
    await svc.patchList(s.org.id, l1.id, { archived: true });
    const b = await mkContact(rep, { email: email.toUpperCase(), listId: l2.id }); // l1 archived: not live, so a second record
    await s.api.DELETE('/contacts/{id}', { params: { path: { id: b.id } } });
    const c = await mkContact(rep, { email, listId: l3.id });
    const [local, domain] = email.split('@');
    const variant = await mkContact(s.api, { email: `${local}+news@${domain}`, listId: l1.id });
    const other = await svc.newOrg();
    const foreign = await mkContact(svc.api(await other.key()), { email });

    const r = await erase(s, c.id);
    expect([...r.data!.erasedContactIds].sort()).toEqual([a.id, b.id, c.id].sort());
    for (const id of [a.id, b.id, c.id]) expect((await contactRow(s.org.id, id)).erased_at?.toISOString()).toBe(r.data!.erasedAt);
    expect(
      await system(svc, (trx) => trx.selectFrom('erasure_evidence').select('contact_id').where('organization_id', '=', s.org.id).execute()),
    ).toHaveLength(3);
    expect((await eventsOf(svc, s.org.id, 'contact.erased')).map((e) => e.data.contactId).sort()).toEqual([a.id, b.id, c.id].sort());
    // The plus-tag variant keeps its record but is suppressed by the stripped-address hash.
    expect((await s.api.GET('/contacts/{id}', { params: { path: { id: variant.id } } })).data?.email).toBe(variant.email);
    expect((await s.api.GET('/suppression', { params: { query: { email: variant.email } } })).data).toMatchObject({ suppressed: true });
    // Another organization's record of the address is untouched.
    expect((await contactRow(other.id, foreign.id)).email).toBe(email);
    // The address may be filed again as a new, suppressed contact.
    expect((await s.api.POST('/contacts', { body: { email } })).response.status).toBe(201);
  });

  it('repeat: 200 alreadyErased with the original time and no event; other records of a past erasure', async () => {
    const s = await setup('MANAGER');
    const c = await mkContact(s.api);
    const first = await erase(s, c.id);
    const again = await erase(s, c.id);
    expect(again.data).toEqual({ ...first.data, alreadyErased: true, erasedContactIds: [] });
    expect(await eventsOf(svc, s.org.id, 'contact.erased')).toHaveLength(1);
    expect(
      await system(svc, (trx) => trx.selectFrom('erasure_evidence').select('id').where('organization_id', '=', s.org.id).execute()),
    ).toHaveLength(1);
  });

  it('concurrent erasures naming different records of one address: both 200, one erases them all', async () => {
    const s = await setup();
    const pairs = await Promise.all(
      Array.from({ length: 4 }, async () => {
        const email = uniqueEmail('race');
        const [l1, l2] = [await mkList(s.api), await mkList(s.api)];
        const a = await mkContact(s.api, { email, listId: l1.id });
        await svc.patchList(s.org.id, l1.id, { archived: true });
        const b = await mkContact(s.api, { email, listId: l2.id });
        return [a.id, b.id];
      }),
    );
    const results = await Promise.all(pairs.map(([a, b]) => Promise.all([erase(s, a), erase(s, b)])));
    for (const [[a, b], [ra, rb]] of pairs.map((p, i) => [p, results[i]] as const)) {
      expect([ra.response.status, rb.response.status]).toEqual([200, 200]);
      expect([ra.data!.alreadyErased, rb.data!.alreadyErased].sort()).toEqual([false, true]);
      const first = ra.data!.alreadyErased ? rb.data! : ra.data!;
      expect([...first.erasedContactIds].sort()).toEqual([a, b].sort());
    }
    expect(await eventsOf(svc, s.org.id, 'contact.erased')).toHaveLength(8);
  });

  it('all or nothing: a failure after the first record erases nothing and answers 500', async () => {
    const s = await setup();
    const email = uniqueEmail('fault');
    const [l1, l2] = [await mkList(s.api), await mkList(s.api)];
    const a = await mkContact(s.api, { email, listId: l1.id });
    await s.api.DELETE('/contacts/{id}', { params: { path: { id: a.id } } });
    const b = await mkContact(s.api, { email, listId: l2.id });
    await seedPersonalData(s.org.id, b.id, email);
    const before = await everything(s.org.id);
    svc.rt.services.faults.add('erase:after-first-record');
    try {
      const r = await erase(s, b.id);
      expect(r.response.status).toBe(500);
      expect(r.error?.type).toMatch(/internal-error$/);
    } finally {
      svc.rt.services.faults.delete('erase:after-first-record');
    }
    expect(await everything(s.org.id)).toBe(before);
    // And then it works.
    expect((await erase(s, b.id)).data?.erasedContactIds.sort()).toEqual([a.id, b.id].sort());
  });
});
