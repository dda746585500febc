// Delivery failures and reports judged by their reason, over real SMTP: the dispatcher sends
// through the loopback sink (which refuses some recipients with answers of its own), and real
// MIME reports written for these tests (RFC 3464 delivery reports, RFC 5965 feedback reports,
// automatic replies) are delivered into the inbound listener. Each case checks the state left
// behind (suppression, the sequence, the send's reason, the mailbox's counts, the organization's
// health) and the events, including those that must NOT happen.

import { sql } from 'kysely';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveInbound } from '../src/boot/runtime.js';
import { sendStep } from '../src/dispatch/send.js';
import type { InboundListener } from '../src/inbound/smtp-listener.js';
import { eventsOf, system, uid, uniqueEmail } from './crm-support.js';
import { contact, type DraftingOrg, draftingOrg, draftsOf, getSequence, sequence, settle, template } from './drafting-support.js';
import { type DnsServer, startDnsServer } from './support/dns-server.js';
import { killSwitchOffQuietly, setClock, startService, type TestService } from './support/harness.js';
import { deliverSmtp, inboundOf as inboundMessages, mime } from './support/inbound-mail.js';
import { type SmtpSink, startSmtpSink } from './support/smtp-sink.js';

const DOMAIN = 'replies.effects-sender.test';
const DAY = 86_400_000;
let svc: TestService;
let sink: SmtpSink;
let inbound: InboundListener;
let dns: DnsServer;
beforeAll(async () => {
  sink = await startSmtpSink();
  // Mail without a reply token or a thread to our message is authenticated through it (it holds no records: none passes).
  dns = await startDnsServer();
  svc = await startService({
    INBOUND_DNS_SERVERS: dns.address,
    INBOUND_MAX_MESSAGES_PER_ADDRESS_PER_MINUTE: '100000',
    INBOUND_MAX_RECIPIENTS_PER_ADDRESS_PER_MINUTE: '100000',
    SMTP_URL: sink.url,
    MAIL_FROM: 'Acme Sales <sales@effects-sender.test>',
    INBOUND_REPLY_DOMAIN: DOMAIN,
    INBOUND_SMTP_PORT: '0',
    INBOUND_SMTP_HOST: '127.0.0.1',
  });
  await svc.startWorker();
  inbound = (await serveInbound(svc.rt))!;
});
afterAll(async () => {
  await inbound?.close();
  await svc?.close();
  await sink?.close();
  await dns?.close();
});

const step = (n: number, dayOffset: number) => ({
  dayOffset,
  subject: n === 1 ? 'An idea for {{company}}' : `Note ${n}`,
  body: `Hi {{firstName}},\n\nNote ${n} about booking more meetings.\n\nBest,\nSam`,
});
const TWO_STEPS = [step(1, 0), step(2, 3)];

interface Sent {
  s: DraftingOrg;
  c: { id: string; email: string };
  seq: { id: string };
  mailboxId: string | null;
  /** Each message that went out, in order: its Message-ID and reply address. */
  out: { messageId: string; replyTo: string }[];
}

/** An organization (with its own mailbox when asked) that sent the steps due now of a sequence to a new contact. */
async function outreach(
  opts: { mailbox?: string; email?: string; steps?: typeof TWO_STEPS; s?: DraftingOrg; sends?: number } = {},
): Promise<Sent> {
  const s = opts.s ?? (await draftingOrg(svc));
  // Some cases send several steps to the contact in a day: more than the contact daily limit's default.
  await svc.admin.PATCH('/organizations/{orgId}', {
    params: { path: { orgId: s.org.id } },
    body: { flags: { v1_2_api_send: true }, sending: { contactDailyLimit: 10 } },
  });
  let mailboxId: string | null = null;
  if (opts.mailbox) {
    const mb = await svc.admin.POST('/organizations/{orgId}/mailboxes', {
      params: { path: { orgId: s.org.id } },
      body: { email: opts.mailbox, name: 'Sam at Acme' },
    });
    expect(mb.data?.status).toBe('verified');
    mailboxId = mb.data!.id;
  }
  const email = opts.email ?? uniqueEmail('dana');
  const c = await contact(s.api, { email, name: 'Dana Whitfield' });
  const seq = await sequence(s.api, c.id, await template(svc, s.org.id, opts.steps ?? TWO_STEPS));
  await settle(svc);
  for (const d of await draftsOf(s.api, c.id)) await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
  await s.api.POST('/drafts/{id}/send', { params: { path: { id: (await draftsOf(s.api, c.id))[0].id } } });
  await settle(svc);
  const out = [];
  for (const m of sink.messages.filter((x) => x.to.includes(email.toLowerCase()))) {
    const parsed = await simpleParser(m.raw);
    out.push({ messageId: parsed.messageId!, replyTo: (parsed.replyTo?.value[0].address ?? '').toLowerCase() });
  }
  expect(out).toHaveLength(opts.sends ?? 1);
  return { s, c, seq, mailboxId, out };
}

/** A message as a mail server writes it (CRLF lines). */

interface Entry {
  address: string;
  action: string;
  status: string;
  diagnostic?: string;
}

/** An RFC 3464 delivery report from a receiving MTA, the returned message's headers (or the whole message) attached. */
function dsn(o: { to: string; entries: Entry[]; returnedId: string; returnedTo: string; whole?: boolean }): string {
  const groups = o.entries.flatMap((e) => [
    `Final-Recipient: rfc822; ${e.address}`,
    `Action: ${e.action}`,
    `Status: ${e.status}`,
    ...(e.diagnostic ? [`Diagnostic-Code: smtp; ${e.diagnostic}`] : []),
    '',
  ]);
  const returned = [
    'From: Sam at Acme <sam@effects-sender.test>',
    `To: ${o.returnedTo}`,
    'Subject: An idea for your team',
    `Message-ID: ${o.returnedId}`,
    ...(o.whole ? ['Content-Type: text/plain; charset=utf-8', '', 'Hi Dana,', '', 'Note 1 about booking more meetings.'] : []),
  ];
  return mime(
    {
      From: 'Mail Delivery Subsystem <mailer-daemon@mx.far-away.example>',
      To: o.to,
      Subject: 'Delivery Status Notification',
      'Message-ID': `<${uid('dsn')}@mx.far-away.example>`,
      'Auto-Submitted': 'auto-replied',
      'Content-Type': 'multipart/report; report-type=delivery-status; boundary="REPORT-7"',
    },
    [
      '--REPORT-7',
      'Content-Type: text/plain; charset=us-ascii',
      '',
      'This is the mail system at mx.far-away.example. Your message could not be delivered to every recipient.',
      '',
      '--REPORT-7',
      'Content-Type: message/delivery-status',
      '',
      'Reporting-MTA: dns; mx.far-away.example',
      'Arrival-Date: Tue, 3 Mar 2026 10:00:05 +0000',
      '',
      ...groups,
      '--REPORT-7',
      `Content-Type: ${o.whole ? 'message/rfc822' : 'text/rfc822-headers'}`,
      '',
      ...returned,
      '',
      '--REPORT-7--',
      '',
    ].join('\n'),
  );
}

/** An RFC 5965 feedback report about one of our messages. */
function arf(o: { to: string; type: string; rcpt: string; returnedId: string; extra?: string[] }): string {
  return mime(
    {
      From: 'Feedback Loop <feedback@isp.example>',
      To: o.to,
      Subject: `Feedback report (${o.type})`,
      'Message-ID': `<${uid('arf')}@isp.example>`,
      'Content-Type': 'multipart/report; report-type=feedback-report; boundary="FBL-3"',
    },
    [
      '--FBL-3',
      'Content-Type: text/plain; charset=us-ascii',
      '',
      'A report about a message your system sent.',
      '',
      '--FBL-3',
      'Content-Type: message/feedback-report',
      '',
      `Feedback-Type: ${o.type}`,
      'User-Agent: ExampleISP-FBL/2.1',
      'Version: 1',
      ...(o.extra ?? []),
      `Original-Rcpt-To: <${o.rcpt}>`,
      'Arrival-Date: Tue, 3 Mar 2026 10:00:05 +0000',
      '',
      '--FBL-3',
      'Content-Type: text/rfc822-headers',
      '',
      'From: Sam at Acme <sam@effects-sender.test>',
      `To: ${o.rcpt}`,
      'Subject: An idea for your team',
      `Message-ID: ${o.returnedId}`,
      '',
      '--FBL-3--',
      '',
    ].join('\n'),
  );
}

/** Delivers a message to the listener over SMTP like an MTA (null envelope sender, as reports have). */
async function deliver(raw: string, to: string[], from = ''): Promise<void> {
  const answer = await deliverSmtp(inbound.port, raw, to, from);
  expect(answer.response).toMatch(/^250 /);
  await settle(svc);
}

const inboundOf = (orgId: string) => inboundMessages(svc, orgId);
const suppression = async (s: DraftingOrg, email: string) =>
  (await s.api.GET('/suppression', { params: { query: { email } } })).data as {
    suppressed: boolean;
    entry: { reason: string; source: string | null; expiresAt: string | null } | null;
  };
const queueOf = async (orgId: string) => (await svc.admin.GET('/send-queue', { params: { query: { organizationId: orgId } } })).data!.data;
const outbox = async (orgId: string) => (await svc.admin.GET('/outbox', { params: { query: { organizationId: orgId } } })).data!.data;
const mailboxes = async (orgId: string) =>
  (await svc.admin.GET('/organizations/{orgId}/mailboxes', { params: { path: { orgId } } })).data!.data;
const health = async (orgId: string) => (await svc.admin.GET('/organizations/{orgId}/health', { params: { path: { orgId } } })).data!;
const kinds = async (orgId: string) => (await eventsOf(svc, orgId, 'reply.classified')).map((e) => e.data.kind);
const bounced = async (orgId: string) => (await eventsOf(svc, orgId, 'email.bounced')).map((e) => e.data);

/** Sends of the organization made earlier (from a mailbox, or the deployment sender), so its rates are read. */
async function earlierSends(orgId: string, mailboxId: string | null, n = 25) {
  await system(svc, (trx) =>
    trx
      .insertInto('send_records')
      .values(
        Array.from({ length: n }, (_, i) => ({
          organization_id: orgId,
          id: uid('snd_'),
          mailbox_id: mailboxId ?? 'deployment',
          status: 'sent',
          sent_at: new Date(Date.now() - (i + 1) * 3_600_000),
          to_email: `earlier${i}@elsewhere.example`,
        })),
      )
      .execute(),
  );
}

describe('delivery reports by the class of their reason', () => {
  it('a failure about the recipient (user unknown) suppresses the address for ever and stops the sequence; the reason is on the send and in email.bounced', async () => {
    const sent = await outreach();
    const [o] = sent.out;
    await deliver(
      dsn({
        to: o.replyTo,
        entries: [{ address: sent.c.email, action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 The email account does not exist' }],
        returnedId: o.messageId,
        returnedTo: sent.c.email,
      }),
      [o.replyTo],
    );
    expect(await suppression(sent.s, sent.c.email)).toMatchObject({
      suppressed: true,
      entry: { reason: 'HARD_BOUNCE', source: 'delivery report', expiresAt: null },
    });
    const [m] = await inboundOf(sent.s.org.id);
    expect(await bounced(sent.s.org.id)).toEqual([
      expect.objectContaining({
        kind: 'hard',
        bounceClass: 'recipient',
        reason: 'user_unknown',
        temporary: false,
        suppressed: true,
        code: '5.1.1',
        contactId: sent.c.id,
        messageId: m.id,
      }),
    ]);
    expect((await outbox(sent.s.org.id)).map((x) => [x.status, x.bounceReason, x.bounceClass])).toEqual([
      ['bounced', 'user_unknown', 'recipient'],
    ]);
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('PAUSED');
    expect((await eventsOf(svc, sent.s.org.id, 'sequence.paused')).map((e) => e.data.reason)).toEqual(['hard_bounce']);
    expect(await kinds(sent.s.org.id)).toEqual(['hard_bounce']);
  });

  it('a full mailbox is a soft failure: not suppressed, the sequence goes on, the message is not sent again', async () => {
    const sent = await outreach();
    const [o] = sent.out;
    await deliver(
      dsn({
        to: o.replyTo,
        entries: [
          {
            address: sent.c.email,
            action: 'failed',
            status: '5.2.2',
            diagnostic: '552 5.2.2 The recipient mailbox is over its storage quota',
          },
        ],
        returnedId: o.messageId,
        returnedTo: sent.c.email,
      }),
      [o.replyTo],
    );
    expect((await suppression(sent.s, sent.c.email)).suppressed).toBe(false);
    expect(await eventsOf(svc, sent.s.org.id, 'suppression.added')).toEqual([]);
    expect(await bounced(sent.s.org.id)).toEqual([
      expect.objectContaining({ kind: 'soft', bounceClass: 'soft', reason: 'mailbox_full', suppressed: false, contactId: sent.c.id }),
    ]);
    expect((await outbox(sent.s.org.id)).map((x) => [x.status, x.bounceReason, x.bounceClass])).toEqual([
      ['bounced', 'mailbox_full', 'soft'],
    ]);
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('ACTIVE');
    expect(await eventsOf(svc, sent.s.org.id, 'sequence.paused')).toEqual([]);
    expect((await queueOf(sent.s.org.id)).find((q) => q.step === 2)).toMatchObject({ state: 'queued' });
    expect(sink.messages.filter((x) => x.to.includes(sent.c.email.toLowerCase()))).toHaveLength(1);
    expect(await kinds(sent.s.org.id)).toEqual(['soft_bounce']);
  });

  it('a refusal of the sender (a blocklist) never suppresses the recipient: it counts against the mailbox, by reason, and stops the sequence', async () => {
    const mailbox = `sam@${uid('acme')}.test`;
    const sent = await outreach({ mailbox });
    const [o] = sent.out;
    await deliver(
      dsn({
        to: o.replyTo,
        entries: [
          {
            address: sent.c.email,
            action: 'failed',
            status: '5.7.1',
            diagnostic: '550 5.7.1 Service unavailable; client host [192.0.2.10] blocked using a DNS blocklist',
          },
        ],
        returnedId: o.messageId,
        returnedTo: sent.c.email,
      }),
      [o.replyTo],
    );
    expect((await suppression(sent.s, sent.c.email)).suppressed).toBe(false);
    expect(await bounced(sent.s.org.id)).toEqual([
      expect.objectContaining({ kind: 'soft', bounceClass: 'sender', reason: 'blocked', suppressed: false }),
    ]);
    const [mb] = await mailboxes(sent.s.org.id);
    expect(mb.deliverability).toEqual({
      windowDays: 28,
      sends: 1,
      hardBounces: 0,
      refusals: 1,
      refusalsByReason: [{ reason: 'blocked', count: 1, lastAt: expect.any(String) }],
    });
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('PAUSED');
    expect((await eventsOf(svc, sent.s.org.id, 'sequence.paused')).map((e) => e.data.reason)).toEqual(['sender_refused']);
    expect(await kinds(sent.s.org.id)).toEqual(['sender_refusal']);
  });

  it('another permanent failure (a message too big; a failure notice naming no address) neither suppresses nor stops the sequence', async () => {
    const sent = await outreach();
    const [o] = sent.out;
    await deliver(
      dsn({
        to: o.replyTo,
        entries: [
          { address: sent.c.email, action: 'failed', status: '5.3.4', diagnostic: '552 5.3.4 Message size exceeds the fixed limit' },
        ],
        returnedId: o.messageId,
        returnedTo: sent.c.email,
      }),
      [o.replyTo],
    );
    expect((await suppression(sent.s, sent.c.email)).suppressed).toBe(false);
    expect(await bounced(sent.s.org.id)).toEqual([
      expect.objectContaining({ kind: 'soft', bounceClass: 'other', reason: 'message_too_big', suppressed: false }),
    ]);
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('ACTIVE');
    expect(await kinds(sent.s.org.id)).toEqual(['other_failure']);

    // A failure notice without a report part, naming no address: a failure of our recipient, nothing more known.
    const bare = await outreach();
    const notice = mime(
      {
        From: 'MAILER-DAEMON@mx.far-away.example',
        To: bare.out[0].replyTo,
        Subject: 'failure notice',
        'Message-ID': `<${uid('qm')}@mx.far-away.example>`,
        'Content-Type': 'text/plain; charset=us-ascii',
      },
      'Hi. This is the mail transfer program at mx.far-away.example.\nI could not deliver your message to the address you sent it to.\nRemote host said: 554 delivery refused\n',
    );
    await deliver(notice, [bare.out[0].replyTo]);
    expect(await kinds(bare.s.org.id)).toEqual(['other_failure']);
    expect(await bounced(bare.s.org.id)).toEqual([
      expect.objectContaining({ bounceClass: 'other', reason: 'undefined', suppressed: false }),
    ]);
    expect((await suppression(bare.s, bare.c.email)).suppressed).toBe(false);
  });

  it("a report listing several recipients is judged on our recipient's entry alone; a success notice changes nothing", async () => {
    const sent = await outreach();
    const [o] = sent.out;
    // Someone else of the organization, named first and refused for good: not our message's recipient.
    const other = await contact(sent.s.api, { email: uniqueEmail('lee'), name: 'Lee Park' });
    await deliver(
      dsn({
        to: o.replyTo,
        entries: [
          { address: other.email, action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 No such user here' },
          { address: sent.c.email, action: 'failed', status: '4.4.7', diagnostic: 'Delivery time expired: gave up after 5 days' },
        ],
        returnedId: o.messageId,
        returnedTo: sent.c.email,
      }),
      [o.replyTo],
    );
    expect((await suppression(sent.s, sent.c.email)).suppressed).toBe(false);
    expect((await suppression(sent.s, other.email)).suppressed).toBe(false);
    expect(await bounced(sent.s.org.id)).toEqual([
      expect.objectContaining({ bounceClass: 'soft', reason: 'expired', contactId: sent.c.id }),
    ]);
    expect(await kinds(sent.s.org.id)).toEqual(['soft_bounce']);

    const ok = await outreach();
    await deliver(
      dsn({
        to: ok.out[0].replyTo,
        entries: [{ address: ok.c.email, action: 'delivered', status: '2.0.0', diagnostic: '250 2.0.0 Ok: delivered to mailbox' }],
        returnedId: ok.out[0].messageId,
        returnedTo: ok.c.email,
      }),
      [ok.out[0].replyTo],
    );
    expect(await kinds(ok.s.org.id)).toEqual(['delivery_notice']);
    expect(await bounced(ok.s.org.id)).toEqual([]);
    expect((await outbox(ok.s.org.id)).map((x) => [x.status, x.bounceReason])).toEqual([['sent', null]]);
    expect((await getSequence(ok.s.api, ok.seq.id)).status).toBe('ACTIVE');
  });

  it('soft failures suppress the address only when repeated: 3 within 30 days, spanning 3 days or more (HARD_BOUNCE, source repeated soft bounces, lapsing after 90 days)', async () => {
    const steps = [step(1, 0), step(2, 0), step(3, 0), step(4, 0)];
    const sent = await outreach({ steps, sends: 4 });
    const t0 = Date.parse('2031-03-03T12:00:00Z');
    const full = async (i: number, at: number) => {
      setClock(svc, new Date(at));
      await deliver(
        dsn({
          to: sent.out[i].replyTo,
          entries: [{ address: sent.c.email, action: 'failed', status: '4.2.2', diagnostic: '452 4.2.2 Mailbox full, try again later' }],
          returnedId: sent.out[i].messageId,
          returnedTo: sent.c.email,
        }),
        [sent.out[i].replyTo],
      );
    };
    // Three within two days: not yet.
    await full(0, t0);
    await full(1, t0 + DAY);
    await full(2, t0 + 2 * DAY);
    expect((await suppression(sent.s, sent.c.email)).suppressed).toBe(false);
    expect((await bounced(sent.s.org.id)).map((b) => [b.bounceClass, b.reason, b.suppressed])).toEqual([
      ['soft', 'mailbox_full', false],
      ['soft', 'mailbox_full', false],
      ['soft', 'mailbox_full', false],
    ]);
    // A fourth, the span now past three days: suppressed, for a while.
    await full(3, t0 + 3.5 * DAY);
    const s = await suppression(sent.s, sent.c.email);
    expect(s).toMatchObject({ suppressed: true, entry: { reason: 'HARD_BOUNCE', source: 'repeated soft bounces' } });
    expect(Date.parse(s.entry!.expiresAt!)).toBeGreaterThanOrEqual(t0 + 93.5 * DAY - 60_000);
    expect(Date.parse(s.entry!.expiresAt!)).toBeLessThanOrEqual(t0 + 93.5 * DAY + 60_000);
    expect((await bounced(sent.s.org.id)).at(-1)).toMatchObject({ kind: 'soft', bounceClass: 'soft', suppressed: true });
    expect((await eventsOf(svc, sent.s.org.id, 'suppression.added')).map((e) => e.data)).toEqual([
      expect.objectContaining({ reason: 'HARD_BOUNCE', source: 'repeated soft bounces' }),
    ]);
    // Nothing was sent again.
    expect(sink.messages.filter((x) => x.to.includes(sent.c.email.toLowerCase()))).toHaveLength(4);
  });
});

describe('the answer at send time by the class of its reason', () => {
  it('a refusal of the sender fails the step without suppressing the recipient, counts on the mailbox and, at 2% of 20+ sends, pauses it (refusal_rate)', async () => {
    const s = await draftingOrg(svc);
    const mailbox = `sam@${uid('acme')}.test`;
    const email = `${uid('pat')}@${uid('strict')}.example`;
    sink.behave(email, { reply: 550, text: '5.7.1 Service unavailable; client host [192.0.2.10] blocked using a DNS blocklist' });
    // The mailbox's earlier sends, so its refusal rate is read (25 + this one).
    const mb = (
      await svc.admin.POST('/organizations/{orgId}/mailboxes', { params: { path: { orgId: s.org.id } }, body: { email: mailbox } })
    ).data!;
    await earlierSends(s.org.id, mb.id);
    const sent = await outreach({ s, email, sends: 0 });
    expect((await suppression(s, email)).suppressed).toBe(false);
    expect(await eventsOf(svc, s.org.id, 'suppression.added')).toEqual([]);
    expect(await bounced(s.org.id)).toEqual([
      expect.objectContaining({ kind: 'soft', bounceClass: 'sender', reason: 'blocked', suppressed: false, code: 550, step: 1 }),
    ]);
    expect((await eventsOf(svc, s.org.id, 'send.failed'))[0].data).toMatchObject({
      permanent: true,
      bounceReason: 'blocked',
      bounceClass: 'sender',
    });
    expect((await eventsOf(svc, s.org.id, 'sequence.step_failed'))[0].data).toMatchObject({
      reason: 'sender_refused',
      bounceReason: 'blocked',
    });
    expect((await queueOf(s.org.id)).map((q) => [q.step, q.state, q.heldBy])).toEqual([
      [1, 'failed', 'sender_refused'],
      [2, 'skipped', 'sequence_not_active'],
    ]);
    expect((await getSequence(s.api, sent.seq.id)).status).toBe('PAUSED');
    expect((await eventsOf(svc, s.org.id, 'sequence.paused')).map((e) => e.data.reason)).toEqual(['sender_refused']);
    expect((await outbox(s.org.id)).filter((x) => x.to === email).map((x) => [x.status, x.bounceReason, x.bounceClass])).toEqual([
      ['bounced', 'blocked', 'sender'],
    ]);
    const [after] = await mailboxes(s.org.id);
    expect(after).toMatchObject({
      status: 'paused',
      statusReason: 'refusal_rate',
      deliverability: {
        sends: 26,
        hardBounces: 0,
        refusals: 1,
        refusalsByReason: [{ reason: 'blocked', count: 1, lastAt: expect.any(String) }],
      },
    });
    // The organization says the mailbox is paused; its bounce rate (hard bounces only) is untouched.
    const h = await health(s.org.id);
    expect(h.reasons).toEqual([expect.objectContaining({ code: 'mailbox_paused', mailboxId: mb.id, reason: 'refusal_rate' })]);
  });

  it('a rate-limit report backs off the recipient domain: its next steps wait (recipient_domain_throttled); a throttle never pauses the mailbox', async () => {
    const s = await draftingOrg(svc);
    const domain = `${uid('busy')}.example`;
    const mb = (
      await svc.admin.POST('/organizations/{orgId}/mailboxes', {
        params: { path: { orgId: s.org.id } },
        body: { email: `sam@${uid('acme')}.test` },
      })
    ).data!;
    await earlierSends(s.org.id, mb.id); // 25 + 1: one refusal would be past 2%
    const sent = await outreach({ s, email: `${uid('dana')}@${domain}`, steps: [step(1, 0)] });
    const [o] = sent.out;
    await deliver(
      dsn({
        to: o.replyTo,
        entries: [
          {
            address: sent.c.email,
            action: 'failed',
            status: '4.7.28',
            diagnostic: '421 4.7.28 Mail from your relay arrives at an unusual rate and is limited for now; come back later',
          },
        ],
        returnedId: o.messageId,
        returnedTo: sent.c.email,
      }),
      [o.replyTo],
    );
    expect(await bounced(s.org.id)).toEqual([
      expect.objectContaining({ bounceClass: 'sender', reason: 'rate_limited', temporary: true, suppressed: false }),
    ]);
    expect((await mailboxes(s.org.id))[0]).toMatchObject({ status: 'verified', statusReason: null });
    // Another contact at the domain waits for the domain's backoff (15 minutes); one elsewhere does not.
    const other = await outreach({ s, email: `${uid('lee')}@${domain}`, steps: [step(1, 0)], sends: 0 });
    const [q] = (await queueOf(s.org.id)).filter((x) => x.contactId === other.c.id);
    expect(q).toMatchObject({ state: 'deferred', heldBy: 'recipient_domain_throttled', attempts: 0 });
    expect(Date.parse(q.nextAttemptAt) - Date.now()).toBeGreaterThan(14 * 60_000);
    await outreach({ s, email: `${uid('kim')}@${uid('calm')}.example`, steps: [step(1, 0)] });
  });

  it('a full mailbox at send time fails the step and is counted, never suppressed', async () => {
    const email = `${uid('kim')}@${uid('quota')}.example`;
    sink.behave(email, { reply: 552, text: '5.2.2 The mailbox of this recipient is full' });
    const sent = await outreach({ email, sends: 0 });
    expect((await suppression(sent.s, email)).suppressed).toBe(false);
    expect(await bounced(sent.s.org.id)).toEqual([
      expect.objectContaining({ bounceClass: 'soft', reason: 'mailbox_full', suppressed: false }),
    ]);
    expect((await queueOf(sent.s.org.id)).find((q) => q.step === 1)).toMatchObject({ state: 'failed', heldBy: 'soft_bounce' });
    expect((await eventsOf(svc, sent.s.org.id, 'sequence.paused')).map((e) => e.data.reason)).toEqual(['soft_bounce']);
  });
  it('a temporary answer still there after the last attempt is judged by its reason; the record stays failed', async () => {
    const email = `${uid('lou')}@${uid('busy')}.example`;
    sink.behave(email, { reply: 452, text: '4.2.2 Mailbox full, try again later' });
    const sent = await outreach({ email, sends: 0, steps: [step(1, 0)] });
    let [q] = await queueOf(sent.s.org.id);
    expect(q).toMatchObject({ state: 'deferred', heldBy: 'transport_retry', attempts: 1 });
    expect(await bounced(sent.s.org.id)).toEqual([]);
    // The last attempt (the earlier ones simulated), now.
    await system(svc, (trx) => sql`UPDATE send_queue SET attempts = 4, next_attempt_at = now() WHERE id = ${q.id}`.execute(trx));
    await sendStep(svc.rt, sent.s.org.id, q.id);
    [q] = await queueOf(sent.s.org.id);
    expect(q).toMatchObject({ state: 'failed', heldBy: 'transport_failed', attempts: 5 });
    expect(await bounced(sent.s.org.id)).toEqual([
      expect.objectContaining({ bounceClass: 'soft', reason: 'mailbox_full', code: 452, temporary: true, suppressed: false }),
    ]);
    expect((await eventsOf(svc, sent.s.org.id, 'send.failed'))[0].data).toMatchObject({
      permanent: false,
      attempts: 5,
      bounceReason: 'mailbox_full',
    });
    expect((await outbox(sent.s.org.id)).map((x) => [x.status, x.bounceReason, x.bounceClass])).toEqual([
      ['failed', null, null],
      ['failed', 'mailbox_full', 'soft'],
    ]);
    expect((await suppression(sent.s, email)).suppressed).toBe(false);
  });
});

describe('complaints and other feedback reports', () => {
  it('an auth-failure report about our mail is recorded, not a complaint: no suppression, no email.complained, the health unmoved; an abuse report still is one', async () => {
    const sent = await outreach();
    await earlierSends(sent.s.org.id, null);
    const [o] = sent.out;
    await deliver(
      arf({
        to: o.replyTo,
        type: 'auth-failure',
        rcpt: sent.c.email,
        returnedId: o.messageId,
        extra: ['Auth-Failure: dkim', 'Reported-Domain: effects-sender.test', 'DKIM-Domain: effects-sender.test'],
      }),
      [o.replyTo],
    );
    const [m] = await inboundOf(sent.s.org.id);
    expect(m).toMatchObject({ contact_id: sent.c.id, send_record_id: expect.any(String), intent_reason: 'arf:auth-failure' });
    expect((await suppression(sent.s, sent.c.email)).suppressed).toBe(false);
    expect(await eventsOf(svc, sent.s.org.id, 'email.complained')).toEqual([]);
    expect(await eventsOf(svc, sent.s.org.id, 'org.health_changed')).toEqual([]);
    expect((await health(sent.s.org.id)).state).toBe('healthy');
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('ACTIVE');
    expect(await kinds(sent.s.org.id)).toEqual(['feedback_report']);

    await deliver(arf({ to: o.replyTo, type: 'abuse', rcpt: sent.c.email, returnedId: o.messageId }), [o.replyTo]);
    expect(await suppression(sent.s, sent.c.email)).toMatchObject({ suppressed: true, entry: { reason: 'COMPLAINT' } });
    expect(await eventsOf(svc, sent.s.org.id, 'email.complained')).toHaveLength(1);
    // One complaint in 26 sends is past 0.3%.
    expect((await health(sent.s.org.id)).reasons).toEqual([expect.objectContaining({ code: 'complaint_rate', complaints: 1 })]);
  });

  it('an opt-out report is the recipient unsubscribing: UNSUBSCRIBE, email.unsubscribed, the sequence paused; no complaint, no reply', async () => {
    const sent = await outreach();
    const [o] = sent.out;
    await deliver(arf({ to: o.replyTo, type: 'opt-out', rcpt: sent.c.email, returnedId: o.messageId }), [o.replyTo]);
    expect(await kinds(sent.s.org.id)).toEqual(['opt_out']);
    expect(await suppression(sent.s, sent.c.email)).toMatchObject({
      suppressed: true,
      entry: { reason: 'UNSUBSCRIBE', source: 'feedback report' },
    });
    expect((await eventsOf(svc, sent.s.org.id, 'email.unsubscribed')).map((e) => e.data)).toEqual([
      expect.objectContaining({ contactId: sent.c.id, source: 'feedback report' }),
    ]);
    expect(await eventsOf(svc, sent.s.org.id, 'email.complained')).toEqual([]);
    expect((await eventsOf(svc, sent.s.org.id, 'sequence.paused')).map((e) => e.data.reason)).toEqual(['unsubscribed']);
    expect((await draftsOf(sent.s.api, sent.c.id)).map((d) => d.repliedAt)).toEqual([null, null]);
  });
});

describe('matching a report to a message we sent', () => {
  it('a delivery report matched only by the Message-ID of the message it returns reaches its contact and send', async () => {
    const mailbox = `sam@${uid('acme')}.test`;
    const sent = await outreach({ mailbox });
    const [o] = sent.out;
    // To the mailbox's own address (no reply token anywhere); the returned message whole, with our Message-ID.
    await deliver(
      dsn({
        to: mailbox,
        entries: [
          { address: sent.c.email, action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 Recipient address rejected: unknown user' },
        ],
        returnedId: o.messageId,
        returnedTo: sent.c.email,
        whole: true,
      }),
      [mailbox],
    );
    const [m] = await inboundOf(sent.s.org.id);
    const [record] = await outbox(sent.s.org.id);
    expect(m).toMatchObject({ contact_id: sent.c.id, send_record_id: record.id, thread_method: 'header', sequence_id: sent.seq.id });
    expect(record).toMatchObject({ status: 'bounced', bounceReason: 'user_unknown' });
    expect(await suppression(sent.s, sent.c.email)).toMatchObject({ suppressed: true, entry: { reason: 'HARD_BOUNCE' } });
    expect(await bounced(sent.s.org.id)).toEqual([expect.objectContaining({ contactId: sent.c.id, messageId: m.id })]);
  });

  it('a report matched to no message of ours is stored for the operator and changes nothing', async () => {
    const mailbox = `sam@${uid('acme')}.test`;
    const sent = await outreach({ mailbox });
    const before = (await eventsOf(svc, sent.s.org.id)).length;
    // About our contact's address, but returning a message we never sent, with no reply token.
    const foreign = `<${uid('elsewhere')}@another-sender.example>`;
    await deliver(
      dsn({
        to: mailbox,
        entries: [{ address: sent.c.email, action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 User unknown' }],
        returnedId: foreign,
        returnedTo: sent.c.email,
      }),
      [mailbox],
    );
    await deliver(arf({ to: mailbox, type: 'abuse', rcpt: sent.c.email, returnedId: foreign }), [mailbox]);
    const ms = await inboundOf(sent.s.org.id);
    expect(ms.map((m) => [m.contact_id, m.send_record_id, m.thread_method, m.status])).toEqual([
      [null, null, 'none', 'classified'],
      [null, null, 'none', 'classified'],
    ]);
    expect(await kinds(sent.s.org.id)).toEqual(['unmatched_report', 'unmatched_report']);
    expect((await suppression(sent.s, sent.c.email)).suppressed).toBe(false);
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('ACTIVE');
    expect((await outbox(sent.s.org.id)).map((x) => [x.status, x.bounceReason])).toEqual([['sent', null]]);
    const after = (await eventsOf(svc, sent.s.org.id)).slice(before).map((e) => e.type);
    expect(after).toEqual(['reply.received', 'reply.classified', 'reply.received', 'reply.classified']);
  });
});

describe('automatic mail', () => {
  it('is never a reply: an automatic acknowledgement and a challenge-response request pause nothing and set no repliedAt', async () => {
    const sent = await outreach();
    const [o] = sent.out;
    const ack = mime(
      {
        From: 'Contoso Support <support@contoso-help.example>',
        To: o.replyTo,
        Subject: 'Re: An idea for your team [Ticket #48213]',
        'Message-ID': `<${uid('ack')}@contoso-help.example>`,
        'In-Reply-To': o.messageId,
        'Auto-Submitted': 'auto-replied',
        'Content-Type': 'text/plain; charset=utf-8',
      },
      'Thank you for writing to us. Your request has been received and a ticket was opened.\nWe are interested in helping you and will get back to you soon.',
    );
    const challenge = mime(
      {
        From: 'Mail Guard <noreply@guard.contoso.example>',
        To: o.replyTo,
        Subject: 'Re: An idea for your team',
        'Message-ID': `<${uid('cr')}@guard.contoso.example>`,
        'In-Reply-To': o.messageId,
        'Content-Type': 'text/plain; charset=utf-8',
      },
      'The person you wrote to only accepts mail from approved senders.\nPlease confirm you are a person by replying to this message; your mail will then be delivered. Sounds good?',
    );
    await deliver(ack, [o.replyTo], 'support@contoso-help.example');
    await deliver(challenge, [o.replyTo], 'noreply@guard.contoso.example');
    expect(await kinds(sent.s.org.id)).toEqual(['automatic', 'automatic']);
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('ACTIVE');
    expect(await eventsOf(svc, sent.s.org.id, 'sequence.paused')).toEqual([]);
    expect(await eventsOf(svc, sent.s.org.id, 'lead.interested')).toEqual([]);
    expect((await draftsOf(sent.s.api, sent.c.id)).map((d) => d.repliedAt)).toEqual([null, null]);
    const contactRow = await system(svc, (trx) =>
      trx.selectFrom('contacts').select('out_of_office_until').where('id', '=', sent.c.id).executeTakeFirstOrThrow(),
    );
    expect(contactRow.out_of_office_until).toBeNull();
    expect(
      await system(svc, (trx) =>
        sql<{ n: number }>`SELECT count(*)::int AS n FROM action_items WHERE organization_id = ${sent.s.org.id}`.execute(trx),
      ),
    ).toMatchObject({
      rows: [{ n: 0 }],
    });
  });
});

describe("every sequence of the contact, whichever sequence's message the event is about", () => {
  beforeAll(async () => {
    await svc.startWorker(); // a second worker competes for the same jobs
  });

  interface TwoSequences {
    s: DraftingOrg;
    c: { id: string; email: string };
    /** The sequence whose message went out (two steps, the second in three days), and the other (one step). */
    seqs: [string, string];
    /** The message that went out. */
    out: { messageId: string; replyTo: string; unsubscribe: string };
    /** The other sequence's step, held by the contact daily limit. */
    held: { id: string };
  }

  /** A contact in two sequences, both queued today: the first one's message goes out, the other's step waits for tomorrow. */
  async function twoSequences(email = uniqueEmail('dana')): Promise<TwoSequences> {
    const s = await draftingOrg(svc);
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { flags: { v1_2_api_send: true } } });
    const c = await contact(s.api, { email, name: 'Dana Whitfield' });
    const first = await sequence(s.api, c.id, await template(svc, s.org.id, TWO_STEPS));
    const other = await sequence(s.api, c.id, await template(svc, s.org.id, [{ ...step(1, 0), subject: 'Another idea for {{company}}' }]));
    await settle(svc);
    const drafts = await draftsOf(s.api, c.id);
    for (const d of drafts) await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
    for (const seq of [first, other]) {
      const d = drafts.find((x) => x.sequenceId === seq.id && x.step === 1)!;
      await s.api.POST('/drafts/{id}/send', { params: { path: { id: d.id } } });
      await settle(svc);
    }
    const got = sink.messages.filter((x) => x.to.includes(email.toLowerCase()));
    expect(got).toHaveLength(1);
    const parsed = await simpleParser(got[0].raw);
    expect(parsed.subject).toBe('An idea for your team');
    const listUnsubscribe = parsed.headerLines.find((h) => h.key === 'list-unsubscribe')?.line.slice('list-unsubscribe:'.length);
    const unsubscribe = /^<(.+)>$/.exec(listUnsubscribe?.trim() ?? '')?.[1] ?? '';
    const q = await queueOf(s.org.id);
    const held = q.find((r) => r.sequenceId === other.id)!;
    expect(held).toMatchObject({ state: 'deferred', heldBy: 'contact_daily_limit' });
    return {
      s,
      c,
      seqs: [first.id, other.id],
      out: { messageId: parsed.messageId!, replyTo: (parsed.replyTo?.value[0].address ?? '').toLowerCase(), unsubscribe },
      held,
    };
  }

  /** Both sequences paused for the reason, one sequence.paused each, their queued steps out of the queue; the held step, run, sends nothing. */
  async function bothStopped(t: TwoSequences, reason: string, sent = 1) {
    for (const id of t.seqs) expect((await getSequence(t.s.api, id)).status, id).toBe('PAUSED');
    const paused = await eventsOf(svc, t.s.org.id, 'sequence.paused');
    expect(paused.map((e) => [e.data.sequenceId, e.data.reason]).sort()).toEqual(t.seqs.map((id) => [id, reason]).sort());
    const q = await queueOf(t.s.org.id);
    expect(
      q
        .filter((r) => r.state !== 'failed')
        .map((r) => [r.sequenceId, r.step, r.state, r.heldBy])
        .sort(),
    ).toEqual(
      [
        [t.seqs[0], 2, 'skipped', 'sequence_not_active'],
        [t.seqs[1], 1, 'skipped', 'sequence_not_active'],
      ].sort(),
    );
    await sendStep(svc.rt, t.s.org.id, t.held.id);
    await settle(svc);
    expect(sink.messages.filter((x) => x.to.includes(t.c.email.toLowerCase()))).toHaveLength(sent);
  }

  it("a reply booking a meeting, to one sequence's reply address, pauses the other sequence too; its queued step is not sent", async () => {
    const t = await twoSequences();
    await deliver(
      mime(
        {
          From: `Dana Whitfield <${t.c.email}>`,
          To: t.out.replyTo,
          Subject: 'Re: An idea for your team',
          'Message-ID': `<${uid('r')}@client.example>`,
          'In-Reply-To': t.out.messageId,
          References: t.out.messageId,
          'Content-Type': 'text/plain; charset=utf-8',
        },
        'Sounds good, can we schedule a call next Tuesday?',
      ),
      [t.out.replyTo],
      t.c.email,
    );
    expect(await kinds(t.s.org.id)).toEqual(['reply']);
    expect(await eventsOf(svc, t.s.org.id, 'meeting.booked')).toHaveLength(1);
    await bothStopped(t, 'replied');
  });

  it('a hard bounce at send time stops every sequence of the contact, not only the one whose step failed', async () => {
    const email = uniqueEmail('gone');
    const s = await draftingOrg(svc);
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { flags: { v1_2_api_send: true } } });
    sink.behave(email, 'permanent');
    const c = await contact(s.api, { email, name: 'Dana Whitfield' });
    const first = await sequence(s.api, c.id, await template(svc, s.org.id, TWO_STEPS));
    const other = await sequence(s.api, c.id, await template(svc, s.org.id, [{ ...step(1, 0), subject: 'Another idea for {{company}}' }]));
    await settle(svc);
    const drafts = await draftsOf(s.api, c.id);
    for (const d of drafts) await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
    // Both queued while the kill switch holds them; then the first sequence's step alone is tried.
    await svc.admin.PATCH('/settings', { body: { emailKillSwitch: true } });
    try {
      for (const seq of [first, other])
        await s.api.POST('/drafts/{id}/send', {
          params: { path: { id: drafts.find((x) => x.sequenceId === seq.id && x.step === 1)!.id } },
        });
      await settle(svc);
    } finally {
      await killSwitchOffQuietly(svc);
    }
    const q = await queueOf(s.org.id);
    await sendStep(svc.rt, s.org.id, q.find((r) => r.sequenceId === first.id && r.step === 1)!.id);
    expect(await bounced(s.org.id)).toEqual([expect.objectContaining({ sequenceId: first.id, kind: 'hard', suppressed: true })]);
    expect((await queueOf(s.org.id)).find((r) => r.sequenceId === first.id && r.step === 1)).toMatchObject({
      state: 'failed',
      heldBy: 'hard_bounce',
    });
    await bothStopped(
      {
        s,
        c,
        seqs: [first.id, other.id],
        out: { messageId: '', replyTo: '', unsubscribe: '' },
        held: q.find((r) => r.sequenceId === other.id)!,
      },
      'hard_bounce',
      0,
    );
  });

  it("a delivery report of a hard bounce about one sequence's message stops the other sequence too", async () => {
    const t = await twoSequences();
    await deliver(
      dsn({
        to: t.out.replyTo,
        entries: [{ address: t.c.email, action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 user unknown' }],
        returnedId: t.out.messageId,
        returnedTo: t.c.email,
      }),
      [t.out.replyTo],
    );
    expect(await bounced(t.s.org.id)).toEqual([expect.objectContaining({ sequenceId: t.seqs[0], kind: 'hard', suppressed: true })]);
    await bothStopped(t, 'hard_bounce');
  });

  it("an unsubscribe (the one-click link of one sequence's message) and a complaint stop every sequence of the contact", async () => {
    const t = await twoSequences();
    const r = await fetch(t.out.unsubscribe, {
      method: 'POST',
      body: 'List-Unsubscribe=One-Click',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(r.status).toBe(200);
    expect(await eventsOf(svc, t.s.org.id, 'email.unsubscribed')).toHaveLength(1);
    await bothStopped(t, 'unsubscribed');
    const k = await twoSequences();
    await deliver(arf({ to: k.out.replyTo, type: 'abuse', rcpt: k.c.email, returnedId: k.out.messageId }), [k.out.replyTo]);
    expect(await eventsOf(svc, k.s.org.id, 'email.complained')).toHaveLength(1);
    await bothStopped(k, 'complained');
  });
});
