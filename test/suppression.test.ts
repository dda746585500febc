import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withOrg } from '../db/database.js';
import { coveringDomains, erasureHmac, matchSuppression } from '../src/compliance/suppression-match.js';
import { eventsOf, system, uid, uniqueEmail } from './crm-support.js';
import { raw, startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

const SECRET = 'test-erasure-secret-0123456789abcdef0123';

const setup = () => svc.orgWithKey(['suppression.write']);

const check = async (api: Awaited<ReturnType<typeof setup>>['api'], email: string) =>
  (await api.GET('/suppression', { params: { query: { email } } })).data as {
    email: string;
    suppressed: boolean;
    entry: Record<string, unknown> | null;
  };

const addDomain = (orgId: string, domain: string, reason?: string) =>
  svc.admin.POST('/organizations/{orgId}/suppression-domains', {
    params: { path: { orgId } },
    body: { domain, ...(reason ? { reason } : {}) },
  });

describe('POST /suppression', () => {
  it('stores a normalized MANUAL_BLOCK entry with the reason in source, idempotently, with one suppression.added', async () => {
    const { org, api } = await setup();
    const email = uniqueEmail('s');
    const r = await api.POST('/suppression', { body: { email: email.toUpperCase(), reason: 'Asked by phone', notes: 'call log 7' } });
    expect(r.response.status).toBe(200);
    expect(r.data).toEqual({ email, suppressed: true });
    const again = await api.POST('/suppression', { body: { email, reason: 'Second time' } });
    expect(again.data).toEqual({ email, suppressed: true });
    const c = await check(api, email);
    expect(c.entry).toEqual({
      id: expect.any(String),
      organizationId: org.id,
      email,
      reason: 'MANUAL_BLOCK',
      source: 'Asked by phone',
      notes: 'call log 7',
      expiresAt: null,
      createdAt: expect.any(String),
      level: 'ADDRESS',
    });
    const events = await eventsOf(svc, org.id, 'suppression.added');
    expect(events.map((e) => e.data)).toEqual([{ email, level: 'ADDRESS', reason: 'MANUAL_BLOCK', source: 'Asked by phone' }]);
    expect(events[0].resource_id).toBe(c.entry?.id);
  });

  it('renews an expired entry of the address (and emits again)', async () => {
    const { org, api } = await setup();
    const email = uniqueEmail('exp');
    await api.POST('/suppression', { body: { email, reason: 'first' } });
    await system(svc, (trx) =>
      trx
        .updateTable('suppression_entries')
        .set({ expires_at: new Date(Date.now() - 1000) })
        .where('organization_id', '=', org.id)
        .execute(),
    );
    expect((await check(api, email)).suppressed).toBe(false);
    await api.POST('/suppression', { body: { email, reason: 'again' } });
    expect((await check(api, email)).entry).toMatchObject({ source: 'again', expiresAt: null });
    expect(await eventsOf(svc, org.id, 'suppression.added')).toHaveLength(2);
  });

  it('refuses a missing or malformed email, a missing reason and unknown fields with 400', async () => {
    const { org, key } = await setup();
    for (const body of [
      { reason: 'r' },
      { email: 'nope', reason: 'r' },
      { email: uniqueEmail() },
      { email: uniqueEmail(), reason: '' },
      { email: uniqueEmail(), reason: 'r', level: 'DOMAIN' },
    ]) {
      const r = await raw(svc.baseUrl, 'POST', '/api/v1/suppression', {
        key,
        body: JSON.stringify(body),
        headers: { 'content-type': 'application/json' },
      });
      expect(r.status, JSON.stringify(body)).toBe(400);
    }
    expect(
      await system(svc, (trx) => trx.selectFrom('suppression_entries').select('id').where('organization_id', '=', org.id).execute()),
    ).toEqual([]);
  });
});

describe('DELETE /suppression', () => {
  it('always answers 200; emits suppression.removed only when the own entry was deleted; DOMAIN and hash entries stay', async () => {
    const { org, api } = await setup();
    const domain = `${uid('d')}.example.com`;
    const email = `first.last+${uid('tag')}@${domain}`;
    await api.POST('/suppression', { body: { email, reason: 'r' } });
    const del = await api.DELETE('/suppression', { params: { query: { email } } });
    expect(del.data).toEqual({ email, suppressed: false });
    expect((await api.DELETE('/suppression', { params: { query: { email } } })).data).toEqual({ email, suppressed: false });
    expect((await eventsOf(svc, org.id, 'suppression.removed')).map((e) => e.data)).toEqual([{ email, level: 'ADDRESS' }]);
    await addDomain(org.id, domain);
    // The domain entry still holds, and the answer says so.
    expect((await api.DELETE('/suppression', { params: { query: { email } } })).data).toEqual({ email, suppressed: true });
    expect((await check(api, email)).suppressed).toBe(true);
    expect(await eventsOf(svc, org.id, 'suppression.removed')).toHaveLength(1);
  });

  it('keeps a literal + in an unencoded email query parameter (GET, POST then DELETE)', async () => {
    const { org, api, key } = await setup();
    const email = `first.last+${uid('tag')}@${uid('p')}.example.com`;
    await api.POST('/suppression', { body: { email, reason: 'r' } });
    const auth = { key };
    const got = await raw(svc.baseUrl, 'GET', `/api/v1/suppression?email=${email}`, auth);
    expect(got.body).toMatchObject({ email, suppressed: true });
    const lifted = await raw(svc.baseUrl, 'DELETE', `/api/v1/suppression?email=${email}`, auth);
    expect(lifted.body).toEqual({ email, suppressed: false });
    expect((await eventsOf(svc, org.id, 'suppression.removed')).map((e) => e.data.email)).toEqual([email]);
  });

  it('GET and DELETE refuse an email that is not an address as sent (blank once trimmed, a control character, over 320 characters with spaces) with 400 and a field error, like POST', async () => {
    const { org, api, key } = await setup();
    const email = uniqueEmail('k');
    await api.POST('/suppression', { body: { email, reason: 'r' } });
    // 320 characters: an address at the limit, which the same address sent with a space is not.
    const longest = `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.${'e'.repeat(59)}.com`;
    expect(longest).toHaveLength(320);
    for (const value of ['%C2%90', '%20', '%09', `%20${encodeURIComponent(email)}`, `${longest}%20`, `x${longest}`, 'not-an-address']) {
      for (const method of ['GET', 'DELETE']) {
        const r = await raw(svc.baseUrl, method, `/api/v1/suppression?email=${value}`, { key });
        expect([method, value, r.status]).toEqual([method, value, 400]);
        expect(r.body).toMatchObject({
          type: expect.stringMatching(/\/problems\/validation-failed$/),
          errors: expect.arrayContaining([expect.objectContaining({ field: 'email' })]),
        });
      }
      const posted = await raw(svc.baseUrl, 'POST', '/api/v1/suppression', {
        key,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: decodeURIComponent(value), reason: 'r' }),
      });
      expect([value, posted.status]).toEqual([value, 400]);
    }
    // Nothing was lifted, and an address at the limit is still an address.
    expect((await check(api, email)).suppressed).toBe(true);
    expect(await eventsOf(svc, org.id, 'suppression.removed')).toHaveLength(0);
    expect((await api.DELETE('/suppression', { params: { query: { email: longest.toUpperCase() } } })).data).toEqual({
      email: longest,
      suppressed: false,
    });
  });
});

describe('GET /suppression', () => {
  it('?email matches the own entry, the plus-tag-stripped entry, DOMAIN entries of the domain or a parent, and erased hashes', async () => {
    const { org, api } = await setup();
    const domain = `${uid('m')}.example.com`;
    await api.POST('/suppression', { body: { email: `ada@${domain}`, reason: 'r' } });
    expect((await check(api, `ada@${domain}`)).entry?.email).toBe(`ada@${domain}`);
    const tagged = await check(api, `Ada+News@${domain}`);
    expect(tagged).toMatchObject({ email: `ada+news@${domain}`, suppressed: true, entry: { email: `ada@${domain}`, level: 'ADDRESS' } });
    expect((await check(api, `bob@${domain}`)).suppressed).toBe(false);
    expect((await check(api, `ada@x${domain}`)).suppressed).toBe(false);

    const blocked = `${uid('blk')}.example.com`;
    const created = await addDomain(org.id, `https://www.${blocked.toUpperCase()}/`, 'Competitor');
    expect(created.response.status).toBe(201);
    expect(created.data).toMatchObject({ email: `@${blocked}`, level: 'DOMAIN', reason: 'MANUAL_BLOCK', source: 'Competitor' });
    expect((await addDomain(org.id, blocked)).data?.id).toBe(created.data?.id); // idempotent
    for (const email of [`ceo@${blocked}`, `x@eu.${blocked}`]) {
      expect(await check(api, email)).toEqual({ email, suppressed: true, entry: created.data });
    }
    expect((await check(api, `ceo@not${blocked}`)).suppressed).toBe(false);
    // An address with its own entry shows that entry rather than the domain's.
    await api.POST('/suppression', { body: { email: `own@${blocked}`, reason: 'r' } });
    expect((await check(api, `own@${blocked}`)).entry?.level).toBe('ADDRESS');

    const erased = uniqueEmail('gone');
    await system(svc, (trx) =>
      trx
        .insertInto('suppression_entries')
        .values({
          organization_id: org.id,
          id: uid('sup_'),
          level: 'ADDRESS',
          email: null,
          email_hmac: erasureHmac(SECRET, erased),
          reason: 'ERASURE',
        })
        .execute(),
    );
    const [l, d] = erased.split('@');
    expect(await check(api, erased)).toEqual({ email: erased, suppressed: true, entry: null });
    expect(await check(api, `${l}+promo@${d}`)).toEqual({ email: `${l}+promo@${d}`, suppressed: true, entry: null });
    // POST leaves an erased address (and its plus-tag variants) as a hash: no clear-text row, no event.
    for (const email of [erased, `${l}+promo@${d}`]) {
      expect((await api.POST('/suppression', { body: { email, reason: 'again' } })).data).toEqual({ email, suppressed: true });
    }
    expect(
      await system(svc, (trx) =>
        trx
          .selectFrom('suppression_entries')
          .select('id')
          .where('organization_id', '=', org.id)
          .where('email', 'in', [erased, `${l}+promo@${d}`])
          .execute(),
      ),
    ).toEqual([]);
    expect((await eventsOf(svc, org.id, 'suppression.added')).map((e) => e.data.domain ?? e.data.email)).toEqual([
      `ada@${domain}`,
      blocked,
      `own@${blocked}`,
    ]);
  });

  it('is one indexed query for any address, used by every caller (matchSuppression)', async () => {
    const { org } = await setup();
    expect(coveringDomains('a.b.example.co.uk')).toEqual(['a.b.example.co.uk', 'b.example.co.uk', 'example.co.uk', 'co.uk']);
    const m = await withOrg(svc.rt.db, org.id, (trx) => matchSuppression(trx, org.id, 'x@y.example.com', SECRET));
    expect(m).toEqual({ suppressed: false, entry: null });
    // Without a usable secret erased addresses cannot be recognized, but nothing fails.
    const n = await withOrg(svc.rt.db, org.id, (trx) => matchSuppression(trx, org.id, 'x@y.example.com', null));
    expect(n.suppressed).toBe(false);
    await system(svc, (trx) =>
      sql`
      INSERT INTO suppression_entries (organization_id, id, level, email, reason)
      SELECT ${org.id}, 'sup_seed' || g, 'ADDRESS', 'p' || g || '@seed.example.com', 'MANUAL_BLOCK' FROM generate_series(1, 3000) g`.execute(
        trx,
      ),
    );
    await svc.pool.query('VACUUM ANALYZE suppression_entries');
    const plan = await withOrg(svc.rt.db, org.id, async (trx) => {
      await sql`set local enable_seqscan = off`.execute(trx);
      return (
        await sql<{ 'QUERY PLAN': string }>`EXPLAIN SELECT * FROM suppression_entries WHERE organization_id = ${org.id}
        AND ((level = 'ADDRESS' AND email IN ('a@b.c', 'a@b.c')) OR (level = 'DOMAIN' AND email IN ('b.c')) OR email_hmac = 'h')`.execute(
          trx,
        )
      ).rows
        .map((r) => r['QUERY PLAN'])
        .join('\n');
    });
    expect(plan).toMatch(/suppression_address_idx/);
    expect(plan).toMatch(/suppression_hmac_idx/);
  });

  it('without email lists entries newest first with cursor paging; limit and cursor are ignored in check mode', async () => {
    const { org, api } = await setup();
    const emails = [];
    for (let i = 0; i < 5; i += 1) {
      emails.push(uniqueEmail(`o${i}`));
      await api.POST('/suppression', { body: { email: emails[i], reason: 'r' } });
    }
    await addDomain(org.id, `${uid('dd')}.example.com`);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const r = await api.GET('/suppression', { params: { query: { limit: 2, cursor } } });
      const body = r.data as { data: { email: string; organizationId: string }[]; nextCursor: string | null };
      seen.push(...body.data.map((e) => e.email));
      if (!body.nextCursor) break;
      cursor = body.nextCursor;
    }
    expect(seen.slice(1)).toEqual([...emails].reverse());
    expect(seen[0]).toMatch(/^@/);
    expect(await check(api, emails[0])).toMatchObject({ suppressed: true });
    const modeCheck = await api.GET('/suppression', { params: { query: { email: emails[0], limit: 1, cursor: 'ignored' } } });
    expect(modeCheck.data).toHaveProperty('suppressed', true);
    const other = await setup();
    expect(((await other.api.GET('/suppression')).data as { data: unknown[] }).data).toEqual([]);
    expect((await check(other.api, emails[0])).suppressed).toBe(false);
  });
});
