// db/pipelined.ts against real Postgres: several statements in one write with one Sync, each
// statement's result parsed as pg parses it, nothing after a failed statement run, statements
// prepared once per connection, and the connection usable after a failure.
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool } from '../db/database.js';
import { DeferredHead, isRead, pipelined } from '../db/pipelined.js';
import { createTestDatabase } from './support/harness.js';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let pool: pg.Pool;

beforeAll(async () => {
  database = await createTestDatabase({ empty: true });
  pool = createPool(database.url, { max: 2, prepare: true });
  await pool.query(`CREATE SEQUENCE ticks;
    CREATE FUNCTION tick() RETURNS bigint LANGUAGE sql AS $$ SELECT nextval('ticks') $$;
    CREATE FUNCTION refuse() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no' USING ERRCODE = 'OB401'; END $$;
    CREATE TABLE counter (id int PRIMARY KEY, n int NOT NULL); INSERT INTO counter VALUES (1, 0);`);
});

afterAll(async () => {
  await pool.end();
  await database.drop();
});

/** How many times tick() ran. */
const ticks = async () => {
  const r = (await pool.query('SELECT last_value, is_called FROM ticks')).rows[0];
  return r.is_called ? Number(r.last_value) : 0;
};

describe('pipelined statements', () => {
  it('answers each statement with its own rows, parsed as pg parses them', async () => {
    const client = await pool.connect();
    try {
      const o = await pipelined(client, [
        { text: 'SELECT $1::int8 AS n, $2::timestamptz AS at', values: [7, '2030-01-02T03:04:05.678Z'], name: 'p_types' },
        { text: `SELECT '{"a":1}'::jsonb AS j, $1::bytea AS b, NULL::text AS t`, values: [Buffer.from('hi')] },
        { text: 'SELECT g FROM generate_series(1, 3) g' },
      ]);
      expect(o.error).toBeNull();
      expect(o.results.map((r) => r.rowCount)).toEqual([1, 1, 3]);
      expect(o.results[0].rows[0]).toEqual({ n: 7, at: new Date('2030-01-02T03:04:05.678Z') });
      expect(o.results[1].rows[0]).toEqual({ j: { a: 1 }, b: Buffer.from('hi'), t: null });
      expect(o.results[2].rows.map((r) => r.g)).toEqual([1, 2, 3]);
    } finally {
      client.release();
    }
  });

  it('runs nothing after a failed statement, and the connection stays usable', async () => {
    const client = await pool.connect();
    try {
      const before = await ticks();
      const o = await pipelined(client, [
        { text: 'SELECT tick()' },
        { text: 'SELECT 1 / $1::int AS x', values: [0], name: 'p_div' },
        { text: 'SELECT tick()' },
      ]);
      expect(o.error?.code).toBe('22012');
      expect(o.failedAt).toBe(1);
      expect(o.results).toHaveLength(1);
      expect(await ticks()).toBe(before + 1);
      // Usable: a plain query, and the same statement again (its Parse succeeded before the error).
      expect((await client.query('SELECT 2 AS two')).rows[0].two).toBe(2);
      const again = await pipelined(client, [{ text: 'SELECT 1 / $1::int AS x', values: [1], name: 'p_div' }]);
      expect(again.results[0].rows[0].x).toBe(1);
    } finally {
      client.release();
    }
  });

  it('prepares a named statement once per connection and reuses it; a statement whose Parse was skipped is parsed next time', async () => {
    const client = await pool.connect();
    try {
      const parsed = (client as unknown as { connection: { parsedStatements: Record<string, string> } }).connection.parsedStatements;
      // The second statement fails: the third's Parse is skipped with it, so it must not count as prepared.
      const o = await pipelined(client, [
        { text: 'SELECT $1::int AS a', values: [1], name: 'p_a' },
        { text: 'SELECT nosuchcolumn', name: 'p_bad' },
        { text: 'SELECT $1::int AS c', values: [3], name: 'p_c' },
      ]);
      expect(o.error?.code).toBe('42703');
      expect(parsed.p_a).toBe('SELECT $1::int AS a');
      expect(parsed.p_bad).toBeUndefined();
      expect(parsed.p_c).toBeUndefined();
      const next = await pipelined(client, [
        { text: 'SELECT $1::int AS a', values: [10], name: 'p_a' },
        { text: 'SELECT $1::int AS c', values: [30], name: 'p_c' },
      ]);
      expect(next.error).toBeNull();
      expect(next.results.map((r) => r.rows[0])).toEqual([{ a: 10 }, { c: 30 }]);
      const prepared = await client.query(`SELECT name FROM pg_prepared_statements WHERE name IN ('p_a', 'p_c') ORDER BY name`);
      expect(prepared.rows.map((r) => r.name)).toEqual(['p_a', 'p_c']);
    } finally {
      client.release();
    }
  });

  it('a deferred head that fails lets nothing of the read run; one that succeeds commits before the read', async () => {
    const client = await pool.connect();
    try {
      const before = await ticks();
      const failing = new DeferredHead([{ text: 'SELECT refuse()' }], () => true);
      await expect(failing.run(client, { text: 'SELECT tick()' }, () => Promise.reject(new Error('unreachable')))).rejects.toMatchObject({
        code: 'OB401',
      });
      expect((await failing.outcome).error?.code).toBe('OB401');
      // The head's transaction is aborted until its owner ends it.
      await client.query('ROLLBACK');
      expect(await ticks()).toBe(before);
      const ok = new DeferredHead([{ text: 'UPDATE counter SET n = n + 1 RETURNING n' }], () => true);
      const read = await ok.run<pg.QueryResult>(client, { text: 'SELECT tick() AS t' }, () => Promise.reject(new Error('unreachable')));
      expect(read.rows[0].t).toBe(before + 1);
      expect((await ok.outcome).results[0].rows[0].n).toBe(1);
      expect((await client.query('SELECT pg_current_xact_id_if_assigned() AS x')).rows[0].x).toBeNull();
    } finally {
      client.release();
    }
  });

  it('tells reads from statements that may write, lock or change settings', () => {
    for (const s of ['SELECT 1', ' with x as (select 1) select * from x', 'select updated_at from t']) expect(isRead(s), s).toBe(true);
    for (const s of [
      'BEGIN',
      'SELECT 1; SELECT 2',
      'WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d',
      'SELECT * FROM t FOR UPDATE',
      'SELECT * FROM t FOR KEY SHARE',
      `SELECT set_config('app.org_id', 'x', false)`,
      'SELECT * INTO u FROM t',
      'INSERT INTO t VALUES (1)',
    ])
      expect(isRead(s), s).toBe(false);
  });
});
