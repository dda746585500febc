// Least privilege (db/roles.ts, db/migrations/0021_least_privilege.sql): every pool of the service
// logs in as a role of its own, none a superuser, none bypassing row-level security, none owning a
// table; work for one organization (a request, a job, the operator's call on one) sees that
// organization's rows only, even from a query that forgets to filter; and seeing every
// organization (app.system = 'on') is the cross-organization role's alone.
import fs from 'node:fs';
import path from 'node:path';
import { type Kysely, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APP_ROLE, type Database, type Db, migrate, roleUrl, SYSTEM_ROLE, WORKER_ROLE, withOrg, withSystem } from '../db/database.js';
import { startEmbedded } from '../db/embedded.js';
import { openRuntime, runWorker, serveHttp } from '../src/boot/runtime.js';
import { loadConfig } from '../src/platform/config.js';
import { createLogger } from '../src/platform/logger.js';
import { CRONTAB } from '../src/tasks/index.js';
import { serviceClients, startService, type TestService, waitFor } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => svc?.close());

/** Two organizations with a product each, made through the operator API. */
async function twoOrganizations() {
  const a = await svc.newOrg();
  const b = await svc.newOrg();
  for (const org of [a, b]) {
    const r = await svc.admin.POST('/organizations/{orgId}/products', {
      params: { path: { orgId: org.id } },
      body: { name: `P ${org.id}` },
    });
    expect(r.response.status).toBe(201);
  }
  return { a: a.id, b: b.id };
}

/** The organizations whose products the query sees; the query has no organization filter. */
const productOrgs = async (trx: Kysely<Database>) =>
  (await sql<{ organization_id: string }>`select organization_id from products order by organization_id`.execute(trx)).rows.map(
    (r) => r.organization_id,
  );

describe('the roles of the pools', () => {
  it('each pool logs in as its own role: no superuser, no BYPASSRLS, no CREATEROLE or CREATEDB, no table owned, no way to another role', async () => {
    const pools: [string, Db][] = [
      ['outbound_app', svc.rt.db],
      ['outbound_worker', svc.rt.workerDb],
      ['outbound_system', svc.rt.systemDb],
    ];
    for (const [role, db] of pools) {
      const r = await sql<Record<string, unknown>>`
        select current_user as "current", session_user as "session", r.rolsuper as super, r.rolbypassrls as bypass,
               r.rolcreaterole as createrole, r.rolcreatedb as createdb,
               (select count(*)::int from pg_class c where c.relowner = r.oid and c.relnamespace = 'public'::regnamespace) as owned
        from pg_roles r where r.rolname = current_user`.execute(db);
      expect(r.rows[0], role).toEqual({
        current: role,
        session: role,
        super: false,
        bypass: false,
        createrole: false,
        createdb: false,
        owned: 0,
      });
      await db.connection().execute(async (conn) => {
        // Logged in as the role itself: there is no other role to reset to, and none to become.
        await sql`reset role`.execute(conn);
        expect((await sql<{ u: string }>`select current_user as u`.execute(conn)).rows[0].u).toBe(role);
        await expect(sql`set role postgres`.execute(conn)).rejects.toThrow(/permission denied/);
      });
    }
  });

  it("every connection the service opens, the worker's included, is one of its roles", async () => {
    const worker = await svc.startWorker();
    try {
      const { org, api } = await svc.orgWithKey();
      expect((await api.GET('/me')).response.status).toBe(200);
      await svc.admin.GET('/outbox');
      await svc.admin.GET('/organizations/{orgId}/health', { params: { path: { orgId: org.id } } });
      await worker.addJob('sweep_org_health', {});
      await waitFor(async () => {
        const left = await svc.pool.query(`select count(*)::int as n from graphile_worker._private_jobs`);
        return left.rows[0].n === 0;
      });
      const seen = await svc.pool.query<{ app: string; usename: string }>(`
        select distinct application_name as app, usename from pg_stat_activity
        where datname = current_database() and application_name like 'outbound-%' and application_name <> 'outbound-migrate'
        order by 1`);
      expect(seen.rows).toEqual(
        expect.arrayContaining([
          { app: 'outbound-api', usename: 'outbound_app' },
          { app: 'outbound-requests', usename: 'outbound_app' },
          { app: 'outbound-system', usename: 'outbound_system' },
          { app: 'outbound-worker', usename: 'outbound_worker' },
        ]),
      );
      const roles = new Map([
        ['outbound-api', 'outbound_app'],
        ['outbound-requests', 'outbound_app'],
        ['outbound-system', 'outbound_system'],
        ['outbound-worker', 'outbound_worker'],
      ]);
      for (const r of seen.rows) expect(r.usename, r.app).toBe(roles.get(r.app));
    } finally {
      await worker.stop();
    }
  });
});

describe('row-level security by role', () => {
  it('a job bound to one organization sees only its rows from a query with no organization filter, even in system mode', async () => {
    const { a, b } = await twoOrganizations();
    // The worker's connection, as a job uses it (withOrg with the job's organization).
    expect(await withOrg(svc.rt.workerDb, a, (trx) => productOrgs(trx as Kysely<Database>))).toEqual([a]);
    const cross = await withOrg(svc.rt.workerDb, a, async (trx) => {
      await sql`select set_config('app.system', 'on', true)`.execute(trx);
      return productOrgs(trx as Kysely<Database>);
    });
    expect(cross).toEqual([a]);
    // Unbound, and in system mode without a binding: nothing at all.
    expect(await productOrgs(svc.rt.workerDb)).toEqual([]);
    expect(await withSystem(svc.rt.workerDb, (trx) => productOrgs(trx as Kysely<Database>))).toEqual([]);
    // Nor can it write a row of another organization.
    await expect(
      withOrg(svc.rt.workerDb, a, (trx) =>
        sql`insert into products (organization_id, id, name) values (${b}, 'prd_cross', 'x')`.execute(trx),
      ),
    ).rejects.toThrow(/row-level security/);
  });

  it('the API role setting app.system sees nothing more; only the cross-organization role sees every organization, and only in system mode', async () => {
    const { a, b } = await twoOrganizations();
    expect(await withSystem(svc.rt.db, (trx) => productOrgs(trx as Kysely<Database>))).toEqual([]);
    const bound = await withOrg(svc.rt.db, a, async (trx) => {
      await sql`select set_config('app.system', 'on', true)`.execute(trx);
      return productOrgs(trx as Kysely<Database>);
    });
    expect(bound).toEqual([a]);
    const all = await withSystem(svc.rt.systemDb, (trx) => productOrgs(trx as Kysely<Database>));
    expect(all).toEqual(expect.arrayContaining([a, b]));
    expect(await productOrgs(svc.rt.systemDb)).toEqual([]);
    expect(await withOrg(svc.rt.systemDb, b, (trx) => productOrgs(trx as Kysely<Database>))).toEqual([b]);
  });

  it('the cross-organization role writes only what its sweeps change, and reads the job queue only through its functions', async () => {
    const { a } = await twoOrganizations();
    await expect(
      withSystem(svc.rt.systemDb, (trx) =>
        sql`insert into products (organization_id, id, name) values (${a}, 'prd_sys', 'x')`.execute(trx),
      ),
    ).rejects.toThrow(/permission denied for table products/);
    await expect(
      withSystem(svc.rt.systemDb, (trx) => sql`update api_keys set revoked_at = now() where organization_id = ${a}`.execute(trx)),
    ).rejects.toThrow(/permission denied for table api_keys/);
    await expect(sql`select count(*) from graphile_worker._private_jobs`.execute(svc.rt.systemDb)).rejects.toThrow(
      /permission denied for schema graphile_worker/,
    );
    await expect(sql`select count(*) from graphile_worker._private_jobs`.execute(svc.rt.db)).rejects.toThrow(
      /permission denied for schema graphile_worker/,
    );
    const counts = await sql<{ pending: number }>`select * from job_queue_counts()`.execute(svc.rt.systemDb);
    expect(counts.rows).toHaveLength(1);
  });
});

describe('the sweeps', () => {
  it('every crontab task runs to completion on the roles the worker gives it', async () => {
    await twoOrganizations();
    const worker = await svc.startWorker();
    try {
      const tasks = CRONTAB.trim()
        .split('\n')
        .map((line) => line.trim().split(/\s+/)[5]);
      expect(tasks).toHaveLength(8);
      for (const task of tasks) await worker.addJob(task, {});
      const left = await waitFor(async () => {
        const r = await svc.pool.query<{ task: string; last_error: string | null }>(
          `
          select t.identifier as task, j.last_error from graphile_worker._private_jobs j
          join graphile_worker._private_tasks t on t.id = j.task_id where t.identifier = any($1)`,
          [tasks],
        );
        return r.rows.length === 0 || r.rows.some((j) => j.last_error !== null) ? r.rows : null;
      });
      expect(left).toEqual([]);
    } finally {
      await worker.stop();
    }
  });
});

describe("the roles' passwords", () => {
  it("are derived from the URL's password, one per role, none the URL's, and a URL without a password is refused", () => {
    const url = 'postgres://admin:s3cret@db.internal:5432/outbound?sslmode=require';
    const urls = ([APP_ROLE, WORKER_ROLE, SYSTEM_ROLE] as const).map((r) => new URL(roleUrl(url, r)));
    expect(urls.map((u) => u.username)).toEqual(['outbound_app', 'outbound_worker', 'outbound_system']);
    expect(urls.map((u) => `${u.host}${u.pathname}${u.search}`)).toEqual(Array(3).fill('db.internal:5432/outbound?sslmode=require'));
    const passwords = urls.map((u) => decodeURIComponent(u.password));
    expect(new Set(passwords).size).toBe(3);
    for (const p of passwords) expect(p).not.toContain('s3cret');
    expect(roleUrl(url, APP_ROLE)).toBe(roleUrl(url, APP_ROLE));
    expect(roleUrl(url.replace('s3cret', 'other'), APP_ROLE)).not.toBe(roleUrl(url, APP_ROLE));
    const saved = process.env.PGPASSWORD;
    delete process.env.PGPASSWORD;
    try {
      expect(() => roleUrl('postgres://admin@db.internal/outbound', APP_ROLE)).toThrow(/carries no password/);
    } finally {
      if (saved !== undefined) process.env.PGPASSWORD = saved;
    }
  });
});

describe('a database URL whose user has only CREATEROLE', () => {
  it('migrates, creates the roles, and the service runs on them: requests, the operator API and a sweep', async () => {
    const dir = path.resolve('.test-data', `createrole-${process.pid}-${Date.now()}`);
    const cluster = await startEmbedded(dir, () => {}, true);
    let stop = async () => {};
    try {
      const admin = new pg.Client({ connectionString: cluster.url });
      await admin.connect();
      await admin.query(`CREATE ROLE migrator LOGIN CREATEROLE PASSWORD 'migrator-password'`);
      await admin.query('CREATE DATABASE outbound OWNER migrator');
      await admin.end();
      const u = new URL(cluster.url);
      u.username = 'migrator';
      u.password = 'migrator-password';
      u.pathname = '/outbound';
      const url = u.toString();
      await migrate(url);
      // A second start (another process, a restart) finds everything in place.
      await migrate(url);

      const config = loadConfig({
        ADMIN_TOKEN: 'adm_createrole_0123456789abcdef',
        DATA_DIR: path.join(dir, 'files'),
        ERASURE_HASH_SECRET: 'test-erasure-secret-0123456789abcdef0123',
        LOG_LEVEL: 'silent',
        PORT: '0',
      });
      const rt = openRuntime(config, createLogger('silent'), url, { poolSize: 4 });
      const http = await serveHttp(rt, 0, '127.0.0.1');
      const worker = await runWorker(rt, 2);
      stop = async () => {
        await worker.stop();
        await http.close();
        await rt.close();
      };
      const clients = serviceClients(`http://127.0.0.1:${http.port}`, config.adminToken!);
      const { org, api } = await clients.orgWithKey();
      const me = await api.GET('/me');
      expect(me.data?.organization.id).toBe(org.id);
      await worker.addJob('sweep_org_health', {});
      const owner = new pg.Client({ connectionString: url });
      await owner.connect();
      try {
        // The migrating user is no superuser: it reads across organizations as a member of the cross-organization role.
        await owner.query(`SELECT set_config('app.system', 'on', false)`);
        await waitFor(async () => {
          const r = await owner.query(`select health_checked_at from organizations where id = $1`, [org.id]);
          return r.rows[0]?.health_checked_at !== null;
        });
        const roles = await owner.query<{ rolname: string; rolsuper: boolean }>(
          `select rolname, rolsuper from pg_roles where rolname in ('migrator', 'outbound_app', 'outbound_worker', 'outbound_system') order by 1`,
        );
        expect(roles.rows.every((r) => r.rolsuper === false)).toBe(true);
        const sys = new pg.Client({ connectionString: roleUrl(url, SYSTEM_ROLE) });
        await sys.connect();
        expect((await sys.query('select current_user as u')).rows[0].u).toBe('outbound_system');
        await sys.end();
      } finally {
        await owner.end();
      }
    } finally {
      await stop();
      await cluster.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
