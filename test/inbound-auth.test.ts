// Who sent it: over real SMTP into the inbound listener with a DNS server on loopback
// holding the records of the senders' domains (DKIM keys made here, DMARC and SPF records): a
// forged reply changes nothing but the stored message; a reply proved by its reply token, by its
// thread to our Message-ID from the address we wrote to, or by an aligned DMARC pass acts as
// before; unsubscribe wording from an unauthenticated sender is honoured within a bound; the
// listener's answers tell nothing of what a message matched; its abuse bounds answer with their
// codes; a DNS server that never answers costs a message 3 s and its authentication.

import net from 'node:net';
import { sql } from 'kysely';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runOrgHealthSweep } from '../src/account/org-health-sweep.js';
import { serveInbound } from '../src/boot/runtime.js';
import { UNVERIFIED_SUPPRESSIONS_PER_HOUR } from '../src/compliance/unverified-unsubscribes.js';
import { sourceOf } from '../src/inbound/smtp-limits.js';
import { ACCEPTED, type InboundListener, startInboundSmtp } from '../src/inbound/smtp-listener.js';
import { ConfigError, type InboundLimits, loadConfig } from '../src/platform/config.js';
import { eventsOf, system, uid, uniqueEmail } from './crm-support.js';
import { contact, type DraftingOrg, draftingOrg, draftsOf, getSequence, sequence, settle, template } from './drafting-support.js';
import { signingDomain } from './support/dkim.js';
import { type DnsServer, startDnsServer } from './support/dns-server.js';
import { startService, type TestService } from './support/harness.js';
import { deliverSmtp, inboundOf as inboundMessages } from './support/inbound-mail.js';
import { type SmtpSink, startSmtpSink } from './support/smtp-sink.js';

const DOMAIN = 'replies.auth-sender.test';
let svc: TestService;
let sink: SmtpSink;
let inbound: InboundListener;
let dns: DnsServer;
beforeAll(async () => {
  sink = await startSmtpSink();
  dns = await startDnsServer();
  svc = await startService({
    SMTP_URL: sink.url,
    MAIL_FROM: 'Acme Sales <sales@auth-sender.test>',
    INBOUND_REPLY_DOMAIN: DOMAIN,
    INBOUND_SMTP_PORT: '0',
    INBOUND_SMTP_HOST: '127.0.0.1',
    INBOUND_DNS_SERVERS: dns.address,
    // This file's mail all comes from loopback: the bounds are tested on listeners of their own.
    INBOUND_MAX_MESSAGES_PER_ADDRESS_PER_MINUTE: '100000',
    INBOUND_MAX_RECIPIENTS_PER_ADDRESS_PER_MINUTE: '100000',
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
  { dayOffset: 0, subject: 'A quick idea for {{company}}', body: 'Hi {{firstName}},\n\nWorth a short chat next week?\n\nBest,\nSam' },
  { dayOffset: 3, subject: 'Following up', body: 'Hi {{firstName}}, one more note. Worth a chat?' },
];

interface Sent {
  s: DraftingOrg;
  c: { id: string; email: string };
  seq: { id: string };
  mailbox: string;
  messageId: string;
  replyTo: string;
}

/** An organization with its own mailbox (or the one given) that sent step 1 of a two-step sequence to a new contact. */
async function outreach(opts: { s?: DraftingOrg; mailbox?: string; email?: string } = {}): Promise<Sent> {
  const mailbox = opts.mailbox ?? `sam@${uid('acme')}.test`;
  const s = opts.s ?? (await draftingOrg(svc));
  if (!opts.s) {
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { flags: { v1_2_api_send: true } } });
    const mb = await svc.admin.POST('/organizations/{orgId}/mailboxes', {
      params: { path: { orgId: s.org.id } },
      body: { email: mailbox, name: 'Sam at Acme' },
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
  return { s, c, seq, mailbox, messageId: parsed.messageId!, replyTo: (parsed.replyTo?.value[0].address ?? '').toLowerCase() };
}

/** A plain-text message as a mail client writes it (CRLF lines). */
function reply(h: { from: string; to: string; inReplyTo?: string; subject?: string }, body: string): string {
  const head = Object.entries({
    'MIME-Version': '1.0',
    Date: new Date().toUTCString(),
    From: h.from,
    To: h.to,
    Subject: h.subject ?? 'Re: A quick idea for your team',
    'Message-ID': `<${uid('r')}@client.example>`,
    'In-Reply-To': h.inReplyTo,
    References: h.inReplyTo,
    'Content-Type': 'text/plain; charset=utf-8',
  })
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\r\n');
  return `${head}\r\n\r\n${body.replace(/\r?\n/g, '\r\n')}\r\n`;
}

/** Delivers a message like an MTA (envelope sender `from`): the answer, or the error given. */
const deliver = async (raw: string, to: string[], from: string, port = inbound.port) => {
  const { ok, response } = await deliverSmtp(port, raw, to, from, 'mx.client.example');
  return { ok, response };
};

const inboundOf = (orgId: string) => inboundMessages(svc, orgId);
const itemsOf = (orgId: string) =>
  system(svc, (trx) => trx.selectFrom('action_items').selectAll().where('organization_id', '=', orgId).orderBy('created_at').execute());
const suppression = async (s: DraftingOrg, email: string) =>
  (await s.api.GET('/suppression', { params: { query: { email } } })).data as {
    suppressed: boolean;
    entry: { reason: string; source: string | null } | null;
  };
const queueOf = async (orgId: string) => (await svc.admin.GET('/send-queue', { params: { query: { organizationId: orgId } } })).data!.data;
const domainOf = (email: string) => email.split('@')[1];
const today = () => new Date().toISOString().slice(0, 10);
/** Today's funnel totals, computed afresh (answers are memoized for 5 minutes). */
const funnel = async (s: DraftingOrg) => {
  await system(svc, (trx) => trx.deleteFrom('analytics_cache').where('organization_id', '=', s.org.id).execute());
  return (await s.api.GET('/analytics/funnel', { params: { query: { from: today(), to: today() } } })).data!.totals;
};
const health = async (orgId: string) => (await svc.admin.GET('/organizations/{orgId}/health', { params: { path: { orgId } } })).data!;

const INTERESTED = 'Yes, this is interesting, please tell me more about pricing for a team of 40.';
const MEETING = 'Could we schedule a call on Thursday afternoon? Please send me an invite.';

describe('who sent it', () => {
  it('a forged interested reply changes nothing but the stored message: no pause, no qualification, no item, no meeting, no out-of-office hold', async () => {
    const sent = await outreach();
    // The contact's domain publishes DMARC (p=reject) and a DKIM key; the forger has neither its key nor a token.
    signingDomain(dns, domainOf(sent.c.email));
    const before = (await eventsOf(svc, sent.s.org.id)).length;
    const back = new Date(Date.now() + 20 * 86_400_000).toLocaleDateString('en-US', { month: 'long', day: 'numeric', timeZone: 'UTC' });
    const ooo = reply(
      { from: sent.c.email, to: sent.mailbox, subject: 'Automatic reply: A quick idea for your team' },
      `I am out of the office until ${back} with no access to email.`,
    ).replace('MIME-Version: 1.0', 'MIME-Version: 1.0\r\nAuto-Submitted: auto-replied');
    for (const raw of [INTERESTED, MEETING]
      .map((body) => reply({ from: `Dana Whitfield <${sent.c.email}>`, to: sent.mailbox }, body))
      .concat(ooo)) {
      const r = await deliver(raw, [sent.mailbox], sent.c.email);
      expect(r).toEqual({ ok: true, response: `250 ${ACCEPTED}` });
    }
    await settle(svc);
    const ms = await inboundOf(sent.s.org.id);
    expect(ms.map((m) => [m.intent, m.contact_id, m.thread_method, m.status, m.authenticated])).toEqual([
      ['interested', sent.c.id, 'sender', 'classified', false],
      ['meeting_request', sent.c.id, 'sender', 'classified', false],
      ['out_of_office', sent.c.id, 'sender', 'classified', false],
    ]);
    expect(ms[0].authentication).toEqual({ by: null, spf: 'none', dkim: 'none', dmarc: 'fail', arc: 'none', dnsTimedOut: false });
    // Stored, announced and classified; nothing else happened.
    const after = (await eventsOf(svc, sent.s.org.id)).slice(before);
    expect(after.map((e) => e.type).sort()).toEqual([...Array(3).fill('reply.classified'), ...Array(3).fill('reply.received')]);
    expect(after.filter((e) => e.type === 'reply.classified').map((e) => [e.data.intent, e.data.authenticated, e.data.effects])).toEqual([
      ['interested', false, []],
      ['meeting_request', false, []],
      ['out_of_office', false, []],
    ]);
    // No out-of-office hold either.
    const row = await system(svc, (trx) =>
      trx.selectFrom('contacts').select('out_of_office_until').where('id', '=', sent.c.id).executeTakeFirstOrThrow(),
    );
    expect(row.out_of_office_until).toBeNull();
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('ACTIVE');
    expect((await queueOf(sent.s.org.id)).find((q) => q.step === 2)).toMatchObject({ state: 'queued' });
    expect((await draftsOf(sent.s.api, sent.c.id)).map((d) => d.repliedAt)).toEqual([null, null]);
    expect((await sent.s.api.GET('/contacts/{id}', { params: { path: { id: sent.c.id } } })).data!.qualificationStatus).not.toBe(
      'QUALIFIED',
    );
    expect(await itemsOf(sent.s.org.id)).toEqual([]);
    const listed = (await sent.s.api.GET('/messages', { params: { query: { direction: 'INBOUND' } } })).data!.data;
    expect(listed.map((m) => [m.intent, m.authenticated])).toEqual([
      ['out_of_office', false],
      ['meeting_request', false],
      ['interested', false],
    ]);
  });

  it('a DMARC-aligned reply acts as today: paused, repliedAt, QUALIFIED, an action item, lead.interested', async () => {
    const sent = await outreach();
    const theirs = signingDomain(dns, domainOf(sent.c.email));
    const raw = await theirs.sign(reply({ from: `Dana Whitfield <${sent.c.email}>`, to: sent.mailbox }, INTERESTED));
    expect(await deliver(raw, [sent.mailbox], sent.c.email)).toEqual({ ok: true, response: `250 ${ACCEPTED}` });
    await settle(svc);
    const [m] = await inboundOf(sent.s.org.id);
    expect(m).toMatchObject({ intent: 'interested', thread_method: 'sender', authenticated: true });
    expect(m.authentication).toMatchObject({ by: 'dmarc', dkim: 'pass', dmarc: 'pass', dnsTimedOut: false });
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('PAUSED');
    expect((await draftsOf(sent.s.api, sent.c.id))[0].repliedAt).not.toBeNull();
    expect((await sent.s.api.GET('/contacts/{id}', { params: { path: { id: sent.c.id } } })).data!.qualificationStatus).toBe('QUALIFIED');
    expect((await itemsOf(sent.s.org.id)).map((i) => i.action_type)).toEqual(['reply_interested']);
    expect((await eventsOf(svc, sent.s.org.id, 'lead.interested')).map((e) => e.data.messageId)).toEqual([m.id]);
    expect((await eventsOf(svc, sent.s.org.id, 'reply.classified')).map((e) => e.data)).toEqual([
      expect.objectContaining({ authenticated: true, effects: expect.arrayContaining(['paused', 'action_item', 'qualified']) }),
    ]);
  });

  it('a reply to the reply token acts as today, with no DNS asked about its sender', async () => {
    const sent = await outreach();
    const asked = dns.queries.length;
    const raw = reply({ from: sent.c.email, to: sent.replyTo }, MEETING);
    expect(await deliver(raw, [sent.replyTo], sent.c.email)).toEqual({ ok: true, response: `250 ${ACCEPTED}` });
    await settle(svc);
    const [m] = await inboundOf(sent.s.org.id);
    expect(m).toMatchObject({ intent: 'meeting_request', thread_method: 'token', authenticated: true, authentication: { by: 'token' } });
    expect(dns.queries.slice(asked).filter((q) => q.includes(domainOf(sent.c.email)))).toEqual([]);
    expect((await eventsOf(svc, sent.s.org.id, 'meeting.booked')).map((e) => e.data.messageId)).toEqual([m.id]);
    expect((await itemsOf(sent.s.org.id)).map((i) => i.action_type)).toEqual(['reply_meeting_request']);
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('PAUSED');
  });

  it('a thread to our Message-ID authenticates a reply from the address we wrote to; from another one it acts on nothing and is no reply in analytics', async () => {
    const sent = await outreach();
    const colleague = `pat.${uid('x')}@${domainOf(sent.c.email)}`;
    // From another address of the domain first: threaded to our message (and its contact), but not proved.
    await deliver(reply({ from: colleague, to: sent.mailbox, inReplyTo: sent.messageId }, INTERESTED), [sent.mailbox], colleague);
    await settle(svc);
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('ACTIVE');
    expect(await itemsOf(sent.s.org.id)).toEqual([]);
    expect((await draftsOf(sent.s.api, sent.c.id)).map((d) => d.repliedAt)).toEqual([null, null]);
    expect(await funnel(sent.s)).toMatchObject({ sequencesSent_count: 1, sequencesReplied_count: 0, sequencesWithMeeting_count: 0 });
    await deliver(reply({ from: sent.c.email, to: sent.mailbox, inReplyTo: sent.messageId }, INTERESTED), [sent.mailbox], sent.c.email);
    await settle(svc);
    const ms = await inboundOf(sent.s.org.id);
    expect(ms.map((m) => [m.thread_method, m.contact_id, m.authenticated, (m.authentication as { by: string | null }).by])).toEqual([
      ['header', sent.c.id, false, null],
      ['header', sent.c.id, true, 'thread'],
    ]);
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('PAUSED');
    expect((await itemsOf(sent.s.org.id)).map((i) => i.action_type)).toEqual(['reply_interested']);
    expect(await funnel(sent.s)).toMatchObject({ sequencesSent_count: 1, sequencesReplied_count: 1 });
  });

  it("SPF is checked with the session's client address and MAIL FROM: aligned with a DMARC record it authenticates; a DKIM pass without a DMARC record does not", async () => {
    const spfd = await outreach();
    // Loopback is the domain's permitted sender; DMARC passes by the aligned SPF alone (no DKIM signature).
    signingDomain(dns, domainOf(spfd.c.email), { spf: 'v=spf1 ip4:127.0.0.1 -all' });
    await deliver(reply({ from: spfd.c.email, to: spfd.mailbox }, INTERESTED), [spfd.mailbox], spfd.c.email);
    // The same from a MAIL FROM of another domain: SPF says nothing for the From domain, DMARC fails.
    await deliver(reply({ from: spfd.c.email, to: spfd.mailbox }, INTERESTED), [spfd.mailbox], `bounce@${uid('relay')}.example`);
    const nodmarc = await outreach();
    const unpolicied = signingDomain(dns, domainOf(nodmarc.c.email), { dmarc: null });
    await deliver(
      await unpolicied.sign(reply({ from: nodmarc.c.email, to: nodmarc.mailbox }, INTERESTED)),
      [nodmarc.mailbox],
      nodmarc.c.email,
    );
    await settle(svc);
    expect((await inboundOf(spfd.s.org.id)).map((m) => [m.authenticated, m.authentication])).toEqual([
      [true, expect.objectContaining({ by: 'dmarc', spf: 'pass', dkim: 'none', dmarc: 'pass' })],
      [false, expect.objectContaining({ by: null, spf: 'none', dmarc: 'fail' })],
    ]);
    expect((await inboundOf(nodmarc.s.org.id)).map((m) => [m.authenticated, m.authentication])).toEqual([
      [false, expect.objectContaining({ by: null, dkim: 'pass', dmarc: 'none' })],
    ]);
    expect((await itemsOf(spfd.s.org.id)).map((i) => i.action_type)).toEqual(['reply_interested']);
    expect(await itemsOf(nodmarc.s.org.id)).toEqual([]);
  });

  it('a message carrying more than 10 body-hashing signatures is not checked: it stays unauthenticated, however well signed', async () => {
    const sent = await outreach();
    const theirs = signingDomain(dns, domainOf(sent.c.email));
    const signed = await theirs.sign(reply({ from: sent.c.email, to: sent.mailbox }, INTERESTED));
    // Ten more signatures of other lengths (each would hash the body again) ahead of the genuine one.
    const extra = Array.from(
      { length: 10 },
      (_, i) => `DKIM-Signature: v=1; a=rsa-sha256; d=${theirs.domain}; s=sel1; l=${i + 1}; h=from; bh=x; b=x`,
    );
    const asked = dns.queries.length;
    await deliver(`${extra.join('\r\n')}\r\n${signed}`, [sent.mailbox], sent.c.email);
    await settle(svc);
    const [m] = await inboundOf(sent.s.org.id);
    expect(m).toMatchObject({ intent: 'interested', authenticated: false, authentication: { by: null, dkim: 'permerror' } });
    expect(dns.queries.slice(asked)).toEqual([]);
    expect(await itemsOf(sent.s.org.id)).toEqual([]);
  });

  it('a message the operator files is trusted: it is authenticated and acts', async () => {
    const sent = await outreach();
    const r = await svc.admin.POST('/organizations/{orgId}/inbound-messages', {
      params: { path: { orgId: sent.s.org.id } },
      body: { fromEmail: sent.c.email, subject: 'Re: hello', body: INTERESTED },
    });
    expect(r.response.status).toBe(201);
    await settle(svc);
    expect(await inboundOf(sent.s.org.id)).toEqual([
      expect.objectContaining({ id: r.data!.id, authenticated: true, authentication: { by: 'operator' }, intent: 'interested' }),
    ]);
    expect((await itemsOf(sent.s.org.id)).map((i) => i.action_type)).toEqual(['reply_interested']);
  });

  it('an unauthenticated delivery report matched by our Message-ID still acts: it can only touch the address that message went to', async () => {
    const sent = await outreach();
    const dsn = [
      'MIME-Version: 1.0',
      'From: Mail Delivery Subsystem <mailer-daemon@mx.far-away.example>',
      `To: ${sent.mailbox}`,
      'Subject: Delivery Status Notification (Failure)',
      `Message-ID: <${uid('dsn')}@mx.far-away.example>`,
      'Auto-Submitted: auto-replied',
      'Content-Type: multipart/report; report-type=delivery-status; boundary="R1"',
      '',
      '--R1',
      'Content-Type: text/plain',
      '',
      'Your message could not be delivered.',
      '',
      '--R1',
      'Content-Type: message/delivery-status',
      '',
      'Reporting-MTA: dns; mx.far-away.example',
      '',
      `Final-Recipient: rfc822; ${sent.c.email}`,
      'Action: failed',
      'Status: 5.1.1',
      'Diagnostic-Code: smtp; 550 5.1.1 user unknown',
      '',
      '--R1',
      'Content-Type: text/rfc822-headers',
      '',
      `From: Sam at Acme <${sent.mailbox}>`,
      `To: ${sent.c.email}`,
      `Message-ID: ${sent.messageId}`,
      '',
      '--R1--',
      '',
    ].join('\r\n');
    expect(await deliver(dsn, [sent.mailbox], '')).toEqual({ ok: true, response: `250 ${ACCEPTED}` });
    await settle(svc);
    const [m] = await inboundOf(sent.s.org.id);
    expect(m).toMatchObject({ thread_method: 'header', contact_id: sent.c.id, authenticated: false });
    expect(await suppression(sent.s, sent.c.email)).toMatchObject({ suppressed: true, entry: { reason: 'HARD_BOUNCE' } });
    expect((await eventsOf(svc, sent.s.org.id, 'reply.classified')).map((e) => [e.data.kind, e.data.authenticated])).toEqual([
      ['hard_bounce', false],
    ]);
  });

  it('a DNS server that never answers: the message is answered within the 3 s bound, stored unauthenticated and changes nothing', async () => {
    const silent = await startDnsServer({ silent: true });
    const own = await startInboundSmtp(
      { ...svc.rt, systemDb: svc.rt.systemDb, config: { ...svc.rt.config, inboundDnsServers: [silent.address] } },
      { port: 0, host: '127.0.0.1' },
    );
    try {
      const sent = await outreach();
      const theirs = signingDomain(dns, domainOf(sent.c.email));
      const raw = await theirs.sign(reply({ from: sent.c.email, to: sent.mailbox }, INTERESTED));
      const t0 = Date.now();
      expect(await deliver(raw, [sent.mailbox], sent.c.email, own.port)).toEqual({ ok: true, response: `250 ${ACCEPTED}` });
      const took = Date.now() - t0;
      expect(took).toBeGreaterThanOrEqual(2900);
      expect(took).toBeLessThan(4500);
      await settle(svc);
      const [m] = await inboundOf(sent.s.org.id);
      expect(m).toMatchObject({ intent: 'interested', authenticated: false, authentication: { by: null, dnsTimedOut: true } });
      expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('ACTIVE');
      expect(await itemsOf(sent.s.org.id)).toEqual([]);
      // It was asked (the DKIM key, the DMARC record, SPF) and answered nothing.
      expect(silent.queries.length).toBeGreaterThan(0);
    } finally {
      await own.close();
      await silent.close();
    }
  });
});

describe('unsubscribe wording from an unauthenticated sender', () => {
  it('pauses the sequences, opens an action item and suppresses a contact we mailed (source unverified reply); a contact we never mailed is not suppressed', async () => {
    const sent = await outreach();
    const r = await deliver(
      reply({ from: sent.c.email, to: sent.mailbox }, 'Please unsubscribe me, I do not want these emails.'),
      [sent.mailbox],
      sent.c.email,
    );
    expect(r.ok).toBe(true);
    await settle(svc);
    const [m] = await inboundOf(sent.s.org.id);
    expect(m).toMatchObject({ intent: 'unsubscribe', authenticated: false, contact_id: sent.c.id });
    expect((await getSequence(sent.s.api, sent.seq.id)).status).toBe('PAUSED');
    expect((await eventsOf(svc, sent.s.org.id, 'sequence.paused')).map((e) => e.data.reason)).toEqual(['unsubscribed']);
    expect(await suppression(sent.s, sent.c.email)).toMatchObject({
      suppressed: true,
      entry: { reason: 'UNSUBSCRIBE', source: 'unverified reply' },
    });
    expect((await eventsOf(svc, sent.s.org.id, 'email.unsubscribed')).map((e) => e.data)).toEqual([
      expect.objectContaining({ messageId: m.id, contactId: sent.c.id, source: 'unverified reply' }),
    ]);
    expect(await itemsOf(sent.s.org.id)).toEqual([
      expect.objectContaining({
        action_type: 'reply_unverified_unsubscribe',
        priority: 'high',
        entity_type: 'Contact',
        entity_id: sent.c.id,
        source_key: `reply:${m.id}`,
        details: expect.objectContaining({ suppressed: true, held: null }),
      }),
    ]);
    expect((await eventsOf(svc, sent.s.org.id, 'reply.classified')).map((e) => [e.data.authenticated, e.data.effects])).toEqual([
      [false, ['paused', 'suppressed', 'action_item']],
    ]);
    // No reply in the drafts or in analytics.
    expect((await draftsOf(sent.s.api, sent.c.id)).map((d) => d.repliedAt)).toEqual([null, null]);

    // A contact of the organization we never wrote to: paused and an item, never suppressed.
    const stranger = await contact(sent.s.api, { email: uniqueEmail('never') });
    await deliver(reply({ from: stranger.email, to: sent.mailbox }, 'Unsubscribe me please.'), [sent.mailbox], stranger.email);
    await settle(svc);
    expect((await suppression(sent.s, stranger.email)).suppressed).toBe(false);
    expect((await itemsOf(sent.s.org.id)).map((i) => [i.entity_id, (i.details as { held: string | null }).held])).toEqual([
      [sent.c.id, null],
      [stranger.id, 'not_mailed'],
    ]);
  });

  it("at most 20 unverified suppressions per organization per hour: past the bound a request is held, and the organization's health names the reason", async () => {
    const first = await outreach();
    const second = await outreach({ s: first.s, mailbox: first.mailbox });
    const org = first.s.org.id;
    // 19 unverified suppressions already this hour.
    await system(svc, (trx) =>
      trx
        .insertInto('suppression_entries')
        .values(
          Array.from({ length: UNVERIFIED_SUPPRESSIONS_PER_HOUR - 1 }, (_, i) => ({
            organization_id: org,
            id: uid('sup_'),
            email: `earlier${i}@${uid('co')}.example.com`,
            reason: 'UNSUBSCRIBE',
            source: 'unverified reply',
          })),
        )
        .execute(),
    );
    expect((await health(org)).reasons).toEqual([]);
    // The 20th: suppressed, and the bound is reached.
    await deliver(reply({ from: first.c.email, to: first.mailbox }, 'Please unsubscribe me.'), [first.mailbox], first.c.email);
    await settle(svc);
    expect(await suppression(first.s, first.c.email)).toMatchObject({ suppressed: true, entry: { source: 'unverified reply' } });
    const reached = await health(org);
    expect(reached).toMatchObject({
      state: 'degraded',
      reasons: [{ code: 'unverified_unsubscribe_limit', severity: 'degraded', suppressions: 20, limit: 20, windowMinutes: 60 }],
    });
    expect((await eventsOf(svc, org, 'org.health_changed')).map((e) => e.data.to)).toEqual(['degraded']);
    // Past it: held for a person (paused, an item saying why), not suppressed.
    await deliver(reply({ from: second.c.email, to: first.mailbox }, 'Please unsubscribe me.'), [first.mailbox], second.c.email);
    await settle(svc);
    expect((await suppression(first.s, second.c.email)).suppressed).toBe(false);
    expect((await getSequence(first.s.api, second.seq.id)).status).toBe('PAUSED');
    const held = (await itemsOf(org)).find((i) => i.entity_id === second.c.id)!;
    expect(held).toMatchObject({ action_type: 'reply_unverified_unsubscribe', details: expect.objectContaining({ held: 'limit' }) });
    expect(held.description).toMatch(/not suppressed: the organization reached 20/);
    expect((await eventsOf(svc, org, 'reply.classified')).at(-1)!.data.effects).toEqual(['paused', 'suppression_held', 'action_item']);
    // An hour later the bound is free again, and the sweep clears the reason.
    await system(svc, (trx) =>
      sql`UPDATE suppression_entries SET created_at = now() - interval '61 minutes' WHERE organization_id = ${org}`.execute(trx),
    );
    await runOrgHealthSweep(svc.rt);
    expect(await health(org)).toMatchObject({ state: 'healthy', reasons: [] });
  });
});

/** One SMTP conversation over a raw socket: every answer exactly as the listener wrote it. */
async function talk(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  socket.setEncoding('utf8');
  let buf = '';
  const waiting: ((line: string) => void)[] = [];
  const answers: string[] = [];
  const closed = new Promise<void>((r) => socket.on('close', () => r()));
  socket.on('error', () => {});
  socket.on('data', (d: string) => {
    buf += d;
    for (let i = buf.indexOf('\r\n'); i >= 0; i = buf.indexOf('\r\n')) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 2);
      // A multi-line answer ends with the line whose code is followed by a space.
      if (/^\d{3} /.test(line)) {
        const w = waiting.shift();
        if (w) w(line);
        else answers.push(line);
      }
    }
  });
  const next = () => new Promise<string>((r) => (answers.length ? r(answers.shift()!) : waiting.push(r)));
  const greeting = await next();
  const send = (cmd: string) => {
    socket.write(`${cmd}\r\n`);
    return next();
  };
  return {
    greeting,
    send,
    /** MAIL FROM, RCPT TO each, DATA and the message: every answer in order. */
    async message(from: string, to: string[], raw: string): Promise<string[]> {
      const out = [await send(`MAIL FROM:<${from}>`)];
      for (const r of to) out.push(await send(`RCPT TO:<${r}>`));
      const data = await send('DATA');
      out.push(data);
      if (data.startsWith('354')) out.push(await send(`${raw.replace(/\r\n\./g, '\r\n..')}\r\n.`));
      return out;
    },
    closed,
    close: () => socket.destroy(),
  };
}

describe('no oracle', () => {
  it('answers the same whatever a message matched: a reply to a token, a duplicate, a forged sender who is a contact, a stranger; and at RCPT for every address of a domain it serves', async () => {
    const sent = await outreach();
    const stranger = uniqueEmail('stranger');
    const mailboxDomain = domainOf(sent.mailbox);
    const token = reply({ from: sent.c.email, to: sent.replyTo, inReplyTo: sent.messageId }, 'Not interested, thanks.');
    const conversations: [string, string[], string][] = [
      [sent.c.email, [sent.replyTo], token],
      [sent.c.email, [sent.replyTo], token], // the duplicate
      [sent.c.email, [sent.mailbox], reply({ from: sent.c.email, to: sent.mailbox }, INTERESTED)], // a forged known contact
      [stranger, [`nobody.${uid('x')}@${mailboxDomain}`], reply({ from: stranger, to: sent.mailbox }, INTERESTED)], // routed nowhere
      [stranger, [`reply+${'a'.repeat(55)}@${DOMAIN}`], reply({ from: stranger, to: DOMAIN }, 'Hello')], // a token that does not verify
      ['', [`postmaster@${DOMAIN}`], reply({ from: 'mailer-daemon@x.example', to: DOMAIN }, 'A notice')],
    ];
    const seen: string[][] = [];
    for (const [from, to, raw] of conversations) {
      const c = await talk(inbound.port);
      expect(c.greeting).toMatch(/^220 /);
      await c.send('EHLO mx.client.example');
      seen.push(await c.message(from, to, raw));
      c.close();
    }
    expect(new Set(seen.map((s) => JSON.stringify(s)))).toEqual(
      new Set([JSON.stringify(['250 Accepted', '250 Accepted', '354 End data with <CR><LF>.<CR><LF>', `250 ${ACCEPTED}`])]),
    );
    await settle(svc);
    // What they did differs: the reply (once), the forged one stored; the stranger's dropped.
    expect((await inboundOf(sent.s.org.id)).map((m) => [m.thread_method, m.authenticated])).toEqual([
      ['token', true],
      ['sender', false],
    ]);
    // A domain it does not serve is refused whoever asks.
    const c = await talk(inbound.port);
    await c.send('EHLO mx.client.example');
    for (const from of [sent.c.email, stranger]) {
      expect(await c.send(`MAIL FROM:<${from}>`)).toBe('250 Accepted');
      expect(await c.send(`RCPT TO:<${sent.c.email}>`)).toBe('550 5.1.1 no such recipient here');
      expect(await c.send('RSET')).toMatch(/^250 /);
    }
    c.close();
  });
});

describe('abuse bounds', () => {
  const LOOSE: InboundLimits = {
    connectionsPerAddress: 50,
    messagesPerConnection: 50,
    recipientsPerConnection: 500,
    messagesPerAddressPerMinute: 500,
    recipientsPerAddressPerMinute: 500,
  };
  /** A listener of its own (its own counters) with some bounds tightened. */
  const listener = (limits: Partial<InboundLimits>) =>
    startInboundSmtp(
      { ...svc.rt, systemDb: svc.rt.systemDb, config: { ...svc.rt.config, inboundLimits: { ...LOOSE, ...limits } } },
      { port: 0, host: '127.0.0.1' },
    );
  const to = () => `reply+${uid('x')}@${DOMAIN}`;
  const note = (n: number) => reply({ from: 'someone@sender.example', to: DOMAIN, subject: `Note ${n}` }, `Note ${n}`);

  it('connections at once per source address: the one past the bound is 421 4.7.0 and closed; a slot freed is taken again', async () => {
    const l = await listener({ connectionsPerAddress: 2 });
    try {
      const a = await talk(l.port);
      const b = await talk(l.port);
      expect([a.greeting, b.greeting]).toEqual([expect.stringMatching(/^220 /), expect.stringMatching(/^220 /)]);
      const c = await talk(l.port);
      expect(c.greeting).toBe('421 4.7.0 too many connections from your address, try again later');
      await c.closed;
      a.close();
      await a.closed;
      const d = await waitForGreeting(l.port);
      expect(d.greeting).toMatch(/^220 /);
      b.close();
      d.close();
    } finally {
      await l.close();
    }
  });

  it('messages and recipients per connection: past the bound 421 4.7.0 (closed) and 452 4.5.3; a new connection goes on', async () => {
    const l = await listener({ messagesPerConnection: 3, recipientsPerConnection: 4 });
    try {
      const c = await talk(l.port);
      await c.send('EHLO mx.client.example');
      for (let i = 1; i <= 2; i++) expect((await c.message('a@sender.example', [to(), to()], note(i))).at(-1)).toBe(`250 ${ACCEPTED}`);
      // The third message: its recipients are the 5th and 6th of the connection.
      expect(await c.message('a@sender.example', [to(), to()], note(3))).toEqual([
        '250 Accepted',
        '452 4.5.3 too many recipients on one connection',
        '452 4.5.3 too many recipients on one connection',
        '503 Error: need RCPT command',
      ]);
      expect(await c.send('RSET')).toMatch(/^250 /);
      expect(await c.send('MAIL FROM:<a@sender.example>')).toBe('421 4.7.0 too many messages on one connection, reconnect to send more');
      await c.closed;
      const again = await talk(l.port);
      await again.send('EHLO mx.client.example');
      expect((await again.message('a@sender.example', [to()], note(4))).at(-1)).toBe(`250 ${ACCEPTED}`);
      again.close();
    } finally {
      await l.close();
    }
  });

  it('messages and recipients per source address a minute, across connections: past the bound 450 4.7.0, try again later', async () => {
    const l = await listener({ messagesPerAddressPerMinute: 3, recipientsPerAddressPerMinute: 5 });
    try {
      const answers: string[][] = [];
      for (let i = 1; i <= 4; i++) {
        const c = await talk(l.port);
        await c.send('EHLO mx.client.example');
        answers.push(await c.message('a@sender.example', i === 3 ? [to(), to(), to(), to()] : [to()], note(i)));
        c.close();
      }
      const taken = ['250 Accepted', '250 Accepted', '354 End data with <CR><LF>.<CR><LF>', `250 ${ACCEPTED}`];
      expect(answers).toEqual([
        taken,
        taken,
        // Recipients 3 to 5 of the minute are taken, the 6th is not (the message goes to the others).
        [
          '250 Accepted',
          '250 Accepted',
          '250 Accepted',
          '250 Accepted',
          '450 4.7.0 too many recipients from your address, try again later',
          '354 End data with <CR><LF>.<CR><LF>',
          `250 ${ACCEPTED}`,
        ],
        // The 4th message of the minute.
        ['450 4.7.0 too many messages from your address, try again later', expect.stringMatching(/^503 /), expect.stringMatching(/^503 /)],
      ]);
    } finally {
      await l.close();
    }
  });

  it('counts an IPv6 sender by its /64 and an IPv4-mapped one as its IPv4 address', () => {
    expect(sourceOf('2001:db8:1:2:aaaa::1')).toBe(sourceOf('2001:0db8:0001:0002:ffff:ffff:ffff:ffff'));
    expect(sourceOf('2001:db8:1:2::1')).toBe('2001:db8:1:2::/64');
    expect(sourceOf('2001:db8:1:3::1')).not.toBe(sourceOf('2001:db8:1:2::1'));
    expect(sourceOf('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(sourceOf('192.0.2.7')).toBe('192.0.2.7');
  });
});

/** A connection once the listener has noticed a closed one (its close is handled a moment later). */
async function waitForGreeting(port: number) {
  for (let i = 0; i < 40; i++) {
    const c = await talk(port);
    if (c.greeting.startsWith('220 ')) return c;
    await c.closed;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('no slot freed');
}

describe('configuration', () => {
  it('reads INBOUND_DNS_SERVERS and the listener bounds, and stops the start with one line naming a bad one', () => {
    expect(loadConfig({})).toMatchObject({
      inboundDnsServers: null,
      inboundLimits: {
        connectionsPerAddress: 10,
        messagesPerConnection: 20,
        recipientsPerConnection: 100,
        messagesPerAddressPerMinute: 60,
        recipientsPerAddressPerMinute: 200,
      },
    });
    expect(loadConfig({ INBOUND_DNS_SERVERS: '127.0.0.1:5353, [::1]:53,192.0.2.1,::1' }).inboundDnsServers).toEqual([
      '127.0.0.1:5353',
      '[::1]:53',
      '192.0.2.1',
      '::1',
    ]);
    const bad = (env: Record<string, string>, name: string) => {
      expect(() => loadConfig(env)).toThrow(ConfigError);
      expect(() => loadConfig(env)).toThrow(new RegExp(`^${name} `));
    };
    bad({ INBOUND_DNS_SERVERS: 'dns.example:53' }, 'INBOUND_DNS_SERVERS');
    bad({ INBOUND_DNS_SERVERS: '127.0.0.1:0' }, 'INBOUND_DNS_SERVERS');
    bad({ INBOUND_DNS_SERVERS: '127.0.0.1:53,nope' }, 'INBOUND_DNS_SERVERS');
    for (const name of [
      'INBOUND_MAX_CONNECTIONS_PER_ADDRESS',
      'INBOUND_MAX_MESSAGES_PER_CONNECTION',
      'INBOUND_MAX_RECIPIENTS_PER_CONNECTION',
      'INBOUND_MAX_MESSAGES_PER_ADDRESS_PER_MINUTE',
      'INBOUND_MAX_RECIPIENTS_PER_ADDRESS_PER_MINUTE',
    ]) {
      bad({ [name]: '0' }, name);
      bad({ [name]: 'many' }, name);
    }
  });
});
