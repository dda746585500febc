// Webhook endpoints and the event catalogue (no delivery here: see delivery.test.ts), and the
// SSRF rules with a service that refuses private targets.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withOrg, withSystem } from '../db/database.js';
import { resolveTarget, UnsafeTargetError } from '../src/net/address.js';
import { emit } from '../src/platform/events.js';
import { EVENT_TYPES, NEVER_EMITTED } from '../src/platform/spec.js';
import { ALL_SCOPES, raw, startService, type TestService, waitFor } from './support/harness.js';
import { type Receiver, startReceiver } from './support/receiver.js';
import { ADDRESS_CASES, urlOf } from './support/ssrf-addresses.js';

const SECRET = /^whs_[0-9a-f]{32}$/;
let svc: TestService;
let strict: TestService;
const receivers: Receiver[] = [];
beforeAll(async () => {
  [svc, strict] = await Promise.all([
    startService({ RATE_LIMIT_PER_MINUTE: '100000' }),
    startService({ RATE_LIMIT_PER_MINUTE: '100000', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false', WEBHOOK_RETRY_DELAYS_SECONDS: '1,1,1,1,1,1' }),
  ]);
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await Promise.all([svc?.close(), strict?.close()]);
});

async function client(s = svc, scopes: readonly string[] = ['webhooks.manage']) {
  const org = await s.newOrg();
  return { org, api: s.api(await org.key(scopes)) };
}

async function endpointRow(id: string) {
  return withSystem(svc.ownerDb, (trx) => trx.selectFrom('webhook_endpoints').selectAll().where('id', '=', id).executeTakeFirstOrThrow());
}

describe('registration', () => {
  it('creates an endpoint (201) with a whs_ secret shown only here, stored encrypted', async () => {
    const { api } = await client();
    const { data, response } = await api.POST('/webhooks', {
      body: { url: 'https://hooks.example.com/a?x=1', eventTypes: ['deal.won', 'contact.erased'], description: 'CRM sync' },
    });
    expect(response.status).toBe(201);
    expect(data).toEqual({
      id: expect.stringMatching(/^whe_/),
      url: 'https://hooks.example.com/a?x=1',
      eventTypes: ['deal.won', 'contact.erased'],
      status: 'active',
      description: 'CRM sync',
      lastDeliveryAt: null,
      consecutiveFailures: 0,
      createdAt: expect.any(String),
      signingSecret: expect.stringMatching(SECRET),
    });
    const row = await endpointRow(data!.id);
    expect(row.secret_ciphertext).not.toContain(data!.signingSecret.slice(4));
    expect(svc.rt.services.secretBox.open(row.secret_ciphertext)).toBe(data!.signingSecret);
    const got = await api.GET('/webhooks/{id}', { params: { path: { id: data!.id } } });
    expect(got.data).not.toHaveProperty('signingSecret');
    expect(JSON.stringify(got.data)).not.toContain(data!.signingSecret);
    const list = await api.GET('/webhooks');
    expect(JSON.stringify(list.data)).not.toContain(data!.signingSecret);
    expect(list.data!.data).toEqual([got.data]);
  });

  it('re-registering the URL of an ACTIVE endpoint answers 200 with it, its eventTypes replaced and its secret', async () => {
    const { api } = await client();
    const url = 'https://hooks.example.com/same';
    const { data: first } = await api.POST('/webhooks', { body: { url, eventTypes: ['deal.won', 'deal.lost'], description: 'keep' } });
    const { data: again, response } = await api.POST('/webhooks', { body: { url, eventTypes: ['contact.deleted'] } });
    expect(response.status).toBe(200);
    expect(again).toMatchObject({
      id: first!.id,
      eventTypes: ['contact.deleted'],
      description: 'keep',
      signingSecret: first!.signingSecret,
    });
    expect(again).not.toHaveProperty('secretRotated');
    const { data: list } = await api.GET('/webhooks');
    expect(list!.data).toHaveLength(1);
  });

  it('re-registration with an unrecoverable stored secret returns a fresh one flagged secretRotated', async () => {
    const { api } = await client();
    const url = 'https://hooks.example.com/lost-key';
    const { data: first } = await api.POST('/webhooks', { body: { url, eventTypes: ['deal.won'] } });
    // As if the encryption key had changed since the secret was stored.
    await withSystem(svc.ownerDb, (trx) =>
      trx.updateTable('webhook_endpoints').set({ secret_ciphertext: 'v1.AAAA.AAAA.AAAA' }).where('id', '=', first!.id).execute(),
    );
    const { data: again, response } = await api.POST('/webhooks', { body: { url, eventTypes: ['deal.won'] } });
    expect(response.status).toBe(200);
    expect(again).toMatchObject({ id: first!.id, secretRotated: true, signingSecret: expect.stringMatching(SECRET) });
    expect(again!.signingSecret).not.toBe(first!.signingSecret);
    expect(svc.rt.services.secretBox.open((await endpointRow(first!.id)).secret_ciphertext)).toBe(again!.signingSecret);
  });

  it('a paused or disabled endpoint with the same URL does not count: a new one is created', async () => {
    const { api } = await client();
    const url = 'https://hooks.example.com/paused';
    const { data: first } = await api.POST('/webhooks', { body: { url, eventTypes: ['deal.won'] } });
    await api.PATCH('/webhooks/{id}', { params: { path: { id: first!.id } }, body: { status: 'paused' } });
    const { data: second, response } = await api.POST('/webhooks', { body: { url, eventTypes: ['deal.won'] } });
    expect(response.status).toBe(201);
    expect(second!.id).not.toBe(first!.id);
    expect(second!.signingSecret).not.toBe(first!.signingSecret);
  });

  it('concurrent registrations of one URL make one endpoint', async () => {
    const { api } = await client();
    const url = 'https://hooks.example.com/race';
    const results = await Promise.all(Array.from({ length: 6 }, () => api.POST('/webhooks', { body: { url, eventTypes: ['deal.won'] } })));
    expect(results.filter((r) => r.response.status === 201)).toHaveLength(1);
    expect(new Set(results.map((r) => r.data!.id)).size).toBe(1);
  });

  it('accepts never-emitted catalogue types; refuses unknown types, bad URLs and unknown fields with 400 and creates nothing', async () => {
    const { api } = await client();
    const ok = await api.POST('/webhooks', { body: { url: 'https://h.example.com/n', eventTypes: ['payment.failed', 'org.created'] } });
    expect(ok.response.status).toBe(201);
    const bad = [
      { url: 'https://h.example.com/x', eventTypes: ['deal.exploded'] },
      { url: 'https://h.example.com/x', eventTypes: [] },
      { url: 'https://h.example.com/x', eventTypes: ['deal.won', 'deal.won'] },
      { url: 'https://h.example.com/x' },
      { eventTypes: ['deal.won'] },
      { url: 'not a url', eventTypes: ['deal.won'] },
      { url: 'ftp://h.example.com/x', eventTypes: ['deal.won'] },
      { url: 'http://', eventTypes: ['deal.won'] },
      { url: `https://h.example.com/${'x'.repeat(2100)}`, eventTypes: ['deal.won'] },
      { url: 'https://h.example.com/x', eventTypes: ['deal.won'], secret: 'mine' },
      { url: 'https://h.example.com/x', eventTypes: ['deal.won'], description: 'd'.repeat(501) },
    ];
    for (const body of bad) {
      const r = await api.POST('/webhooks', { body: body as never });
      expect(r.response.status, JSON.stringify(body)).toBe(400);
      expect(r.error?.type).toMatch(/\/problems\/validation-failed$/);
    }
    const { data } = await api.GET('/webhooks');
    expect(data!.data).toHaveLength(1);
  });

  it('needs webhooks.manage for every webhook operation', async () => {
    const org = await svc.newOrg();
    const key = await org.key(ALL_SCOPES.filter((s) => s !== 'webhooks.manage'));
    const api = svc.api(key);
    const r = await api.GET('/webhooks/events');
    expect(r.response.status).toBe(403);
    expect(r.error?.detail).toContain('webhooks.manage');
    expect((await api.POST('/webhooks', { body: { url: 'https://h.example.com/', eventTypes: ['deal.won'] } })).response.status).toBe(403);
  });
});

describe('reading, changing and deleting', () => {
  it('PATCH changes url, eventTypes, description and status; status active resets consecutiveFailures', async () => {
    const { api } = await client();
    const { data: ep } = await api.POST('/webhooks', {
      body: { url: 'https://h.example.com/p', eventTypes: ['deal.won'], description: 'x' },
    });
    const id = ep!.id;
    const { data: changed } = await api.PATCH('/webhooks/{id}', {
      params: { path: { id } },
      body: { url: 'https://h.example.com/q', eventTypes: ['deal.lost', 'deal.created'], description: null, status: 'paused' },
    });
    expect(changed).toEqual({
      ...ep,
      signingSecret: undefined,
      url: 'https://h.example.com/q',
      eventTypes: ['deal.lost', 'deal.created'],
      description: null,
      status: 'paused',
    });
    await withSystem(svc.ownerDb, (trx) =>
      trx.updateTable('webhook_endpoints').set({ consecutive_failures: 9, status: 'disabled' }).where('id', '=', id).execute(),
    );
    const { data: active } = await api.PATCH('/webhooks/{id}', { params: { path: { id } }, body: { status: 'active' } });
    expect(active).toMatchObject({ status: 'active', consecutiveFailures: 0 });
    // The secret is unchanged by a PATCH.
    expect(svc.rt.services.secretBox.open((await endpointRow(id)).secret_ciphertext)).toBe(ep!.signingSecret);
  });

  it('PATCH refuses an empty body, unknown fields and bad values, changing nothing', async () => {
    const { api } = await client();
    const { data: ep } = await api.POST('/webhooks', { body: { url: 'https://h.example.com/p', eventTypes: ['deal.won'] } });
    for (const body of [{}, { status: 'sleeping' }, { eventTypes: ['nope.nope'] }, { url: 'nope' }, { signingSecret: 'whs_0' }]) {
      const r = await api.PATCH('/webhooks/{id}', { params: { path: { id: ep!.id } }, body: body as never });
      expect(r.response.status, JSON.stringify(body)).toBe(400);
    }
    const { data: same } = await api.GET('/webhooks/{id}', { params: { path: { id: ep!.id } } });
    expect(same).toMatchObject({ url: 'https://h.example.com/p', eventTypes: ['deal.won'], status: 'active' });
  });

  it('rotate-secret returns a new secret once; id, url, subscriptions and history stay', async () => {
    const { api } = await client();
    const { data: ep } = await api.POST('/webhooks', { body: { url: 'https://h.example.com/r', eventTypes: ['deal.won'] } });
    const { data: rotated, response } = await api.POST('/webhooks/{id}/rotate-secret', { params: { path: { id: ep!.id } } });
    expect(response.status).toBe(200);
    expect(rotated).toEqual({ ...ep, signingSecret: expect.stringMatching(SECRET), secretRotated: true });
    expect(rotated!.signingSecret).not.toBe(ep!.signingSecret);
    expect(svc.rt.services.secretBox.open((await endpointRow(ep!.id)).secret_ciphertext)).toBe(rotated!.signingSecret);
  });

  it('DELETE removes the endpoint and its deliveries; a second DELETE is 404', async () => {
    const { org, api } = await client();
    const { data: ep } = await api.POST('/webhooks', { body: { url: 'https://h.example.com/d', eventTypes: ['deal.won'] } });
    await withOrg(svc.rt.db, org.id, (trx) =>
      trx
        .insertInto('webhook_deliveries')
        .values({
          organization_id: org.id,
          id: 'whd_x1',
          webhook_endpoint_id: ep!.id,
          event_id: 'evt_x',
          event_type: 'deal.won',
        })
        .execute(),
    );
    const del = await api.DELETE('/webhooks/{id}', { params: { path: { id: ep!.id } } });
    expect(del.data).toEqual({ id: ep!.id, deleted: true });
    expect((await api.DELETE('/webhooks/{id}', { params: { path: { id: ep!.id } } })).response.status).toBe(404);
    expect((await api.GET('/webhooks/{id}', { params: { path: { id: ep!.id } } })).response.status).toBe(404);
    const left = await withSystem(svc.ownerDb, (trx) =>
      trx.selectFrom('webhook_deliveries').select('id').where('webhook_endpoint_id', '=', ep!.id).execute(),
    );
    expect(left).toEqual([]);
  });

  it('lists endpoints newest first with a cursor', async () => {
    const { api } = await client();
    const ids: string[] = [];
    for (let i = 0; i < 3; i += 1)
      ids.push((await api.POST('/webhooks', { body: { url: `https://h.example.com/${i}`, eventTypes: ['deal.won'] } })).data!.id);
    const p1 = await api.GET('/webhooks', { params: { query: { limit: 2 } } });
    expect(p1.data!.data.map((e) => e.id)).toEqual([ids[2], ids[1]]);
    const p2 = await api.GET('/webhooks', { params: { query: { limit: 2, cursor: p1.data!.nextCursor! } } });
    expect(p2.data).toEqual({ data: [expect.objectContaining({ id: ids[0] })], nextCursor: null });
    expect((await api.GET('/webhooks', { params: { query: { cursor: 'forged' } } })).response.status).toBe(400);
  });

  it("another organization's endpoint and deliveries are unknown ids (404) and change nothing", async () => {
    const a = await client();
    const b = await client();
    const { data: ep } = await a.api.POST('/webhooks', { body: { url: 'https://h.example.com/t', eventTypes: ['deal.won'] } });
    await withOrg(svc.rt.db, a.org.id, (trx) =>
      trx
        .insertInto('webhook_deliveries')
        .values({
          organization_id: a.org.id,
          id: 'whd_t1',
          webhook_endpoint_id: ep!.id,
          event_id: 'evt_t',
          event_type: 'deal.won',
        })
        .execute(),
    );
    const id = ep!.id;
    const path = { id };
    const dpath = { id, deliveryId: 'whd_t1' };
    const statuses = [
      (await b.api.GET('/webhooks/{id}', { params: { path } })).response.status,
      (await b.api.PATCH('/webhooks/{id}', { params: { path }, body: { status: 'paused' } })).response.status,
      (await b.api.POST('/webhooks/{id}/rotate-secret', { params: { path } })).response.status,
      (await b.api.POST('/webhooks/{id}/test-deliver', { params: { path } })).response.status,
      (await b.api.GET('/webhooks/{id}/deliveries', { params: { path } })).response.status,
      (await b.api.GET('/webhooks/{id}/deliveries/{deliveryId}', { params: { path: dpath } })).response.status,
      (await b.api.POST('/webhooks/{id}/deliveries/{deliveryId}/replay', { params: { path: dpath } })).response.status,
      (await b.api.DELETE('/webhooks/{id}', { params: { path } })).response.status,
    ];
    expect(statuses).toEqual([404, 404, 404, 404, 404, 404, 404, 404]);
    expect((await b.api.GET('/webhooks')).data!.data).toEqual([]);
    const { data: still } = await a.api.GET('/webhooks/{id}', { params: { path } });
    expect(still).toMatchObject({ status: 'active' });
    expect((await a.api.GET('/webhooks/{id}/deliveries', { params: { path } })).data!.data).toHaveLength(1);
    // A delivery of another endpoint of the same organization is not found under this one.
    const { data: other } = await a.api.POST('/webhooks', { body: { url: 'https://h.example.com/t2', eventTypes: ['deal.won'] } });
    expect(
      (await a.api.GET('/webhooks/{id}/deliveries/{deliveryId}', { params: { path: { id: other!.id, deliveryId: 'whd_t1' } } })).response
        .status,
    ).toBe(404);
  });
});

describe('event catalogue', () => {
  it('lists the 73 types sorted, flags the 17 never emitted, and carries the envelope version', async () => {
    const { api } = await client();
    const { data } = await api.GET('/webhooks/events');
    expect(data!.apiVersion).toBe('2026-07-21');
    expect(data!.data).toHaveLength(73);
    expect(data!.data.map((t) => t.type)).toEqual([...EVENT_TYPES].sort());
    expect(data!.data.filter((t) => !t.emitted).map((t) => t.type)).toEqual([...NEVER_EMITTED].sort());
    expect(data!.data.find((t) => t.type === 'rule.hot_reply')).toEqual({ type: 'rule.hot_reply', group: 'Custom rules', emitted: true });
    expect(data!.data.find((t) => t.type === 'email.opened')?.group).toBe('Email telemetry');
    expect(data!.data.every((t) => t.group.length > 0)).toBe(true);
  });
});

describe('SSRF protection (private targets refused)', () => {
  // Every refused address of the shared table (test/support/ssrf-addresses.ts), as a URL host,
  // and the spellings only a URL or a name has.
  const refusedAddresses = ADDRESS_CASES.filter((c) => c.reason !== null && urlOf(c.address) !== null);
  const unsafe = [
    'http://127.1.2.3:8080/h',
    'http://localhost/h',
    'http://api.localhost/h',
    'http://172.31.255.255/h',
    'http://100.127.255.254/h',
    'http://2130706433/h',
    'http://0x7f.0.0.1/h',
    'http://[::ffff:169.254.169.254]/h',
    'http://[64:ff9b::169.254.169.254]/h',
    'http://metadata.google.internal/computeMetadata/v1/',
  ];

  it('refuses registration of each unsafe address family with 400 unsafe-webhook-url', async () => {
    const { api } = await client(strict);
    for (const url of unsafe) {
      const r = await api.POST('/webhooks', { body: { url, eventTypes: ['deal.won'] } });
      expect(r.response.status, url).toBe(400);
      expect(r.error?.type, url).toMatch(/\/problems\/unsafe-webhook-url$/);
    }
    for (const c of refusedAddresses) {
      const r = await api.POST('/webhooks', { body: { url: urlOf(c.address)!, eventTypes: ['deal.won'] } });
      expect(r.response.status, c.form).toBe(400);
      expect(r.error?.type, c.form).toMatch(/\/problems\/unsafe-webhook-url$/);
      expect(r.error?.detail, c.form).toContain(` is a ${c.reason} address.`);
    }
    expect((await api.GET('/webhooks')).data!.data).toEqual([]);
  });

  it('accepts public addresses, and refuses a PATCH to an unsafe URL leaving the endpoint unchanged', async () => {
    const { api } = await client(strict);
    const { data: ep, response } = await api.POST('/webhooks', { body: { url: 'https://93.184.215.14/hook', eventTypes: ['deal.won'] } });
    expect(response.status).toBe(201);
    for (const c of ADDRESS_CASES.filter((x) => x.reason === null)) {
      expect((await api.POST('/webhooks', { body: { url: urlOf(c.address)!, eventTypes: ['deal.won'] } })).response.status, c.form).toBe(
        201,
      );
    }
    const r = await api.PATCH('/webhooks/{id}', { params: { path: { id: ep!.id } }, body: { url: 'http://[::ffff:7f00:1]/x' } });
    expect(r.response.status).toBe(400);
    expect(r.error?.type).toMatch(/\/problems\/unsafe-webhook-url$/);
    expect((await api.GET('/webhooks/{id}', { params: { path: { id: ep!.id } } })).data!.url).toBe('https://93.184.215.14/hook');
  });

  it('never connects to an unsafe address at delivery or test delivery, and does not retry it', async () => {
    const rx = await startReceiver();
    receivers.push(rx);
    const { org, api } = await client(strict);
    const { data: ep } = await api.POST('/webhooks', { body: { url: 'https://93.184.215.14/hook', eventTypes: ['deal.won'] } });
    // As if the URL had been stored before the deployment refused private targets.
    await withSystem(strict.ownerDb, (trx) => trx.updateTable('webhook_endpoints').set({ url: rx.url }).where('id', '=', ep!.id).execute());
    const test = await api.POST('/webhooks/{id}/test-deliver', { params: { path: { id: ep!.id } } });
    expect(test.data).toMatchObject({
      delivered: false,
      httpStatus: null,
      errorMessage: expect.stringMatching(/^refused: 127\.0\.0\.1 is a loopback address/),
    });
    await strict.startWorker();
    await withOrg(strict.rt.db, org.id, (trx) => emit(trx, org.id, { type: 'deal.won', resource: { type: 'Deal', id: 'd' }, data: {} }));
    const rows = await waitFor(
      async () => {
        const { data } = await api.GET('/webhooks/{id}/deliveries', { params: { path: { id: ep!.id } } });
        return data!.data[0]?.status === 'failed' ? data!.data : null;
      },
      20_000,
      'the refused delivery',
    );
    expect(rows).toMatchObject([{ attempt: 1, httpStatus: null, errorMessage: expect.stringMatching(/^refused: /) }]);
    expect(rx.received).toHaveLength(0);
  });

  it('resolves names and refuses when any address is unsafe; allows everything when private targets are allowed', async () => {
    await expect(resolveTarget(new URL('http://localhost:1/'), false, 2000)).rejects.toBeInstanceOf(UnsafeTargetError);
    await expect(resolveTarget(new URL('http://[::1]:1/'), false, 2000)).rejects.toBeInstanceOf(UnsafeTargetError);
    const ok = await resolveTarget(new URL('http://127.0.0.1:1/'), true, 2000);
    expect(ok.addresses).toEqual([{ address: '127.0.0.1', family: 4 }]);
  });

  it('raw requests with a non-JSON body are refused before any check', async () => {
    const { org } = await client(strict);
    const key = await org.key(['webhooks.manage']);
    const r = await raw(strict.baseUrl, 'POST', '/api/v1/webhooks', {
      key,
      body: '{"url":',
      headers: { 'content-type': 'application/json' },
    });
    expect(r.status).toBe(400);
    expect(String(r.body.type)).toMatch(/malformed-json$/);
  });
});
