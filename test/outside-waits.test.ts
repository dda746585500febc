// No outside I/O inside a transaction: operations that wait on the outside world (a test delivery
// to a receiver that never answers, an SMTP handshake with a server that never greets, a research
// crawl of a site that never answers, DNS that answers slowly at webhook registration) hold no
// pooled connection and no transaction while they wait, so other tenants are answered at once.
// The harness's request pool has 10 connections; each case keeps several times that many waits
// in flight.

import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { Lookup } from '../src/net/address.js';
import { startService, type TestService, waitFor } from './support/harness.js';
import { type SilentServer, startSilentServer } from './support/receiver.js';

const opened: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((o) => o.close()));
});

async function service(env: Record<string, string>): Promise<TestService> {
  const svc = await startService({ RATE_LIMIT_PER_MINUTE: '100000', ...env });
  opened.push(svc);
  return svc;
}

async function silentServer(): Promise<SilentServer> {
  const s = await startSilentServer();
  opened.unshift(s); // closed before the service, so the waits it holds end first
  return s;
}

/** Connections of the service's database left idle inside a transaction for more than half a second. */
async function idleInTransaction(svc: TestService): Promise<string[]> {
  const r = await svc.pool.query<{ application_name: string; query: string }>(
    `SELECT application_name, query FROM pg_stat_activity
     WHERE datname = current_database() AND state LIKE 'idle in transaction%'
       AND clock_timestamp() - state_change > interval '500 milliseconds'`,
  );
  return r.rows.map((x) => `${x.application_name}: ${x.query}`);
}

/**
 * Another tenant's read, list and write, answered while the waits go on: each within `withinMs`,
 * none 5xx; and no connection idle in a transaction, checked every 100 ms meanwhile.
 */
async function otherTenantIsServed(svc: TestService, withinMs: number): Promise<void> {
  const { api } = await svc.orgWithKey();
  const idle: string[] = [];
  let checking = true;
  const watch = (async () => {
    while (checking) {
      idle.push(...(await idleInTransaction(svc)));
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  try {
    for (let round = 0; round < 3; round += 1) {
      const t0 = Date.now();
      let timer: NodeJS.Timeout | undefined;
      const [me, lists, created] = await Promise.race([
        Promise.all([api.GET('/me'), api.GET('/lists'), api.POST('/lists', { body: { name: `During the wait ${round}` } })]),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`another tenant not answered within ${4 * withinMs} ms`)), 4 * withinMs);
        }),
      ]).finally(() => clearTimeout(timer));
      const took = Date.now() - t0;
      expect([me.response.status, lists.response.status, created.response.status]).toEqual([200, 200, 201]);
      expect(took, 'answered while the waits go on').toBeLessThan(withinMs);
      await new Promise((r) => setTimeout(r, 300));
    }
  } finally {
    checking = false;
    await watch;
  }
  expect(idle, 'connections idle in transaction').toEqual([]);
}

describe('waits on the outside world hold no connection', () => {
  it('50 test deliveries to a receiver that never answers, SMTP handshakes and research crawls of silent servers leave other tenants served, with no connection idle in transaction', async () => {
    const silent = await silentServer();
    const svc = await service({
      WEBHOOK_TIMEOUT_MS: '8000',
      RESEARCH_SITE_URL_TEMPLATE: `http://127.0.0.1:${silent.port}/{domain}`,
      RESEARCH_ALLOW_PRIVATE_TARGETS: 'true',
      RESEARCH_REQUEST_TIMEOUT_MS: '8000',
    });
    const attackers = await Promise.all(
      Array.from({ length: 5 }, async (_, i) => {
        const { org, api } = await svc.orgWithKey();
        const ep = await api.POST('/webhooks', { body: { url: `http://127.0.0.1:${silent.port}/hook`, eventTypes: ['deal.won'] } });
        const company = await api.POST('/companies', { body: { domain: `silent-${i}-${org.id.slice(-6)}.example`, name: `Silent ${i}` } });
        return { org, api, endpointId: ep.data!.id, companyId: company.data!.id };
      }),
    );
    const started = Date.now();
    let settled = 0;
    const track = <T>(p: Promise<T>) =>
      p.finally(() => {
        settled += 1;
      });
    const tests = Array.from({ length: 50 }, (_, i) => {
      const a = attackers[i % attackers.length];
      return track(a.api.POST('/webhooks/{id}/test-deliver', { params: { path: { id: a.endpointId } } }));
    });
    const mailboxes = attackers.map((a) =>
      track(
        svc.admin.POST('/organizations/{orgId}/mailboxes', {
          params: { path: { orgId: a.org.id } },
          body: { email: `rep@${a.org.id.slice(-6)}.silent.test`, smtpUrl: `smtp://127.0.0.1:${silent.port}` },
        }),
      ),
    );
    const research = attackers.map((a) => track(a.api.POST('/companies/{id}/research', { params: { path: { id: a.companyId } } })));

    // As many waits as the request pool has connections, and more, are under way.
    await waitFor(() => silent.accepted() >= 15, 6000, 'waits connected to the silent server');
    await otherTenantIsServed(svc, 1500);
    // Every one of them is waiting on the silent server at once: none queued for a connection.
    await waitFor(() => silent.accepted() >= 60, 2000, 'all 60 waits connected to the silent server');
    expect(settled, 'every wait still going on').toBe(0);
    expect(Date.now() - started).toBeLessThan(8000);

    const answered = await Promise.all(tests);
    for (const t of answered) {
      expect(t.response.status).toBe(200);
      expect(t.data).toMatchObject({ delivered: false, httpStatus: null, errorMessage: 'timeout: no answer within 8000 ms' });
    }
    for (const m of await Promise.all(mailboxes)) expect(m.data).toMatchObject({ status: 'failed', statusReason: expect.any(String) });
    for (const r of await Promise.all(research)) expect(r.response.status).toBeLessThan(500);
  });

  it('webhook registrations and URL changes waiting on slow DNS leave other tenants served, with no connection idle in transaction', async () => {
    const svc = await service({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
    let lookups = 0;
    const slow: Lookup = async () => {
      lookups += 1;
      await new Promise((r) => setTimeout(r, 2500));
      return [{ address: '93.184.215.14', family: 4 }];
    };
    svc.rt.services.lookup = slow;
    const owners = await Promise.all(Array.from({ length: 4 }, () => svc.orgWithKey()));
    const existing = await Promise.all(
      owners.map((o) => o.api.POST('/webhooks', { body: { url: 'https://93.184.215.14/hook', eventTypes: ['deal.won'] } })),
    );
    const registrations = Array.from({ length: 24 }, (_, i) =>
      owners[i % owners.length].api.POST('/webhooks', { body: { url: `https://slow-${i}.example.test/hook`, eventTypes: ['deal.won'] } }),
    );
    const changes = owners.map((o, i) =>
      o.api.PATCH('/webhooks/{id}', {
        params: { path: { id: existing[i].data!.id } },
        body: { url: `https://moved-${i}.example.test/hook` },
      }),
    );
    await waitFor(() => lookups >= 10, 4000, 'registrations waiting on DNS');
    await otherTenantIsServed(svc, 1500);
    expect(lookups, 'every registration and change waited on DNS at once').toBe(28);
    for (const r of await Promise.all(registrations)) expect(r.response.status).toBe(201);
    for (const [i, r] of (await Promise.all(changes)).entries())
      expect(r.data).toMatchObject({ url: `https://moved-${i}.example.test/hook` });
  });

  it('request bodies that arrive slowly hold no connection: other tenants are served while 30 keyed requests wait for theirs', async () => {
    const svc = await service({});
    const { port } = new URL(svc.baseUrl);
    const slowKeys = await Promise.all(Array.from({ length: 3 }, () => svc.orgWithKey().then((o) => o.key)));
    // Each client sends its headers and the first bytes of a body, then nothing more.
    const sockets = await Promise.all(
      Array.from(
        { length: 30 },
        (_, i) =>
          new Promise<net.Socket>((resolve, reject) => {
            const s = net.connect(Number(port), '127.0.0.1', () => {
              s.write(
                `POST /api/v1/lists HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${slowKeys[i % 3]}\r\n` +
                  'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"name":',
              );
              resolve(s);
            });
            s.on('error', reject);
          }),
      ),
    );
    const answered: string[] = [];
    for (const s of sockets) s.on('data', (d) => answered.push(d.toString()));
    opened.unshift({
      close: async () => {
        for (const s of sockets) s.destroy();
      },
    });
    await new Promise((r) => setTimeout(r, 300));
    await otherTenantIsServed(svc, 1500);
    expect(answered, 'the slow requests are still waiting for their bodies').toEqual([]);
  });
});
