import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventsOf, insertSequence, mkContact, mkList, planOf, sequenceStatus, system, uid, uniqueEmail } from './crm-support.js';
import { ALL_SCOPES, raw, startService, type TestService, waitFor } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

const setup = () => svc.orgWithKey();

const archive = (orgId: string, listId: string, body: { archived?: boolean; isTest?: boolean }) => svc.patchList(orgId, listId, body);

const contactCount = (orgId: string) =>
  system(svc, async (trx) =>
    Number(
      (
        await trx
          .selectFrom('contacts')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('organization_id', '=', orgId)
          .executeTakeFirstOrThrow()
      ).n,
    ),
  );

describe('POST /contacts', () => {
  it('creates with 201, normalizing the address, linking the company and filing on the list', async () => {
    const { org, api } = await setup();
    const list = await mkList(api);
    const email = uniqueEmail('Ada');
    const domain = `${uid('acme')}.example.com`;
    const r = await api.POST('/contacts', {
      body: {
        email: email.toUpperCase(),
        name: 'Ada Lovelace',
        title: 'CTO',
        listId: list.id,
        company: { name: 'Acme', domain: `https://www.${domain}/x` },
        fitScore: 0,
        urgencyScore: 100,
        qualificationStatus: 'QUALIFIED',
      },
    });
    expect(r.response.status).toBe(201);
    expect(r.data).toMatchObject({
      organizationId: org.id,
      email: email.toLowerCase(),
      name: 'Ada Lovelace',
      title: 'CTO',
      phone: null,
      notes: null,
      leadSource: null,
      company: { name: 'Acme', domain },
      qualificationStatus: 'QUALIFIED',
      fitScore: 0,
      urgencyScore: 100,
      list: { id: list.id, name: list.name },
    });
    expect(r.data).not.toHaveProperty('deletedAt');
    // The company exists as POST /companies would have made it.
    const co = await api.POST('/companies', { body: { domain } });
    expect(co.response.status).toBe(200);
    expect(co.data?.id).toBe(r.data?.company?.id);
  });

  it('links by company name only when such a company exists, and refuses a freemail company domain', async () => {
    const { api } = await setup();
    const co = await api.POST('/companies', { body: { domain: `${uid('named')}.example.com`, name: 'Named Works' } });
    const a = await api.POST('/contacts', { body: { email: uniqueEmail(), company: { name: 'NAMED works' } } });
    expect(a.data?.company?.id).toBe(co.data?.id);
    const b = await api.POST('/contacts', { body: { email: uniqueEmail(), company: { name: 'Nobody Inc' } } });
    expect(b.response.status).toBe(201);
    expect(b.data?.company).toBeNull();
    const c = await api.POST('/contacts', { body: { email: uniqueEmail(), company: { domain: 'gmail.com' } } });
    expect(c.response.status).toBe(400);
    expect(c.error?.type).toMatch(/freemail-domain$/);
  });

  it('rule 1: the same address on the same list answers 200 with the contact, unchanged', async () => {
    const { org, api } = await setup();
    const list = await mkList(api);
    const c = await mkContact(api, { listId: list.id, name: 'Original' });
    const again = await api.POST('/contacts', { body: { email: c.email.toUpperCase(), listId: list.id, name: 'Changed', fitScore: 99 } });
    expect(again.response.status).toBe(200);
    expect(again.response.headers.get('x-service-existing-list')).toBeNull();
    expect(again.data).toEqual(c);
    expect(await contactCount(org.id)).toBe(1);
  });

  it('rules 2-3: live on another list answers 200 with the header, changes nothing and attaches it to the explicit list', async () => {
    const { org, api } = await setup();
    const [l1, l2] = [await mkList(api), await mkList(api)];
    const c = await mkContact(api, { listId: l1.id, name: 'Keep Me' });
    const seq = await insertSequence(svc, org.id, c.id, 'ACTIVE');
    const r = await api.POST('/contacts', { body: { email: c.email, listId: l2.id, name: 'Other Name' } });
    expect(r.response.status).toBe(200);
    expect(r.response.headers.get('x-service-existing-list')).toBe('true');
    expect(r.data).toEqual(c);
    expect(r.data?.list?.id).toBe(l1.id);
    expect(await contactCount(org.id)).toBe(1);
    expect(await sequenceStatus(svc, org.id, seq)).toBe('ACTIVE');
    const onL2 = await api.GET('/contacts', { params: { query: { listId: l2.id } } });
    expect(onL2.data?.data.map((x) => x.id)).toEqual([c.id]);
    expect(onL2.data?.data[0].list?.id).toBe(l1.id); // its own list stays
    // Twice attached is still once listed.
    await api.POST('/contacts', { body: { email: c.email, listId: l2.id } });
    expect((await api.GET('/contacts', { params: { query: { listId: l2.id } } })).data?.data).toHaveLength(1);
  });

  it('rule 3: without listId a live contact elsewhere is returned and attached nowhere', async () => {
    const { org, api } = await setup();
    const l1 = await mkList(api);
    const c = await mkContact(api, { listId: l1.id });
    const r = await api.POST('/contacts', { body: { email: c.email } });
    expect(r.response.status).toBe(200);
    expect(r.response.headers.get('x-service-existing-list')).toBe('true');
    const memberships = await system(svc, (trx) =>
      trx.selectFrom('list_memberships').selectAll().where('organization_id', '=', org.id).execute(),
    );
    expect(memberships).toEqual([]);
    // Nor was a CRM import list made for it: the organization still has only its own list.
    const lists = await system(svc, (trx) => trx.selectFrom('contact_lists').select('id').where('organization_id', '=', org.id).execute());
    expect(lists.map((l) => l.id)).toEqual([l1.id]);
  });

  it('rule 2: a record on an archived, test or deleted list, or a soft-deleted record, is not live', async () => {
    const { org, api } = await setup();
    for (const make of ['archived', 'test', 'deleted-list', 'deleted-contact'] as const) {
      const [home, target] = [await mkList(api), await mkList(api)];
      const c = await mkContact(api, { listId: home.id });
      if (make === 'archived') await archive(org.id, home.id, { archived: true });
      if (make === 'test') await archive(org.id, home.id, { isTest: true });
      if (make === 'deleted-list') await api.DELETE('/lists/{id}', { params: { path: { id: home.id } } });
      if (make === 'deleted-contact') await api.DELETE('/contacts/{id}', { params: { path: { id: c.id } } });
      const r = await api.POST('/contacts', { body: { email: c.email, listId: target.id } });
      expect(r.response.status, make).toBe(201);
      expect(r.response.headers.get('x-service-existing-list')).toBeNull();
      expect(r.data?.id).not.toBe(c.id);
      expect(r.data?.list?.id).toBe(target.id);
    }
  });

  it('a soft-deleted record gives its slot back: the same list can file the address again', async () => {
    const { api } = await setup();
    const list = await mkList(api);
    const c = await mkContact(api, { listId: list.id });
    await api.DELETE('/contacts/{id}', { params: { path: { id: c.id } } });
    const r = await api.POST('/contacts', { body: { email: c.email, listId: list.id } });
    expect(r.response.status).toBe(201);
    expect(r.data?.id).not.toBe(c.id);
  });

  it('rule 4: without listId contacts share one CRM import list, created on demand and owned by the owner', async () => {
    const { org, api } = await setup();
    const [a, b] = await Promise.all([mkContact(api), mkContact(api)]);
    expect(a.list?.name).toBe('CRM import');
    expect(b.list?.id).toBe(a.list?.id);
    const list = await api.GET('/lists/{id}', { params: { path: { id: a.list!.id } } });
    expect(list.data).toMatchObject({ name: 'CRM import', userId: org.ownerId, sourceType: 'OTHER' });
  });

  it('concurrent creates of one person make one record', async () => {
    const { org, api } = await setup();
    const email = uniqueEmail();
    const results = await Promise.all(Array.from({ length: 6 }, () => api.POST('/contacts', { body: { email } })));
    expect(results.map((r) => r.response.status).sort()).toEqual([200, 200, 200, 200, 200, 201]);
    expect(new Set(results.map((r) => r.data?.id)).size).toBe(1);
    expect(await contactCount(org.id)).toBe(1);
  });

  it('creates a contact for a suppressed address (suppression only blocks sending)', async () => {
    const { api } = await setup();
    const email = uniqueEmail();
    await api.POST('/suppression', { body: { email, reason: 'asked' } });
    expect((await api.POST('/contacts', { body: { email } })).response.status).toBe(201);
  });

  it('refuses bad input with 400 and an unknown, foreign or deleted listId with 404, creating nothing', async () => {
    const { org, api } = await setup();
    const other = await setup();
    const foreign = await mkList(other.api);
    const gone = await mkList(api);
    await api.DELETE('/lists/{id}', { params: { path: { id: gone.id } } });
    for (const listId of ['lst_nope', foreign.id, gone.id]) {
      const r = await api.POST('/contacts', { body: { email: uniqueEmail(), listId } });
      expect(r.response.status).toBe(404);
    }
    const bad: unknown[] = [
      {},
      { email: 'nope' },
      { email: uniqueEmail(), fitScore: 101 },
      { email: uniqueEmail(), urgencyScore: -1 },
      { email: uniqueEmail(), unknown: 1 },
      { email: uniqueEmail(), company: {} },
      { email: uniqueEmail(), qualificationStatus: 'HOT' },
      { email: uniqueEmail(), company: { domain: 'not a domain' } },
    ];
    for (const body of bad) {
      const r = await raw(svc.baseUrl, 'POST', '/api/v1/contacts', {
        key: await org.key(),
        body: JSON.stringify(body),
        headers: { 'content-type': 'application/json' },
      });
      expect(r.status, JSON.stringify(body)).toBe(400);
    }
    expect(await contactCount(org.id)).toBe(0);
  });

  it('checks the company domain only when it creates: a known person is 200 whatever the domain, a new one 400 at body.company.domain leaving nothing', async () => {
    const { org, api } = await setup();
    const list = await mkList(api);
    const c = await mkContact(api, { listId: list.id });
    for (const domain of ['not a domain', 'gmail.com']) {
      const r = await api.POST('/contacts', { body: { email: c.email, listId: list.id, company: { domain } } });
      expect(r.response.status, domain).toBe(200);
      expect(r.data).toEqual(c);
    }
    const bad = await api.POST('/contacts', { body: { email: uniqueEmail(), company: { domain: 'not a domain' } } });
    expect(bad.response.status).toBe(400);
    expect(bad.error).toMatchObject({ errors: [{ field: 'body.company.domain' }] });
    const free = await api.POST('/contacts', { body: { email: uniqueEmail(), company: { name: 'Mail Co', domain: 'https://gmail.com' } } });
    expect(free.response.status).toBe(400);
    expect(free.error).toMatchObject({ type: expect.stringMatching(/freemail-domain$/), errors: [{ field: 'body.company.domain' }] });
    // Nothing stayed: no contact, no company, and no CRM import list for the refused creations.
    expect(await contactCount(org.id)).toBe(1);
    const [lists, companies] = await system(svc, async (trx) => [
      await trx.selectFrom('contact_lists').select('id').where('organization_id', '=', org.id).execute(),
      await trx.selectFrom('companies').select('id').where('organization_id', '=', org.id).execute(),
    ]);
    expect(lists.map((l) => l.id)).toEqual([list.id]);
    expect(companies).toEqual([]);
  });

  it('names an unnamed company of the domain, never renames a named one, and links by domain before name', async () => {
    const { api } = await setup();
    const domain = `${uid('unnamed')}.example.com`;
    const unnamed = await api.POST('/companies', { body: { domain } });
    const named = await api.POST('/companies', { body: { domain: `${uid('named')}.example.com`, name: 'Named Ltd' } });
    const a = await api.POST('/contacts', {
      body: { email: uniqueEmail(), company: { name: 'Now Named', domain: `http://www.${domain}/` } },
    });
    expect(a.data?.company).toEqual({ id: unnamed.data!.id, name: 'Now Named', domain });
    const b = await api.POST('/contacts', { body: { email: uniqueEmail(), company: { name: 'Other Name', domain: named.data!.domain! } } });
    expect(b.data?.company).toMatchObject({ id: named.data!.id, name: 'Named Ltd' });
    // A domain wins over a name that matches another company.
    const c = await api.POST('/contacts', { body: { email: uniqueEmail(), company: { name: 'Named Ltd', domain } } });
    expect(c.data?.company?.id).toBe(unnamed.data!.id);
  });

  it('links the company of its domain that another transaction commits while the contact is being filed', async () => {
    const { org, api } = await setup();
    const domain = `${uid('race')}.example.com`;
    const companyId = uid('cmp_');
    const other = await svc.pool.connect();
    try {
      await other.query('BEGIN');
      await other.query(`SELECT set_config('app.system', 'on', true)`);
      await other.query(`INSERT INTO companies (organization_id, id, name, domain, domain_normalized) VALUES ($1, $2, 'Racer', $3, $3)`, [
        org.id,
        companyId,
        domain,
      ]);
      const posting = api.POST('/contacts', { body: { email: uniqueEmail(), company: { domain } } });
      // The filing's company insert waits for the uncommitted row of the same domain.
      await waitFor(
        async () =>
          (
            await svc.pool.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
        AND query LIKE '%INSERT INTO companies%' AND pid <> pg_backend_pid()`)
          ).rowCount,
        15_000,
        'the filing to wait on the company',
      );
      await other.query('COMMIT');
      const r = await posting;
      expect(r.response.status).toBe(201);
      expect(r.data?.company).toEqual({ id: companyId, name: 'Racer', domain });
    } finally {
      other.release();
    }
  });
});

describe('GET /contacts', () => {
  it('lists newest first with deletedAt and erasedAt on every item, and pages without gaps', async () => {
    const { api } = await setup();
    const made = [];
    for (let i = 0; i < 5; i += 1) made.push(await mkContact(api));
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const r = await api.GET('/contacts', { params: { query: { limit: 2, cursor } } });
      for (const item of r.data!.data) {
        expect(item.deletedAt).toBeNull();
        expect(item.erasedAt).toBeNull();
      }
      seen.push(...r.data!.data.map((x) => x.id));
      if (!r.data!.nextCursor) break;
      cursor = r.data!.nextCursor;
    }
    expect(seen).toEqual(made.map((c) => c.id).reverse());
    const bad = await api.GET('/contacts', { params: { query: { cursor: 'forged' } } });
    expect(bad.error?.type).toMatch(/invalid-cursor$/);
  });

  it('list items are the contact as GET by id gives it, plus deletedAt and erasedAt, whatever the text holds', async () => {
    const { api } = await setup();
    const list = await mkList(api);
    const made = await api.POST('/contacts', {
      body: {
        email: uniqueEmail(),
        name: 'Zoë "Zed" O\'Brien \\ \u2028 ✓',
        listId: list.id,
        title: 'Head of\nSales\t"ops"',
        fitScore: 7,
        company: { name: 'Acme "Quoted"', domain: `${uid('acme')}.example.com` },
      },
    });
    expect(made.response.status, JSON.stringify(made.error)).toBe(201);
    const patched = await api.PATCH('/contacts/{id}', {
      params: { path: { id: made.data!.id } },
      body: {
        phone: '+1 555',
        notes: '</script>{"a":1}',
        leadSource: 'Ünïcode 🎉',
        urgencyScore: 0,
        qualificationStatus: 'NURTURE',
      },
    });
    expect(patched.response.status, JSON.stringify(patched.error)).toBe(200);
    const plain = await mkContact(api);
    const page = (await api.GET('/contacts', { params: { query: { limit: 10 } } })).data!;
    expect(page.data.map((x) => x.id)).toEqual([plain.id, made.data!.id]);
    for (const item of page.data) {
      const { deletedAt, erasedAt, ...contact } = item;
      expect([deletedAt, erasedAt]).toEqual([null, null]);
      expect((await api.GET('/contacts/{id}', { params: { path: { id: item.id } } })).data).toEqual(contact);
    }
    expect(page.data[1].company?.name).toBe('Acme "Quoted"');
    expect(page.data[1].list).toEqual({ id: list.id, name: list.name });
    await api.DELETE('/contacts/{id}', { params: { path: { id: plain.id } } });
    const withDeleted = (await api.GET('/contacts', { params: { query: { includeDeleted: 'true' } } })).data!;
    expect(withDeleted.data[0].deletedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('filters by qualificationStatus, exact normalized email, and q over name or email (case-insensitive, literal)', async () => {
    const { api, key } = await setup();
    const tok = uid('zq');
    const a = await api.POST('/contacts', {
      body: { email: uniqueEmail(), name: `Ada ${tok.toUpperCase()}`, qualificationStatus: 'NURTURE' },
    });
    const b = await api.POST('/contacts', { body: { email: `${tok}_x%@example.com`, name: 'Bob' } });
    const c = await mkContact(api, { name: 'Carl' });
    const ids = async (query: Record<string, string>) =>
      (await api.GET('/contacts', { params: { query } })).data!.data.map((x) => x.id).sort();
    expect(await ids({ qualificationStatus: 'NURTURE' })).toEqual([a.data!.id]);
    expect(await ids({ email: ` ${c.email.toUpperCase()} ` })).toEqual([c.id]);
    expect(await ids({ q: tok })).toEqual([a.data!.id, b.data!.id].sort());
    expect(await ids({ q: `${tok}_x%` })).toEqual([b.data!.id]);
    expect(await ids({ q: `${tok}%` })).toEqual([]); // % is a literal, not a wildcard
    expect(await ids({ q: 'CARL' })).toEqual([c.id]);
    expect(await ids({ q: tok, qualificationStatus: 'NURTURE' })).toEqual([a.data!.id]);
    // A + sent unencoded in `email` stays a plus (an address has no spaces).
    const tagged = await mkContact(api, { email: `ada+${tok}@example.com` });
    const unencoded = await raw(svc.baseUrl, 'GET', `/api/v1/contacts?email=ada+${tok}@example.com`, { key });
    expect((unencoded.body.data as { id: string }[]).map((x) => x.id)).toEqual([tagged.id]);
  });

  it('pages a list through its own and its attached contacts in one order, walking memberships by index', async () => {
    const { org, api } = await setup();
    const [home, campaign] = [await mkList(api), await mkList(api)];
    // 900 contacts on another list, every third attached to the campaign; 40 own contacts in between.
    await system(svc, async (trx) => {
      await sql`
        INSERT INTO contacts (organization_id, id, list_id, email, email_normalized, name, created_at)
        SELECT ${org.id}, 'con_att' || g, CASE WHEN g % 25 = 0 THEN ${campaign.id} ELSE ${home.id} END,
               'a' || g || '@att.example.com', 'a' || g || '@att.example.com', 'Att ' || g, now_ms() - make_interval(secs => g)
        FROM generate_series(1, 1000) g`.execute(trx);
      await sql`
        INSERT INTO list_memberships (organization_id, list_id, contact_id, contact_created_at)
        SELECT organization_id, ${campaign.id}, id, created_at FROM contacts
        WHERE organization_id = ${org.id} AND list_id = ${home.id} AND substr(id, 8)::int % 3 = 0`.execute(trx);
    });
    const expected = await system(svc, (trx) =>
      sql<{ id: string }>`
      SELECT id FROM contacts WHERE organization_id = ${org.id}
        AND (list_id = ${campaign.id} OR id IN (SELECT contact_id FROM list_memberships WHERE organization_id = ${org.id} AND list_id = ${campaign.id}))
      ORDER BY created_at DESC, id DESC`.execute(trx),
    );
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const r = await api.GET('/contacts', { params: { query: { listId: campaign.id, limit: 100, ...(cursor ? { cursor } : {}) } } });
      seen.push(...r.data!.data.map((x) => x.id));
      cursor = r.data!.nextCursor ?? undefined;
    } while (cursor);
    expect(seen).toEqual(expected.rows.map((x) => x.id));
    expect(seen.length).toBeGreaterThan(300);
    await svc.pool.query('VACUUM ANALYZE list_memberships');
    const plan = await planOf(
      svc,
      org.id,
      `SELECT m.contact_id FROM list_memberships m WHERE m.organization_id = '${org.id}'
      AND m.list_id = '${campaign.id}' AND m.deleted_at IS NULL ORDER BY m.contact_created_at DESC, m.contact_id DESC LIMIT 51`,
    );
    expect(plan).toMatch(/Index (Only )?Scan using list_memberships_page_idx/);
    expect(plan).not.toMatch(/Sort/);
  });

  it('q pages through many matches and finds rare matches beyond the first rows; every filter is index-backed', async () => {
    const { org, api } = await setup();
    // Seed directly: 2,500 common matches, then one rare contact older than all of them.
    const list = await mkList(api);
    await system(svc, (trx) =>
      sql`
      INSERT INTO contacts (organization_id, id, list_id, email, email_normalized, name, created_at)
      SELECT ${org.id}, 'con_seed' || g, ${list.id}, 'p' || g || '@common.example.com', 'p' || g || '@common.example.com', 'Common ' || g,
             now_ms() - make_interval(secs => g)
      FROM generate_series(1, 2500) g`.execute(trx),
    );
    await system(svc, (trx) =>
      sql`
      INSERT INTO contacts (organization_id, id, list_id, email, email_normalized, name, created_at)
      VALUES (${org.id}, 'con_rare', ${list.id}, 'rare@x.example.com', 'rare@x.example.com', 'Zelda Quux', now_ms() - interval '1 day')`.execute(
        trx,
      ),
    );
    await svc.pool.query('VACUUM ANALYZE contacts'); // also moves new rows out of the trigram index's pending list
    const plan = (where: string) =>
      planOf(
        svc,
        org.id,
        `SELECT c.id FROM contacts c WHERE c.organization_id = '${org.id}' AND ${where} ORDER BY c.created_at DESC, c.id DESC LIMIT 51`,
      );
    expect(await plan('c.deleted_at IS NULL AND c.erased_at IS NULL')).toMatch(/Index (Only )?Scan using contacts_live_page_idx/);
    expect(await plan(`c.list_id = 'lst_x'`)).toMatch(/contacts_list_idx/);
    expect(await plan(`c.qualification_status = 'CUSTOMER'`)).toMatch(/contacts_status_idx/);
    expect(await plan(`c.email_normalized = 'p7@common.example.com'`)).toMatch(/contacts_email_idx|contacts_list_email_live_idx/);
    expect(await plan(`(c.created_at, c.id) < (now() - interval '40 minutes', 'x')`)).toMatch(/Index Cond: .*ROW\(created_at, id\) </);
    // The substring search goes through the search view, where the trigram index applies ...
    const like = `(lower(c.name) || ' ' || c.email_normalized) LIKE '%zelda q%'`;
    const search = await planOf(svc, org.id, `SELECT c.id FROM contacts_search c WHERE c.organization_id = '${org.id}' AND ${like}`);
    expect(search).toMatch(/contacts_search_trgm_idx/);
    // ... which, unlike the table itself, it could not under the tenant policy.
    const direct = await planOf(svc, org.id, `SELECT c.id FROM contacts c WHERE c.organization_id = '${org.id}' AND ${like}`);
    expect(direct).not.toMatch(/contacts_search_trgm_idx/);
    const rare = await api.GET('/contacts', { params: { query: { q: 'zelda q' } } });
    expect(rare.data?.data.map((x) => x.id)).toEqual(['con_rare']);
    const first = await api.GET('/contacts', { params: { query: { q: 'common', limit: 200 } } });
    expect(first.data?.data).toHaveLength(200);
    expect(first.data?.data[0].id).toBe('con_seed1');
    const second = await api.GET('/contacts', { params: { query: { q: 'common', limit: 200, cursor: first.data!.nextCursor! } } });
    expect(second.data?.data[0].id).toBe('con_seed201');
    // A rare match after a cursor deep in the common ones.
    const deep = await api.GET('/contacts', { params: { query: { q: 'e', limit: 1, cursor: second.data!.nextCursor! } } });
    expect(deep.data?.data[0].id).toBe('con_seed401');
  });

  it('listId shows own and attached contacts, hides detached ones, and gives an empty page for unknown or deleted lists', async () => {
    const { org, api } = await setup();
    const [l1, l2] = [await mkList(api), await mkList(api)];
    const own = await mkContact(api, { listId: l1.id });
    const elsewhere = await mkContact(api, { listId: l2.id });
    await api.POST('/contacts', { body: { email: elsewhere.email, listId: l1.id } });
    const tok = await mkContact(api, { listId: l2.id, name: uid('Tok') });
    const ids = async (query: Record<string, string>) => (await api.GET('/contacts', { params: { query } })).data!.data.map((x) => x.id);
    expect(await ids({ listId: l1.id })).toEqual([elsewhere.id, own.id]);
    expect(await ids({ listId: l1.id, q: elsewhere.email })).toEqual([elsewhere.id]);
    expect(await ids({ listId: l2.id })).toEqual([tok.id, elsewhere.id]);
    expect(await ids({ listId: 'lst_unknown' })).toEqual([]);
    // Paging across the two sources.
    const p1 = await api.GET('/contacts', { params: { query: { listId: l1.id, limit: 1 } } });
    const p2 = await api.GET('/contacts', { params: { query: { listId: l1.id, limit: 1, cursor: p1.data!.nextCursor! } } });
    expect([p1.data?.data[0].id, p2.data?.data[0].id, p2.data?.nextCursor]).toEqual([elsewhere.id, own.id, null]);
    await api.DELETE('/lists/{id}', { params: { path: { id: l1.id } } });
    expect(await ids({ listId: l1.id })).toEqual([]);
    const m = await system(svc, (trx) =>
      trx.selectFrom('list_memberships').select('deleted_at').where('organization_id', '=', org.id).executeTakeFirstOrThrow(),
    );
    expect(m.deleted_at).not.toBeNull();
  });

  it('hides soft-deleted and erased contacts unless includeDeleted=true', async () => {
    const { org } = await setup();
    const key = await org.key(ALL_SCOPES, { userId: org.ownerId });
    const api = svc.api(key);
    const live = await mkContact(api);
    const gone = await mkContact(api);
    const erased = await mkContact(api);
    await api.DELETE('/contacts/{id}', { params: { path: { id: gone.id } } });
    await api.POST('/contacts/{id}/erase', { params: { path: { id: erased.id } }, body: { requesterRef: 'T-1', reason: 'asked' } });
    expect((await api.GET('/contacts')).data?.data.map((x) => x.id)).toEqual([live.id]);
    const all = (await api.GET('/contacts', { params: { query: { includeDeleted: 'true' } } })).data!.data;
    expect(all.map((x) => x.id)).toEqual([erased.id, gone.id, live.id]);
    expect(all[0].erasedAt).not.toBeNull();
    expect(all[0].email).not.toBe(erased.email);
    expect(all[1].deletedAt).not.toBeNull();
    expect(all[1].erasedAt).toBeNull();
  });

  it("never shows another organization's contacts, whatever the filter", async () => {
    const a = await setup();
    const b = await setup();
    const c = await mkContact(b.api, { name: 'Secret Person' });
    for (const query of [{}, { q: 'secret' }, { email: c.email }, { listId: c.list!.id }, { includeDeleted: 'true' as const }]) {
      expect((await a.api.GET('/contacts', { params: { query } })).data?.data).toEqual([]);
    }
  });

  it('the search view only ever shows the bound organization', async () => {
    const a = await setup();
    const b = await setup();
    await mkContact(b.api);
    const rows = await svc.rt.db.transaction().execute(async (trx) => {
      await sql`select set_config('app.org_id', ${a.org.id}, true)`.execute(trx);
      return (await sql<{ n: number }>`select count(*)::int as n from contacts_search where organization_id = ${b.org.id}`.execute(trx))
        .rows[0].n;
    });
    expect(rows).toBe(0);
    await expect(
      svc.rt.db.transaction().execute(async (trx) => {
        await sql`select set_config('app.org_id', ${a.org.id}, true)`.execute(trx);
        await sql`update contacts_search set name = 'x'`.execute(trx);
      }),
    ).rejects.toThrow(/permission denied/);
  });
});

describe('GET /contacts/{id} and research', () => {
  it('returns the contact; include=research adds research (null when none cached), unknown tokens ignored', async () => {
    const { api } = await setup();
    const c = await mkContact(api);
    const plain = await api.GET('/contacts/{id}', { params: { path: { id: c.id } } });
    expect(plain.data).toEqual(c);
    expect(plain.data).not.toHaveProperty('research');
    const withResearch = await api.GET('/contacts/{id}', { params: { path: { id: c.id }, query: { include: 'bogus, research' } } });
    expect(withResearch.data).toEqual({ ...c, research: null });
    expect((await api.GET('/contacts/{id}/research', { params: { path: { id: c.id } } })).response.status).toBe(404);
  });

  it('returns cached research with its freshness', async () => {
    const { org, api } = await setup();
    const c = await mkContact(api);
    const at = new Date(Date.now() - 2 * 86_400_000);
    await system(svc, (trx) =>
      trx
        .updateTable('contacts')
        .set({
          research: JSON.stringify({ facts: [{ text: 'f' }, 'junk'], sources: 'malformed', ttlDays: 30 }),
          research_updated_at: at,
        })
        .where('organization_id', '=', org.id)
        .where('id', '=', c.id)
        .execute(),
    );
    // Freshness follows the organization's current TTL (set to 1 day here), not what the stored value says.
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: org.id } }, body: { researchTtlDays: 1 } });
    const r = await api.GET('/contacts/{id}/research', { params: { path: { id: c.id } } });
    expect(r.data).toEqual({
      contactId: c.id,
      companyId: null,
      facts: [{ text: 'f' }],
      sources: [],
      contactAssessment: null,
      signalReasons: [],
      updatedAt: at.toISOString(),
      ttlDays: 1,
      isFresh: false,
    });
    const d = await api.GET('/contacts/{id}', { params: { path: { id: c.id }, query: { include: 'research' } } });
    expect(d.data?.research).toEqual({ facts: [{ text: 'f' }], sources: [], updatedAt: at.toISOString(), ttlDays: 1, isFresh: false });
  });

  it('answers 404 for unknown, foreign, deleted and erased contacts on every verb', async () => {
    const { org, api } = await setup();
    const other = await setup();
    const foreign = await mkContact(other.api);
    const owner = svc.api(await org.key(ALL_SCOPES, { userId: org.ownerId }));
    const deleted = await mkContact(api);
    await api.DELETE('/contacts/{id}', { params: { path: { id: deleted.id } } });
    const erased = await mkContact(api);
    await owner.POST('/contacts/{id}/erase', { params: { path: { id: erased.id } }, body: { requesterRef: 'r', reason: 'r' } });
    for (const id of ['con_unknown', foreign.id, deleted.id, erased.id]) {
      const p = { params: { path: { id } } };
      expect((await api.GET('/contacts/{id}', p)).response.status).toBe(404);
      expect((await api.GET('/contacts/{id}/research', p)).response.status).toBe(404);
      expect((await api.PATCH('/contacts/{id}', { ...p, body: { name: 'x' } })).response.status).toBe(404);
      expect((await api.POST('/contacts/{id}/pause-sequence', p)).response.status).toBe(404);
    }
    for (const id of ['con_unknown', foreign.id]) {
      expect((await api.DELETE('/contacts/{id}', { params: { path: { id } } })).response.status).toBe(404);
      expect(
        (await owner.POST('/contacts/{id}/erase', { params: { path: { id } }, body: { requesterRef: 'r', reason: 'r' } })).response.status,
      ).toBe(404);
    }
  });
});

describe('PATCH /contacts/{id}', () => {
  it('changes only the sent fields, reports whether anything changed, and clears with null', async () => {
    const { api } = await setup();
    const c = await mkContact(api, { fitScore: 40 });
    const co = await api.POST('/companies', { body: { domain: `${uid('pc')}.example.com` } });
    const r = await api.PATCH('/contacts/{id}', {
      params: { path: { id: c.id } },
      body: { phone: '+1 555', notes: 'n', leadSource: 'expo', companyId: co.data!.id, qualificationStatus: 'CUSTOMER' },
    });
    expect(r.data).toEqual({ id: c.id, updated: true });
    const after = (await api.GET('/contacts/{id}', { params: { path: { id: c.id } } })).data!;
    expect(after).toMatchObject({
      name: c.name,
      fitScore: 40,
      phone: '+1 555',
      notes: 'n',
      leadSource: 'expo',
      company: { id: co.data!.id },
      qualificationStatus: 'CUSTOMER',
    });
    expect(after.updatedAt >= c.updatedAt).toBe(true);
    const same = await api.PATCH('/contacts/{id}', { params: { path: { id: c.id } }, body: { phone: '+1 555', fitScore: 40 } });
    expect(same.data).toEqual({ id: c.id, updated: false });
    await api.PATCH('/contacts/{id}', { params: { path: { id: c.id } }, body: { phone: null, companyId: null, fitScore: null } });
    expect((await api.GET('/contacts/{id}', { params: { path: { id: c.id } } })).data).toMatchObject({
      phone: null,
      company: null,
      fitScore: null,
    });
  });

  it('refuses unknown fields, email, out-of-range scores, an empty body and a foreign companyId with 400, changing nothing', async () => {
    const { api } = await setup();
    const other = await setup();
    const foreignCo = await other.api.POST('/companies', { body: { domain: `${uid('fc')}.example.com` } });
    const c = await mkContact(api, { fitScore: 40 });
    for (const body of [
      { email: 'x@y.z' },
      { fitScore: 101 },
      { urgencyScore: -1 },
      {},
      { companyId: foreignCo.data!.id },
      { name: '' },
      { name: null },
    ]) {
      const r = await api.PATCH('/contacts/{id}', { params: { path: { id: c.id } }, body: body as never });
      expect(r.response.status, JSON.stringify(body)).toBe(400);
    }
    expect((await api.GET('/contacts/{id}', { params: { path: { id: c.id } } })).data).toEqual(c);
  });
});

describe('DELETE /contacts/{id}', () => {
  it('soft-deletes with a 30-day advisory undo window, emits contact.deleted once, and repeats with the original time', async () => {
    const { org, api } = await setup();
    const c = await mkContact(api);
    const first = await api.DELETE('/contacts/{id}', { params: { path: { id: c.id } } });
    expect(first.data).toMatchObject({ id: c.id, deleted: true });
    expect(Date.parse(first.data!.undoAvailableUntil) - Date.parse(first.data!.deletedAt)).toBe(30 * 86_400_000);
    const again = await api.DELETE('/contacts/{id}', { params: { path: { id: c.id } } });
    expect(again.data).toEqual(first.data);
    const events = await eventsOf(svc, org.id, 'contact.deleted');
    expect(events.map((e) => [e.data, e.resource_type, e.resource_id])).toEqual([[{ contactId: c.id }, 'Contact', c.id]]);
    expect((await api.GET('/contacts/{id}', { params: { path: { id: c.id } } })).response.status).toBe(404);
  });

  it('concurrent deletes emit one event', async () => {
    const { org, api } = await setup();
    const c = await mkContact(api);
    const rs = await Promise.all(Array.from({ length: 5 }, () => api.DELETE('/contacts/{id}', { params: { path: { id: c.id } } })));
    expect(new Set(rs.map((r) => r.data?.deletedAt)).size).toBe(1);
    expect(await eventsOf(svc, org.id, 'contact.deleted')).toHaveLength(1);
  });
});

describe('POST /contacts/{id}/pause-sequence', () => {
  it('pauses every in-flight sequence, one sequence.paused each, and leaves the others', async () => {
    const { org, api } = await setup();
    const c = await mkContact(api);
    const other = await mkContact(api);
    const seqs: Record<string, string> = {};
    for (const s of ['ACTIVE', 'QUEUED', 'DRAFTED', 'APPROVED', 'NEW', 'COMPLETED', 'PAUSED'])
      seqs[s] = await insertSequence(svc, org.id, c.id, s);
    const otherSeq = await insertSequence(svc, org.id, other.id, 'ACTIVE');
    const r = await api.POST('/contacts/{id}/pause-sequence', { params: { path: { id: c.id } }, body: { reason: 'asked for later' } });
    expect(r.data).toEqual({ contactId: c.id, pausedCount: 4 });
    for (const s of ['ACTIVE', 'QUEUED', 'DRAFTED', 'APPROVED']) expect(await sequenceStatus(svc, org.id, seqs[s])).toBe('PAUSED');
    for (const s of ['NEW', 'COMPLETED']) expect(await sequenceStatus(svc, org.id, seqs[s])).toBe(s);
    expect(await sequenceStatus(svc, org.id, otherSeq)).toBe('ACTIVE');
    const events = await eventsOf(svc, org.id, 'sequence.paused');
    expect(events.map((e) => e.resource_id).sort()).toEqual(['ACTIVE', 'QUEUED', 'DRAFTED', 'APPROVED'].map((s) => seqs[s]).sort());
    expect(events[0].data).toMatchObject({ contactId: c.id, reason: 'asked for later' });
    const again = await api.POST('/contacts/{id}/pause-sequence', { params: { path: { id: c.id } } });
    expect(again.data).toEqual({ contactId: c.id, pausedCount: 0 });
    expect(await eventsOf(svc, org.id, 'sequence.paused')).toHaveLength(4);
  });
});
