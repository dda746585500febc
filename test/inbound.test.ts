// Replies over real SMTP: the dispatcher sends through the loopback sink with INBOUND_REPLY_DOMAIN
// set (Reply-To and envelope sender carry a signed reply address), and a real SMTP client
// (nodemailer) delivers real MIME into the inbound listener: Gmail, Outlook and Apple style replies
// with quotes, an Exchange out-of-office, a vacation autoreply, delivery reports (RFC 3464), a
// complaint (RFC 5965), a reply that is only a signature, duplicates, forged tokens, a reply from an
// erased contact, and malformed or oversized input. Mail without a reply token or a thread to our
// message is authenticated through a DNS server on loopback (test/support/dns-server.ts). Each case checks the state left behind: the
// stored message, its threading and classification, the effects and the events (and those NOT emitted).

import { sql } from 'kysely';
import { simpleParser } from 'mailparser';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveInbound } from '../src/boot/runtime.js';
import { sendStep } from '../src/dispatch/send.js';
import { classifyReply } from '../src/inbound/classify-reply.js';
import { ACCEPTED, type InboundListener, startInboundSmtp } from '../src/inbound/smtp-listener.js';
import { createSigner, openReplyAddress, replyAddress } from '../src/mail/tokens.js';
import { ConfigError, loadConfig } from '../src/platform/config.js';
import { eventsOf, system, uid, uniqueEmail } from './crm-support.js';
import { contact, type DraftingOrg, draftingOrg, draftsOf, getSequence, sequence, settle, template } from './drafting-support.js';
import { signingDomain } from './support/dkim.js';
import { type DnsServer, startDnsServer } from './support/dns-server.js';
import { failedJobs, startService, type TestService } from './support/harness.js';
import { deliverSmtp, inboundOf as inboundMessages, mime } from './support/inbound-mail.js';
import { type SmtpSink, startSmtpSink } from './support/smtp-sink.js';

const DOMAIN = 'replies.acme-sender.test';
const DAY = 86_400_000;
let svc: TestService;
let sink: SmtpSink;
let inbound: InboundListener;
let dns: DnsServer;
beforeAll(async () => {
  sink = await startSmtpSink();
  dns = await startDnsServer();
  svc = await startService({
    INBOUND_DNS_SERVERS: dns.address,
    // Every message of this file comes from loopback: the per-address bounds are tested on a listener of their own.
    INBOUND_MAX_MESSAGES_PER_ADDRESS_PER_MINUTE: '100000',
    INBOUND_MAX_RECIPIENTS_PER_ADDRESS_PER_MINUTE: '100000',
    SMTP_URL: sink.url,
    MAIL_FROM: 'Acme Sales <sales@acme-sender.test>',
    INBOUND_REPLY_DOMAIN: DOMAIN,
    INBOUND_SMTP_PORT: '0',
    INBOUND_SMTP_HOST: '127.0.0.1',
    INBOUND_MAX_MESSAGE_BYTES: String(200 * 1024),
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

const STEPS = [
  {
    dayOffset: 0,
    subject: 'A quick idea for {{company}}',
    body: 'Hi {{firstName}},\n\nWe help revenue teams book more qualified meetings.\n\nWould a short chat next week be useful?\n\nBest,\nSam',
  },
  { dayOffset: 3, subject: 'Following up', body: 'Hi {{firstName}}, one more note. Worth a chat?' },
];

interface Sent {
  s: DraftingOrg;
  c: { id: string; email: string };
  seq: { id: string };
  messageId: string;
  replyTo: string;
  envelopeFrom: string;
  raw: string;
}

/** An organization (optionally with its own mailbox) that sent step 1 of a two-step sequence to a new contact. */
async function outreach(opts: { mailbox?: string; email?: string } = {}): Promise<Sent> {
  const s = await draftingOrg(svc);
  await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { flags: { v1_2_api_send: true } } });
  if (opts.mailbox) {
    const mb = await svc.admin.POST('/organizations/{orgId}/mailboxes', {
      params: { path: { orgId: s.org.id } },
      body: { email: opts.mailbox, name: 'Sam at Acme' },
    });
    expect(mb.data?.status).toBe('verified');
  }
  const email = opts.email ?? uniqueEmail('dana');
  const c = await contact(s.api, { email, name: 'Dana Whitfield' });
  const seq = await sequence(s.api, c.id, await template(svc, s.org.id, STEPS));
  await settle(svc);
  for (const d of await draftsOf(s.api, c.id)) await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
  await s.api.POST('/drafts/{id}/send', { params: { path: { id: (await draftsOf(s.api, c.id))[0].id } } });
  await settle(svc);
  const got = sink.messages.filter((m) => m.to.includes(email.toLowerCase()));
  expect(got).toHaveLength(1);
  const parsed = await simpleParser(got[0].raw);
  return {
    s,
    c,
    seq,
    messageId: parsed.messageId!,
    replyTo: (parsed.replyTo?.value[0].address ?? '').toLowerCase(),
    envelopeFrom: got[0].from,
    raw: got[0].raw,
  };
}

const textReply = (
  h: { from: string; to: string; subject?: string; inReplyTo?: string; references?: string; id?: string; extra?: Record<string, string> },
  body: string,
) =>
  mime(
    {
      From: h.from,
      To: h.to,
      Subject: h.subject ?? 'Re: A quick idea for your team',
      'Message-ID': h.id ?? `<${uid('r')}@client.example>`,
      'In-Reply-To': h.inReplyTo,
      References: h.references,
      'Content-Type': 'text/plain; charset=utf-8',
      'Content-Transfer-Encoding': '8bit',
      ...h.extra,
    },
    body,
  );

/** Delivers a message to the listener over SMTP like an MTA: the server's answer, or the error it gave. */
const deliver = (raw: string | Buffer, to: string[], from = 'mta@client.example') => deliverSmtp(inbound.port, raw, to, from);

const inboundOf = (orgId: string) => inboundMessages(svc, orgId);
const itemsOf = (orgId: string) =>
  system(svc, (trx) => trx.selectFrom('action_items').selectAll().where('organization_id', '=', orgId).execute());
const contactRow = (id: string) =>
  system(svc, (trx) => trx.selectFrom('contacts').selectAll().where('id', '=', id).executeTakeFirstOrThrow());
const suppression = async (s: DraftingOrg, email: string) =>
  (await s.api.GET('/suppression', { params: { query: { email } } })).data as {
    suppressed: boolean;
    entry: { reason: string; source: string | null } | null;
  };
const queueOf = async (orgId: string) => (await svc.admin.GET('/send-queue', { params: { query: { organizationId: orgId } } })).data!.data;
const types = async (orgId: string) => (await eventsOf(svc, orgId)).map((e) => e.type);

const QUOTE = (from: string) =>
  `On Tue, Mar 3, 2026 at 10:00 AM Acme Sales <${from}> wrote:\n> Hi Dana,\n>\n> We help revenue teams book more qualified meetings.\n>\n> Would a short chat next week be useful?`;

describe('the reply address on outbound mail', () => {
  it('is the Reply-To and the envelope sender of every message; the visible From stays the sender', async () => {
    const sent = await outreach();
    expect(sent.replyTo).toMatch(new RegExp(`^reply\\+[a-z2-7]{55}@${DOMAIN.replace(/\./g, '\\.')}$`));
    expect(sent.replyTo.split('@')[0].length).toBeLessThanOrEqual(64);
    expect(sent.envelopeFrom.toLowerCase()).toBe(sent.replyTo);
    expect(sent.raw).toMatch(/^From: "?Acme Sales"? <sales@acme-sender\.test>/m);
    const record = await system(svc, (trx) =>
      trx.selectFrom('send_records').select(['id', 'headers']).where('organization_id', '=', sent.s.org.id).executeTakeFirstOrThrow(),
    );
    expect(openReplyAddress(svc.rt.services.signer, sent.replyTo)).toEqual({ organizationId: sent.s.org.id, sendRecordId: record.id });
    expect((record.headers as Record<string, string>)['Reply-To']).toBe(sent.replyTo);
  });

  it('tokens survive case-folding; altered, truncated or foreign tokens are not trusted', () => {
    const signer = createSigner(Buffer.alloc(32, 7));
    const other = createSigner(Buffer.alloc(32, 8));
    const org = 'org_0123456789abcdef01234567';
    const rec = 'snd_89abcdef0123456789abcdef';
    const address = replyAddress(signer, DOMAIN, org, rec)!;
    expect(openReplyAddress(signer, address)).toEqual({ organizationId: org, sendRecordId: rec });
    expect(openReplyAddress(signer, address.toUpperCase())).toEqual({ organizationId: org, sendRecordId: rec });
    const token = address.slice(6, 61);
    const flipped = token.slice(0, 10) + (token[10] === 'a' ? 'b' : 'a') + token.slice(11);
    expect(openReplyAddress(signer, `reply+${flipped}@${DOMAIN}`)).toBeNull();
    expect(openReplyAddress(signer, `reply+${token.slice(0, 54)}@${DOMAIN}`)).toBeNull();
    expect(openReplyAddress(other, address)).toBeNull();
    expect(replyAddress(signer, DOMAIN, 'legacy-org', rec)).toBeNull();
  });
});

describe('replies over SMTP', () => {
  it('Gmail style, to the reply address: threaded by its token, quotes left out, interested: paused, repliedAt, lead.interested and an action item', async () => {
    const sent = await outreach();
    const raw = textReply(
      { from: `Dana Whitfield <${sent.c.email}>`, to: sent.replyTo, inReplyTo: sent.messageId, references: sent.messageId },
      `Thanks Sam, this sounds interesting. Please tell me more about pricing for a team of 40.\n\n${QUOTE('sales@acme-sender.test')}`,
    );
    const answer = await deliver(raw, [sent.replyTo]);
    expect(answer).toMatchObject({ ok: true, response: `250 ${ACCEPTED}` });
    const [m] = await inboundOf(sent.s.org.id);
    // No model is configured: the rules classified it, and its effects happened, before the 250.
    expect(m).toMatchObject({
      contact_id: sent.c.id,
      thread_method: 'token',
      sequence_id: sent.seq.id,
      status: 'classified',
      from_email: sent.c.email.toLowerCase(),
      to_email: sent.replyTo,
      authenticated: true,
      authentication: { by: 'token' },
    });
    expect(m.send_record_id).toMatch(/^snd_/);
    expect(m.raw_mime!.toString('utf8').trimEnd()).toBe(raw.trimEnd());
    await settle(svc);
    const [done] = await inboundOf(sent.s.org.id);
    expect(done).toMatchObject({ status: 'classified', intent: 'interested', automatic: false });
    expect(done.stripped_text).toBe('Thanks Sam, this sounds interesting. Please tell me more about pricing for a team of 40.');
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('PAUSED');
    const [d1] = await draftsOf(sent.s.api, sent.c.id);
    expect(d1.repliedAt).not.toBeNull();
    const items = await itemsOf(sent.s.org.id);
    expect(items).toEqual([
      expect.objectContaining({
        action_type: 'reply_interested',
        ai_generated: true,
        priority: 'high',
        entity_type: 'Contact',
        entity_id: sent.c.id,
        source_key: `reply:${m.id}`,
        sales_person_id: sent.s.org.ownerId,
        status: 'pending',
      }),
    ]);
    const interested = await eventsOf(svc, sent.s.org.id, 'lead.interested');
    expect(interested.map((e) => e.data)).toEqual([
      expect.objectContaining({
        messageId: m.id,
        contactId: sent.c.id,
        intent: 'interested',
        actionItemId: items[0].id,
        confidence: expect.any(Number),
        reason: expect.any(String),
      }),
    ]);
    expect((await eventsOf(svc, sent.s.org.id, 'sequence.paused')).map((e) => e.data.reason)).toEqual(['replied']);
    const received = await eventsOf(svc, sent.s.org.id, 'reply.received');
    expect(received.map((e) => e.data)).toEqual([
      expect.objectContaining({ messageId: m.id, contactId: sent.c.id, threadMethod: 'token', sendRecordId: m.send_record_id }),
    ]);
    expect((await eventsOf(svc, sent.s.org.id, 'reply.classified')).map((e) => e.data)).toEqual([
      expect.objectContaining({ messageId: m.id, intent: 'interested', kind: 'reply' }),
    ]);
    // No message text and no address in any of these events.
    for (const e of await eventsOf(svc, sent.s.org.id)) {
      if (!e.type.startsWith('reply.') && !['lead.interested', 'sequence.paused'].includes(e.type)) continue;
      expect(JSON.stringify(e.data)).not.toMatch(/pricing|@/);
    }
    // The queued second step was cancelled with the pause.
    expect((await queueOf(sent.s.org.id)).find((q) => q.step === 2)).toMatchObject({ state: 'skipped', heldBy: 'sequence_not_active' });
  });

  it('Outlook style, to the mailbox address: threaded by In-Reply-To, a meeting request: meeting.booked and an urgent action item', async () => {
    const mailbox = `sam@${uid('acme')}.test`;
    const sent = await outreach({ mailbox });
    const body =
      `Could we schedule a call on Thursday afternoon? Please send me an invite.\n\nDana\n\n________________________________\nFrom: Sam at Acme <${mailbox}>\n` +
      `Sent: Tuesday, March 3, 2026 10:00 AM\nTo: Dana Whitfield <${sent.c.email}>\nSubject: A quick idea for your team\n\nHi Dana,\n\nWe help revenue teams book more qualified meetings.`;
    const raw = textReply(
      {
        from: `"Whitfield, Dana" <${sent.c.email}>`,
        to: `Sam at Acme <${mailbox}>`,
        inReplyTo: sent.messageId,
        extra: { 'Thread-Index': 'AQHZ1234abcd==' },
      },
      body,
    );
    expect((await deliver(raw, [mailbox])).ok).toBe(true);
    await settle(svc);
    const [m] = await inboundOf(sent.s.org.id);
    expect(m).toMatchObject({ thread_method: 'header', contact_id: sent.c.id, intent: 'meeting_request', to_email: mailbox });
    expect(m.stripped_text).not.toMatch(/revenue teams/);
    expect(await itemsOf(sent.s.org.id)).toEqual([
      expect.objectContaining({
        action_type: 'reply_meeting_request',
        priority: 'urgent',
        ai_generated: true,
        source_key: `reply:${m.id}`,
      }),
    ]);
    expect((await eventsOf(svc, sent.s.org.id, 'meeting.booked')).map((e) => e.data)).toEqual([
      expect.objectContaining({ messageId: m.id, contactId: sent.c.id, intent: 'meeting_request' }),
    ]);
    expect(await eventsOf(svc, sent.s.org.id, 'lead.interested')).toEqual([]);
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('PAUSED');
  });

  it('Apple Mail style without References, to the case-folded reply address: threaded by its token, unsubscribe: UNSUBSCRIBE suppression and email.unsubscribed', async () => {
    const sent = await outreach();
    const body = `Please unsubscribe me, I do not want these emails.\n\nSent from my iPhone\n\n> On Mar 3, 2026, at 10:00, Acme Sales <sales@acme-sender.test> wrote:\n>\n> Hi Dana,\n> We help revenue teams book more qualified meetings.`;
    const upper = sent.replyTo.toUpperCase();
    expect((await deliver(textReply({ from: sent.c.email, to: upper }, body), [upper])).ok).toBe(true);
    await settle(svc);
    const [m] = await inboundOf(sent.s.org.id);
    expect(m).toMatchObject({ thread_method: 'token', contact_id: sent.c.id, intent: 'unsubscribe' });
    expect(await suppression(sent.s, sent.c.email)).toMatchObject({ suppressed: true, entry: { reason: 'UNSUBSCRIBE', source: 'reply' } });
    expect((await eventsOf(svc, sent.s.org.id, 'suppression.added')).map((e) => e.data)).toEqual([
      expect.objectContaining({ reason: 'UNSUBSCRIBE', email: sent.c.email.toLowerCase() }),
    ]);
    expect((await eventsOf(svc, sent.s.org.id, 'email.unsubscribed')).map((e) => e.data)).toEqual([
      expect.objectContaining({ messageId: m.id, contactId: sent.c.id, source: 'reply' }),
    ]);
    expect((await eventsOf(svc, sent.s.org.id, 'sequence.paused')).map((e) => e.data.reason)).toEqual(['unsubscribed']);
  });

  it('threads by the sender when nothing else names the message: not interested pauses and marks the latest sent draft replied, opens no item', async () => {
    const mailbox = `team@${uid('acme')}.test`;
    const sent = await outreach({ mailbox });
    // Nothing but the sender names the message, so it acts only with an aligned DMARC pass: the
    // contact's domain signs it (DKIM) and publishes a DMARC policy.
    const theirs = signingDomain(dns, sent.c.email.split('@')[1]);
    const raw = await theirs.sign(textReply({ from: sent.c.email, to: mailbox, subject: 'Your email' }, 'We are not interested, thanks.'));
    expect((await deliver(raw, [mailbox], sent.c.email)).ok).toBe(true);
    await settle(svc);
    const [m] = await inboundOf(sent.s.org.id);
    expect(m).toMatchObject({ thread_method: 'sender', contact_id: sent.c.id, send_record_id: null, intent: 'not_interested' });
    expect(m).toMatchObject({ authenticated: true, authentication: { by: 'dmarc', dkim: 'pass', dmarc: 'pass' } });
    expect((await draftsOf(sent.s.api, sent.c.id))[0].repliedAt).not.toBeNull();
    expect((await draftsOf(sent.s.api, sent.c.id))[1].repliedAt).toBeNull();
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('PAUSED');
    expect(await itemsOf(sent.s.org.id)).toEqual([]);
    for (const t of ['lead.interested', 'meeting.booked', 'suppression.added'])
      expect(await eventsOf(svc, sent.s.org.id, t), t).toEqual([]);
  });

  it('an Exchange out-of-office is not a reply: nothing paused, the contact is out of office until the date it gives, and the dispatcher holds the next step until then', async () => {
    const sent = await outreach();
    const back = new Date(Date.now() + 10 * DAY);
    const backText = back.toLocaleDateString('en-US', { month: 'long', day: 'numeric', year: 'numeric', timeZone: 'UTC' });
    const raw = textReply(
      {
        from: `Dana Whitfield <${sent.c.email}>`,
        to: sent.replyTo,
        subject: 'Automatic reply: A quick idea for your team',
        inReplyTo: sent.messageId,
        extra: { 'Auto-Submitted': 'auto-replied', 'X-Auto-Response-Suppress': 'All', 'X-MS-Exchange-Inbox-Rules-Loop': sent.c.email },
      },
      `I am out of the office until ${backText} with limited access to email. For urgent matters contact my colleague.`,
    );
    expect((await deliver(raw, [sent.replyTo], '')).ok).toBe(true);
    await settle(svc);
    const [m] = await inboundOf(sent.s.org.id);
    expect(m).toMatchObject({ intent: 'out_of_office', automatic: true, thread_method: 'token' });
    const until = (await contactRow(sent.c.id)).out_of_office_until!;
    expect(Math.abs(until.getTime() - back.getTime())).toBeLessThan(1.5 * DAY);
    expect(m.ooo_until?.getTime()).toBe(until.getTime());
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('ACTIVE');
    expect((await draftsOf(sent.s.api, sent.c.id))[0].repliedAt).toBeNull();
    for (const t of ['sequence.paused', 'lead.interested', 'suppression.added'])
      expect(await eventsOf(svc, sent.s.org.id, t), t).toEqual([]);
    expect((await eventsOf(svc, sent.s.org.id, 'reply.classified')).map((e) => e.data)).toEqual([
      expect.objectContaining({ intent: 'out_of_office', kind: 'out_of_office', oooUntil: until.toISOString() }),
    ]);
    // Step 2 comes due (its three days pass): the gate holds it until the return date; nothing goes out.
    const step2 = (await queueOf(sent.s.org.id)).find((q) => q.step === 2)!;
    await system(svc, (trx) =>
      sql`UPDATE send_queue SET scheduled_at = now(), next_attempt_at = now() WHERE id = ${step2.id}`.execute(trx),
    );
    await sendStep(svc.rt, sent.s.org.id, step2.id);
    expect((await queueOf(sent.s.org.id)).find((q) => q.step === 2)).toMatchObject({
      state: 'deferred',
      heldBy: 'contact_out_of_office',
      nextAttemptAt: until.toISOString(),
    });
    expect(sink.messages.filter((x) => x.to.includes(sent.c.email.toLowerCase()))).toHaveLength(1);
  });

  it('a vacation autoreply without a date holds the contact for the default 7 days', async () => {
    const sent = await outreach();
    const raw = textReply(
      {
        from: sent.c.email,
        to: sent.replyTo,
        subject: 'Re: A quick idea for your team',
        extra: { 'X-Autoreply': 'yes', 'Auto-Submitted': 'auto-replied', Precedence: 'auto_reply' },
      },
      'Hello, I am on vacation with no access to email. I will read your message when I am back.',
    );
    const before = Date.now();
    expect((await deliver(raw, [sent.replyTo], '')).ok).toBe(true);
    await settle(svc);
    const until = (await contactRow(sent.c.id)).out_of_office_until!.getTime();
    expect(until).toBeGreaterThanOrEqual(before + 7 * DAY);
    expect(until).toBeLessThanOrEqual(Date.now() + 7 * DAY);
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('ACTIVE');
    expect(await eventsOf(svc, sent.s.org.id, 'sequence.paused')).toEqual([]);
  });

  it("a permanent delivery report to the reply address is the dispatcher's hard bounce: HARD_BOUNCE, email.bounced, the record bounced, the sequence paused; a second report changes nothing", async () => {
    const sent = await outreach();
    const dsn = (id: string, status: string, action: string) =>
      mime(
        {
          From: 'Mail Delivery System <MAILER-DAEMON@mx.recipient.example>',
          To: sent.replyTo,
          Subject: 'Undelivered Mail Returned to Sender',
          'Message-ID': `<${id}@mx.recipient.example>`,
          'Auto-Submitted': 'auto-replied',
          'Content-Type': 'multipart/report; report-type=delivery-status; boundary="DSN-BOUNDARY"',
        },
        [
          '--DSN-BOUNDARY',
          'Content-Type: text/plain; charset=us-ascii',
          '',
          'I am sorry to have to inform you that your message could not be delivered.',
          '',
          '--DSN-BOUNDARY',
          'Content-Type: message/delivery-status',
          '',
          'Reporting-MTA: dns; mx.recipient.example',
          '',
          `Final-Recipient: rfc822; ${sent.c.email}`,
          `Action: ${action}`,
          `Status: ${status}`,
          `Diagnostic-Code: smtp; ${status.startsWith('5') ? '550' : '451'} ${status} mailbox unavailable`,
          '',
          '--DSN-BOUNDARY',
          'Content-Type: text/rfc822-headers',
          '',
          'From: Acme Sales <sales@acme-sender.test>',
          `To: ${sent.c.email}`,
          'Subject: A quick idea for your team',
          `Message-ID: ${sent.messageId}`,
          '',
          '--DSN-BOUNDARY--',
          '',
        ].join('\n'),
      );
    // A temporary report first: recorded, nothing else.
    expect((await deliver(dsn(uid('delay'), '4.4.1', 'delayed'), [sent.replyTo], '')).ok).toBe(true);
    await settle(svc);
    let ms = await inboundOf(sent.s.org.id);
    expect(ms[0]).toMatchObject({ intent: 'bounce', intent_reason: 'dsn:4.4.1', contact_id: sent.c.id, thread_method: 'token' });
    expect(ms[0].report).toMatchObject({ kind: 'dsn', recipients: [expect.objectContaining({ status: '4.4.1', permanent: false })] });
    expect((await suppression(sent.s, sent.c.email)).suppressed).toBe(false);
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('ACTIVE');
    // The permanent one.
    expect((await deliver(dsn(uid('fail'), '5.1.1', 'failed'), [sent.replyTo], '')).ok).toBe(true);
    await settle(svc);
    ms = await inboundOf(sent.s.org.id);
    expect(ms[1]).toMatchObject({
      intent: 'bounce',
      intent_reason: 'dsn:5.1.1',
      contact_id: sent.c.id,
      from_email: 'mailer-daemon@mx.recipient.example',
    });
    expect(await suppression(sent.s, sent.c.email)).toMatchObject({
      suppressed: true,
      entry: { reason: 'HARD_BOUNCE', source: 'delivery report' },
    });
    const bounced = await eventsOf(svc, sent.s.org.id, 'email.bounced');
    expect(bounced.map((e) => e.data)).toEqual([
      expect.objectContaining({ kind: 'hard', code: '5.1.1', contactId: sent.c.id, sequenceId: sent.seq.id, step: 1, messageId: ms[1].id }),
    ]);
    expect((await eventsOf(svc, sent.s.org.id, 'sequence.paused')).map((e) => e.data.reason)).toEqual(['hard_bounce']);
    expect(
      (await svc.admin.GET('/outbox', { params: { query: { organizationId: sent.s.org.id } } })).data!.data.map((o) => o.status),
    ).toEqual(['bounced']);
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('PAUSED');
    expect((await queueOf(sent.s.org.id)).find((q) => q.step === 2)).toMatchObject({ state: 'skipped' });
    // Another copy of the report (another Message-ID): stored, but the bounce is not applied twice.
    expect((await deliver(dsn(uid('again'), '5.1.1', 'failed'), [sent.replyTo], '')).ok).toBe(true);
    await settle(svc);
    expect(await eventsOf(svc, sent.s.org.id, 'email.bounced')).toHaveLength(1);
    expect(await eventsOf(svc, sent.s.org.id, 'suppression.added')).toHaveLength(1);
    expect(await eventsOf(svc, sent.s.org.id, 'reply.classified')).toHaveLength(3);
  });

  it('an ARF complaint adds COMPLAINT, emits email.complained and pauses the sequence', async () => {
    const sent = await outreach();
    const arf = mime(
      {
        From: 'Feedback Loop <fbl@isp.example>',
        To: sent.replyTo,
        Subject: 'Complaint about a message',
        'Message-ID': `<${uid('arf')}@isp.example>`,
        'Content-Type': 'multipart/report; report-type=feedback-report; boundary="ARF"',
      },
      [
        '--ARF',
        'Content-Type: text/plain',
        '',
        'This is an email abuse report.',
        '',
        '--ARF',
        'Content-Type: message/feedback-report',
        '',
        'Feedback-Type: abuse',
        'User-Agent: ISP-FBL/1.0',
        'Version: 1',
        `Original-Mail-From: <${sent.replyTo}>`,
        `Original-Rcpt-To: <${sent.c.email}>`,
        '',
        '--ARF',
        'Content-Type: message/rfc822',
        '',
        'From: Acme Sales <sales@acme-sender.test>',
        `To: ${sent.c.email}`,
        `Message-ID: ${sent.messageId}`,
        'Subject: A quick idea',
        '',
        'Hi Dana',
        '',
        '--ARF--',
        '',
      ].join('\n'),
    );
    expect((await deliver(arf, [sent.replyTo], '')).ok).toBe(true);
    await settle(svc);
    const [m] = await inboundOf(sent.s.org.id);
    expect(m).toMatchObject({ intent: 'complaint', intent_reason: 'arf:abuse', contact_id: sent.c.id });
    expect(await suppression(sent.s, sent.c.email)).toMatchObject({ suppressed: true, entry: { reason: 'COMPLAINT' } });
    expect((await eventsOf(svc, sent.s.org.id, 'email.complained')).map((e) => e.data)).toEqual([
      expect.objectContaining({ messageId: m.id, contactId: sent.c.id, feedbackType: 'abuse' }),
    ]);
    expect((await eventsOf(svc, sent.s.org.id, 'sequence.paused')).map((e) => e.data.reason)).toEqual(['complained']);
  });

  it('a reply that is only a signature is a human reply of intent other; its preview is the whole text', async () => {
    const sent = await outreach();
    const raw = textReply(
      { from: sent.c.email, to: sent.replyTo, inReplyTo: sent.messageId },
      `--\nDana Whitfield\nHead of Operations, Contoso\n+1 555 0100\n\n${QUOTE('sales@acme-sender.test')}`,
    );
    expect((await deliver(raw, [sent.replyTo])).ok).toBe(true);
    await settle(svc);
    const [m] = await inboundOf(sent.s.org.id);
    expect(m).toMatchObject({ intent: 'other', stripped_text: '' });
    const [item] = (await sent.s.api.GET('/messages', { params: { query: { direction: 'INBOUND' } } })).data!.data;
    expect(item.bodyPreview).toMatch(/^-- Dana Whitfield Head of Operations, Contoso/);
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('PAUSED');
  });

  it('a duplicate delivery stores nothing new, emits nothing and classifies once; a classification job run again does nothing', async () => {
    const sent = await outreach();
    const raw = textReply({ from: sent.c.email, to: sent.replyTo, inReplyTo: sent.messageId }, 'Sounds interesting, tell me more.');
    // The same answer for the first delivery and the duplicate (the answer tells nothing).
    expect((await deliver(raw, [sent.replyTo])).response).toBe(`250 ${ACCEPTED}`);
    expect((await deliver(raw, [sent.replyTo])).response).toBe(`250 ${ACCEPTED}`);
    await settle(svc);
    const ms = await inboundOf(sent.s.org.id);
    expect(ms).toHaveLength(1);
    const before = await types(sent.s.org.id);
    expect(before.filter((t) => t === 'reply.received')).toHaveLength(1);
    expect(before.filter((t) => t === 'reply.classified')).toHaveLength(1);
    await classifyReply(svc.rt, sent.s.org.id, ms[0].id);
    expect(await types(sent.s.org.id)).toEqual(before);
    expect(await itemsOf(sent.s.org.id)).toHaveLength(1);
  });

  it('a forged reply token is ignored: the headers thread the reply; with no headers and an unknown sender it is accepted and dropped', async () => {
    const sent = await outreach();
    const [local, domain] = sent.replyTo.split('@');
    const forged = `${local.slice(0, 20)}${local[20] === 'a' ? 'b' : 'a'}${local.slice(21)}@${domain}`;
    expect(openReplyAddress(svc.rt.services.signer, forged)).toBeNull();
    expect(
      (
        await deliver(textReply({ from: sent.c.email, to: forged, inReplyTo: sent.messageId }, 'Tell me more, sounds interesting.'), [
          forged,
        ])
      ).ok,
    ).toBe(true);
    const [m] = await inboundOf(sent.s.org.id);
    expect(m).toMatchObject({ thread_method: 'header', contact_id: sent.c.id });
    const stranger = textReply({ from: uniqueEmail('stranger'), to: forged }, 'Buy cheap watches');
    const answer = await deliver(stranger, [forged]);
    expect(answer).toMatchObject({ ok: true, response: `250 ${ACCEPTED}` });
    expect(await inboundOf(sent.s.org.id)).toHaveLength(1);
    await settle(svc);
  });

  it('a reply from an erased contact is stored redacted: not linked, no text, no raw MIME, no addresses, not classified, no effects', async () => {
    const sent = await outreach();
    const erase = await sent.s.api.POST('/contacts/{id}/erase', {
      params: { path: { id: sent.c.id } },
      body: { requesterRef: uid('DSR-'), reason: 'Data subject request' },
    });
    expect(erase.response.status).toBe(200);
    const before = await types(sent.s.org.id);
    const raw = textReply(
      { from: `Dana Whitfield <${sent.c.email}>`, to: sent.replyTo, inReplyTo: sent.messageId, subject: 'Re: my data' },
      'Please unsubscribe me. Dana Whitfield, Contoso',
    );
    expect((await deliver(raw, [sent.replyTo])).ok).toBe(true);
    await settle(svc);
    const [m] = await inboundOf(sent.s.org.id);
    expect(m).toMatchObject({
      contact_id: null,
      send_record_id: null,
      sequence_id: null,
      from_email: null,
      to_email: null,
      subject: null,
      body: '',
      stripped_text: null,
      raw_mime: null,
      report: null,
      in_reply_to: null,
      references_ids: [],
      status: 'redacted',
      intent: null,
    });
    const after = (await eventsOf(svc, sent.s.org.id)).slice(before.length);
    expect(after.map((e) => e.type)).toEqual(['reply.received']);
    expect(after[0].data).toEqual({ messageId: m.id, contactId: null, redacted: true });
    expect(JSON.stringify(await inboundOf(sent.s.org.id))).not.toMatch(/Dana|Contoso|unsubscribe/i);
  });

  it("erasure removes the new message columns of the person's replies and outbound messages", async () => {
    const sent = await outreach();
    await deliver(textReply({ from: sent.c.email, to: sent.replyTo, inReplyTo: sent.messageId }, 'Interested, tell me more.'), [
      sent.replyTo,
    ]);
    await settle(svc);
    const erase = await sent.s.api.POST('/contacts/{id}/erase', {
      params: { path: { id: sent.c.id } },
      body: { requesterRef: uid('DSR-'), reason: 'Data subject request' },
    });
    expect(erase.response.status).toBe(200);
    const rows = await system(svc, (trx) => trx.selectFrom('messages').selectAll().where('organization_id', '=', sent.s.org.id).execute());
    expect(rows.map((r) => r.direction).sort()).toEqual(['INBOUND', 'OUTBOUND']);
    for (const r of rows) {
      expect(r).toMatchObject({
        body: '',
        subject: null,
        from_email: null,
        to_email: null,
        stripped_text: null,
        report: null,
      });
    }
    const mime = await system(svc, (trx) =>
      trx.selectFrom('inbound_raw_messages').select('message_id').where('organization_id', '=', sent.s.org.id).execute(),
    );
    expect(mime).toEqual([]);
  });
});

describe('recipients', () => {
  it("a reply to the deployment sender's own address is taken and threaded by its headers", async () => {
    const sent = await outreach();
    const r = await deliver(
      textReply(
        { from: sent.c.email, to: 'Acme Sales <sales@acme-sender.test>', inReplyTo: sent.messageId },
        'Tell me more, sounds interesting.',
      ),
      ['sales@acme-sender.test'],
    );
    expect(r.ok).toBe(true);
    expect((await inboundOf(sent.s.org.id))[0]).toMatchObject({
      thread_method: 'header',
      contact_id: sent.c.id,
      to_email: 'sales@acme-sender.test',
    });
    await settle(svc);
  });

  it('with nothing but the sender to go by, a live contact of exactly one organization names it; of two, the message is dropped', async () => {
    const one = await draftingOrg(svc);
    const email = uniqueEmail('solo');
    const c = await contact(one.api, { email });
    expect(
      (
        await deliver(textReply({ from: email, to: 'sales@acme-sender.test', subject: 'Hello' }, 'Interested, tell me more.'), [
          'sales@acme-sender.test',
        ])
      ).ok,
    ).toBe(true);
    expect((await inboundOf(one.org.id)).map((m) => [m.thread_method, m.contact_id])).toEqual([['sender', c.id]]);
    const two = await draftingOrg(svc);
    await contact(two.api, { email });
    const r = await deliver(textReply({ from: email, to: 'sales@acme-sender.test', subject: 'Hello again' }, 'Still interested.'), [
      'sales@acme-sender.test',
    ]);
    expect(r.response).toBe(`250 ${ACCEPTED}`);
    expect(await inboundOf(one.org.id)).toHaveLength(1);
    expect(await inboundOf(two.org.id)).toEqual([]);
    await settle(svc);
  });

  it('without a reply domain every recipient is taken (mail forwarded to the listener), and the headers or the sender route it', async () => {
    const sent = await outreach();
    const open = await startInboundSmtp(
      {
        db: svc.rt.db,
        systemDb: svc.rt.systemDb,
        config: { ...svc.rt.config, inboundReplyDomain: null },
        services: svc.rt.services,
        log: svc.rt.log,
      },
      { port: 0, host: '127.0.0.1' },
    );
    try {
      const t = nodemailer.createTransport({ host: '127.0.0.1', port: open.port, secure: false, ignoreTLS: true });
      await t.sendMail({
        envelope: { from: sent.c.email, to: ['inbox@forwarded.example'] },
        raw: textReply({ from: sent.c.email, to: 'inbox@forwarded.example', references: sent.messageId }, 'Interested, tell me more.'),
      });
      await t.sendMail({
        envelope: { from: 'x@y.example', to: ['inbox@forwarded.example'] },
        raw: textReply({ from: uniqueEmail('nobody'), to: 'inbox@forwarded.example' }, 'Nobody knows me'),
      });
      t.close();
    } finally {
      await open.close();
    }
    expect((await inboundOf(sent.s.org.id)).map((m) => [m.thread_method, m.contact_id])).toEqual([['header', sent.c.id]]);
    await settle(svc);
  });
});

describe('the listener with bad input', () => {
  it('refuses recipients that are neither reply addresses nor mailboxes, and too many recipients', async () => {
    const r = await deliver(textReply({ from: 'a@b.example', to: 'someone@elsewhere.example' }, 'hi'), ['someone@elsewhere.example']);
    expect(r).toMatchObject({ ok: false, code: 550 });
    const many = Array.from({ length: 25 }, (_, i) => `reply+x${i}@${DOMAIN}`);
    const t = await deliver(textReply({ from: 'a@b.example', to: many[0] }, 'hi'), many);
    // The first 20 are taken, the rest answered 452 (nodemailer then sends to the accepted ones).
    expect(t.ok).toBe(true);
    expect(t.rejected).toEqual(many.slice(20));
  });

  it('advertises SIZE and answers an oversized message 552; stores nothing; keeps serving', async () => {
    const sent = await outreach();
    const big = textReply({ from: sent.c.email, to: sent.replyTo }, `Interested!\n${'x'.repeat(80)}\n`.repeat(3000));
    const r = await deliver(big, [sent.replyTo]);
    expect(r.ok).toBe(false);
    expect(r.code).toBe(552);
    expect(await inboundOf(sent.s.org.id)).toEqual([]);
    expect((await deliver(textReply({ from: sent.c.email, to: sent.replyTo }, 'Interested, tell me more.'), [sent.replyTo])).ok).toBe(true);
    expect(await inboundOf(sent.s.org.id)).toHaveLength(1);
    await settle(svc);
  });

  it('stores malformed MIME and binary junk without crashing; a message without Message-ID gets a stable id from its bytes', async () => {
    const sent = await outreach();
    const junk: (string | Buffer)[] = [
      `From: ${sent.c.email}\r\nTo: ${sent.replyTo}\r\nContent-Type: multipart/mixed; boundary="never-closed"\r\n\r\n--never-closed\r\nContent-Type: text/plain\r\n\r\nhalf a part`,
      Buffer.concat([
        Buffer.from(`From: ${sent.c.email}\r\nTo: ${sent.replyTo}\r\nSubject: \u0000nul\r\n\r\n`),
        Buffer.from([0, 0xff, 0xfe, 0x80, 0x0d, 0x0a, 0x00, 0x41]),
      ]),
      `From: =?utf-8?B?broken?= <${sent.c.email}>\r\nTo: ${sent.replyTo}\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!not base64!!!`,
      'no headers at all, just text',
    ];
    for (const j of junk) expect((await deliver(j, [sent.replyTo])).ok).toBe(true);
    const noId = `From: ${sent.c.email}\r\nTo: ${sent.replyTo}\r\nSubject: no id\r\n\r\nTell me more please.\r\n`;
    expect((await deliver(noId, [sent.replyTo])).response).toBe(`250 ${ACCEPTED}`);
    expect((await deliver(noId, [sent.replyTo])).response).toBe(`250 ${ACCEPTED}`);
    await settle(svc);
    const ms = await inboundOf(sent.s.org.id);
    expect(ms).toHaveLength(junk.length + 1);
    expect(ms.filter((m) => /@synthesized\.invalid>$/.test(m.message_id ?? ''))).toHaveLength(junk.length + 1);
    expect(ms.every((m) => m.status === 'classified')).toBe(true);
    // Every message, however broken, is announced and classified exactly once.
    for (const type of ['reply.received', 'reply.classified']) {
      expect((await eventsOf(svc, sent.s.org.id, type)).map((e) => e.data.messageId).sort(), type).toEqual(ms.map((m) => m.id).sort());
    }
    expect(await failedJobs(svc)).toEqual([]);
    expect((await svc.admin.GET('/queue')).data!.failed).toBe(0);
  });

  it('answers 451 when the message cannot be stored, so the sender tries again; the retry is stored', async () => {
    const sent = await outreach();
    const raw = textReply({ from: sent.c.email, to: sent.replyTo }, 'Interested, tell me more.');
    svc.rt.services.faults.add('inbound:before-commit');
    try {
      expect(await deliver(raw, [sent.replyTo])).toMatchObject({ ok: false, code: 451 });
    } finally {
      svc.rt.services.faults.delete('inbound:before-commit');
    }
    expect(await inboundOf(sent.s.org.id)).toEqual([]);
    expect(await eventsOf(svc, sent.s.org.id, 'reply.received')).toEqual([]);
    expect((await deliver(raw, [sent.replyTo])).ok).toBe(true);
    expect(await inboundOf(sent.s.org.id)).toHaveLength(1);
    await settle(svc);
  });
});

describe('configuration', () => {
  it('stops the start with one line naming a bad inbound variable', () => {
    const bad = (env: Record<string, string>, name: string) => {
      expect(() => loadConfig(env)).toThrow(ConfigError);
      expect(() => loadConfig(env)).toThrow(new RegExp(`^${name} `));
    };
    bad({ INBOUND_SMTP_PORT: '70000' }, 'INBOUND_SMTP_PORT');
    bad({ INBOUND_SMTP_PORT: 'smtp' }, 'INBOUND_SMTP_PORT');
    bad({ INBOUND_REPLY_DOMAIN: 'not a domain' }, 'INBOUND_REPLY_DOMAIN');
    bad({ INBOUND_REPLY_DOMAIN: 'localhost' }, 'INBOUND_REPLY_DOMAIN');
    bad({ INBOUND_SMTP_HOST: 'my host' }, 'INBOUND_SMTP_HOST');
    bad({ INBOUND_MAX_MESSAGE_BYTES: '10' }, 'INBOUND_MAX_MESSAGE_BYTES');
    expect(loadConfig({})).toMatchObject({
      inboundSmtpPort: null,
      inboundReplyDomain: null,
      inboundSmtpHost: '0.0.0.0',
      inboundMaxMessageBytes: 10 * 1024 * 1024,
    });
    expect(loadConfig({ INBOUND_SMTP_PORT: '2525', INBOUND_REPLY_DOMAIN: 'Replies.Example.com' })).toMatchObject({
      inboundSmtpPort: 2525,
      inboundReplyDomain: 'replies.example.com',
    });
  });
});
