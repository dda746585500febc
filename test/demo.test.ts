// npm run demo as an operator runs it: a child process against a running service (--url and
// ADMIN_TOKEN), serving the bundled sample site on a free loopback port the service is configured
// to research, and receiving webhooks it verifies. Checks the output and the data it left; and
// that a failing first step stops the demo with its message and leaves nothing behind.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { system } from './crm-support.js';
import { raw, startService, type TestService } from './support/harness.js';

let svc: TestService;
let sitePort: number;

/**
 * A free port below the system's ephemeral range, the range bind(0) draws from: the demo listens
 * on it only later, and in between no other test's listener (they all take port 0) can be given it.
 */
async function freePort(): Promise<number> {
  let low = 32768;
  try {
    low = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || low;
  } catch {
    /* not Linux */
  }
  for (;;) {
    const port = 10_000 + Math.floor(Math.random() * (low - 10_000));
    const s = net.createServer();
    const ok = await new Promise<boolean>((r) => {
      s.once('error', () => r(false));
      s.listen(port, '127.0.0.1', () => r(true));
    });
    if (ok) {
      await new Promise((r) => s.close(r));
      return port;
    }
  }
}

beforeAll(async () => {
  sitePort = await freePort();
  svc = await startService({
    RESEARCH_SITE_URL_TEMPLATE: `http://127.0.0.1:${sitePort}/sites/{domain}`,
    RESEARCH_ALLOWED_TARGETS: `127.0.0.1:${sitePort}`,
    RATE_LIMIT_PER_MINUTE: '100000',
  });
  await svc.startWorker();
});
afterAll(async () => {
  await svc?.close();
});

function runDemo(env: Record<string, string>): Promise<{ code: number | null; out: string; err: string }> {
  const root = path.resolve(import.meta.dirname, '..');
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/demo.ts', '--url', svc.baseUrl], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', DEMO_SITE_PORT: String(sitePort), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      err += d;
    });
    child.on('close', (code) => resolve({ code, out, err }));
  });
}

const orgCount = async () =>
  (await system(svc, (trx) => sql<{ n: number }>`SELECT count(*)::int AS n FROM organizations`.execute(trx))).rows[0].n;

describe('npm run demo', () => {
  it('stops at the first failing step with its message, creating nothing', async () => {
    const before = await orgCount();
    const r = await runDemo({ ADMIN_TOKEN: 'not-the-operator-token-0123' });
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^✗ organization created failed: POST \/organizations answered 401: Send the operator token/m);
    expect(r.out).not.toContain('✓');
    expect(await orgCount()).toBe(before);
    const none = await runDemo({});
    expect(none.code).toBe(1);
    expect(none.err).toContain('ADMIN_TOKEN must be set');
  });

  it('creates an organization, an OWNER key and sample data, verifies every webhook delivery and prints the key and three curl commands', async () => {
    const r = await runDemo({ ADMIN_TOKEN: svc.config.adminToken! });
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    for (const line of [
      '✓ organization created',
      '✓ OWNER API key created (attributed to the owner)',
      '✓ research of both companies from the sample site',
      '✓ the owner named Alex Morgan (Account Executive), with a mailbox in that name',
      '✓ drafts written by the fallback provider',
      '✓ 3 deals on stages',
      '✓ webhook deliveries verified',
    ])
      expect(r.out).toContain(line);
    const key = /Your API key \(OWNER\):\n {2}(obk_live_[0-9a-f]{32})\n/.exec(r.out)?.[1];
    expect(key).toBeDefined();
    const curls = r.out.split('\n').filter((l) => l.trim().startsWith('curl '));
    expect(curls).toHaveLength(3);
    for (const c of curls) expect(c).toContain(`Authorization: Bearer ${key}`);
    expect(r.out).not.toContain('NOT verified');
    // The first contact's three drafts are printed, signed by the named owner's mailbox.
    for (const n of [1, 2, 3]) expect(r.out).toContain(`  Step ${n} to Maria Jansen: A quick idea for Northwind Robotics`);
    expect(r.out).toContain('    Best regards,\n    Alex Morgan\n    Account Executive\n');

    // The key works, is the owner's, and sees what the demo made.
    const me = await raw(svc.baseUrl, 'GET', '/api/v1/me', { key });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({
      apiKey: { role: 'OWNER', name: 'demo' },
      organization: { name: expect.stringMatching(/^Harborline \(demo [0-9a-f]{6}\)$/), plan: 'growth' },
    });
    const orgId = (me.body.organization as { id: string }).id;
    const state = await system(svc, async (trx) => ({
      owner: await trx
        .selectFrom('api_keys as k')
        .innerJoin('users as u', (j) => j.onRef('u.organization_id', '=', 'k.organization_id').onRef('u.id', '=', 'k.user_id'))
        .select(['u.role'])
        .where('k.organization_id', '=', orgId)
        .execute(),
      lists: await trx.selectFrom('contact_lists').select('name').where('organization_id', '=', orgId).execute(),
      companies: await trx
        .selectFrom('companies')
        .select(['domain_normalized', 'research_updated_at', 'sources_count'])
        .where('organization_id', '=', orgId)
        .execute(),
      contacts: await trx.selectFrom('contacts').select(['company_id', 'list_id']).where('organization_id', '=', orgId).execute(),
      drafts: await trx.selectFrom('drafts').select(['provider', 'status']).where('organization_id', '=', orgId).execute(),
      deals: (
        await sql<{
          slug: string;
        }>`SELECT s.slug FROM deals d JOIN deal_stages s ON s.organization_id = d.organization_id AND s.id = d.stage_id WHERE d.organization_id = ${orgId} ORDER BY s.sort_order`.execute(
          trx,
        )
      ).rows,
      deliveries: await trx
        .selectFrom('webhook_deliveries')
        .select(['status', 'event_type'])
        .where('organization_id', '=', orgId)
        .execute(),
    }));
    expect(state.owner).toEqual([{ role: 'OWNER' }]);
    expect(state.lists.map((l) => l.name).sort()).toEqual(['SaaS finance', 'Warehouse automation']);
    expect(state.companies.map((c) => c.domain_normalized).sort()).toEqual(['bluepeak-analytics.example', 'northwind-robotics.example']);
    for (const c of state.companies) expect(c.research_updated_at).not.toBeNull();
    expect(state.contacts).toHaveLength(6);
    for (const c of state.contacts) {
      expect(c.company_id).not.toBeNull();
      expect(c.list_id).not.toBeNull();
    }
    expect(state.drafts).toHaveLength(15); // 5 sequences of the built-in sequence's 3 steps
    expect(state.drafts.every((d) => d.provider === 'fallback')).toBe(true);
    expect(state.deals.map((d) => d.slug)).toEqual(['qualification', 'proposal', 'negotiation']);
    // One verified line per delivery, every delivery succeeded: two research completions, three deals created, three stage changes.
    expect(state.deliveries.every((d) => d.status === 'succeeded')).toBe(true);
    expect(state.deliveries.map((d) => d.event_type).sort()).toEqual([
      'company.research_completed',
      'company.research_completed',
      'deal.created',
      'deal.created',
      'deal.created',
      'deal.stage_changed',
      'deal.stage_changed',
      'deal.stage_changed',
    ]);
    expect(r.out.split('\n').filter((l) => /^ {2}webhook: \S+ evt_\w+ verified$/.test(l))).toHaveLength(state.deliveries.length);
  });
});
