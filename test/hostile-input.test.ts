// Hostile bytes never answer 500, and secrets leak nothing: every secret comparison (link tokens,
// cursors, the operator and metrics tokens) takes any input, of any length in characters or bytes,
// and answers as for a wrong value; JSON bodies nest at most MAX_JSON_DEPTH levels and the NUL
// scan walks without recursion; failed operator authentications are slowed and limited per source
// address; cursors are signed with a key derived from the deployment's secret key.

import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTH_FAILURE_DELAY_MS, AUTH_FAILURE_LIMIT } from '../src/http/auth-throttle.js';
import { MAX_JSON_DEPTH } from '../src/http/request.js';
import { adminOperations, publicOperations } from '../src/platform/spec.js';
import { verifySignature } from '../src/webhooks/signing.js';
import { raw, startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  // Behind a trusted proxy, so each test can speak from source addresses of its own.
  svc = await startService({ TRUST_PROXY: 'true', RATE_LIMIT_PER_MINUTE: '100000' });
});
afterAll(async () => {
  await svc?.close();
});

/** Distinct source addresses (TEST-NET-3), one per caller. */
let nextAddress = 1;
const source = () => ({ 'x-forwarded-for': `203.0.113.${nextAddress++}` });

/** Signatures of the right length in characters but not in bytes, and other shapes a forger tries. */
const forged = (chars: number) => [
  'é'.repeat(chars),
  '😀'.repeat(chars / 2),
  `${'a'.repeat(chars - 1)}é`,
  '\u0000'.repeat(chars),
  'a'.repeat(chars),
  'a'.repeat(chars - 1),
  'a'.repeat(chars + 1),
  '',
];

describe('link tokens', () => {
  it('answers a forged unsubscribe, click or open token of any bytes as not valid: 404 pages, the open pixel always its GIF', async () => {
    const org = await svc.newOrg();
    const signer = svc.rt.services.signer;
    const payload = (purpose: 'unsubscribe' | 'open' | 'click') =>
      signer.sign(purpose, { o: org.id, r: `snd_${crypto.randomBytes(12).toString('hex')}`, u: 'https://example.com/' }).split('.')[0];
    const pixel = await fetch(`${svc.baseUrl}/t/o/${signer.sign('open', { o: org.id, r: 'snd_x' })}`);
    expect(pixel.status).toBe(200);
    const gif = Buffer.from(await pixel.arrayBuffer());
    for (const sig of forged(22)) {
      const at = (purpose: 'unsubscribe' | 'open' | 'click', prefix: string) => `${prefix}${payload(purpose)}.${encodeURIComponent(sig)}`;
      for (const method of ['GET', 'POST']) {
        const r = await fetch(`${svc.baseUrl}${at('unsubscribe', '/unsubscribe/')}`, { method });
        expect(r.status, `${method} unsubscribe ${JSON.stringify(sig)}`).toBe(404);
        expect(r.headers.get('content-type')).toMatch(/^text\/html/);
      }
      const click = await fetch(`${svc.baseUrl}${at('click', '/t/c/')}`, { redirect: 'manual' });
      expect(click.status, `click ${JSON.stringify(sig)}`).toBe(404);
      const open = await fetch(`${svc.baseUrl}${at('open', '/t/o/')}`);
      expect(open.status, `open ${JSON.stringify(sig)}`).toBe(200);
      expect(open.headers.get('content-type')).toBe('image/gif');
      expect(Buffer.from(await open.arrayBuffer()).equals(gif)).toBe(true);
    }
  });

  it('checks webhook signatures of any bytes without throwing', () => {
    const secret = `whs_${crypto.randomBytes(16).toString('hex')}`;
    const t = Math.floor(Date.now() / 1000);
    for (const sig of forged(64)) expect(verifySignature(`t=${t},v1=${sig}`, '{}', secret), JSON.stringify(sig)).toBe(false);
  });
});

describe('cursors', () => {
  /** Every paged list of both APIs, its path filled with ids that exist where the list needs one. */
  async function pagedLists() {
    const { org, key } = await svc.orgWithKey();
    const fill = (p: string) => p.replace('{orgId}', org.id).replace('{id}', `x_${crypto.randomBytes(12).toString('hex')}`);
    const lists: { path: string; key?: string; admin: boolean; pathParams: boolean }[] = [];
    for (const op of publicOperations.values())
      if (op.method === 'get' && op.parameters.some((p) => p.name === 'cursor'))
        lists.push({ path: `/api/v1${fill(op.path)}`, key, admin: false, pathParams: op.path.includes('{') });
    for (const op of adminOperations.values())
      if (op.method === 'get' && op.parameters.some((p) => p.name === 'cursor'))
        lists.push({ path: `/admin/api${fill(op.path)}`, key: svc.config.adminToken!, admin: true, pathParams: false });
    expect(lists.length).toBeGreaterThanOrEqual(16);
    return lists;
  }

  it('answers a cursor of any bytes on every paged list with 400 invalid-cursor, never 500', async () => {
    for (const list of await pagedLists()) {
      for (const mac of forged(16)) {
        for (const cursor of [`x.${mac}`, `${Buffer.from('["2024-01-01T00:00:00.000Z","x"]').toString('base64url')}.${mac}`]) {
          const r = await raw(svc.baseUrl, 'GET', `${list.path}?cursor=${encodeURIComponent(cursor)}`, { key: list.key });
          const what = `${list.path} ${JSON.stringify(cursor)}: ${r.text.slice(0, 200)}`;
          // A list under an unknown parent may answer its 404 first.
          if (list.pathParams) expect([400, 404], what).toContain(r.status);
          else expect(r.status, what).toBe(400);
          // U+0000 is refused in any parameter before the cursor is read.
          const slug = cursor.includes('\u0000') ? 'validation-failed' : 'invalid-cursor';
          if (r.status === 400) expect(r.body.type, what).toBe(`${svc.baseUrl}/problems/${slug}`);
        }
      }
    }
  });

  it("signs cursors with a key derived from the deployment's secret key: one signed with the old constant is 400", async () => {
    const { api, key } = await svc.orgWithKey();
    for (const name of ['a', 'b', 'c']) await api.POST('/lists', { body: { name } });
    const first = await api.GET('/lists', { params: { query: { limit: 1 } } });
    expect(first.data!.nextCursor).toEqual(expect.any(String));
    const payload = first.data!.nextCursor!.split('.')[0];
    const withKey = (k: crypto.BinaryLike) =>
      `${payload}.${crypto.createHmac('sha256', k).update(payload).digest('base64url').slice(0, 16)}`;
    const old = await raw(svc.baseUrl, 'GET', `/api/v1/lists?limit=1&cursor=${withKey('outbound-cursor-v1')}`, { key });
    expect(old.status).toBe(400);
    expect(old.body.type).toBe(`${svc.baseUrl}/problems/invalid-cursor`);
    // The service's own cursor is exactly the one HKDF-SHA256 of the secret key signs.
    const secretKey = Buffer.from(fs.readFileSync(path.join(svc.config.dataDir, 'secret-key'), 'utf8').trim(), 'hex');
    const derived = Buffer.from(crypto.hkdfSync('sha256', secretKey, Buffer.alloc(0), 'outbound-cursor-v2', 32));
    expect(withKey(derived)).toBe(first.data!.nextCursor);
    const next = await api.GET('/lists', { params: { query: { limit: 1, cursor: first.data!.nextCursor! } } });
    expect(next.response.status).toBe(200);
    expect(next.data!.data).toHaveLength(1);
  });
});

describe('JSON bodies', () => {
  const nested = (depth: number, inner: string) => `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`;
  const json = { 'content-type': 'application/json' };

  it(`refuses a body nested deeper than ${MAX_JSON_DEPTH} levels with 400 validation-failed, NULs at any depth included`, async () => {
    const { key } = await svc.orgWithKey();
    const post = (body: string) => raw(svc.baseUrl, 'POST', '/api/v1/lists', { key, body, headers: json });
    // The body object is the first level.
    const atLimit = await post(`{"name":"x","description":${nested(MAX_JSON_DEPTH - 1, '1')}}`);
    expect(atLimit.status).toBe(400);
    expect(JSON.stringify(atLimit.body.errors)).not.toMatch(/deeper/);
    for (const body of [
      `{"name":"x","description":${nested(MAX_JSON_DEPTH, '1')}}`,
      `{"name":"x","description":${nested(MAX_JSON_DEPTH, '{"a":"\\u0000"}')}}`,
      `{"name":"x","description":${nested(100_000, '"\\u0000"')}}`,
      `{"name":"x","description":${'{"a":'.repeat(60_000)}"\\u0000"${'}'.repeat(60_000)}}`,
    ]) {
      const r = await post(body);
      expect(r.status, body.slice(0, 80)).toBe(400);
      expect(r.body).toMatchObject({
        type: `${svc.baseUrl}/problems/validation-failed`,
        errors: [{ field: 'body', message: `nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels` }],
      });
    }
    // Brackets inside strings are text, not nesting (escaped quotes included).
    const brackets = await post(JSON.stringify({ name: `"${'['.repeat(150)}`, description: `\\"${'{'.repeat(300)}` }));
    expect(brackets.status).toBe(201);
  });

  it('finds a NUL in a wide body without recursion and names its field', async () => {
    const { key } = await svc.orgWithKey();
    const r = await raw(svc.baseUrl, 'POST', '/api/v1/lists', {
      key,
      body: `{"name":"x","description":"ok","tags":[${Array.from({ length: 5000 }, (_, i) => `"t${i}"`).join(',')},"a\\u0000"]}`,
      headers: json,
    });
    expect(r.status).toBe(400);
    expect(r.body.errors).toEqual([{ field: 'body.tags.5000', message: 'contains U+0000' }]);
  });
});

describe('operator and metrics tokens', () => {
  const wrongTokens = () => {
    const right = svc.config.adminToken!;
    const n = right.length;
    // NUL cannot travel in a header at all (the client refuses it).
    return [
      ...forged(n).filter((t) => !t.includes('\u0000')),
      `${right.slice(0, -1)}${right.at(-1) === 'a' ? 'b' : 'a'}`,
      `${right}x`,
      `${right.slice(0, -1)}é`,
      'x'.repeat(5000),
    ];
  };

  it('answers every wrong token, whatever its length in characters or bytes, with the same 401 after the same delay', async () => {
    for (const where of ['/admin/api/settings', '/metrics']) {
      const answers = new Set<string>();
      for (const token of [...wrongTokens(), null]) {
        const headers: Record<string, string> = { ...source() };
        // A header carries bytes: characters past U+00FF go as their UTF-8 bytes (read back as Latin-1).
        if (token !== null)
          headers.authorization = `Bearer ${/^[\x00-\xff]*$/.test(token) ? token : Buffer.from(token).toString('latin1')}`;
        const started = performance.now();
        const r = await fetch(`${svc.baseUrl}${where}`, { headers });
        const elapsed = performance.now() - started;
        const body = (await r.json()) as Record<string, unknown>;
        expect(r.status, `${where} ${JSON.stringify(token)?.slice(0, 40)}`).toBe(401);
        expect(elapsed, `${where} ${JSON.stringify(token)?.slice(0, 40)}`).toBeGreaterThanOrEqual(AUTH_FAILURE_DELAY_MS - 5);
        const { instance: _i, ...rest } = body;
        answers.add(JSON.stringify({ rest, type: r.headers.get('content-type') }));
      }
      expect([...answers], where).toHaveLength(1);
    }
  });

  it('limits failed authentications per source address (429 with Retry-After, /metrics counted too); the right token is never limited', async () => {
    const attacker = source();
    for (let i = 0; i < AUTH_FAILURE_LIMIT; i += 1) {
      const r = await raw(svc.baseUrl, 'GET', '/admin/api/settings', { headers: { ...attacker, authorization: `Bearer wrong-${i}` } });
      expect(r.status, `failure ${i + 1}`).toBe(401);
    }
    for (const where of ['/admin/api/settings', '/metrics']) {
      const r = await raw(svc.baseUrl, 'GET', where, { headers: { ...attacker, authorization: `Bearer ${svc.config.adminToken}x` } });
      expect(r.status, where).toBe(429);
      expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(r.body).toMatchObject({ type: `${svc.baseUrl}/problems/authentication-throttled`, status: 429 });
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    }
    // The right token from the same address, as often as an operator or a test polls it.
    for (let i = 0; i < 20; i += 1) {
      const ok = await svc.admin.GET('/settings', { headers: attacker });
      expect(ok.response.status).toBe(200);
    }
    const scrape = await raw(svc.baseUrl, 'GET', '/metrics', {
      headers: { ...attacker, authorization: `Bearer ${svc.config.adminToken}` },
    });
    expect(scrape.status).toBe(200);
    // Another address is not limited by this one's failures.
    const other = await raw(svc.baseUrl, 'GET', '/admin/api/settings', { headers: { ...source(), authorization: 'Bearer wrong' } });
    expect(other.status).toBe(401);
  });
});
