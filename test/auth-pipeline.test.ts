// A keyed read's authentication travels with its first statement (src/http/deferred-auth.ts,
// db/pipelined.ts, authenticate_request of db/migrations): nothing after a refused authentication
// runs, the connection goes back unbound, reads of one key do not wait for each other, a stale
// memory of a key gives the fresh answer, and 401 > 429 > 403 > 400 hold as before.
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APP_ROLE, createPool, roleUrl } from '../db/database.js';
import { DeferredHead } from '../db/pipelined.js';
import { hashKey } from '../src/http/auth.js';
import { ALL_SCOPES, raw, startService, type TestService } from './support/harness.js';

const LIMIT = 1000;
let svc: TestService;
let app: pg.Pool;

beforeAll(async () => {
  svc = await startService({ RATE_LIMIT_PER_MINUTE: String(LIMIT) });
  const url = (svc.pool as unknown as { options: { connectionString: string } }).options.connectionString;
  app = createPool(roleUrl(url, APP_ROLE), { max: 2, prepare: true, name: 'test-auth-pipeline' });
  await svc.pool.query(`CREATE SEQUENCE IF NOT EXISTS ticks;
    CREATE OR REPLACE FUNCTION tick() RETURNS bigint LANGUAGE sql AS $$ SELECT nextval('ticks') $$;
    GRANT USAGE ON SEQUENCE ticks TO ${APP_ROLE};`);
});

afterAll(async () => {
  await app?.end();
  await svc?.close();
});

const AUTH = 'select * from authenticate_request($1, $2, $3)';
const ticks = async () => {
  const r = (await svc.pool.query('SELECT last_value, is_called FROM ticks')).rows[0];
  return r.is_called ? Number(r.last_value) : 0;
};
const countOf = async (keyId: string) =>
  Number((await svc.pool.query('SELECT count FROM rate_limits WHERE api_key_id = $1', [keyId])).rows[0]?.count ?? 0);
/** The window the service counts in now (authenticate_api_key's). */
const FILL_WINDOW = `INSERT INTO rate_limits (organization_id, api_key_id, window_start, count)
  SELECT organization_id, id, to_timestamp(floor(extract(epoch FROM clock_timestamp()) / 60) * 60), $2 FROM api_keys WHERE id = $1
  ON CONFLICT (organization_id, api_key_id) DO UPDATE SET count = EXCLUDED.count, window_start = EXCLUDED.window_start`;

/** The statement run on the most recently used request connection (the pool hands it out first). */
async function onLastRequestConnection(text: string): Promise<pg.QueryResult> {
  const client = await svc.rt.requestPool.connect();
  try {
    return await client.query(text);
  } finally {
    client.release();
  }
}

describe('authentication with the first read', () => {
  it('an unknown key, an exceeded limit or a missing scope: nothing after the authentication runs, and a 429 leaves the count at the limit', async () => {
    const org = await svc.newOrg();
    const { id, key } = await org.keyWithId(['contacts.read']);
    const client = await app.connect();
    try {
      const attempt = async (hash: Buffer, scope: string | null, limit: number) => {
        const head = new DeferredHead([{ text: AUTH, values: [hash, scope, limit], name: 'authenticate_request' }], () => true);
        const read = head.run(client, { text: 'SELECT tick()' }, () => Promise.reject(new Error('sent alone')));
        const error = await read.then(
          () => null,
          (e: { code?: string }) => e,
        );
        await client.query(`ROLLBACK; SELECT set_config('app.org_id', '', false)`);
        return error?.code;
      };
      const before = await ticks();
      expect(await attempt(hashKey(`obk_live_${'0'.repeat(32)}`), null, 10)).toBe('OB401');
      expect(await attempt(hashKey(key), 'deals.read', 10)).toBe('OB403');
      await svc.pool.query(FILL_WINDOW, [id, 10]);
      expect(await attempt(hashKey(key), 'contacts.read', 10)).toBe('OB429');
      expect(await ticks()).toBe(before);
      expect(await countOf(id)).toBe(10);
      // The same head within its limit lets the read run, once.
      expect(await attempt(hashKey(key), 'contacts.read', 11)).toBeUndefined();
      expect(await ticks()).toBe(before + 1);
      expect(await countOf(id)).toBe(11);
    } finally {
      client.release();
    }
  });

  it('two requests of one key whose first reads are slow do not wait for each other', async () => {
    const org = await svc.newOrg();
    const { id, key } = await org.keyWithId();
    await svc.pool.query(FILL_WINDOW, [id, 1]);
    const client = await app.connect();
    try {
      const head = new DeferredHead([{ text: AUTH, values: [hashKey(key), null, LIMIT], name: 'authenticate_request' }], () => true);
      const slow = head.run(client, { text: 'SELECT pg_sleep(1.5)' }, () => Promise.reject(new Error('sent alone')));
      await new Promise((r) => setTimeout(r, 300));
      // What the key's next request does first: count on the key's row, here within 300 ms.
      const other = await svc.pool.connect();
      try {
        await other.query('BEGIN');
        await other.query(`SET LOCAL lock_timeout = '300ms'`);
        const r = await other.query('UPDATE rate_limits SET count = count + 1 WHERE api_key_id = $1', [id]);
        await other.query('COMMIT');
        expect(r.rowCount).toBe(1);
      } finally {
        other.release();
      }
      await slow;
      // And through the service: two list reads of one key at once.
      const started = Date.now();
      const [a, b] = await Promise.all([svc.api(key).GET('/contacts'), svc.api(key).GET('/contacts')]);
      expect([a.response.status, b.response.status]).toEqual([200, 200]);
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      client.release();
    }
  });

  it('the request connection goes back to the pool unbound after a refused authentication', async () => {
    const org = await svc.newOrg();
    const { id, key } = await org.keyWithId();
    expect((await svc.api(key).GET('/contacts')).response.status).toBe(200);
    expect((await svc.api(key).GET('/contacts')).response.status).toBe(200);
    // The read travelled with the authentication, and the connection is bound to the organization.
    expect((await onLastRequestConnection(`SELECT name FROM pg_prepared_statements WHERE name = 'pipeline_begin'`)).rowCount).toBe(1);
    expect((await onLastRequestConnection(`SELECT current_setting('app.org_id', true) AS v`)).rows[0].v).toBe(org.id);
    await svc.pool.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [id]);
    const refused = await svc.api(key).GET('/contacts');
    expect(refused.response.status).toBe(401);
    expect((await onLastRequestConnection(`SELECT current_setting('app.org_id', true) AS v`)).rows[0].v).toBe('');
  });

  it('a stale memory of a key (organization changed, role changed, key revoked) gives the fresh answer', async () => {
    const org = await svc.newOrg();
    const { id, key } = await org.keyWithId(ALL_SCOPES, { role: 'REP' });
    const api = svc.api(key);
    expect((await api.GET('/me')).data?.organization.flags.v1_2_api_send).toBe(false);
    await svc.pool.query(`UPDATE organizations SET flags = flags || '{"v1_2_api_send": true}', name = 'Renamed' WHERE id = $1`, [org.id]);
    const me = (await api.GET('/me')).data;
    expect(me?.organization).toMatchObject({ name: 'Renamed', flags: { v1_2_api_send: true } });
    await svc.pool.query(`UPDATE users SET role = 'MANAGER' WHERE id = (SELECT user_id FROM api_keys WHERE id = $1)`, [id]);
    expect((await api.GET('/me')).data?.apiKey.role).toBe('MANAGER');
    expect((await api.GET('/contacts')).response.status).toBe(200);
    await svc.pool.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [id]);
    expect((await api.GET('/contacts')).response.status).toBe(401);
    expect((await api.GET('/me')).response.status).toBe(401);
  });

  it('keeps 401 > 429 > 403 > 400 for a key the service has seen', async () => {
    const org = await svc.newOrg();
    const bad = { limit: 'many' };
    const status = async (key: string) => (await raw(svc.baseUrl, 'GET', `/api/v1/contacts?limit=${bad.limit}`, { key })).status;
    // 400: a known key, the right scope, a bad parameter.
    const ok = await org.keyWithId();
    expect((await svc.api(ok.key).GET('/contacts')).response.status).toBe(200);
    expect(await status(ok.key)).toBe(400);
    // 403 before 400: a known key without the scope.
    const narrow = await org.key(['deals.read']);
    expect((await svc.api(narrow).GET('/me')).response.status).toBe(200);
    expect(await status(narrow)).toBe(403);
    // 429 before 403 and 400.
    const limited = await org.keyWithId(['deals.read']);
    expect((await svc.api(limited.key).GET('/me')).response.status).toBe(200);
    await svc.pool.query(FILL_WINDOW, [limited.id, LIMIT]);
    expect(await status(limited.key)).toBe(429);
    const full = await org.keyWithId();
    expect((await svc.api(full.key).GET('/contacts')).response.status).toBe(200);
    await svc.pool.query(FILL_WINDOW, [full.id, LIMIT]);
    const tooMany = await svc.api(full.key).GET('/contacts');
    expect(tooMany.response.status).toBe(429);
    expect(tooMany.response.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(tooMany.response.headers.get('retry-after')).not.toBeNull();
    expect(await countOf(full.id)).toBe(LIMIT);
    expect(await status(full.key)).toBe(429);
    // 401 before 429: the limited key revoked.
    await svc.pool.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [full.id]);
    expect(await status(full.key)).toBe(401);
    expect((await svc.api(full.key).GET('/contacts')).response.status).toBe(401);
  });
});
