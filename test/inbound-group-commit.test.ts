// Group commit of inbound mail, over real SMTP: replies delivered at once over several connections
// are stored, announced and classified with their effects in one transaction (a savepoint each),
// and each sender is answered only after that transaction commits. To make a group deterministic,
// a test holds an exclusive lock on the messages table: the first replies' transactions wait on it
// while the others arrive and queue, then all of them form the next group when the lock goes.

import { sql } from 'kysely';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveInbound } from '../src/boot/runtime.js';
import { STORE_GROUPS } from '../src/inbound/group-commit.js';
import { ACCEPTED, type InboundListener } from '../src/inbound/smtp-listener.js';
import { eventsOf, system, uid, uniqueEmail } from './crm-support.js';
import { contact, type DraftingOrg, draftingOrg, draftsOf, getSequence, sequence, settle, template } from './drafting-support.js';
import { type DnsServer, startDnsServer } from './support/dns-server.js';
import { failedJobs, startService, type TestService } from './support/harness.js';
import { type Delivery, deliverSmtp, inboundOf, mime } from './support/inbound-mail.js';
import { type SmtpSink, startSmtpSink } from './support/smtp-sink.js';
import { waitFor } from './support/wait.js';

const DOMAIN = 'replies.group-sender.test';
let svc: TestService;
let sink: SmtpSink;
let inbound: InboundListener;
let dns: DnsServer;
beforeAll(async () => {
  sink = await startSmtpSink();
  dns = await startDnsServer();
  svc = await startService({
    // Each case sets up several contacts through the API with one key.
    RATE_LIMIT_PER_MINUTE: '10000',
    INBOUND_DNS_SERVERS: dns.address,
    INBOUND_MAX_MESSAGES_PER_ADDRESS_PER_MINUTE: '100000',
    INBOUND_MAX_RECIPIENTS_PER_ADDRESS_PER_MINUTE: '100000',
    SMTP_URL: sink.url,
    MAIL_FROM: 'Acme Sales <sales@group-sender.test>',
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

const STEPS = [
  { dayOffset: 0, subject: 'A quick idea for {{company}}', body: 'Hi {{firstName}},\n\nWorth a short chat next week?\n\nBest,\nSam' },
  { dayOffset: 3, subject: 'Following up', body: 'Hi {{firstName}}, one more note. Worth a chat?' },
];

interface Sent {
  c: { id: string; email: string };
  seq: { id: string };
  messageId: string;
  replyTo: string;
}

/** One organization that sent step 1 of a two-step sequence to each of `n` new contacts. */
async function outreach(n: number): Promise<{ s: DraftingOrg; sent: Sent[] }> {
  const s = await draftingOrg(svc);
  await svc.admin.PATCH('/organizations/{orgId}', {
    params: { path: { orgId: s.org.id } },
    body: { flags: { v1_2_api_send: true } },
  });
  const tpl = await template(svc, s.org.id, STEPS);
  const people = [];
  for (let i = 0; i < n; i += 1) {
    const c = await contact(s.api, { email: uniqueEmail('dana'), name: 'Dana Whitfield' });
    people.push({ c, seq: await sequence(s.api, c.id, tpl) });
  }
  await settle(svc);
  for (const { c } of people) {
    for (const d of await draftsOf(s.api, c.id)) await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
    await s.api.POST('/drafts/{id}/send', { params: { path: { id: (await draftsOf(s.api, c.id))[0].id } } });
  }
  await settle(svc);
  const sent: Sent[] = [];
  for (const { c, seq } of people) {
    const got = sink.messages.filter((m) => m.to.includes(c.email.toLowerCase()));
    expect(got).toHaveLength(1);
    const parsed = await simpleParser(got[0].raw);
    sent.push({ c, seq, messageId: parsed.messageId!, replyTo: (parsed.replyTo?.value[0].address ?? '').toLowerCase() });
  }
  return { s, sent };
}

/** An interested reply to our message, from the contact to its reply address. */
const replyTo = (x: Sent, id = `<${uid('r')}@client.example>`) =>
  mime(
    {
      From: x.c.email,
      To: x.replyTo,
      Subject: 'Re: A quick idea for your team',
      'Message-ID': id,
      'In-Reply-To': x.messageId,
      References: x.messageId,
      'Content-Type': 'text/plain; charset=utf-8',
    },
    'Yes, this is interesting, please tell me more about pricing for a team of 40.',
  );

const waiting = async () =>
  (
    await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks WHERE relation = 'messages'::regclass AND NOT granted`.execute(
      svc.ownerDb,
    )
  ).rows[0].n;

type Mail = { raw: string; to: string };

/**
 * Delivers the `first` (as many as the listener's store transactions in flight) one after the
 * other, each waiting on a lock of the messages table, then the `rest` at once, each over a
 * connection of its own; then lets them go. While the lock is held, only the first wait (the rest
 * are queued behind them, not each in a transaction of its own) and no sender has an answer; the
 * rest are then stored as one group.
 */
async function deliverGrouped(first: Mail[], rest: Mail[]): Promise<Delivery[]> {
  expect(first).toHaveLength(STORE_GROUPS);
  let answered = 0;
  const go = (m: Mail) =>
    deliverSmtp(inbound.port, m.raw, [m.to], 'mta@client.example').finally(() => {
      answered += 1;
    });
  const answers: Promise<Delivery>[] = [];
  await svc.ownerDb.transaction().execute(async (trx) => {
    await sql`LOCK TABLE messages IN EXCLUSIVE MODE`.execute(trx);
    for (const [i, m] of first.entries()) {
      answers.push(go(m));
      await waitFor(async () => (await waiting()) > i, 15_000, 'a first reply to wait on the lock');
    }
    answers.push(...rest.map(go));
    // Long enough for every one of them to be parsed, routed and queued behind the waiting transactions.
    await new Promise((r) => setTimeout(r, 1500));
    expect(await waiting()).toBe(STORE_GROUPS);
    expect(answered).toBe(0);
  });
  return Promise.all(answers);
}

const mailOf = (x: Sent, id?: string): Mail => ({ raw: replyTo(x, id), to: x.replyTo });

describe('group commit', () => {
  it('stores replies delivered at once over several connections in one transaction, each once with its effects, each answered 250 after the commit', async () => {
    const { s, sent } = await outreach(STORE_GROUPS + 5);
    const answers = await deliverGrouped(
      sent.slice(0, STORE_GROUPS).map((x) => mailOf(x)),
      sent.slice(STORE_GROUPS).map((x) => mailOf(x)),
    );
    expect(answers.map((a) => a.response)).toEqual(sent.map(() => `250 ${ACCEPTED}`));
    const ms = await inboundOf(svc, s.org.id);
    expect(ms).toHaveLength(sent.length);
    for (const x of sent) {
      const m = ms.find((r) => r.contact_id === x.c.id)!;
      expect(m).toMatchObject({ status: 'classified', intent: 'interested', thread_method: 'token', authenticated: true });
      expect((await getSequence(s.api, x.seq.id)).status).toBe('PAUSED');
      expect((await draftsOf(s.api, x.c.id))[0].repliedAt).not.toBeNull();
    }
    for (const type of ['reply.received', 'reply.classified', 'lead.interested']) {
      expect((await eventsOf(svc, s.org.id, type)).map((e) => e.data.messageId).sort(), type).toEqual(ms.map((m) => m.id).sort());
    }
    const items = await system(svc, (trx) =>
      trx.selectFrom('action_items').select('source_key').where('organization_id', '=', s.org.id).execute(),
    );
    expect(items.map((i) => i.source_key).sort()).toEqual(ms.map((m) => `reply:${m.id}`).sort());
    await settle(svc);
    expect(await failedJobs(svc)).toEqual([]);
    expect((await svc.admin.GET('/queue')).data!.failed).toBe(0);
  });

  it('fails only the message that fails in a group: it is answered 451 and stored on its retry, the others are committed', async () => {
    const { s, sent } = await outreach(STORE_GROUPS + 4);
    const ids = sent.map(() => `<${uid('r')}@client.example>`);
    const bad = STORE_GROUPS + 1;
    svc.rt.services.faults.add(`inbound:store:${ids[bad]}`);
    let answers: Delivery[];
    try {
      const mails = sent.map((x, i) => mailOf(x, ids[i]));
      answers = await deliverGrouped(mails.slice(0, STORE_GROUPS), mails.slice(STORE_GROUPS));
    } finally {
      svc.rt.services.faults.delete(`inbound:store:${ids[bad]}`);
    }
    expect(answers.map((a) => a.code)).toEqual(sent.map((_, i) => (i === bad ? 451 : 250)));
    expect(answers[bad].response).toMatch(/^451 4\.3\.0 /);
    const ms = await inboundOf(svc, s.org.id);
    expect(ms.map((m) => m.message_id).sort()).toEqual(ids.filter((_, i) => i !== bad).sort());
    expect((await eventsOf(svc, s.org.id, 'reply.received')).map((e) => e.data.messageId).sort()).toEqual(ms.map((m) => m.id).sort());
    expect((await getSequence(s.api, sent[bad].seq.id)).status).toBe('ACTIVE');
    // The sender tries again: stored once, with its effects.
    expect((await deliverSmtp(inbound.port, replyTo(sent[bad], ids[bad]), [sent[bad].replyTo], 'mta@client.example')).code).toBe(250);
    expect((await inboundOf(svc, s.org.id)).map((m) => m.message_id).sort()).toEqual([...ids].sort());
    expect((await getSequence(s.api, sent[bad].seq.id)).status).toBe('PAUSED');
    expect(await eventsOf(svc, s.org.id, 'reply.classified')).toHaveLength(sent.length);
  });

  it('answers 451 to every message of a group whose commit fails, and stores nothing of it; the retries are stored once', async () => {
    const { s, sent } = await outreach(STORE_GROUPS + 3);
    const raws = sent.map((x) => replyTo(x));
    svc.rt.services.faults.add('inbound:before-commit');
    let answers: Delivery[];
    try {
      const mails = sent.map((x, i) => ({ raw: raws[i], to: x.replyTo }));
      answers = await deliverGrouped(mails.slice(0, STORE_GROUPS), mails.slice(STORE_GROUPS));
    } finally {
      svc.rt.services.faults.delete('inbound:before-commit');
    }
    expect(answers.map((a) => a.code)).toEqual(sent.map(() => 451));
    expect(await inboundOf(svc, s.org.id)).toEqual([]);
    expect(await eventsOf(svc, s.org.id, 'reply.received')).toEqual([]);
    for (const x of sent) expect((await getSequence(s.api, x.seq.id)).status).toBe('ACTIVE');
    const retried = await Promise.all(sent.map((x, i) => deliverSmtp(inbound.port, raws[i], [x.replyTo], 'mta@client.example')));
    expect(retried.map((a) => a.code)).toEqual(sent.map(() => 250));
    expect(await inboundOf(svc, s.org.id)).toHaveLength(sent.length);
    expect(await eventsOf(svc, s.org.id, 'reply.classified')).toHaveLength(sent.length);
    for (const x of sent) expect((await getSequence(s.api, x.seq.id)).status).toBe('PAUSED');
  });
});
