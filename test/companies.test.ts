import { domainToASCII } from 'node:url';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planOf, system, uid } from './crm-support.js';
import { raw, startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

const setup = () => svc.orgWithKey();

const companyCount = (orgId: string) =>
  system(svc, async (trx) =>
    Number(
      (
        await trx
          .selectFrom('companies')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('organization_id', '=', orgId)
          .executeTakeFirstOrThrow()
      ).n,
    ),
  );

describe('POST /companies', () => {
  it('creates with 201 and every field; bare domains and URLs are one identity', async () => {
    const { org, api } = await setup();
    const d = `${uid('acme')}.example.com`;
    const first = await api.POST('/companies', { body: { domain: d, name: 'Acme' } });
    expect(first.response.status).toBe(201);
    expect(first.data).toEqual({
      id: expect.any(String),
      name: 'Acme',
      domain: d,
      domainNormalized: d,
      industry: null,
      companySize: null,
      headquarters: null,
      tier: null,
      tags: [],
      ownerSalesPersonId: null,
      researchUpdatedAt: null,
      sourcesCount: 0,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    for (const variant of [
      `https://www.${d}/about?x=1`,
      `HTTP://${d.toUpperCase()}:8080/`,
      `www.${d}.`,
      `  ${d}  `,
      `//${d}`,
      `ftp://${d}`,
    ]) {
      const r = await api.POST('/companies', { body: { domain: variant } });
      expect(r.response.status, variant).toBe(200);
      expect(r.data, variant).toEqual(first.data);
    }
    expect(await companyCount(org.id)).toBe(1);
  });

  it('normalizes internationalized names to punycode', async () => {
    const { api } = await setup();
    const tag = uid('m');
    const r = await api.POST('/companies', { body: { domain: `https://bücher-${tag}.example` } });
    expect(r.response.status).toBe(201);
    expect(r.data?.domainNormalized).toBe(domainToASCII(`bücher-${tag}.example`));
    expect(r.data?.domainNormalized).toMatch(/^xn--/);
    const again = await api.POST('/companies', { body: { domain: `BÜCHER-${tag}.example` } });
    expect(again.data?.id).toBe(r.data?.id);
  });

  it('backfills a name onto an unnamed company only; a curated name is never overwritten', async () => {
    const { api } = await setup();
    const d = `${uid('fill')}.example.com`;
    const bare = await api.POST('/companies', { body: { domain: d } });
    expect(bare.data?.name).toBe(d); // falls back to the domain
    const filled = await api.POST('/companies', { body: { domain: d, name: 'Filled Ltd' } });
    expect(filled.response.status).toBe(200);
    expect(filled.data?.name).toBe('Filled Ltd');
    const kept = await api.POST('/companies', { body: { domain: d, name: 'Other Name' } });
    expect(kept.data?.name).toBe('Filled Ltd');
    expect(kept.data?.updatedAt).toBe(filled.data?.updatedAt);
  });

  it('400 for missing, invalid and freemail domains, creating nothing', async () => {
    const { org, key, api } = await setup();
    for (const domain of ['', 'not a domain', 'localhost', '192.168.1.1', 'http://', 'exa_mple.com', '-bad.com', `${'a'.repeat(64)}.com`]) {
      const r = await raw(svc.baseUrl, 'POST', '/api/v1/companies', {
        key,
        body: JSON.stringify({ domain }),
        headers: { 'content-type': 'application/json' },
      });
      expect(r.status, domain).toBe(400);
    }
    for (const domain of ['gmail.com', 'https://www.yahoo.com/mail', 'Hotmail.com', 'mailinator.com']) {
      const r = await api.POST('/companies', { body: { domain } });
      expect(r.response.status, domain).toBe(400);
      expect(r.error?.type).toMatch(/freemail-domain$/);
    }
    expect((await api.POST('/companies', { body: { name: 'x' } as never })).response.status).toBe(400);
    expect(await companyCount(org.id)).toBe(0);
  });

  it('concurrent creates of one domain make one company', async () => {
    const { org, api } = await setup();
    const d = `${uid('race')}.example.com`;
    const rs = await Promise.all(Array.from({ length: 5 }, () => api.POST('/companies', { body: { domain: d } })));
    expect(rs.map((r) => r.response.status).sort()).toEqual([200, 200, 200, 200, 201]);
    expect(await companyCount(org.id)).toBe(1);
  });
});

describe('GET /companies', () => {
  it('lists newest first with only id, name, domain, createdAt; searches name substrings and domain prefixes', async () => {
    const { api } = await setup();
    const tok = uid('nim');
    const a = (await api.POST('/companies', { body: { domain: `${tok}-shop.example.com`, name: 'Shop Front' } })).data!;
    const b = (await api.POST('/companies', { body: { domain: `${uid('b')}.example.com`, name: `Nimbus ${tok.toUpperCase()} Holdings` } }))
      .data!;
    const c = (await api.POST('/companies', { body: { domain: `${uid('c')}.example.com` } })).data!;
    const all = await api.GET('/companies');
    expect(all.data?.data).toEqual([c, b, a].map((x) => ({ id: x.id, name: x.name, domain: x.domain, createdAt: x.createdAt })));
    expect(Object.keys(all.data!.data[0]).sort()).toEqual(['createdAt', 'domain', 'id', 'name']);
    const ids = async (search: string) => (await api.GET('/companies', { params: { query: { search } } })).data!.data.map((x) => x.id);
    expect(await ids(tok)).toEqual([b.id, a.id]); // name substring (b) and domain prefix (a)
    expect(await ids(`${tok}-sh`)).toEqual([a.id]);
    expect(await ids('shop.example')).toEqual([]); // a domain matches by prefix only
    expect(await ids('front')).toEqual([a.id]);
    expect(await ids('%')).toEqual([]);
    const p1 = await api.GET('/companies', { params: { query: { limit: 2 } } });
    const p2 = await api.GET('/companies', { params: { query: { limit: 2, cursor: p1.data!.nextCursor! } } });
    expect([...p1.data!.data, ...p2.data!.data].map((x) => x.id)).toEqual([c.id, b.id, a.id]);
    expect(p2.data?.nextCursor).toBeNull();
  });

  it("never shows another organization's companies; search is index-backed under row-level security", async () => {
    const a = await setup();
    const b = await setup();
    const co = (await b.api.POST('/companies', { body: { domain: `${uid('sec')}.example.com`, name: 'Secret Co' } })).data!;
    expect((await a.api.GET('/companies', { params: { query: { search: 'secret' } } })).data?.data).toEqual([]);
    expect((await a.api.GET('/companies/{id}', { params: { path: { id: co.id } } })).response.status).toBe(404);
    await system(svc, (trx) =>
      sql`
      INSERT INTO companies (organization_id, id, name, domain, domain_normalized)
      SELECT ${a.org.id}, 'cmp_seed' || g, 'Company ' || g, 'c' || g || '.example.com', 'c' || g || '.example.com'
      FROM generate_series(1, 3000) g`.execute(trx),
    );
    await svc.pool.query('VACUUM ANALYZE companies');
    const plan = await planOf(
      svc,
      a.org.id,
      `SELECT s.id FROM companies_search s WHERE s.organization_id = '${a.org.id}' AND (lower(s.name) LIKE '%secret%' OR s.domain_normalized LIKE 'secret%')`,
    );
    expect(plan).toMatch(/companies_name_trgm_idx/);
    expect(plan).toMatch(/companies_domain_prefix_idx/);
  });
});

describe('GET /companies/{id} and research', () => {
  it('returns every field; sourcesCount is 0 for a malformed legacy value; research is 404 until computed', async () => {
    const { org, api } = await setup();
    const c = (await api.POST('/companies', { body: { domain: `${uid('r')}.example.com` } })).data!;
    expect((await api.GET('/companies/{id}', { params: { path: { id: c.id } } })).data).toEqual(c);
    expect((await api.GET('/companies/{id}/research', { params: { path: { id: c.id } } })).response.status).toBe(404);
    const at = new Date();
    for (const [stored, count] of [
      ['"12"', 0],
      ['{"n": 3}', 0],
      ['-1', 0],
      ['2.5', 0],
      ['7', 7],
    ] as const) {
      await system(svc, (trx) =>
        trx
          .updateTable('companies')
          .set({
            sources_count: stored,
            research: JSON.stringify({ researchSources: [{ url: 'u' }], recentNews: 'bad', painPoints: [{ p: 1 }, 3], ttlDays: 30 }),
            research_updated_at: at,
            tags: ['a', 'b'],
            industry: 'Software',
          })
          .where('organization_id', '=', org.id)
          .where('id', '=', c.id)
          .execute(),
      );
      const one = await api.GET('/companies/{id}', { params: { path: { id: c.id } } });
      expect(one.data).toMatchObject({ sourcesCount: count, tags: ['a', 'b'], industry: 'Software', researchUpdatedAt: at.toISOString() });
    }
    const research = await api.GET('/companies/{id}/research', { params: { path: { id: c.id } } });
    // A legacy value: malformed arrays read as [], the missing parts as null; freshness by the organization's TTL (default 30 days).
    expect(research.data).toEqual({
      companyId: c.id,
      summary: null,
      facts: [],
      researchSources: [{ url: 'u' }],
      recentNews: [],
      painPoints: [{ p: 1 }],
      coverage: null,
      updatedAt: at.toISOString(),
      ttlDays: 30,
      isFresh: true,
    });
    expect((await api.GET('/companies/{id}', { params: { path: { id: 'cmp_unknown' } } })).response.status).toBe(404);
  });
});
