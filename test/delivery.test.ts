// Webhook delivery end to end: real receivers on loopback, the worker in-process, one-second
// retry delays, a one-second attempt timeout and a low disable threshold.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withOrg, withSystem } from '../db/database.js';
import { emit } from '../src/platform/events.js';
import { fanOut } from '../src/webhooks/delivery.js';
import { verifySignature } from '../src/webhooks/signing.js';
import { startService, type TestService, waitFor } from './support/harness.js';
import { type Receiver, type Respond, startReceiver } from './support/receiver.js';

let svc: TestService;
const receivers: Receiver[] = [];
beforeAll(async () => {
  svc = await startService({
    WEBHOOK_RETRY_DELAYS_SECONDS: '1,1,1,1,1,1',
    WEBHOOK_TIMEOUT_MS: '1000',
    WEBHOOK_DISABLE_AFTER_FAILURES: '5',
    RATE_LIMIT_PER_MINUTE: '100000',
  });
  await svc.startWorker();
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await svc?.close();
});

async function receiver(respond?: Respond): Promise<Receiver> {
  const rx = await startReceiver(respond);
  receivers.push(rx);
  return rx;
}

async function setup(respond?: Respond, eventTypes: string[] = ['deal.won']) {
  const org = await svc.newOrg();
  const key = await org.key(['webhooks.manage', 'events.read']);
  const api = svc.api(key);
  const rx = await receiver(respond);
  const { data: ep } = await api.POST('/webhooks', { body: { url: rx.url, eventTypes: eventTypes as never } });
  return { org, api, rx, ep: ep!, key };
}

/** Emits an event the way every handler does (the same emit, in a transaction of the organization). */
async function emitEvent(orgId: string, type = 'deal.won', data: Record<string, unknown> = { dealId: 'deal_1', dealName: 'Acme' }) {
  return withOrg(svc.rt.db, orgId, (trx) => emit(trx, orgId, { type, resource: { type: 'Deal', id: 'deal_1' }, data }));
}

async function deliveries(api: ReturnType<TestService['api']>, endpointId: string) {
  const { data, response } = await api.GET('/webhooks/{id}/deliveries', { params: { path: { id: endpointId } } });
  expect(response.status).toBe(200);
  return data!.data;
}

async function waitDeliveries(
  api: ReturnType<TestService['api']>,
  endpointId: string,
  pred: (rows: Awaited<ReturnType<typeof deliveries>>) => boolean,
  what = 'delivery rows',
) {
  return waitFor(
    async () => {
      const rows = await deliveries(api, endpointId);
      return pred(rows) ? rows : null;
    },
    20_000,
    what,
  );
}

/** Moves the claims of an event's deliveries back in time (time passing for them). */
async function ageClaims(s: TestService, eventId: string, by: string) {
  await withSystem(s.ownerDb, (trx) =>
    sql`UPDATE webhook_deliveries SET claimed_at = claimed_at - ${by}::interval WHERE event_id = ${eventId} AND claimed_at IS NOT NULL`.execute(
      trx,
    ),
  );
}

/** Deliver jobs still queued for a delivery (the proof that no further attempt will come). */
async function queuedAttempts(deliveryId: string): Promise<number> {
  const r = await svc.pool.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE payload->>'deliveryId' = $1`, [
    deliveryId,
  ]);
  return r.rows[0].n;
}

describe('delivery format', () => {
  it('POSTs the envelope as application/json, signed over the raw body bytes', async () => {
    const { org, api, rx, ep } = await setup();
    const eventId = await emitEvent(org.id, 'deal.won', { dealId: 'deal_1', dealName: 'Zoë & Co — “quoted”' });
    const [req] = await rx.waitFor();
    expect(req.url).toBe('/hook');
    expect(req.headers['content-type']).toBe('application/json');
    const sig = String(req.headers['x-outbound-signature']);
    expect(sig).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifySignature(sig, req.raw, ep.signingSecret)).toBe(true);
    // The signature covers the bytes as sent: a re-serialization with other spacing does not verify.
    expect(verifySignature(sig, Buffer.from(JSON.stringify(req.body, null, 1)), ep.signingSecret)).toBe(false);
    expect(req.body).toEqual({
      apiVersion: '2026-07-21',
      id: eventId,
      type: 'deal.won',
      createdAt: expect.any(String),
      organizationId: org.id,
      data: { dealId: 'deal_1', dealName: 'Zoë & Co — “quoted”' },
      resource: { type: 'Deal', id: 'deal_1' },
    });
    // The same envelope as the event log.
    const log = await api.GET('/events', { params: { query: { type: 'deal.won' } } });
    expect(log.data!.data[0]).toEqual(req.body);
    const rows = await waitDeliveries(api, ep.id, (rs) => rs[0]?.status === 'succeeded');
    expect(rows).toEqual([
      {
        id: expect.stringMatching(/^whd_/),
        webhookEndpointId: ep.id,
        eventId,
        eventType: 'deal.won',
        status: 'succeeded',
        attempt: 1,
        httpStatus: 200,
        errorMessage: null,
        deliveredAt: expect.any(String),
        scheduledAt: expect.any(String),
        createdAt: expect.any(String),
      },
    ]);
    const { data: after } = await api.GET('/webhooks/{id}', { params: { path: { id: ep.id } } });
    expect(after!.lastDeliveryAt).not.toBeNull();
    expect(after!.consecutiveFailures).toBe(0);
  });

  it('fans one event out to every active subscribed endpoint, with one envelope id, and to no other', async () => {
    const { org, api, rx } = await setup(undefined, ['deal.won', 'deal.lost']);
    const rx2 = await receiver();
    const other = await receiver();
    const paused = await receiver();
    await api.POST('/webhooks', { body: { url: rx2.url, eventTypes: ['deal.won'] } });
    await api.POST('/webhooks', { body: { url: other.url, eventTypes: ['deal.lost'] } });
    const { data: p } = await api.POST('/webhooks', { body: { url: paused.url, eventTypes: ['deal.won'] } });
    await api.PATCH('/webhooks/{id}', { params: { path: { id: p!.id } }, body: { status: 'paused' } });
    const eventId = await emitEvent(org.id);
    const [a] = await rx.waitFor();
    const [b] = await rx2.waitFor();
    expect(a.body!.id).toBe(eventId);
    expect(b.body!.id).toBe(eventId);
    const rows = await withSystem(svc.ownerDb, (trx) =>
      trx.selectFrom('webhook_deliveries').selectAll().where('event_id', '=', eventId).execute(),
    );
    expect(rows).toHaveLength(2);
    expect(other.received).toHaveLength(0);
    expect(paused.received).toHaveLength(0);
  });

  it('a repeated fan-out of the same event creates no second row and sends nothing again', async () => {
    const { org, api, rx, ep } = await setup();
    const eventId = await emitEvent(org.id);
    await waitDeliveries(api, ep.id, (rs) => rs[0]?.status === 'succeeded');
    await fanOut({ db: svc.rt.db, config: svc.rt.config, services: svc.rt.services, log: svc.rt.log }, org.id, eventId);
    expect(await deliveries(api, ep.id)).toHaveLength(1);
    expect(rx.received).toHaveLength(1);
  });
});

describe('retries', () => {
  it('retries a 5xx with the same envelope id and numbers the attempts', async () => {
    const { org, api, rx, ep } = await setup((_r, n) => (n < 3 ? (n === 1 ? 500 : 503) : 200));
    const eventId = await emitEvent(org.id);
    const reqs = await rx.waitFor(3);
    expect(new Set(reqs.map((r) => r.body!.id))).toEqual(new Set([eventId]));
    for (const r of reqs) expect(verifySignature(String(r.headers['x-outbound-signature']), r.raw, ep.signingSecret)).toBe(true);
    const [row] = await waitDeliveries(api, ep.id, (rs) => rs[0]?.status === 'succeeded');
    expect(row).toMatchObject({ attempt: 3, httpStatus: 200, errorMessage: null, status: 'succeeded' });
    expect(await queuedAttempts(row.id)).toBe(0);
    const { data: after } = await api.GET('/webhooks/{id}', { params: { path: { id: ep.id } } });
    expect(after!.consecutiveFailures).toBe(0);
  });

  it('shows a retrying row with the failed status, the next attempt number and when it is due', async () => {
    let release = false;
    const { org, api, rx, ep } = await setup(() => (release ? 200 : 502));
    await emitEvent(org.id);
    await rx.waitFor(1);
    const [row] = await waitDeliveries(api, ep.id, (rs) => rs[0]?.status === 'retrying');
    expect(row).toMatchObject({ attempt: 2, httpStatus: 502, errorMessage: 'HTTP 502', deliveredAt: null });
    expect(Date.parse(row.scheduledAt)).toBeGreaterThan(Date.parse(row.createdAt));
    release = true;
    await waitDeliveries(api, ep.id, (rs) => rs[0]?.status === 'succeeded');
  });

  it('retries a receiver that does not answer within the timeout', async () => {
    const { org, api, rx, ep } = await setup((_r, n) => (n === 1 ? 'hang' : 200));
    const eventId = await emitEvent(org.id);
    const reqs = await rx.waitFor(2);
    expect(reqs[1].body!.id).toBe(eventId);
    const [row] = await waitDeliveries(api, ep.id, (rs) => rs[0]?.status === 'succeeded');
    expect(row.attempt).toBe(2);
  });

  it('records a timeout as a failed attempt without a status', async () => {
    const { org, api, ep } = await setup(() => 'hang');
    await emitEvent(org.id);
    const [row] = await waitDeliveries(api, ep.id, (rs) => rs[0]?.status === 'retrying');
    expect(row.httpStatus).toBeNull();
    expect(row.errorMessage).toMatch(/timeout/);
    await api.PATCH('/webhooks/{id}', { params: { path: { id: ep.id } }, body: { status: 'paused' } });
  });

  it('retries a connection error', async () => {
    const { org, api, ep } = await setup();
    const dead = await receiver();
    await dead.close(); // nothing listens on that port any more
    await api.PATCH('/webhooks/{id}', { params: { path: { id: ep.id } }, body: { url: dead.url } });
    await emitEvent(org.id);
    const [row] = await waitDeliveries(api, ep.id, (rs) => rs[0]?.status === 'retrying');
    expect(row.errorMessage).toMatch(/ECONNREFUSED/);
    expect(row.httpStatus).toBeNull();
    await api.PATCH('/webhooks/{id}', { params: { path: { id: ep.id } }, body: { status: 'paused' } });
  });

  it('does not retry a 4xx: one attempt, failed', async () => {
    const { org, api, rx, ep } = await setup(() => 410);
    await emitEvent(org.id);
    const [row] = await waitDeliveries(api, ep.id, (rs) => rs[0]?.status === 'failed');
    expect(row).toMatchObject({ attempt: 1, httpStatus: 410, errorMessage: 'HTTP 410', deliveredAt: null });
    expect(await queuedAttempts(row.id)).toBe(0);
    expect(rx.received).toHaveLength(1);
    const { data: after } = await api.GET('/webhooks/{id}', { params: { path: { id: ep.id } } });
    expect(after!.consecutiveFailures).toBe(1);
  });

  it('does not follow a redirect (a 3xx is a permanent rejection)', async () => {
    const { org, api, ep } = await setup(() => 302);
    await emitEvent(org.id);
    const [row] = await waitDeliveries(api, ep.id, (rs) => rs[0]?.status === 'failed');
    expect(row).toMatchObject({ attempt: 1, httpStatus: 302 });
  });
});

describe('attempt limit', () => {
  it('makes 7 attempts in all, then marks the delivery failed with nothing more queued', async () => {
    const big = await startService({ WEBHOOK_RETRY_DELAYS_SECONDS: '0,0,0,0,0,0', WEBHOOK_DISABLE_AFTER_FAILURES: '100' });
    try {
      await big.startWorker();
      const org = await big.newOrg();
      const api = big.api(await org.key(['webhooks.manage']));
      const rx = await receiver(() => 500);
      const { data: ep } = await api.POST('/webhooks', { body: { url: rx.url, eventTypes: ['deal.won'] } });
      const eventId = await withOrg(big.rt.db, org.id, (trx) =>
        emit(trx, org.id, { type: 'deal.won', resource: { type: 'Deal', id: 'd' }, data: {} }),
      );
      const [row] = await waitFor(
        async () => {
          const { data } = await api.GET('/webhooks/{id}/deliveries', { params: { path: { id: ep!.id } } });
          return data!.data[0]?.status === 'failed' ? data!.data : null;
        },
        30_000,
        'the delivery to fail',
      );
      expect(row).toMatchObject({ attempt: 7, httpStatus: 500, eventId });
      expect(rx.received).toHaveLength(7);
      expect(new Set(rx.received.map((r) => r.body!.id))).toEqual(new Set([eventId]));
      const q = await big.pool.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE payload->>'deliveryId' = $1`, [
        row.id,
      ]);
      expect(q.rows[0].n).toBe(0);
      const { data: after } = await api.GET('/webhooks/{id}', { params: { path: { id: ep!.id } } });
      expect(after).toMatchObject({ status: 'active', consecutiveFailures: 7, lastDeliveryAt: null });
    } finally {
      await big.close();
    }
  });
});

describe('disabling', () => {
  it('disables an endpoint at the failure threshold; it gets nothing until set active, which resets the count', async () => {
    let ok = false;
    const { org, api, rx, ep } = await setup(() => (ok ? 200 : 500));
    await emitEvent(org.id);
    const got = await waitFor(
      async () => {
        const { data } = await api.GET('/webhooks/{id}', { params: { path: { id: ep.id } } });
        return data!.status === 'disabled' ? data : null;
      },
      20_000,
      'status disabled',
    );
    expect(got!.consecutiveFailures).toBe(5);
    // The 6th attempt, already queued, is dropped rather than sent.
    const [row] = await waitDeliveries(api, ep.id, (rs) => rs[0]?.status === 'failed');
    expect(row.errorMessage).toBe('not attempted: the endpoint is disabled');
    expect(rx.received).toHaveLength(5);
    expect(await queuedAttempts(row.id)).toBe(0);
    // New events make no delivery at all while disabled.
    const dropped = await emitEvent(org.id);
    const jobs = await svc.pool.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE payload->>'eventId' = $1`, [
      dropped,
    ]);
    expect(jobs.rows[0].n).toBe(0);
    expect(await deliveries(api, ep.id)).toHaveLength(1);

    ok = true;
    const { data: active } = await api.PATCH('/webhooks/{id}', { params: { path: { id: ep.id } }, body: { status: 'active' } });
    expect(active).toMatchObject({ status: 'active', consecutiveFailures: 0 });
    const later = await emitEvent(org.id);
    const [req] = await rx.waitFor(1, (r) => r.body?.id === later);
    expect(verifySignature(String(req.headers['x-outbound-signature']), req.raw, ep.signingSecret)).toBe(true);
    expect(rx.received.some((r) => r.body?.id === dropped)).toBe(false);
  });
});

describe('lock order', () => {
  it('fans events out while many endpoints are disabled, reactivated and deleted, with several workers: no deadlock, each delivery sent once', async () => {
    // Every delivery fails, an endpoint is disabled at its third failure, retries are an hour
    // away: each (event, endpoint) pair gets at most one request, and every disabling rechecks
    // the organization's health while other fan-outs record failures on the same endpoints.
    const busy = await startService({
      WEBHOOK_RETRY_DELAYS_SECONDS: '3600,3600,3600,3600,3600,3600',
      WEBHOOK_TIMEOUT_MS: '3000',
      WEBHOOK_DISABLE_AFTER_FAILURES: '3',
      RATE_LIMIT_PER_MINUTE: '100000',
    });
    try {
      const org = await busy.newOrg();
      const api = busy.api(await org.key(['webhooks.manage']));
      // Answers once a few requests arrived together, so the fan-outs record their outcomes at once.
      const rx = await receiver(async () => {
        await new Promise((r) => setTimeout(r, 20));
        return 500;
      });
      const endpoints: string[] = [];
      for (let i = 0; i < 24; i += 1) {
        const { data } = await api.POST('/webhooks', { body: { url: `${rx.url}?e=${i}`, eventTypes: ['deal.won'] } });
        endpoints.push(data!.id);
      }
      const errors: string[] = [];
      for (let w = 0; w < 3; w += 1) {
        const worker = await busy.startWorker();
        worker.events.on('job:error', ({ job, error }) => errors.push(`${job.task_identifier}: ${(error as Error).message}`));
      }
      const events: string[] = [];
      const requests: Promise<unknown>[] = [];
      for (let round = 0; round < 6; round += 1) {
        for (let i = 0; i < 8; i += 1) {
          events.push(
            await withOrg(busy.rt.db, org.id, (trx) =>
              emit(trx, org.id, { type: 'deal.won', resource: { type: 'Deal', id: 'd' }, data: {} }),
            ),
          );
        }
        // Meanwhile the client sets disabled endpoints active again (which rechecks health) and
        // deletes some.
        for (const id of endpoints.slice(round * 4, round * 4 + 4)) {
          requests.push(api.PATCH('/webhooks/{id}', { params: { path: { id } }, body: { status: 'active' } }));
        }
        requests.push(api.DELETE('/webhooks/{id}', { params: { path: { id: endpoints[round * 4 + 3] } } }));
        await new Promise((r) => setTimeout(r, 150));
      }
      const answers = (await Promise.all(requests)) as { response: Response }[];
      const failedRequests = answers.filter((a) => a.response.status >= 500).map((a) => `${a.response.url}: ${a.response.status}`);
      await waitFor(
        async () => {
          const r = await busy.pool.query(
            `SELECT count(*)::int AS n FROM graphile_worker._private_jobs j JOIN graphile_worker._private_tasks t ON t.id = j.task_id
             WHERE t.identifier = 'fanout_event'`,
          );
          return r.rows[0].n === 0 || errors.length > 0;
        },
        30_000,
        'every fan-out job done',
      );
      expect({ jobErrors: errors, failedRequests }).toEqual({ jobErrors: [], failedRequests: [] });
      // Each (event, endpoint) pair was sent at most once, and every request sent is recorded.
      const sent = new Map<string, number>();
      for (const r of rx.received) {
        const k = `${r.body!.id} ${r.url}`;
        sent.set(k, (sent.get(k) ?? 0) + 1);
      }
      expect([...sent.values()].filter((n) => n > 1)).toEqual([]);
      const recorded = await withSystem(busy.rt.systemDb, (trx) =>
        trx
          .selectFrom('webhook_deliveries')
          .select(['status', 'http_status'])
          .where('organization_id', '=', org.id)
          .where('event_id', 'in', events)
          .execute(),
      );
      expect(recorded.filter((d) => d.status === 'pending')).toEqual([]);
      // The deleted endpoints' rows went with them.
      const deleted = new Set(Array.from({ length: 6 }, (_, round) => `/hook?e=${round * 4 + 3}`));
      const kept = rx.received.filter((r) => !deleted.has(r.url));
      expect(recorded.filter((d) => d.http_status === 500)).toHaveLength(kept.length);
      expect(kept.length).toBeGreaterThan(18);
    } finally {
      await busy.close();
    }
  });
});

describe('a retried job', () => {
  it('a fan-out retried after it sent but before it recorded sends nothing again while the claims hold; once stale, the attempts are made again and recorded', async () => {
    const org = await svc.newOrg();
    const api = svc.api(await org.key(['webhooks.manage']));
    const rx = await receiver();
    const eps: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      const { data } = await api.POST('/webhooks', { body: { url: `${rx.url}?retried=${i}`, eventTypes: ['deal.lost'] } });
      eps.push(data!.id);
    }
    const job = async (eventId: string) =>
      (
        await svc.pool.query<{ attempts: number; last_error: string | null }>(
          `SELECT attempts, last_error FROM graphile_worker._private_jobs WHERE payload->>'eventId' = $1`,
          [eventId],
        )
      ).rows[0];
    svc.rt.services.faults.add('webhook:after-send');
    let eventId: string;
    try {
      eventId = await emitEvent(org.id, 'deal.lost');
      await rx.waitFor(3, (r) => r.body?.id === eventId);
      // The job failed after sending; graphile-worker runs it again a few seconds later, and that
      // run finds the attempts claimed by the first.
      const retried = await waitFor(
        async () => {
          const j = await job(eventId);
          return j?.last_error?.includes('claimed by an earlier run') ? j : null;
        },
        20_000,
        'the job run again, finding the claims',
      );
      expect(retried.attempts).toBeGreaterThanOrEqual(2);
    } finally {
      svc.rt.services.faults.delete('webhook:after-send');
    }
    expect(rx.received.filter((r) => r.body?.id === eventId)).toHaveLength(3);
    for (const id of eps) expect(await deliveries(api, id)).toMatchObject([{ eventId, status: 'pending', attempt: 1 }]);

    // A minute later the claims are stale (their run stopped): the next run makes the attempts again and records them.
    await ageClaims(svc, eventId, '2 minutes');
    await svc.pool.query(`UPDATE graphile_worker._private_jobs SET run_at = now() WHERE payload->>'eventId' = $1`, [eventId]);
    for (const id of eps) await waitDeliveries(api, id, (rows) => rows[0]?.status === 'succeeded', 'the attempt recorded');
    expect(rx.received.filter((r) => r.body?.id === eventId)).toHaveLength(6);
    expect(await job(eventId)).toBeUndefined();
  });
});

describe('replay, rotation and test delivery', () => {
  it('replay inserts a new row (attempt 1, due now) and re-sends the same envelope; the original is untouched', async () => {
    const { org, api, rx, ep } = await setup();
    const eventId = await emitEvent(org.id);
    const [original] = await waitDeliveries(api, ep.id, (rs) => rs[0]?.status === 'succeeded');
    const before = Date.now();
    const { data: fresh, response } = await api.POST('/webhooks/{id}/deliveries/{deliveryId}/replay', {
      params: { path: { id: ep.id, deliveryId: original.id } },
    });
    expect(response.status).toBe(201);
    expect(fresh).toMatchObject({
      eventId,
      eventType: 'deal.won',
      attempt: 1,
      status: 'pending',
      httpStatus: null,
      errorMessage: null,
      deliveredAt: null,
    });
    expect(fresh!.id).not.toBe(original.id);
    expect(Date.parse(fresh!.scheduledAt)).toBeGreaterThanOrEqual(before - 1000);
    const reqs = await rx.waitFor(2);
    expect(reqs[1].body!.id).toBe(eventId);
    expect(reqs[1].raw.equals(reqs[0].raw)).toBe(true);
    const rows = await waitDeliveries(api, ep.id, (rs) => rs.every((d) => d.status === 'succeeded') && rs.length === 2);
    expect(rows[0].id).toBe(fresh!.id); // newest first
    const { data: again } = await api.GET('/webhooks/{id}/deliveries/{deliveryId}', {
      params: { path: { id: ep.id, deliveryId: original.id } },
    });
    expect(again).toEqual(original);
  });

  it('after rotate-secret, deliveries verify with the new secret only', async () => {
    const { org, api, rx, ep } = await setup();
    const { data: rotated } = await api.POST('/webhooks/{id}/rotate-secret', { params: { path: { id: ep.id } } });
    expect(rotated!.signingSecret).not.toBe(ep.signingSecret);
    await emitEvent(org.id);
    const [req] = await rx.waitFor();
    const sig = String(req.headers['x-outbound-signature']);
    expect(verifySignature(sig, req.raw, rotated!.signingSecret)).toBe(true);
    expect(verifySignature(sig, req.raw, ep.signingSecret)).toBe(false);
  });

  it('test-deliver fires a signed synthetic event, reports the status and stores nothing', async () => {
    const { org, api, rx, ep } = await setup((_r, n) => (n === 1 ? 200 : 503), ['deal.lost', 'deal.won']);
    const { data, response } = await api.POST('/webhooks/{id}/test-deliver', { params: { path: { id: ep.id } } });
    expect(response.status).toBe(200);
    expect(data).toEqual({
      delivered: true,
      httpStatus: 200,
      errorMessage: null,
      durationMs: expect.any(Number),
      eventId: expect.stringMatching(/^evt_/),
    });
    const [req] = rx.received;
    expect(verifySignature(String(req.headers['x-outbound-signature']), req.raw, ep.signingSecret)).toBe(true);
    expect(req.body).toEqual({
      apiVersion: '2026-07-21',
      id: data!.eventId,
      type: 'deal.lost',
      createdAt: expect.any(String),
      organizationId: org.id,
      data: { test: true },
      resource: { type: 'WebhookEndpoint', id: ep.id },
    });
    const failed = await api.POST('/webhooks/{id}/test-deliver', { params: { path: { id: ep.id } } });
    expect(failed.data).toMatchObject({ delivered: false, httpStatus: 503, errorMessage: 'HTTP 503' });
    expect(await deliveries(api, ep.id)).toEqual([]);
    const events = await withSystem(svc.ownerDb, (trx) =>
      trx.selectFrom('events').select('id').where('organization_id', '=', org.id).execute(),
    );
    expect(events).toEqual([]);
    const { data: after } = await api.GET('/webhooks/{id}', { params: { path: { id: ep.id } } });
    expect(after).toMatchObject({ consecutiveFailures: 0, lastDeliveryAt: null });
  });

  it('test-deliver reports a timeout without a status', async () => {
    const { api, ep } = await setup(() => 'hang');
    const { data } = await api.POST('/webhooks/{id}/test-deliver', { params: { path: { id: ep.id } } });
    expect(data).toMatchObject({ delivered: false, httpStatus: null, errorMessage: 'timeout: no answer within 1000 ms' });
    expect(data!.durationMs).toBeGreaterThanOrEqual(900);
  });
});

describe('crash safety', () => {
  it('an event whose worker is killed mid-delivery still arrives: the job runs again once its lock expires', async () => {
    // A service without an in-process worker; a separate worker process takes the fan-out job and
    // is killed (SIGKILL) while the receiver holds the request, so nothing is recorded and the
    // job stays locked by the dead worker.
    const crash = await startService({ WEBHOOK_RETRY_DELAYS_SECONDS: '1,1,1,1,1,1' });
    const dbUrl = crash.pool.options.connectionString;
    // Node itself (tsx as a loader): the tsx CLI runs the script in a child of its own, which a
    // SIGKILL of the CLI leaves running (an orphan worker that keeps the job and polls on).
    const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('src/boot/worker-main.ts')], {
      env: {
        ...process.env,
        DATABASE_URL: dbUrl,
        DATA_DIR: crash.config.dataDir,
        WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
        WEBHOOK_TIMEOUT_MS: '60000',
        LOG_LEVEL: 'silent',
      },
      stdio: 'ignore',
    });
    try {
      const org = await crash.newOrg();
      const api = crash.api(await org.key(['webhooks.manage']));
      const rx = await receiver((_r, n) => (n === 1 ? 'hang' : 200));
      const { data: ep } = await api.POST('/webhooks', { body: { url: rx.url, eventTypes: ['deal.won'] } });
      const eventId = await withOrg(crash.rt.db, org.id, (trx) =>
        emit(trx, org.id, { type: 'deal.won', resource: { type: 'Deal', id: 'd' }, data: {} }),
      );
      await rx.waitFor(1);
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      const { data: pending } = await api.GET('/webhooks/{id}/deliveries', { params: { path: { id: ep!.id } } });
      expect(pending!.data).toMatchObject([{ eventId, status: 'pending', attempt: 1, httpStatus: null }]);
      const locked = await crash.pool.query(`SELECT locked_by FROM graphile_worker._private_jobs WHERE payload->>'eventId' = $1`, [
        eventId,
      ]);
      expect(locked.rows).toHaveLength(1);
      expect(locked.rows[0].locked_by).not.toBeNull();
      // Four hours later graphile-worker clears the dead worker's lock (and the dead run's claim of
      // the attempt is long stale); simulate that, then let a new worker take over.
      await crash.pool.query(
        `UPDATE graphile_worker._private_jobs SET locked_at = now() - interval '4 hours 1 minute' WHERE payload->>'eventId' = $1`,
        [eventId],
      );
      await ageClaims(crash, eventId, '4 hours 1 minute');
      await crash.pool.query(
        `UPDATE graphile_worker._private_jobs SET locked_at = NULL, locked_by = NULL WHERE locked_at < now() - interval '4 hours'`,
      );
      await crash.startWorker();
      const reqs = await rx.waitFor(2);
      expect(reqs.map((r) => r.body!.id)).toEqual([eventId, eventId]);
      const rows = await waitFor(
        async () => {
          const { data } = await api.GET('/webhooks/{id}/deliveries', { params: { path: { id: ep!.id } } });
          return data!.data[0]?.status === 'succeeded' ? data!.data : null;
        },
        20_000,
        'the delivery to succeed',
      );
      expect(rows).toMatchObject([{ eventId, attempt: 1, httpStatus: 200 }]);
    } finally {
      child.kill('SIGKILL');
      await crash.close();
    }
  });
});
