// Data that ages out (src/platform/retention.ts): the event log, webhook deliveries, sends' bodies
// and inbound raw MIME live in monthly partitions; the sweep makes months ahead, drops whole the
// months past the longest retention, and deletes the older rows of organizations that keep less.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withSystem } from '../db/database.js';
import { runRetentionSweep } from '../src/platform/retention.js';
import { startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService({ RATE_LIMIT_PER_MINUTE: '100000', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
});
afterAll(async () => {
  await svc?.close();
});

const DAY = 86_400_000;
const ago = (days: number) => new Date(Date.now() - days * DAY);
const month = (at: Date) => `${at.getUTCFullYear()}${String(at.getUTCMonth() + 1).padStart(2, '0')}`;
const monthStart = (at: Date) => new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1)).toISOString().slice(0, 10);
const sweep = () => runRetentionSweep({ systemDb: svc.rt.systemDb, config: svc.config });
let n = 0;
const uid = (p: string) => `${p}${Date.now().toString(36)}${(n++).toString(36)}`;

/** The monthly partitions of a table, by name. */
async function partitions(table: string): Promise<string[]> {
  const r = await svc.pool.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = $1::regclass AND c.relname ~ '_p[0-9]{6}$' ORDER BY 1`,
    [`public.${table}`],
  );
  return r.rows.map((x) => x.name);
}

/** Makes the month of `at` a partition, as the migration did for the months of existing rows. */
async function partitionOf(table: string, at: Date) {
  await svc.pool.query('SELECT retention_ensure_partitions($1, $2::date, $2::date)', [table, monthStart(at)]);
}

/** Seeds one row of each aging kind for an organization at a time: an event, its delivery, a send's bodies, an inbound MIME. */
async function seedAt(orgId: string, at: Date, endpointId = 'whe_none') {
  const ids = { event: uid('evt_'), delivery: uid('whd_'), send: uid('snd_'), message: uid('msg_') };
  await withSystem(svc.ownerDb, async (trx) => {
    await trx
      .insertInto('events')
      .values({
        organization_id: orgId,
        id: ids.event,
        type: 'deal.created',
        api_version: '2026-07-21',
        data: JSON.stringify({ dealId: 'deal_1' }),
        resource_type: 'Deal',
        resource_id: 'deal_1',
        created_at: at,
      })
      .execute();
    await trx
      .insertInto('webhook_deliveries')
      .values({
        organization_id: orgId,
        id: ids.delivery,
        webhook_endpoint_id: endpointId,
        event_id: ids.event,
        event_type: 'deal.created',
        status: 'succeeded',
        created_at: at,
        scheduled_at: at,
      })
      .execute();
    await trx
      .insertInto('send_bodies')
      .values({ organization_id: orgId, send_record_id: ids.send, text_body: 'Hello', html_body: '<p>Hello</p>', created_at: at })
      .execute();
    await trx
      .insertInto('inbound_raw_messages')
      .values({ organization_id: orgId, message_id: ids.message, raw_mime: Buffer.from('Subject: hi\r\n\r\nhi'), created_at: at })
      .execute();
  });
  return ids;
}

/** Which of the seeded rows are still stored. */
async function stored(orgId: string, ids: Awaited<ReturnType<typeof seedAt>>) {
  return withSystem(svc.ownerDb, async (trx) => ({
    event: (await trx.selectFrom('events').select('id').where('organization_id', '=', orgId).where('id', '=', ids.event).execute()).length,
    delivery: (
      await trx.selectFrom('webhook_deliveries').select('id').where('organization_id', '=', orgId).where('id', '=', ids.delivery).execute()
    ).length,
    send: (
      await trx
        .selectFrom('send_bodies')
        .select('send_record_id')
        .where('organization_id', '=', orgId)
        .where('send_record_id', '=', ids.send)
        .execute()
    ).length,
    message: (
      await trx
        .selectFrom('inbound_raw_messages')
        .select('message_id')
        .where('organization_id', '=', orgId)
        .where('message_id', '=', ids.message)
        .execute()
    ).length,
  }));
}

const TABLES = ['events', 'webhook_deliveries', 'send_bodies', 'inbound_raw_messages'];

describe('partitions', () => {
  it('the months from this one to three ahead exist for every aging table, made at migration and again by the sweep', async () => {
    const now = new Date();
    const expected = [0, 1, 2, 3].map((k) => month(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + k, 1))));
    for (const t of TABLES) {
      const names = await partitions(t);
      for (const m of expected) expect(names, t).toContain(`${t}_p${m}`);
    }
    // The sweep makes the fourth month ahead once it is due; dropped ahead months come back.
    await svc.pool.query(`DROP TABLE events_p${expected[3]}`);
    expect(await partitions('events')).not.toContain(`events_p${expected[3]}`);
    const r = await sweep();
    expect(r.made).toBeGreaterThanOrEqual(1);
    expect(await partitions('events')).toContain(`events_p${expected[3]}`);
    // Each partition carries the organization policy, enabled and forced.
    const rls = await svc.pool.query<{ relrowsecurity: boolean; relforcerowsecurity: boolean }>(
      `SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE relname = $1`,
      [`events_p${expected[3]}`],
    );
    expect(rls.rows[0]).toEqual({ relrowsecurity: true, relforcerowsecurity: true });
  });
});

describe('the sweep', () => {
  it('drops a month older than the retention whole: its rows are gone, newer rows stay', async () => {
    const org = await svc.newOrg();
    // Defaults: events 400 days, deliveries 30, bodies and raw MIME 90.
    const old = { events: ago(520), others: ago(220) };
    for (const t of TABLES) await partitionOf(t, t === 'events' ? old.events : old.others);
    const oldEvent = await seedAt(org.id, old.events);
    const oldOthers = await seedAt(org.id, old.others);
    const recent = await seedAt(org.id, ago(3));
    expect(await partitions('events')).toContain(`events_p${month(old.events)}`);
    const r = await sweep();
    expect(r.dropped).toEqual(
      expect.arrayContaining([
        `events_p${month(old.events)}`,
        `webhook_deliveries_p${month(old.others)}`,
        `send_bodies_p${month(old.others)}`,
        `inbound_raw_messages_p${month(old.others)}`,
      ]),
    );
    expect(await partitions('events')).not.toContain(`events_p${month(old.events)}`);
    expect(await partitions('send_bodies')).not.toContain(`send_bodies_p${month(old.others)}`);
    expect((await stored(org.id, oldEvent)).event).toBe(0);
    // 220 days: past the deliveries', bodies' and raw MIME's retention, within the events'.
    expect(await stored(org.id, oldOthers)).toEqual({ event: 1, delivery: 0, send: 0, message: 0 });
    expect(await stored(org.id, recent)).toEqual({ event: 1, delivery: 1, send: 1, message: 1 });
    // A row written outside every partition (the default partition) ages out too.
    const stray = ago(900);
    const strayIds = await seedAt(org.id, stray);
    const where = await svc.pool.query<{ t: string }>(`SELECT tableoid::regclass::text AS t FROM events WHERE id = $1`, [strayIds.event]);
    expect(where.rows[0].t).toBe('events_default');
    const again = await sweep();
    expect(again.deleted.events).toBeGreaterThanOrEqual(1);
    expect(await stored(org.id, strayIds)).toEqual({ event: 0, delivery: 0, send: 0, message: 0 });
  });

  it("an organization's shorter override removes only its own older rows; the operator sets and clears it", async () => {
    const short = await svc.newOrg();
    const other = await svc.newOrg();
    const patched = await svc.admin.PATCH('/organizations/{orgId}', {
      params: { path: { orgId: short.id } },
      body: { retention: { eventsDays: 30, webhookDeliveriesDays: 2, sendBodiesDays: 7, inboundRawDays: 7 } },
    });
    expect(patched.response.status).toBe(200);
    expect(patched.data!.retention).toEqual({ eventsDays: 30, webhookDeliveriesDays: 2, sendBodiesDays: 7, inboundRawDays: 7 });
    const tooShort = await svc.admin.PATCH('/organizations/{orgId}', {
      params: { path: { orgId: short.id } },
      body: { retention: { eventsDays: 29 } },
    });
    expect(tooShort.response.status).toBe(400);
    const shortOld = await seedAt(short.id, ago(45));
    const shortNew = await seedAt(short.id, ago(1));
    const otherOld = await seedAt(other.id, ago(45));
    const r = await sweep();
    expect(r.deleted.events).toBeGreaterThanOrEqual(1);
    expect(await stored(short.id, shortOld)).toEqual({ event: 0, delivery: 0, send: 0, message: 0 });
    expect(await stored(short.id, shortNew)).toEqual({ event: 1, delivery: 1, send: 1, message: 1 });
    // The other organization keeps the deployment's days: 45 days is within events 400, bodies and raw 90 (its
    // delivery, past the deliveries' 30, goes with its month).
    expect(await stored(other.id, otherOld)).toMatchObject({ event: 1, send: 1, message: 1 });
    // null clears an override; fields left out stay.
    const cleared = await svc.admin.PATCH('/organizations/{orgId}', {
      params: { path: { orgId: short.id } },
      body: { retention: { eventsDays: null } },
    });
    expect(cleared.data!.retention).toEqual({ eventsDays: null, webhookDeliveriesDays: 2, sendBodiesDays: 7, inboundRawDays: 7 });
    const fresh = await svc.newOrg();
    const read = await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: fresh.id } }, body: { researchBudget: 100 } });
    expect(read.data!.retention).toEqual({ eventsDays: null, webhookDeliveriesDays: null, sendBodiesDays: null, inboundRawDays: null });
  });

  it('within the promised window the event log lists and a delivery is listed and replayed after the sweep', async () => {
    const { org, api } = await svc.orgWithKey(['events.read', 'webhooks.manage']);
    const ep = await api.POST('/webhooks', { body: { url: 'http://127.0.0.1:9/hook', eventTypes: ['deal.created'] } });
    expect(ep.response.status).toBe(201);
    const endpointId = ep.data!.id;
    // 20 days: within the deliveries' 30 and the events' 400.
    const ids = await seedAt(org.id, ago(20), endpointId);
    await sweep();
    const events = await api.GET('/events', { params: { query: { type: 'deal.created', limit: 200 } } });
    expect(events.response.status).toBe(200);
    expect(events.data!.data.map((e) => e.id)).toContain(ids.event);
    const list = await api.GET('/webhooks/{id}/deliveries', { params: { path: { id: endpointId } } });
    expect(list.data!.data.map((d) => d.id)).toContain(ids.delivery);
    const replay = await api.POST('/webhooks/{id}/deliveries/{deliveryId}/replay', {
      params: { path: { id: endpointId, deliveryId: ids.delivery } },
    });
    expect(replay.response.status).toBe(201);
    expect(replay.data).toMatchObject({ eventId: ids.event, attempt: 1, status: 'pending' });
  });

  it('the funnel over 366 days is the same after the sweep removed every body, MIME, delivery and event it could', async () => {
    const { org, api } = await svc.orgWithKey(['analytics.read']);
    await svc.admin.PATCH('/organizations/{orgId}', {
      params: { path: { orgId: org.id } },
      body: { retention: { eventsDays: 30, webhookDeliveriesDays: 2, sendBodiesDays: 7, inboundRawDays: 7 } },
    });
    // Sequences started 300, 200 and 100 days ago, each sent; the first two replied to.
    await withSystem(svc.ownerDb, async (trx) => {
      for (const [i, days] of [300, 200, 100].entries()) {
        const at = ago(days);
        const seq = uid('seq_');
        await trx
          .insertInto('contact_sequences')
          .values({ organization_id: org.id, id: seq, contact_id: uid('con_'), template_id: 'tpl_x', created_at: at })
          .execute();
        const send = uid('snd_');
        await trx
          .insertInto('send_records')
          .values({ organization_id: org.id, id: send, sequence_id: seq, step: 1, status: 'sent', sent_at: at, created_at: at })
          .execute();
        await trx
          .insertInto('send_bodies')
          .values({ organization_id: org.id, send_record_id: send, text_body: 'Hi', html_body: '<p>Hi</p>', created_at: at })
          .execute();
        await trx
          .insertInto('events')
          .values({
            organization_id: org.id,
            id: uid('evt_'),
            type: 'draft.sent',
            api_version: '2026-07-21',
            data: '{}',
            resource_type: 'Draft',
            resource_id: 'drf_x',
            created_at: at,
          })
          .execute();
        if (i < 2) {
          const msg = uid('msg_');
          const replied = new Date(at.getTime() + DAY);
          await trx
            .insertInto('messages')
            .values({
              organization_id: org.id,
              id: msg,
              direction: 'INBOUND',
              sequence_id: seq,
              send_record_id: send,
              message_id: `<${msg}@example.com>`,
              intent: 'interested',
              authenticated: true,
              created_at: replied,
            })
            .execute();
          await trx
            .insertInto('inbound_raw_messages')
            .values({ organization_id: org.id, message_id: msg, raw_mime: Buffer.from('Subject: re\r\n\r\nyes'), created_at: replied })
            .execute();
        }
      }
    });
    const window = { from: new Date(Date.now() - 365 * DAY).toISOString().slice(0, 10), to: new Date().toISOString().slice(0, 10) };
    const funnel = async () => {
      await svc.pool.query('DELETE FROM analytics_cache WHERE organization_id = $1', [org.id]);
      const r = await api.GET('/analytics/funnel', { params: { query: window } });
      expect(r.response.status).toBe(200);
      return r.data!;
    };
    const before = await funnel();
    expect(before.totals).toMatchObject({ sequencesStarted_count: 3, sequencesSent_count: 3, sequencesReplied_count: 2 });
    await sweep();
    const left = await withSystem(svc.ownerDb, async (trx) => ({
      bodies: (await trx.selectFrom('send_bodies').select('send_record_id').where('organization_id', '=', org.id).execute()).length,
      mime: (await trx.selectFrom('inbound_raw_messages').select('message_id').where('organization_id', '=', org.id).execute()).length,
      events: (await trx.selectFrom('events').select('id').where('organization_id', '=', org.id).execute()).length,
      sends: (await trx.selectFrom('send_records').select('id').where('organization_id', '=', org.id).execute()).length,
      messages: (await trx.selectFrom('messages').select('id').where('organization_id', '=', org.id).execute()).length,
    }));
    expect(left).toEqual({ bodies: 0, mime: 0, events: 0, sends: 3, messages: 2 });
    expect(await funnel()).toEqual(before);
  });
});

describe('the bounds', () => {
  it('the sweep works over every organization in batches: a large shorter-lived organization is emptied whole', async () => {
    const org = await svc.newOrg();
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: org.id } }, body: { retention: { eventsDays: 30 } } });
    await sql`
      INSERT INTO events (organization_id, id, type, api_version, data, resource_type, resource_id, created_at)
      SELECT ${org.id}, 'evt_bulk_' || g, 'deal.created', '2026-07-21', '{}', 'Deal', 'deal_1', now() - interval '40 days'
      FROM generate_series(1, 12000) g`.execute(svc.ownerDb);
    const r = await sweep();
    expect(r.deleted.events).toBeGreaterThanOrEqual(12000);
    const left = await svc.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE organization_id = $1`, [org.id]);
    expect(left.rows[0].n).toBe(0);
  });
});
