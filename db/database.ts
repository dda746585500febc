// Connections: an owner pool (migrations, the worker) and an application pool whose sessions
// run as the `outbound_app` role, to which row-level security applies (no BYPASSRLS, not owner).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Logger, runMigrations } from 'graphile-worker';
import { Kysely, type Migration, type MigrationProvider, Migrator, PostgresDialect, sql, type Transaction } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.js';

export const APP_ROLE = 'outbound_app';
const here = path.dirname(fileURLToPath(import.meta.url));

// Counts and cents come back as numbers, dates as their YYYY-MM-DD text.
pg.types.setTypeParser(20, (v) => Number(v));
pg.types.setTypeParser(1700, (v) => Number(v));
pg.types.setTypeParser(1082, (v) => v);

export type Db = Kysely<Database>;
/**
 * Epoch milliseconds of a timestamptz column (stored at millisecond precision, so exact). Hot
 * list reads select timestamps this way: a number costs the API node far less than parsing
 * timestamp text into a Date.
 */
export const epochMs = (col: string) => sql<number>`(extract(epoch FROM ${sql.ref(col)}) * 1000)::int8`;

/** A connection inside a transaction (Kysely's Transaction is a Kysely with nesting disallowed). */
export type Tx = Kysely<Database> | Transaction<Database>;

// Parameterised statements are prepared once per connection and reused by name: Postgres then
// skips parsing and planning on every later request of the same shape. Shapes are few (queries
// are built by code, values are parameters); past MAX_PREPARED distinct texts nothing more is
// prepared.
const MAX_PREPARED = 2000;
const statementNames = new Map<string, string>();

function statementName(text: string): string | null {
  let name = statementNames.get(text);
  if (name === undefined) {
    if (statementNames.size >= MAX_PREPARED) return null;
    name = `s${crypto.createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
    statementNames.set(text, name);
  }
  return name;
}

function prepareStatements(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...a: unknown[]) => unknown;
  (client as { query: unknown }).query = (config: unknown, values?: unknown, cb?: unknown) => {
    if (typeof config === 'string' && Array.isArray(values) && values.length > 0 && cb === undefined) {
      const name = statementName(config);
      if (name !== null) return query({ name, text: config, values });
    }
    return cb === undefined ? query(config, values) : query(config, values, cb);
  };
}

export function createPool(url: string, opts: { role?: string; max?: number; name?: string; prepare?: boolean } = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 20,
    application_name: opts.name ?? 'outbound',
    ...(opts.role ? { options: `-c role=${opts.role}` } : {}),
  });
  // A client losing its server connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
  if (opts.prepare) pool.on('connect', prepareStatements);
  return pool;
}

export function createDb(pool: pg.Pool): Db {
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

const SAFE_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Runs fn inside BEGIN/COMMIT on one connection; `prelude` joins BEGIN in the same round trip. */
export async function transactionOn<T>(conn: Db, fn: () => Promise<T>, prelude = ''): Promise<T> {
  await sql.raw(`BEGIN${prelude ? `; ${prelude}` : ''}`).execute(conn);
  let result: T;
  try {
    result = await fn();
  } catch (e) {
    await sql
      .raw('ROLLBACK')
      .execute(conn)
      .catch(() => {});
    throw e;
  }
  await sql.raw('COMMIT').execute(conn);
  return result;
}

/**
 * Runs the reads of fn (on a connection outside any transaction) with their cached generic plans,
 * for statements whose plan must not be chosen anew from each set of parameter values.
 */
export async function withGenericPlan<T>(conn: Tx, fn: () => Promise<T>): Promise<T> {
  return transactionOn(conn as Db, fn, 'SET LOCAL plan_cache_mode = force_generic_plan');
}

/**
 * Runs fn in a transaction bound to one organization (row-level security sees only its rows).
 * BEGIN and the binding go in one round trip: the id is one of ours, checked against SAFE_ID, so
 * it can be inlined as a literal.
 */
export async function withOrg<T>(db: Db, organizationId: string, fn: (trx: Tx) => Promise<T>): Promise<T> {
  if (!SAFE_ID.test(organizationId)) throw new Error('withOrg: malformed organization id');
  return db
    .connection()
    .execute((conn) => transactionOn(conn, () => fn(conn), `SELECT set_config('app.org_id', '${organizationId}', true)`));
}

/** Runs fn in a transaction that may see every organization: background sweeps and operator work. */
export async function withSystem<T>(db: Db, fn: (trx: Tx) => Promise<T>): Promise<T> {
  return db.connection().execute((conn) => transactionOn(conn, () => fn(conn), `SELECT set_config('app.system', 'on', true)`));
}

class SqlFileProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    const dir = path.join(here, 'migrations');
    const out: Record<string, Migration> = {};
    for (const file of fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.sql'))
      .sort()) {
      const text = fs.readFileSync(path.join(dir, file), 'utf8');
      out[file.replace(/\.sql$/, '')] = {
        up: async (db) => {
          await sql.raw(text).execute(db);
        },
      };
    }
    return out;
  }
}

/**
 * Applies our migrations and graphile-worker's, then grants the application role what it needs.
 * Processes started together on one database (API nodes and workers) take turns: the whole of it
 * runs under a session advisory lock, since concurrent GRANTs fail ("tuple concurrently updated").
 */
export async function migrate(url: string): Promise<void> {
  const pool = createPool(url, { max: 3, name: 'outbound-migrate' });
  const db = createDb(pool);
  const lock = await pool.connect();
  try {
    await lock.query(`SELECT pg_advisory_lock(hashtext('outbound:migrate'))`);
    const { error, results } = await new Migrator({ db, provider: new SqlFileProvider() }).migrateToLatest();
    if (error) {
      const failed = results?.find((r) => r.status === 'Error');
      throw new Error(`migration ${failed?.migrationName ?? ''} failed: ${(error as Error).message ?? error}`);
    }
    await runMigrations({ connectionString: url, logger: silentWorkerLogger() });
    await sql
      .raw(`
      DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${APP_ROLE}') THEN
          CREATE ROLE ${APP_ROLE} NOLOGIN NOBYPASSRLS;
        END IF;
      END $$;
      DO $$ BEGIN
        IF NOT pg_has_role(current_user, '${APP_ROLE}', 'MEMBER') THEN
          EXECUTE format('GRANT ${APP_ROLE} TO %I', current_user);
        END IF;
      END $$;
      GRANT USAGE ON SCHEMA public TO ${APP_ROLE};
      GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${APP_ROLE};
      GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO ${APP_ROLE};
    `)
      .execute(db);
  } finally {
    await lock.query(`SELECT pg_advisory_unlock(hashtext('outbound:migrate'))`).catch(() => {});
    lock.release();
    await db.destroy();
  }
}

export function silentWorkerLogger(): Logger {
  return new Logger(() => () => {});
}
