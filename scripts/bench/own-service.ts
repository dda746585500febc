// For bench areas that need a database and service processes of their own (drafts, sending), so
// no other worker takes their jobs: a fresh database in the bench cluster, a service process on
// it, and the small HTTP helper their setup uses.
import type { ChildProcess } from 'node:child_process';
import pg from 'pg';
import { migrate } from '../../db/database.js';
import { freePort } from '../../db/embedded.js';
import type { BenchContext } from './types.js';

/** The listener's abuse bounds (docs/configuration.md) lifted for a bench whose one client on loopback sends every message. */
export const UNBOUNDED_SENDER = {
  INBOUND_MAX_CONNECTIONS_PER_ADDRESS: '1000000',
  INBOUND_MAX_MESSAGES_PER_CONNECTION: '1000000',
  INBOUND_MAX_RECIPIENTS_PER_CONNECTION: '1000000',
  INBOUND_MAX_MESSAGES_PER_ADDRESS_PER_MINUTE: '10000000',
  INBOUND_MAX_RECIPIENTS_PER_ADDRESS_PER_MINUTE: '10000000',
};

/** Drops and creates database `name` in the bench cluster, migrated; returns its URL. */
export async function ownDatabase(ctx: BenchContext, name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: ctx.serviceEnv.DATABASE_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(ctx.serviceEnv.DATABASE_URL);
  u.pathname = `/${name}`;
  await migrate(u.toString());
  return u.toString();
}

/** A service process (as `npm start` runs it) on the database at `url`; resolves once it is healthy. */
export async function startOwnService(
  ctx: BenchContext,
  url: string,
  env: Record<string, string> = {},
): Promise<{ origin: string; child: ChildProcess }> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const child = ctx.startProcess('src/boot/main.ts', {
    ...ctx.serviceEnv,
    DATABASE_URL: url,
    PORT: String(port),
    PUBLIC_BASE_URL: origin,
    ...env,
  });
  for (let i = 0; ; i += 1) {
    try {
      if ((await fetch(`${origin}/healthz`)).ok) break;
    } catch {
      /* starting */
    }
    if (i > 300 || child.exitCode !== null) throw new Error('bench service did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
  return { origin, child };
}

export async function stopProcess(child: ChildProcess): Promise<void> {
  child.kill('SIGTERM');
  await new Promise<void>((r) => {
    if (child.exitCode !== null) r();
    else child.once('exit', () => r());
  });
}

/** One JSON call; a status of 300 or more throws. */
export async function call(origin: string, token: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${origin}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status >= 300) throw new Error(`${method} ${path} -> ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

/**
 * `rows` pending action items of the owner, newest first a second apart, each on the contact
 * `'con_' || substr(md5(contactSeed || g), 1, 24)` (the seeding of the contacts they refer to).
 */
export async function seedActionItems(
  client: pg.PoolClient,
  orgId: string,
  ownerId: string,
  rows: number,
  contactSeed: string,
): Promise<void> {
  await client.query(
    `
    INSERT INTO action_items (organization_id, id, action_type, title, description, priority, status, entity_type, entity_id,
                              sales_person_id, ai_generated, expected_impact_cents, created_at, updated_at)
    SELECT $1, 'act_' || substr(md5('a' || g), 1, 24), 'follow_up_reply', 'Reply to Person ' || g, 'They asked about pricing.',
           (ARRAY['urgent', 'high', 'medium', 'low'])[1 + g % 4], 'pending', 'Contact', 'con_' || substr(md5($4::text || g), 1, 24),
           $2, true, 250000, date_trunc('milliseconds', now() - g * interval '1 second'), date_trunc('milliseconds', now() - g * interval '1 second')
    FROM generate_series(1, $3::int) g`,
    [orgId, ownerId, rows, contactSeed],
  );
}
