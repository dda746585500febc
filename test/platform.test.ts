import crypto from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withOrg } from '../db/database.js';
import { createApp } from '../src/http/app.js';
import { authenticate } from '../src/http/auth.js';
import { ALL_SCOPES, raw, startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

describe('authentication', () => {
  it('answers 401 problems for a missing, malformed, unknown, expired or revoked key', async () => {
    const org = await svc.newOrg();
    expect((await svc.api().GET('/me')).response.status).toBe(401);
    expect((await svc.api('not-a-key').GET('/me')).response.status).toBe(401);
    expect((await svc.api(`obk_live_${crypto.randomBytes(16).toString('hex')}`).GET('/me')).response.status).toBe(401);
    const expired = await org.key(ALL_SCOPES, { expiresAt: new Date(Date.now() - 60_000).toISOString() });
    expect((await svc.api(expired).GET('/me')).response.status).toBe(401);
    const { id, key } = await org.keyWithId();
    expect((await svc.api(key).GET('/me')).response.status).toBe(200);
    const revoked = await svc.admin.DELETE('/api-keys/{keyId}', { params: { path: { keyId: id } } });
    expect(revoked.data).toEqual({ id, revoked: true });
    const after = await svc.api(key).GET('/me');
    expect(after.response.status).toBe(401);
    expect(after.error?.type).toBe(`${svc.baseUrl}/problems/unauthorized`);
  });

  it('GET /me describes the key and its organization', async () => {
    const org = await svc.newOrg({ plan: 'growth' });
    const key = await org.key(['analytics.read'], { role: 'MANAGER' });
    const { data } = await svc.api(key).GET('/me');
    expect(data?.apiKey.scopes).toEqual(['analytics.read']);
    expect(data?.apiKey.role).toBe('MANAGER');
    expect(data?.organization).toMatchObject({ id: org.id, plan: 'growth', flags: { v1_2_api_send: false } });
  });

  it('refuses a key without the required scope with 403 insufficient-scope naming it', async () => {
    const org = await svc.newOrg();
    const key = await org.key(ALL_SCOPES.filter((s) => s !== 'lists.read'));
    const { error, response } = await svc.api(key).GET('/lists');
    expect(response.status).toBe(403);
    expect(error?.type).toMatch(/\/problems\/insufficient-scope$/);
    expect(error?.detail).toContain('lists.read');
  });
});

describe('rate limit', () => {
  it('sends the window headers and refuses concurrent requests past the limit with 429', async () => {
    const limited = await startService({ RATE_LIMIT_PER_MINUTE: '10' });
    try {
      const org = await limited.newOrg();
      const key = await org.key();
      // The window's end is after the request was sent (a clock read after the answer may already
      // be in the next window).
      const sent = Date.now();
      const first = await limited.api(key).GET('/me');
      expect(first.response.headers.get('x-ratelimit-limit')).toBe('10');
      const reset = Number(first.response.headers.get('x-ratelimit-reset'));
      expect(reset % 60).toBe(0);
      expect(reset).toBeGreaterThan(sent / 1000);
      const results = await Promise.all(Array.from({ length: 30 }, () => limited.api(key).GET('/me')));
      const ok = results.filter((r) => r.response.status === 200).length;
      const tooMany = results.filter((r) => r.response.status === 429);
      // Unless the 60-second window rolled over mid-burst, exactly 9 more requests fit. Every answer,
      // 429s included, names its window: a burst still wholly in the first window is all `reset`
      // (one 429 of the old window says nothing of the others, which may be in the new one).
      if (results.every((r) => Number(r.response.headers.get('x-ratelimit-reset')) === reset)) expect(ok).toBe(9);
      expect(ok).toBeLessThanOrEqual(19);
      expect(tooMany.length).toBeGreaterThan(0);
      const r = tooMany[0].response;
      expect(r.headers.get('x-ratelimit-remaining')).toBe('0');
      const retry = Number(r.headers.get('retry-after'));
      expect(Number.isInteger(retry) && retry >= 0 && retry <= 60).toBe(true);
      expect(tooMany[0].error?.type).toMatch(/\/problems\/rate-limited$/);
    } finally {
      await limited.close();
    }
  });
});

describe('problems', () => {
  it('answers problems for unknown routes, wrong methods, malformed JSON, wrong types, oversized bodies and wrong content types', async () => {
    const org = await svc.newOrg();
    const key = await org.key();
    const json = { 'content-type': 'application/json' };
    const cases: [string, string, { body?: string; headers?: Record<string, string> }, number, string][] = [
      ['GET', '/api/v1/no-such-thing', {}, 404, 'not-found'],
      ['PUT', '/api/v1/lists', { body: '{}', headers: json }, 405, 'method-not-allowed'],
      ['POST', '/api/v1/lists', { body: '{"name":', headers: json }, 400, 'malformed-json'],
      ['POST', '/api/v1/lists', { body: '{"name":42}', headers: json }, 400, 'validation-failed'],
      ['POST', '/api/v1/lists', { body: JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) }), headers: json }, 413, 'payload-too-large'],
      [
        'POST',
        '/api/v1/lists',
        { body: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
        400,
        'malformed-json',
      ],
      ['POST', '/api/v1/lists', { body: 'name=x', headers: { 'content-type': 'text/plain' } }, 400, 'malformed-json'],
      ['GET', '/api/v1/lists?limit=500', {}, 400, 'validation-failed'],
      ['GET', '/api/v1/public-templates?cursor=tampered', {}, 400, 'invalid-cursor'],
      ['GET', '/api/v1/public-templates?sequenceStep=99999999999999999999', {}, 400, 'validation-failed'],
      ['GET', '/api/v1/lists/%E0%A4%A', {}, 404, 'not-found'],
      // A path value outside its schema names nothing that can exist; U+0000 is refused anywhere.
      ['GET', `/api/v1/lists/${'x'.repeat(65)}`, {}, 404, 'not-found'],
      ['GET', '/api/v1/deals/a%00b', {}, 404, 'not-found'],
      ['GET', '/api/v1/deals?stageSlug=a%00b', {}, 400, 'validation-failed'],
      ['POST', '/api/v1/lists', { body: '{"name":"a\\u0000b"}', headers: json }, 400, 'validation-failed'],
      ['POST', '/api/v1/lists', { body: '{"name":"x","description":{"a\\u0000":1}}', headers: json }, 400, 'validation-failed'],
    ];
    for (const [method, path, init, status, slug] of cases) {
      const r = await raw(svc.baseUrl, method, path, { key, ...init });
      expect(r.status, `${method} ${path}`).toBe(status);
      expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(r.body).toMatchObject({ type: `${svc.baseUrl}/problems/${slug}`, status });
      expect(typeof r.body.title).toBe('string');
      expect(typeof r.body.detail).toBe('string');
      expect(r.headers.get('x-request-id')).toBeTruthy();
    }
  });

  it('gives every kind of response its request id: pages, problems, public, operator, documents, the desk, health', async () => {
    const key = await svc.newOrg().then((o) => o.key());
    const paths: [string, Record<string, string>][] = [
      ['/api/v1/me', { authorization: `Bearer ${key}` }],
      ['/api/v1/lists?limit=2', { authorization: `Bearer ${key}` }],
      ['/api/v1/lists', {}],
      ['/api/v1/no-such-thing', { authorization: `Bearer ${key}` }],
      ['/api/v1/public-templates', {}],
      ['/admin/api/organizations', {}],
      ['/api-docs/openapi.json', {}],
      ['/docs', {}],
      ['/desk', {}],
      ['/healthz', {}],
      ['/nowhere', {}],
    ];
    for (const [path, headers] of paths) {
      const r = await fetch(`${svc.baseUrl}${path}`, { headers });
      await r.arrayBuffer();
      expect(r.headers.get('x-request-id'), path).toMatch(/^[\w.-]{1,64}$/);
    }
    const echoed = await fetch(`${svc.baseUrl}/api/v1/me`, { headers: { authorization: `Bearer ${key}`, 'x-request-id': 'trace-42' } });
    expect(echoed.headers.get('x-request-id')).toBe('trace-42');
  });

  it('reads a JSON body sent as text/plain (what fetch sends for a string body)', async () => {
    const key = await svc.newOrg().then((o) => o.key());
    for (const headers of [{ 'content-type': 'text/plain;charset=UTF-8' }, {}] as Record<string, string>[]) {
      const r = await raw(svc.baseUrl, 'POST', '/api/v1/lists', { key, body: JSON.stringify({ name: 'Plain' }), headers });
      expect(r.status, JSON.stringify(headers)).toBe(201);
      expect(r.body).toMatchObject({ name: 'Plain' });
    }
  });

  it('accepts an absent body, an empty one or {} on an operation that takes none, and refuses any other', async () => {
    const key = await svc.newOrg().then((o) => o.key());
    const path = '/api/v1/webhooks/whk_unknown/rotate-secret';
    const json = { 'content-type': 'application/json' };
    // The body passes, so the unknown id is what answers.
    for (const body of [undefined, '', '  \n', '{}', ' { } ']) {
      const r = await raw(svc.baseUrl, 'POST', path, { key, body, headers: json });
      expect(r.status, JSON.stringify(body)).toBe(404);
    }
    for (const body of ['{"a":1}', '[]', 'null']) {
      const r = await raw(svc.baseUrl, 'POST', path, { key, body, headers: json });
      expect(r.status, body).toBe(400);
      expect(r.body.type).toBe(`${svc.baseUrl}/problems/validation-failed`);
    }
  });

  it('serves a page for every problem type URL', async () => {
    const r = await raw(svc.baseUrl, 'GET', '/api/v1/me');
    const page = await fetch(String(r.body.type));
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/retry/i);
    expect((await fetch(`${svc.baseUrl}/problems/no-such-slug`)).status).toBe(404);
  });

  it('answers 501 not-implemented for an operation without a handler', async () => {
    const org = await svc.newOrg();
    // Every operation of the contract has its handler now: an app built without one shows the path.
    const { config, db, systemDb, services, log } = svc.rt;
    const app = createApp({
      config,
      db,
      requestDb: db,
      systemDb,
      services,
      log,
      handlers: {},
      adminHandlers: {},
      health: async () => true,
    });
    const r = await app.request('/api/v1/analytics/lift', { headers: { authorization: `Bearer ${await org.key()}` } });
    expect(r.status).toBe(501);
    expect(((await r.json()) as { type: string }).type).toBe(`${svc.baseUrl}/problems/not-implemented`);
  });
});

describe('tenancy', () => {
  it("answers another organization's id exactly like an unknown id (404)", async () => {
    const a = await svc.newOrg();
    const b = await svc.newOrg();
    const keyA = await a.key();
    const keyB = await b.key();
    const { data: list } = await svc.api(keyA).POST('/lists', { body: { name: 'Mine' } });
    const foreign = await svc.api(keyB).GET('/lists/{id}', { params: { path: { id: list!.id } } });
    const unknown = await svc.api(keyB).GET('/lists/{id}', { params: { path: { id: 'lst_000000000000000000000000' } } });
    expect(foreign.response.status).toBe(404);
    expect(unknown.response.status).toBe(404);
    expect(foreign.error!.detail).toBe(unknown.error!.detail);
    expect((await svc.api(keyA).GET('/lists/{id}', { params: { path: { id: list!.id } } })).response.status).toBe(200);
  });

  it('row-level security hides other organizations even from a query with no organization filter', async () => {
    const a = await svc.newOrg();
    const b = await svc.newOrg();
    for (const org of [a, b]) {
      await svc.admin.POST('/organizations/{orgId}/products', { params: { path: { orgId: org.id } }, body: { name: `P ${org.id}` } });
    }
    const seen = await withOrg(svc.rt.db, a.id, (trx) =>
      sql<{ organization_id: string }>`select organization_id from products`.execute(trx),
    );
    expect(seen.rows.map((r) => r.organization_id)).toEqual([a.id]);
    // Without an organization bound, the application role sees nothing at all.
    const none = await sql<{ n: number }>`select count(*)::int as n from products`.execute(svc.rt.db);
    expect(none.rows[0].n).toBe(0);
    // And it cannot write a row for another organization.
    await expect(
      withOrg(svc.rt.db, a.id, (trx) => sql`insert into products (organization_id, id, name) values (${b.id}, 'prd_x', 'x')`.execute(trx)),
    ).rejects.toThrow(/row-level security/);
    const role = await sql<{ u: string; bypass: boolean; owner: boolean }>`
      select current_user as u, r.rolbypassrls as bypass, r.rolsuper as owner from pg_roles r where r.rolname = current_user`.execute(
      svc.rt.db,
    );
    expect(role.rows[0]).toEqual({ u: 'outbound_app', bypass: false, owner: false });
  });
});

describe('idempotency', () => {
  it('settles concurrent duplicates to one creation, scopes keys per organization, and bounds their length', async () => {
    const org = await svc.newOrg();
    const api = svc.api(await org.key(), { 'Idempotency-Key': 'same-key' });
    const results = await Promise.all(Array.from({ length: 8 }, () => api.POST('/lists', { body: { name: 'Concurrent' } })));
    const ids = new Set(results.map((r) => r.data?.id));
    expect(ids.size).toBe(1);
    expect(results.map((r) => r.response.status).every((st) => st === 201)).toBe(true);
    expect(results.filter((r) => r.response.headers.get('idempotent-replayed') === 'true')).toHaveLength(7);
    const rows = await withOrg(svc.rt.db, org.id, (trx) => trx.selectFrom('contact_lists').select('id').execute());
    expect(rows).toHaveLength(1);
    // The same key in another organization is another key.
    const other = await svc.newOrg();
    const theirs = await svc.api(await other.key(), { 'Idempotency-Key': 'same-key' }).POST('/lists', { body: { name: 'Concurrent' } });
    expect(theirs.response.status).toBe(201);
    expect(theirs.data!.id).not.toBe([...ids][0]);
    const tooLong = await svc.api(await org.key(), { 'Idempotency-Key': 'k'.repeat(256) }).POST('/lists', { body: { name: 'x' } });
    expect(tooLong.response.status).toBe(400);
  });
});

describe('request binding', () => {
  it("binds the request connection to the key's organization, and to none after an unknown key", async () => {
    const org = await svc.newOrg();
    const key = await org.key();
    const bound = await svc.rt.db.connection().execute(async (conn) => {
      await authenticate(conn, `Bearer ${key}`, 100);
      const a = (await sql<{ v: string }>`select current_setting('app.org_id', true) as v`.execute(conn)).rows[0].v;
      await expect(authenticate(conn, `Bearer obk_live_${'0'.repeat(32)}`, 100)).rejects.toThrow();
      const b = (await sql<{ v: string }>`select current_setting('app.org_id', true) as v`.execute(conn)).rows[0].v;
      const system = (await sql<{ v: string | null }>`select current_setting('app.system', true) as v`.execute(conn)).rows[0].v;
      return { a, b, system };
    });
    expect(bound).toEqual({ a: org.id, b: '', system: expect.not.stringMatching(/^on$/) });
  });
});

describe('public templates and documents', () => {
  it('lists active public templates without a key, with CORS, filtered by useCase alias, industry and step count', async () => {
    const tag = crypto.randomBytes(4).toString('hex');
    const step = { dayOffset: 0, subject: 'Hi', body: 'Hello' };
    await svc.admin.POST('/public-templates', {
      body: { name: 'A', useCase: `uc-${tag}`, industry: 'saas', steps: [step, { ...step, dayOffset: 3 }] },
    });
    await svc.admin.POST('/public-templates', { body: { name: 'B', useCase: `uc-${tag}`, industry: 'retail', steps: [step] } });
    await svc.admin.POST('/public-templates', {
      body: { name: 'C', useCase: `uc-${tag}`, industry: 'saas', steps: [step], active: false },
    });
    const all = await svc.api().GET('/public-templates', { params: { query: { useCaseSlug: `uc-${tag}` } } });
    expect(all.data?.data.map((t) => t.name).sort()).toEqual(['A', 'B']);
    expect(all.response.headers.get('access-control-allow-origin')).toBe('*');
    const saas = await svc
      .api()
      .GET('/public-templates', { params: { query: { useCase: `uc-${tag}`, industry: 'SaaS', sequenceStep: 2 } } });
    expect(saas.data?.data.map((t) => t.name)).toEqual(['A']);
    expect(saas.data?.data[0].steps.map((s) => s.step)).toEqual([1, 2]);
  });

  it('serves both OpenAPI documents and a health check', async () => {
    const doc = await (await fetch(`${svc.baseUrl}/api-docs/openapi.json`)).json();
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('1.0.0');
    // The server names the running service (its PUBLIC_BASE_URL), not the document's local default.
    expect(doc.servers).toEqual([{ url: `${svc.config.publicBaseUrl}/api/v1`, 'x-internal': false, description: expect.any(String) }]);
    const admin = await fetch(`${svc.baseUrl}/admin/api-docs/openapi.json`);
    expect(admin.status).toBe(200);
    expect((await admin.json()).servers).toEqual([
      { url: `${svc.config.publicBaseUrl}/admin/api`, 'x-internal': true, description: expect.any(String) },
    ]);
    expect(await (await fetch(`${svc.baseUrl}/healthz`)).json()).toEqual({ status: 'ok' });
  });

  it('refuses the operator API without the operator token', async () => {
    const r = await raw(svc.baseUrl, 'POST', '/admin/api/organizations', {
      body: '{"name":"x"}',
      headers: { 'content-type': 'application/json' },
    });
    expect(r.status).toBe(401);
  });
});
