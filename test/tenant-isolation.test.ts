// Row-level security is applied by one function at migration time (db/migrations/0020, as 0021
// redefined it): a table given to apply_tenant_isolation has row-level security enabled and forced,
// one tenant_isolation policy and one cross_organization policy (outbound_system's only), however
// often it is applied, and the application role then reads and writes only the rows of the
// organization its transaction is bound to, system mode or not.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APP_ROLE } from '../db/database.js';
import { createTestDatabase } from './support/harness.js';

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let owner: pg.Client;

beforeAll(async () => {
  db = await createTestDatabase();
  owner = new pg.Client({ connectionString: db.url });
  await owner.connect();
});
afterAll(async () => {
  await owner?.end();
  await db?.drop();
});

describe('apply_tenant_isolation', () => {
  it('enables, forces and creates its two policies, idempotently, and the application role then sees only its organization', async () => {
    await owner.query('CREATE TABLE isolation_probe (organization_id text NOT NULL, id text NOT NULL, PRIMARY KEY (organization_id, id))');
    await owner.query(`GRANT SELECT, INSERT ON isolation_probe TO ${APP_ROLE}`);
    await owner.query(`SELECT apply_tenant_isolation('isolation_probe')`);
    await owner.query(`SELECT apply_tenant_isolation('isolation_probe')`);
    const state = await owner.query(`
      SELECT c.relrowsecurity, c.relforcerowsecurity,
             (SELECT count(*)::int FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = 'tenant_isolation') AS policies,
             (SELECT array_agg(r.rolname::text) FROM pg_policy p CROSS JOIN unnest(p.polroles) AS pr(oid) JOIN pg_roles r ON r.oid = pr.oid
              WHERE p.polrelid = c.oid AND p.polname = 'cross_organization') AS cross_roles
      FROM pg_class c WHERE c.oid = 'isolation_probe'::regclass`);
    expect(state.rows[0]).toEqual({ relrowsecurity: true, relforcerowsecurity: true, policies: 1, cross_roles: ['outbound_system'] });

    // The owner too is held to the policy (forced): system mode to seed rows of two organizations.
    await owner.query('BEGIN');
    await owner.query(`SELECT set_config('app.system', 'on', true)`);
    await owner.query(`INSERT INTO isolation_probe VALUES ('org_a', 'x'), ('org_b', 'y')`);
    await owner.query('COMMIT');
    await owner.query('BEGIN');
    await owner.query(`SET LOCAL ROLE ${APP_ROLE}`);
    await owner.query(`SELECT set_config('app.org_id', 'org_a', true)`);
    // System mode is not the application role's: it changes nothing for it.
    await owner.query(`SELECT set_config('app.system', 'on', true)`);
    const seen = await owner.query('SELECT organization_id, id FROM isolation_probe ORDER BY id');
    const foreign = await owner.query(`INSERT INTO isolation_probe VALUES ('org_b', 'z')`).catch((e: Error) => e);
    await owner.query('ROLLBACK');
    expect(seen.rows).toEqual([{ organization_id: 'org_a', id: 'x' }]);
    expect(foreign).toBeInstanceOf(Error);
    expect(String((foreign as Error).message)).toMatch(/row-level security/);
  });

  it('changes nothing when the application role calls it: the role owns no table', async () => {
    await owner.query('BEGIN');
    await owner.query(`SET LOCAL ROLE ${APP_ROLE}`);
    const refused = await owner.query(`SELECT apply_tenant_isolation('organizations')`).catch((e: Error) => e);
    await owner.query('ROLLBACK');
    expect(String((refused as Error).message)).toMatch(/must be owner/);
  });
});
