// The database roles the service's pools log in as (db/migrations/0021_least_privilege.sql): none is
// a superuser, none bypasses row-level security, none owns a tenant table. Their passwords are not
// stored anywhere: each is derived from the password of the database URL (DATABASE_URL, or the
// embedded cluster's generated DATA_DIR/pg-password), so every process that can migrate the database
// can also log in as them, and nothing else can. migrate() sets a role's password when logging in
// with the derived one fails (a new role, or a changed URL password).
import crypto from 'node:crypto';
import pg from 'pg';

/** The API: keyed requests, public routes and the operator's work on one organization, each bound to it (app.org_id). */
export const APP_ROLE = 'outbound_app';
/** graphile-worker and the jobs it runs, each bound to its organization; owns the job queue's schema. */
export const WORKER_ROLE = 'outbound_worker';
/**
 * The only role whose transactions may see every organization (app.system = 'on'): the sweeps,
 * the operator's cross-organization reads and the lookups made before an organization is known.
 */
export const SYSTEM_ROLE = 'outbound_system';
export const LOGIN_ROLES = [APP_ROLE, WORKER_ROLE, SYSTEM_ROLE] as const;
export type LoginRole = (typeof LOGIN_ROLES)[number];

/** The password pg would send for the URL: the URL's own, else PGPASSWORD. */
function urlPassword(url: string): string {
  const u = new URL(url);
  const own = u.password ? decodeURIComponent(u.password) : '';
  const password = own || process.env.PGPASSWORD || '';
  if (!password) {
    throw new Error(
      `the database URL for user "${decodeURIComponent(u.username)}" carries no password; the service derives the passwords of its database roles from it`,
    );
  }
  return password;
}

/** The role's password: an HMAC of the role name keyed by the URL's password (not reversible to it). */
export function rolePassword(url: string, role: LoginRole): string {
  return crypto.createHmac('sha256', urlPassword(url)).update(`outbound database role\0${role}`).digest('base64url');
}

/** The URL with the role's name and password in place of the URL's user (host, database and parameters kept). */
export function roleUrl(url: string, role: LoginRole): string {
  const u = new URL(url);
  u.username = role;
  u.password = encodeURIComponent(rolePassword(url, role));
  return u.toString();
}

/**
 * A SCRAM-SHA-256 verifier of the password (RFC 5802, as Postgres stores it), so that ALTER ROLE
 * never carries the password itself into a server log.
 */
function scramVerifier(password: string): string {
  const salt = crypto.randomBytes(16);
  const iterations = 4096;
  const salted = crypto.pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const hmac = (key: Buffer, text: string) => crypto.createHmac('sha256', key).update(text).digest();
  const storedKey = crypto.createHash('sha256').update(hmac(salted, 'Client Key')).digest();
  const serverKey = hmac(salted, 'Server Key');
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

async function canLogIn(url: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: url, application_name: 'outbound-migrate' });
  c.on('error', () => {});
  try {
    await c.connect();
    return true;
  } catch (e) {
    // 28P01: wrong password (or none set yet); 28000: no login allowed (a NOLOGIN role). Anything
    // else (no pg_hba.conf entry for the role, the server gone) is not fixed by setting a password.
    const code = (e as { code?: string }).code;
    if (code === '28P01' || code === '28000') return false;
    throw new Error(`cannot log in as database role ${new URL(url).username}: ${(e as Error).message}`);
  } finally {
    await c.end().catch(() => {});
  }
}

/**
 * Makes each role able to log in with its derived password, on the migration connection `admin`
 * (whose user created the roles). A role that already can is left alone: several processes, and
 * several databases of one cluster, start without rewriting the cluster-wide role each time.
 */
export async function ensureRoleLogins(url: string, admin: pg.ClientBase): Promise<void> {
  for (const role of LOGIN_ROLES) {
    const target = roleUrl(url, role);
    if (await canLogIn(target)) continue;
    await admin.query(`ALTER ROLE ${role} LOGIN PASSWORD '${scramVerifier(rolePassword(url, role))}'`);
    if (!(await canLogIn(target))) {
      throw new Error(`database role ${role} cannot log in with its password: allow password logins for it (pg_hba.conf)`);
    }
  }
}
