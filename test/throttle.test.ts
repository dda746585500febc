// Slowing down for receiving servers and ramping new mailboxes up: which SMTP answers are throttles
// (src/mail/throttle.ts, over answers written in the manner of the providers'), the backoff of a
// server that answered one (src/dispatch/backoff.ts) against a real SMTP server on loopback that
// throttles for a while, with two workers, and the ramp-up of a mailbox with its own server
// (src/dispatch/ramp-up.ts). The recipient domain's backoff on a rate-limit delivery report is in
// test/inbound-effects.test.ts.

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isThrottle } from '../src/mail/throttle.js';
import { system, uid } from './crm-support.js';
import { contact, type DraftingOrg, draftingOrg, draftsOf, sequence, settle, template } from './drafting-support.js';
import { startService, type TestService } from './support/harness.js';
import { type SmtpSink, startSmtpSink } from './support/smtp-sink.js';

/** The first backoff of a throttled server in these tests (the default is a minute). */
const BACKOFF_MS = 8_000;

let svc: TestService;
let sink: SmtpSink;
beforeAll(async () => {
  sink = await startSmtpSink();
  svc = await startService({
    SMTP_URL: sink.url,
    MAIL_FROM: 'Acme Sales <sales@acme-sender.test>',
    SMTP_TIMEOUT_MS: '2000',
    SMTP_THROTTLE_BACKOFF_MS: String(BACKOFF_MS),
  });
  await svc.startWorker();
  await svc.startWorker(); // two workers race for the same jobs
});
afterAll(async () => {
  await svc?.close();
  await sink?.close();
});

describe('which answers are throttles', () => {
  // Answers written in the manner of each provider's, in our own words.
  const throttles: [string, number | null, string][] = [
    ['Gmail, unusual rate', 421, '421-4.7.28 We see an unusual rate of mail from your address; it is limited for now.'],
    ['Gmail, unusual rate as 450', 450, '450 4.7.28 Mail from this sender arrives at an unusual rate; please come back later.'],
    ['Yahoo TSS04', 421, '421 4.7.0 [TSS04] Messages from 192.0.2.7 deferred for now: unexpected volume from your server.'],
    ['Yahoo TS02 without a status', 421, '421 Deferred [TS02] please retry later.'],
    ['Outlook, server busy', 451, '451 4.7.650 The mail server is busy and has limited your sending for now; try again later.'],
    ['any 421 with a 4.7.x status', 421, '421 4.7.1 Your account is sending too fast. Closing connection.'],
    ['a generic rate limit', 450, '450 4.7.1 Rate limit reached for this sender, try again later'],
    ['too many messages', 452, '452 4.7.0 Too many messages in this session from you'],
    ['throttled wording, no status', 451, '451 Sender throttled, please slow down'],
    ['code only in the text', null, '421 4.7.28 unusual rate of traffic'],
  ];
  const others: [string, number | null, string][] = [
    ['greylisting', 451, '451 4.7.1 Greylisted, please try again later'],
    ["greylisting's bare try again later", 451, '451 4.7.1 try again later'],
    ['a full mailbox', 452, '452 4.2.2 The recipient mailbox is over its quota'],
    ['too many recipients in one message', 452, '452 4.5.3 Too many recipients'],
    ['a policy refusal at 4xx', 450, '450 4.7.1 <x@y.example>: Recipient address rejected: Access denied'],
    ['a permanent rate refusal is no throttle to wait out', 550, '550 5.7.28 Your sending rate is refused for good'],
    ['accepted', 250, '250 2.0.0 Ok: queued as 4F2A'],
    ['a connection failure', null, 'ECONNRESET: socket hang up'],
  ];
  it.each(throttles)('%s is a throttle', (_name, code, response) => {
    expect(isThrottle({ code, response })).toBe(true);
  });
  it.each(others)('%s is not', (_name, code, response) => {
    expect(isThrottle({ code, response })).toBe(false);
  });
});

const STEP = { dayOffset: 0, subject: 'Orbit for {{company}}', body: 'Hi {{firstName}},\n\nWe fly small satellites.\n\nBest,\nSam' };

async function sendingOrg(settings: Record<string, unknown> = {}) {
  const s = await draftingOrg(svc);
  await svc.admin.PATCH('/organizations/{orgId}', {
    params: { path: { orgId: s.org.id } },
    body: { flags: { v1_2_api_send: true }, ...(Object.keys(settings).length ? { sending: settings } : {}) },
  });
  return s;
}

/** A mailbox of the organization with its own SMTP server. */
async function ownMailbox(s: DraftingOrg, server: SmtpSink, dailyCap: number) {
  const r = await svc.admin.POST('/organizations/{orgId}/mailboxes', {
    params: { path: { orgId: s.org.id } },
    body: { email: `rep@${uid('own')}.test`, name: 'Rep', dailyCap, smtpUrl: server.url },
  });
  expect(r.data?.status).toBe('verified');
  return r.data!;
}

/** A contact with an approved one-step sequence, asked to be sent. */
async function queued(s: DraftingOrg, email: string) {
  const c = await contact(s.api, { email, name: 'Dana Whitfield' });
  await sequence(s.api, c.id, await template(svc, s.org.id, [STEP]));
  await settle(svc);
  const [d] = await draftsOf(s.api, c.id);
  await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
  await s.api.POST('/drafts/{id}/send', { params: { path: { id: d.id } } });
  return c;
}

/** The organization's sending settings as the operator reads them (a PATCH answers the organization). */
const sendingOf = async (orgId: string, sending: Record<string, unknown> = {}) =>
  (await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId } }, body: { sending } })).data!.sending;
const queueOf = async (orgId: string) => (await svc.admin.GET('/send-queue', { params: { query: { organizationId: orgId } } })).data!.data;
const outbox = async (orgId: string) => (await svc.admin.GET('/outbox', { params: { query: { organizationId: orgId } } })).data!.data;
const mailboxes = async (orgId: string) =>
  (await svc.admin.GET('/organizations/{orgId}/mailboxes', { params: { path: { orgId } } })).data!.data;
const backoffs = (orgId: string) =>
  system(svc, (trx) =>
    sql<{ scope: string; level: number; until: Date; in_flight_limit: number | null }>`
      SELECT scope, level, until, in_flight_limit FROM send_backoffs WHERE organization_id = ${orgId} ORDER BY scope`.execute(trx),
  ).then((r) => r.rows);

describe('a server that says "slow down"', () => {
  it('is backed off: the steps wait (server_throttled) with no attempt meanwhile, the mailbox is not paused, then they resume slowly and each goes once', async () => {
    const server = await startSmtpSink();
    try {
      const s = await sendingOrg();
      const mb = await ownMailbox(s, server, 100);
      const domain = `${uid('busy')}.example`;
      server.behave(`@${domain}`, { reply: 421, text: '4.7.28 You are sending at an unusual rate; we are limiting your mail for now' });
      const people = [];
      for (let i = 0; i < 6; i += 1) people.push(await queued(s, `${uid('p')}@${domain}`));
      await settle(svc);
      // Every step waits for the server's backoff, none spent an attempt, the step throttled included.
      const held = await queueOf(s.org.id);
      expect(held).toHaveLength(6);
      for (const q of held) {
        expect(q).toMatchObject({ state: 'deferred', heldBy: 'server_throttled', attempts: 0 });
        expect(Date.parse(q.nextAttemptAt)).toBeGreaterThan(Date.now());
      }
      const [b] = await backoffs(s.org.id);
      expect(b).toMatchObject({ scope: `server:127.0.0.1:${server.port}`, level: 1, in_flight_limit: 1 });
      expect(server.messages).toEqual([]);
      const tried = { connections: server.connections, recipients: server.recipients };
      expect(tried.recipients).toBeGreaterThanOrEqual(1);
      // Throttles never pause the mailbox nor fail the step.
      expect((await mailboxes(s.org.id)).find((m) => m.id === mb.id)).toMatchObject({ status: 'verified', statusReason: null });
      expect((await outbox(s.org.id)).every((m) => m.status === 'failed' && m.bounceClass === null)).toBe(true);
      // The server answers again; nothing reaches it until the backoff ends.
      server.behave(`@${domain}`, 'accept');
      const quiet = b.until.getTime() - 500 - Date.now();
      expect(quiet).toBeGreaterThan(1_000);
      await new Promise((r) => setTimeout(r, quiet));
      expect({ connections: server.connections, recipients: server.recipients }).toEqual(tried);
      // After it, one message at a time at first, then more: every step goes, each once.
      await server.waitFor(6, 60_000);
      await settle(svc);
      const got = server.messages.filter((m) => m.to[0].endsWith(`@${domain}`));
      expect(got.map((m) => m.to[0]).sort()).toEqual(people.map((p) => p.email.toLowerCase()).sort());
      expect(got[0].at).toBeGreaterThanOrEqual(b.until.getTime() - 50);
      expect(got[5].at - got[0].at).toBeGreaterThanOrEqual(1_000); // not all at once
      expect(await queueOf(s.org.id)).toEqual([]);
      expect((await outbox(s.org.id)).filter((m) => m.status === 'sent')).toHaveLength(6);
      expect((await backoffs(s.org.id))[0]).toMatchObject({ level: 1 });
      expect((await mailboxes(s.org.id)).find((m) => m.id === mb.id)).toMatchObject({ status: 'verified' });
    } finally {
      await server.close();
    }
  });

  it('backs off longer at each throttle in a row, up to a few hours', async () => {
    const { backoffMs, MAX_BACKOFF_MS } = await import('../src/dispatch/backoff.js');
    expect([1, 2, 3, 4].map((l) => backoffMs(60_000, l))).toEqual([60_000, 120_000, 240_000, 480_000]);
    expect(backoffMs(60_000, 40)).toBe(MAX_BACKOFF_MS);
  });
});

describe('ramp-up of a new mailbox', () => {
  it('a mailbox with its own server sends its day-1 cap, more on day 2; the operator sees effectiveDailyCap beside dailyCap', async () => {
    const server = await startSmtpSink();
    try {
      const s = await sendingOrg({ rampUp: { startCap: 3, dailyIncrease: 2 } });
      expect((await sendingOf(s.org.id)).rampUp).toEqual({ enabled: true, startCap: 3, dailyIncrease: 2 });
      const mb = await ownMailbox(s, server, 100);
      expect(mb).toMatchObject({ dailyCap: 100, effectiveDailyCap: 3 });
      for (let i = 0; i < 8; i += 1) await queued(s, `${uid('p')}@${uid('rcpt')}.example`);
      await settle(svc);
      expect(server.messages).toHaveLength(3);
      const held = await queueOf(s.org.id);
      expect(held).toHaveLength(5);
      for (const q of held) expect(q.heldBy).toBe('mailbox_daily_cap');
      // A day later (the mailbox added 24 hours ago): 5 in the rolling 24 hours.
      await system(svc, (trx) =>
        sql`UPDATE mailboxes SET created_at = created_at - interval '1 day 1 minute' WHERE organization_id = ${s.org.id} AND id = ${mb.id}`.execute(
          trx,
        ),
      );
      expect((await mailboxes(s.org.id)).find((m) => m.id === mb.id)).toMatchObject({ dailyCap: 100, effectiveDailyCap: 5 });
      await system(svc, (trx) =>
        sql`SELECT enqueue_job('send_step', json_build_object('organizationId', organization_id, 'queueId', id), NULL, id)
          FROM send_queue WHERE organization_id = ${s.org.id} AND state = 'deferred'`.execute(trx),
      );
      await settle(svc);
      expect(server.messages).toHaveLength(5);
      expect(new Set(server.messages.map((m) => m.to[0])).size).toBe(5);
      expect(await queueOf(s.org.id)).toHaveLength(3);
      // Added once everything is sent (else the rotation would pin to it): a mailbox sending through the deployment's transport is not ramped.
      const relayed = await svc.admin.POST('/organizations/{orgId}/mailboxes', {
        params: { path: { orgId: s.org.id } },
        body: { email: `relayed@${uid('own')}.test`, dailyCap: 100 },
      });
      expect(relayed.data).toMatchObject({ dailyCap: 100, effectiveDailyCap: 100 });
      // Off, the configured cap.
      expect((await sendingOf(s.org.id, { rampUp: { enabled: false } })).rampUp).toEqual({ enabled: false, startCap: 3, dailyIncrease: 2 });
      expect((await mailboxes(s.org.id)).find((m) => m.id === mb.id)).toMatchObject({ effectiveDailyCap: 100 });
    } finally {
      await server.close();
    }
  });

  it('a new organization ramps up from 20 a day, 3 more each day', async () => {
    const s = await sendingOrg();
    expect((await sendingOf(s.org.id)).rampUp).toEqual({ enabled: true, startCap: 20, dailyIncrease: 3 });
  });
});
