// The dispatcher against a real SMTP server on loopback: POST /drafts/{id}/send, the message and
// its headers, threading, DKIM, one-click unsubscribe, tracking, outcomes (sent, bounced, retried),
// every gate, rotation and caps, and recovery after a worker is killed mid-send.

import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import path from 'node:path';
import { sql } from 'kysely';
import { DateTime } from 'luxon';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendStep } from '../src/dispatch/send.js';
import { sweepSends } from '../src/dispatch/sweep.js';
import { eventsOf, system, uid } from './crm-support.js';
import { contact, type DraftingOrg, draftingOrg, draftsOf, getSequence, sequence, settle, template } from './drafting-support.js';
import { ALL_SCOPES, killSwitchOffQuietly, type PublicClient, raw, startService, type TestService, waitFor } from './support/harness.js';
import { type SmtpSink, startSmtpSink } from './support/smtp-sink.js';

let svc: TestService;
let sink: SmtpSink;
beforeAll(async () => {
  sink = await startSmtpSink();
  // A short socket limit, so a server that hangs is given up on quickly.
  svc = await startService({ SMTP_URL: sink.url, MAIL_FROM: 'Acme Sales <sales@acme-sender.test>', SMTP_TIMEOUT_MS: '2000' });
  await svc.startWorker();
});
afterAll(async () => {
  await svc?.close();
  await sink?.close();
});

const STEPS = [
  {
    dayOffset: 0,
    subject: 'Orbit for {{company}}',
    body: 'Hi {{firstName}},\n\nWe fly small satellites: https://acme.example/launch\n\nBest,\nSam',
  },
  { dayOffset: 0, subject: 'Following up', body: 'Hi {{firstName}}, one more note. Worth a call?' },
];

/** An organization that may send; the tests send several steps to one contact in a day, so the contact limit is 10 unless given. */
async function sendingOrg(settings: Record<string, unknown> = {}) {
  const s = await draftingOrg(svc);
  await svc.admin.PATCH('/organizations/{orgId}', {
    params: { path: { orgId: s.org.id } },
    body: { flags: { v1_2_api_send: true }, sending: { contactDailyLimit: 10, ...settings } },
  });
  return s;
}

/** A contact with an approved two-step sequence, ready to send. */
async function approved(s: DraftingOrg, email = `${uid('p')}@${uid('rcpt')}.example`, steps = STEPS) {
  const c = await contact(s.api, { email, name: 'Dana Whitfield' });
  const seq = await sequence(s.api, c.id, await template(svc, s.org.id, steps));
  await settle(svc);
  const drafts = await draftsOf(s.api, c.id);
  for (const d of drafts) await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
  return { c, seq, drafts };
}

const send = (s: DraftingOrg, id: string) => s.api.POST('/drafts/{id}/send', { params: { path: { id } } });
const queueOf = async (orgId: string) => (await svc.admin.GET('/send-queue', { params: { query: { organizationId: orgId } } })).data!.data;
const outbox = async (orgId: string) => (await svc.admin.GET('/outbox', { params: { query: { organizationId: orgId } } })).data!.data;
const forTo = (address: string) => sink.messages.filter((m) => m.to.includes(address.toLowerCase()));

describe('POST /drafts/{id}/send', () => {
  it('answers 404 while the flag is off, 403 on the free plan, 400 for a draft not approved or outside a sequence', async () => {
    const s = await draftingOrg(svc);
    const { drafts } = await approved(s);
    expect((await send(s, drafts[0].id)).response.status).toBe(404);
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { flags: { v1_2_api_send: true } } });
    const c = await contact(s.api);
    await sequence(s.api, c.id, await template(svc, s.org.id, STEPS));
    await settle(svc);
    const [fresh] = await draftsOf(s.api, c.id);
    expect((await send(s, fresh.id)).response.status).toBe(400);
    const loose = uid('drf_');
    await system(svc, (trx) =>
      trx
        .insertInto('drafts')
        .values({ organization_id: s.org.id, id: loose, contact_id: c.id, status: 'APPROVED', subject: 's', body: 'b' })
        .execute(),
    );
    const r = await send(s, loose);
    expect(r.response.status).toBe(400);
    expect(r.error?.detail).toMatch(/not part of a sequence/);
    expect((await send(s, 'drf_000000000000000000000000')).response.status).toBe(404);
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { plan: 'free' } });
    expect((await send(s, drafts[0].id)).response.status).toBe(403);
    const noScope = svc.api(await s.org.key(['drafts.read', 'drafts.write']));
    expect((await noScope.POST('/drafts/{id}/send', { params: { path: { id: drafts[0].id } } })).response.status).toBe(403);
  });

  it('skips with a stable reason: suppressed, removed, do-not-contact, already in pipeline, already queued, all steps sent', async () => {
    const s = await sendingOrg({ days: [((new Date().getUTCDay() + 2) % 7) + 1] }); // a window closed today: nothing goes out
    const reason = async (prepare: (c: { id: string; email: string }) => Promise<void>) => {
      const a = await approved(s);
      await prepare(a.c);
      const r = await send(s, a.drafts[0].id);
      expect(r.response.status).toBe(200);
      return r.data!;
    };
    expect(
      await reason(async (c) => {
        await s.api.POST('/suppression', { body: { email: c.email, reason: 'asked' } });
      }),
    ).toEqual({ draftId: expect.any(String), queued: false, queuedJobCount: 0, skippedReason: 'suppressed' });
    expect(
      (
        await reason(async (c) => {
          await s.api.DELETE('/contacts/{id}', { params: { path: { id: c.id } } });
        })
      ).skippedReason,
    ).toBe('contact_removed');
    expect(
      (
        await reason(async (c) => {
          await system(svc, (trx) =>
            trx
              .updateTable('contacts')
              .set({ tags: ['do-not-contact'] })
              .where('id', '=', c.id)
              .execute(),
          );
        })
      ).skippedReason,
    ).toBe('do_not_contact');
    expect(
      (
        await reason(async (c) => {
          await s.api.POST('/deals', { body: { name: 'Open deal', primaryContactId: c.id } });
        })
      ).skippedReason,
    ).toBe('already_in_pipeline');
    const a = await approved(s);
    const first = await send(s, a.drafts[0].id);
    expect(first.data).toEqual({ draftId: a.drafts[0].id, queued: true, queuedJobCount: 2, skippedReason: null });
    expect((await getSequence(s.api, a.seq.id)).status).toBe('QUEUED');
    expect((await send(s, a.drafts[1].id)).data).toMatchObject({ queued: false, skippedReason: 'already_queued' });
    await system(svc, (trx) => sql`UPDATE drafts SET sent_at = now() WHERE sequence_id = ${a.seq.id}`.execute(trx));
    await system(svc, (trx) => sql`UPDATE send_queue SET state = 'sent' WHERE sequence_id = ${a.seq.id}`.execute(trx));
    expect((await send(s, a.drafts[0].id)).data).toMatchObject({ queued: false, skippedReason: 'all_steps_sent' });
  });
});

describe('sending', () => {
  it('sends both steps in order over SMTP: threading, one-click unsubscribe, text and HTML, events, statuses, usage and the outbox', async () => {
    const s = await sendingOrg();
    const { c, seq, drafts } = await approved(s);
    await send(s, drafts[0].id);
    await settle(svc);
    const got = forTo(c.email);
    expect(got).toHaveLength(2);
    const [m1, m2] = await Promise.all(got.map((m) => simpleParser(m.raw)));
    expect(m1.from!.text).toBe('"Acme Sales" <sales@acme-sender.test>');
    expect(m1.to && !Array.isArray(m1.to) && m1.to.value[0].address).toBe(c.email.toLowerCase());
    expect(m1.subject).toBe('Orbit for your team');
    expect(m2.subject).toBe('Re: Orbit for your team');
    expect(m1.messageId).toMatch(/^<[0-9a-f]+\.[0-9a-z]+@acme-sender\.test>$/);
    expect(m2.inReplyTo).toBe(m1.messageId);
    expect(m2.references).toBe(m1.messageId);
    for (const m of [m1, m2]) {
      const header = (name: string) =>
        m.headerLines
          .find((h) => h.key === name)
          ?.line.slice(name.length + 1)
          .trim();
      const lu = { url: /^<(.+)>$/.exec(header('list-unsubscribe') ?? '')?.[1] ?? '' };
      expect(lu.url).toMatch(new RegExp(`^${svc.baseUrl}/unsubscribe/`));
      expect(header('list-unsubscribe-post')).toBe('List-Unsubscribe=One-Click');
      expect(m.text).toContain(`unsubscribe: ${lu.url}`);
      expect(m.html).toContain(`href="${lu.url}"`);
    }
    expect(m1.html).toContain('<a href="https://acme.example/launch" rel="noopener">https://acme.example/launch</a>');
    expect(m1.text!.startsWith('Hi Dana,\n\nWe fly small satellites')).toBe(true);

    expect(await getSequence(s.api, seq.id)).toMatchObject({ status: 'COMPLETED', currentStep: 2 });
    for (const d of await draftsOf(s.api, c.id)) expect(d.sentAt).not.toBeNull();
    const types = (await eventsOf(svc, s.org.id)).map((e) => e.type).filter((t) => t.startsWith('sequence.') || t === 'draft.sent');
    expect(types).toEqual(['draft.sent', 'sequence.started', 'draft.sent', 'sequence.completed']);
    const sent = await eventsOf(svc, s.org.id, 'draft.sent');
    expect(sent.map((e) => e.data.draftId)).toEqual(drafts.map((d) => d.id));
    expect(sent[0].data).toMatchObject({ mailboxId: 'deployment', messageId: m1.messageId });
    expect((await s.api.GET('/usage', {})).data!.sends.attempted).toBe(2);
    const box = await outbox(s.org.id);
    expect(box.map((m) => [m.step, m.status, m.to, m.from, m.messageId])).toEqual([
      [1, 'sent', c.email.toLowerCase(), 'sales@acme-sender.test', m1.messageId],
      [2, 'sent', c.email.toLowerCase(), 'sales@acme-sender.test', m2.messageId],
    ]);
    expect(box[0].headers['List-Unsubscribe-Post']).toBe('List-Unsubscribe=One-Click');
    expect(await queueOf(s.org.id)).toEqual([]);
  });

  it("signs with the mailbox's DKIM key, covering both unsubscribe headers (verified with mailauth and an injected resolver)", async () => {
    const s = await sendingOrg();
    const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const mb = await svc.admin.POST('/organizations/{orgId}/mailboxes', {
      params: { path: { orgId: s.org.id } },
      body: {
        email: 'rep@signed.test',
        name: 'Rep',
        smtpUrl: sink.url,
        dkim: { domainName: 'signed.test', keySelector: 'sel1', privateKey: pem },
      },
    });
    expect(mb.data).toMatchObject({ status: 'verified', ownSmtp: true, dkim: { domainName: 'signed.test', keySelector: 'sel1' } });
    expect(JSON.stringify(mb.data)).not.toContain('PRIVATE KEY');
    const { c, drafts } = await approved(s, undefined, [STEPS[0]]);
    await send(s, drafts[0].id);
    await settle(svc);
    const [m] = forTo(c.email);
    const txt = `v=DKIM1; k=rsa; p=${publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`;
    const resolver = async (name: string, type: string) => {
      if (type === 'TXT' && name === 'sel1._domainkey.signed.test') return [[txt]];
      throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    };
    const result = await dkimVerify(Buffer.from(m.raw), { resolver });
    expect(result.results[0]).toMatchObject({ signingDomain: 'signed.test', selector: 'sel1', status: { result: 'pass' } });
    const signature = /^DKIM-Signature:.*$/im.exec(m.raw.replace(/\r?\n[ \t]+/g, ' '))![0];
    const signed = String(/[;\s]h=([^;]+)/.exec(signature)?.[1])
      .toLowerCase()
      .replace(/\s/g, '')
      .split(':');
    expect(signed).toEqual(expect.arrayContaining(['list-unsubscribe', 'list-unsubscribe-post', 'from', 'subject', 'message-id']));
  });

  it('treats a 5xx as a hard bounce: HARD_BOUNCE suppression, email.bounced, send.failed, sequence.step_failed, the sequence paused', async () => {
    const s = await sendingOrg();
    const email = `${uid('gone')}@bounce.example`;
    sink.behave(email, 'permanent');
    const { c, seq, drafts } = await approved(s, email);
    await send(s, drafts[0].id);
    await settle(svc);
    expect(forTo(email)).toEqual([]);
    const sup = await s.api.GET('/suppression', { params: { query: { email } } });
    expect(sup.data).toMatchObject({ suppressed: true, entry: { reason: 'HARD_BOUNCE', source: 'dispatcher' } });
    for (const type of ['email.bounced', 'send.failed', 'sequence.step_failed', 'suppression.added'])
      expect(await eventsOf(svc, s.org.id, type), type).toHaveLength(1);
    expect((await eventsOf(svc, s.org.id, 'email.bounced'))[0].data).toMatchObject({ contactId: c.id, step: 1, code: 550, kind: 'hard' });
    expect(await getSequence(s.api, seq.id)).toMatchObject({ status: 'PAUSED', pausedFrom: 'QUEUED' });
    const q = await queueOf(s.org.id);
    expect(q.map((r) => [r.step, r.state, r.heldBy])).toEqual([
      [1, 'failed', 'hard_bounce'],
      [2, 'skipped', 'sequence_not_active'],
    ]);
    expect((await outbox(s.org.id)).map((m) => m.status)).toEqual(['bounced']);
  });

  it('retries a 4xx with backoff, then gives up with send.failed after the last attempt', async () => {
    const s = await sendingOrg();
    const email = `${uid('busy')}@later.example`;
    sink.behave(email, 'temporary');
    const { drafts } = await approved(s, email, [STEPS[0]]);
    await send(s, drafts[0].id);
    await settle(svc);
    let [q] = await queueOf(s.org.id);
    expect(q).toMatchObject({ state: 'deferred', heldBy: 'transport_retry', attempts: 1 });
    expect(Date.parse(q.nextAttemptAt) - Date.now()).toBeGreaterThan(50_000);
    expect(await eventsOf(svc, s.org.id, 'send.failed')).toEqual([]);
    // The last attempt (the earlier ones simulated), now.
    await system(svc, (trx) => sql`UPDATE send_queue SET attempts = 4, next_attempt_at = now() WHERE id = ${q.id}`.execute(trx));
    await sendStep(svc.rt, s.org.id, q.id);
    [q] = await queueOf(s.org.id);
    expect(q).toMatchObject({ state: 'failed', heldBy: 'transport_failed', attempts: 5 });
    expect((await eventsOf(svc, s.org.id, 'send.failed'))[0].data).toMatchObject({ permanent: false, attempts: 5 });
    expect(await eventsOf(svc, s.org.id, 'sequence.step_failed')).toHaveLength(1);
    expect((await s.api.GET('/usage', {})).data!.sends.attempted).toBe(2);
  });

  it('a server that hangs: before the message, tried again later; after all of it, possibly sent and never sent again', async () => {
    const s = await sendingOrg();
    const early = `${uid('slow')}@hang-early.example`;
    const late = `${uid('slow')}@hang-late.example`;
    sink.behave(early, 'hang-rcpt');
    sink.behave(late, 'hang');
    const a = await approved(s, early, [STEPS[0]]);
    const b = await approved(s, late);
    await send(s, a.drafts[0].id);
    await send(s, b.drafts[0].id);
    await settle(svc);
    const q = await queueOf(s.org.id);
    expect(q.find((r) => r.contactId === a.c.id)).toMatchObject({ state: 'deferred', heldBy: 'transport_retry', attempts: 1 });
    // The late one's server had the whole message: it may have delivered it. The sequence goes on
    // (the second step threads onto the first), and neither is tried again.
    expect(q.filter((r) => r.contactId === b.c.id).map((r) => [r.step, r.state, r.heldBy])).toEqual([
      [1, 'possibly_sent', 'possibly_sent'],
      [2, 'possibly_sent', 'possibly_sent'],
    ]);
    const box = (await outbox(s.org.id)).filter((m) => m.contactId === b.c.id);
    expect(box.map((m) => m.status)).toEqual(['possibly_sent', 'possibly_sent']);
    const hung = sink.hung.filter((m) => m.to.includes(late.toLowerCase()));
    expect(hung).toHaveLength(2);
    const second = await simpleParser(hung[1].raw);
    expect(second.inReplyTo).toBe((await simpleParser(hung[0].raw)).messageId);
    expect(await eventsOf(svc, s.org.id, 'send.failed')).toEqual([]);
    expect(forTo(late)).toEqual([]);
  });
});

describe('one-click unsubscribe', () => {
  it('GET shows a confirmation page; POST suppresses the address, stops the sequences and emits email.unsubscribed, once', async () => {
    const s = await sendingOrg();
    const second = { ...STEPS[1], dayOffset: 3 };
    const { c, seq, drafts } = await approved(s, undefined, [STEPS[0], second]);
    await send(s, drafts[0].id);
    await settle(svc);
    const [m] = await Promise.all(forTo(c.email).map((x) => simpleParser(x.raw)));
    const url = /^<(.+)>$/.exec(
      m.headerLines
        .find((h) => h.key === 'list-unsubscribe')!
        .line.slice('list-unsubscribe:'.length)
        .trim(),
    )![1];
    const path = new URL(url).pathname;
    const page = await raw(svc.baseUrl, 'GET', path);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<form method="post">');
    expect(await s.api.GET('/suppression', { params: { query: { email: c.email } } }).then((r) => r.data)).toMatchObject({
      suppressed: false,
    });
    // A mail client's one-click POST (RFC 8058).
    const post = await raw(svc.baseUrl, 'POST', path, {
      body: 'List-Unsubscribe=One-Click',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(post.status).toBe(200);
    expect(post.text).toContain('You are unsubscribed');
    expect((await s.api.GET('/suppression', { params: { query: { email: c.email } } })).data).toMatchObject({
      suppressed: true,
      entry: { reason: 'UNSUBSCRIBE' },
    });
    expect(await getSequence(s.api, seq.id)).toMatchObject({ status: 'PAUSED', pausedFrom: 'ACTIVE' });
    expect((await queueOf(s.org.id)).map((q) => [q.step, q.state, q.heldBy])).toEqual([[2, 'skipped', 'sequence_not_active']]);
    const again = await raw(svc.baseUrl, 'POST', path);
    expect(again.status).toBe(200);
    expect(await eventsOf(svc, s.org.id, 'email.unsubscribed')).toHaveLength(1);
    expect((await eventsOf(svc, s.org.id, 'email.unsubscribed'))[0].data).toMatchObject({
      contactId: c.id,
      draftId: drafts[0].id,
      step: 1,
    });
    expect((await eventsOf(svc, s.org.id, 'suppression.added')).filter((e) => e.data.reason === 'UNSUBSCRIBE')).toHaveLength(1);
    expect((await raw(svc.baseUrl, 'POST', `${path.slice(0, -3)}xyz`)).status).toBe(404);
    expect((await raw(svc.baseUrl, 'GET', '/unsubscribe/garbage')).status).toBe(404);
  });

  it('renews an expired suppression entry of the address in place, emitting suppression.added again', async () => {
    const s = await sendingOrg();
    const { c, drafts } = await approved(s, undefined, [STEPS[0]]);
    await send(s, drafts[0].id);
    await settle(svc);
    const [m] = await Promise.all(forTo(c.email).map((x) => simpleParser(x.raw)));
    const url = /^<(.+)>$/.exec(
      m.headerLines
        .find((h) => h.key === 'list-unsubscribe')!
        .line.slice('list-unsubscribe:'.length)
        .trim(),
    )![1];
    const path = new URL(url).pathname;
    const oneClick = () =>
      raw(svc.baseUrl, 'POST', path, {
        body: 'List-Unsubscribe=One-Click',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
    const status = async () =>
      (await s.api.GET('/suppression', { params: { query: { email: c.email } } })).data as {
        suppressed: boolean;
        entry: Record<string, unknown> | null;
      };
    expect((await oneClick()).status).toBe(200);
    const first = (await status()).entry!;
    await system(svc, (trx) =>
      trx
        .updateTable('suppression_entries')
        .set({ expires_at: new Date(Date.now() - 1000) })
        .where('organization_id', '=', s.org.id)
        .where('id', '=', first.id as string)
        .execute(),
    );
    expect((await status()).suppressed).toBe(false);
    expect((await oneClick()).status).toBe(200);
    const renewed = await status();
    expect(renewed.suppressed).toBe(true);
    expect(renewed.entry).toMatchObject({ id: first.id, reason: 'UNSUBSCRIBE', source: 'one-click unsubscribe', expiresAt: null });
    const added = (await eventsOf(svc, s.org.id, 'suppression.added')).filter((e) => e.data.reason === 'UNSUBSCRIBE');
    expect(added.map((e) => [e.resource_id, e.data])).toEqual([
      [first.id, { email: c.email.toLowerCase(), level: 'ADDRESS', reason: 'UNSUBSCRIBE', source: 'one-click unsubscribe' }],
      [first.id, { email: c.email.toLowerCase(), level: 'ADDRESS', reason: 'UNSUBSCRIBE', source: 'one-click unsubscribe' }],
    ]);
  });
});

describe('tracking (opt-in)', () => {
  it('is off by default; when on, a signed pixel records the first open and signed redirects record clicks', async () => {
    const off = await sendingOrg();
    const a = await approved(off, undefined, [STEPS[0]]);
    await send(off, a.drafts[0].id);
    await settle(svc);
    const plain = await simpleParser(forTo(a.c.email)[0].raw);
    expect(plain.html).not.toContain('/t/o/');
    expect(plain.html).not.toContain('/t/c/');

    const s = await sendingOrg({ tracking: true });
    const { c, drafts } = await approved(s, undefined, [STEPS[0]]);
    await send(s, drafts[0].id);
    await settle(svc);
    const html = String((await simpleParser(forTo(c.email)[0].raw)).html);
    const pixel = new URL(/src="([^"]+\/t\/o\/[^"]+)"/.exec(html)![1]).pathname;
    const click = new URL(/href="([^"]+\/t\/c\/[^"]+)"/.exec(html)![1].replace(/&amp;/g, '&')).pathname;
    for (let i = 0; i < 2; i += 1) {
      const p = await fetch(`${svc.baseUrl}${pixel}`);
      expect(p.headers.get('content-type')).toBe('image/gif');
    }
    expect(await eventsOf(svc, s.org.id, 'email.opened')).toHaveLength(1);
    expect((await draftsOf(s.api, c.id))[0].openedAt).not.toBeNull();
    const r = await fetch(`${svc.baseUrl}${click}`, { redirect: 'manual' });
    expect(r.status).toBe(302);
    expect(r.headers.get('location')).toBe('https://acme.example/launch');
    expect((await eventsOf(svc, s.org.id, 'email.clicked'))[0].data).toMatchObject({ url: 'https://acme.example/launch', contactId: c.id });
    // Change the signature's last character to a different one (a fixed replacement is a no-op
    // one time in 64, when the signature already ends with it).
    const forged = click.slice(0, -1) + (click.endsWith('A') ? 'B' : 'A');
    expect((await fetch(`${svc.baseUrl}${forged}`, { redirect: 'manual' })).status).toBe(404);
  });
});

describe('gates', () => {
  it('the kill switch holds every send and loses nothing', async () => {
    const s = await sendingOrg();
    await svc.admin.PATCH('/settings', { body: { emailKillSwitch: true } });
    try {
      const { c, drafts } = await approved(s, undefined, [STEPS[0]]);
      await send(s, drafts[0].id);
      await settle(svc);
      expect(forTo(c.email)).toEqual([]);
      const [q] = await queueOf(s.org.id);
      expect(q).toMatchObject({ state: 'deferred', heldBy: 'kill_switch' });
      // Turning it off releases what it held at once (src/dispatch/reevaluate.ts): no job needs running by hand.
      await svc.admin.PATCH('/settings', { body: { emailKillSwitch: false } });
      await waitFor(() => forTo(c.email).length === 1, 60_000, 'the step the kill switch held');
    } finally {
      await svc.admin.PATCH('/settings', { body: { emailKillSwitch: false } });
    }
  });

  it('holds steps outside the sending window (IANA zone, days, hours) until it opens', async () => {
    const zone = 'America/New_York';
    const local = new Intl.DateTimeFormat('en-US', { timeZone: zone, weekday: 'short' }).format(new Date());
    const today = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'].indexOf(local) + 1;
    const tomorrow = (today % 7) + 1;
    const s = await sendingOrg({ timeZone: zone, days: [tomorrow], from: '09:30', to: '17:00' });
    const { c, drafts } = await approved(s, undefined, [STEPS[0]]);
    await send(s, drafts[0].id);
    await settle(svc);
    expect(forTo(c.email)).toEqual([]);
    const [q] = await queueOf(s.org.id);
    expect(q).toMatchObject({ state: 'deferred', heldBy: 'sending_window' });
    const opens = new Date(q.nextAttemptAt);
    const parts = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      weekday: 'short',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    }).formatToParts(opens);
    expect(parts.find((p) => p.type === 'weekday')!.value).toBe(['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'][tomorrow - 1]);
    expect(`${parts.find((p) => p.type === 'hour')!.value}:${parts.find((p) => p.type === 'minute')!.value}`).toBe('09:30');
    const bad = await svc.admin.PATCH('/organizations/{orgId}', {
      params: { path: { orgId: s.org.id } },
      body: { sending: { timeZone: 'Mars/Olympus' } },
    });
    expect(bad.response.status).toBe(400);
    const backwards = await svc.admin.PATCH('/organizations/{orgId}', {
      params: { path: { orgId: s.org.id } },
      body: { sending: { from: '18:00', to: '09:00' } },
    });
    expect(backwards.response.status).toBe(400);
  });

  it('skips a step whose contact was suppressed after it was queued, and holds a snoozed contact until the snooze ends', async () => {
    const s = await sendingOrg();
    await svc.admin.PATCH('/settings', { body: { emailKillSwitch: true } });
    const a = await approved(s, undefined, [STEPS[0]]);
    const b = await approved(s, undefined, [STEPS[0]]);
    await send(s, a.drafts[0].id);
    await send(s, b.drafts[0].id);
    await settle(svc);
    await s.api.POST('/suppression', { body: { email: a.c.email, reason: 'asked' } });
    const until = new Date(Date.now() + 3 * 86_400_000);
    await system(svc, (trx) => trx.updateTable('contacts').set({ snoozed_until: until }).where('id', '=', b.c.id).execute());
    await svc.admin.PATCH('/settings', { body: { emailKillSwitch: false } });
    // Released at once, both are gated again by the workers.
    const rows = await waitFor(
      async () => {
        const r = await queueOf(s.org.id);
        return r.every((q) => ['suppressed', 'contact_snoozed'].includes(q.heldBy ?? '')) ? r : null;
      },
      60_000,
      'both steps gated again',
    );
    expect(rows.find((r) => r.contactId === a.c.id)).toMatchObject({ state: 'skipped', heldBy: 'suppressed' });
    expect(rows.find((r) => r.contactId === b.c.id)).toMatchObject({
      state: 'deferred',
      heldBy: 'contact_snoozed',
      nextAttemptAt: until.toISOString(),
    });
    expect([...forTo(a.c.email), ...forTo(b.c.email)]).toEqual([]);
  });

  it('waits when no mailbox is verified and the deployment sender is not allowed', async () => {
    const s = await sendingOrg({ allowDeploymentSender: false });
    const { c, drafts } = await approved(s, undefined, [STEPS[0]]);
    await send(s, drafts[0].id);
    await settle(svc);
    expect(forTo(c.email)).toEqual([]);
    expect((await queueOf(s.org.id))[0]).toMatchObject({ state: 'deferred', heldBy: 'no_verified_mailbox' });
    const failed = await svc.admin.POST('/organizations/{orgId}/mailboxes', {
      params: { path: { orgId: s.org.id } },
      body: { email: 'rep@nowhere.test', smtpUrl: 'smtp://127.0.0.1:1' },
    });
    expect(failed.data).toMatchObject({ status: 'failed', statusReason: expect.stringMatching(/ECONNREFUSED|connect/) });
    // Drafted while no mailbox could send, the sequence has none; it is pinned by the same rotation at its first send.
    const seqId = (await s.api.GET('/drafts/{id}', { params: { path: { id: drafts[0].id } } })).data!.sequenceId!;
    expect((await getSequence(s.api, seqId)).mailboxId).toBeNull();
    const late = await svc.admin.POST('/organizations/{orgId}/mailboxes', {
      params: { path: { orgId: s.org.id } },
      body: { email: `late@${uid('pin')}.test`, name: 'Late Starter' },
    });
    expect(late.data!.status).toBe('verified');
    // A mailbox verified releases the steps that waited for one (src/dispatch/reevaluate.ts).
    await waitFor(() => forTo(c.email).length === 1, 60_000, 'the step that waited for a mailbox');
    expect(forTo(c.email).map((m) => m.from)).toEqual([late.data!.email]);
    expect((await getSequence(s.api, seqId)).mailboxId).toBe(late.data!.id);
  });

  it('refuses an smtpUrl that cannot be parsed with 400 on body.smtpUrl, adding nothing', async () => {
    const org = await svc.newOrg();
    for (const smtpUrl of ['smtp://[', 'smtps://[::1', 'smtp://exa mple.test:25']) {
      const r = await svc.admin.POST('/organizations/{orgId}/mailboxes', {
        params: { path: { orgId: org.id } },
        body: { email: 'rep@unparsable.test', smtpUrl },
      });
      expect(r.response.status, smtpUrl).toBe(400);
      expect(r.error, smtpUrl).toMatchObject({
        type: `${svc.baseUrl}/problems/validation-failed`,
        errors: [{ field: 'body.smtpUrl', message: expect.stringContaining('cannot be parsed') }],
      });
    }
    const list = await svc.admin.GET('/organizations/{orgId}/mailboxes', { params: { path: { orgId: org.id } } });
    expect(list.data!.data).toEqual([]);
  });

  it('keeps a mailbox within its daily cap, a recipient domain within its cap, and the minimum gap', async () => {
    const s = await sendingOrg({ recipientDomainDailyCap: 2, minGapSeconds: 0 });
    await svc.admin.POST('/organizations/{orgId}/mailboxes', {
      params: { path: { orgId: s.org.id } },
      body: { email: 'one@capped.test', dailyCap: 3 },
    });
    const domain = `${uid('shared')}.example`;
    const people = [];
    for (let i = 0; i < 3; i += 1) people.push(await approved(s, `${uid('p')}@${domain}`, [STEPS[0]]));
    const others = [];
    for (let i = 0; i < 2; i += 1) others.push(await approved(s, undefined, [STEPS[0]]));
    for (const p of [...people, ...others]) await send(s, p.drafts[0].id);
    await settle(svc);
    // A step whose job met it in another batch's hands is looked at again 20 s later: wait for its verdict.
    const rows = await waitFor(
      async () => {
        const q = await queueOf(s.org.id);
        return q.every((r) => r.heldBy !== null) ? q : null;
      },
      45_000,
      'every held step judged',
    );
    const sentCount = (await outbox(s.org.id)).filter((m) => m.status === 'sent').length;
    expect(sentCount).toBe(3); // the mailbox's cap: a step the domain cap holds takes no mailbox slot
    expect((await outbox(s.org.id)).filter((m) => m.to?.endsWith(`@${domain}`)).length).toBeLessThanOrEqual(2);
    expect(rows.map((r) => r.heldBy).sort()).toEqual(expect.arrayContaining(['mailbox_daily_cap']));
    for (const r of rows) expect(['mailbox_daily_cap', 'recipient_domain_daily_cap']).toContain(r.heldBy);
    const gap = await sendingOrg({ minGapSeconds: 3600 });
    const g1 = await approved(gap, undefined, [STEPS[0]]);
    const g2 = await approved(gap, undefined, [STEPS[0]]);
    await send(gap, g1.drafts[0].id);
    await send(gap, g2.drafts[0].id);
    await settle(svc);
    const held = await queueOf(gap.org.id);
    expect(held).toHaveLength(1);
    expect(held[0]).toMatchObject({ heldBy: 'min_gap' });
    expect(Date.parse(held[0].nextAttemptAt) - Date.now()).toBeGreaterThan(3500_000);
  });
});

describe('mailboxes and caps under concurrency', () => {
  it("rotates mailboxes by cap left, keeps every later step on the first step's mailbox, and never overshoots a cap with two workers racing", async () => {
    const s = await sendingOrg();
    const a = await svc.admin.POST('/organizations/{orgId}/mailboxes', {
      params: { path: { orgId: s.org.id } },
      body: { email: 'a@rotate.test', name: 'A', dailyCap: 6 },
    });
    const b = await svc.admin.POST('/organizations/{orgId}/mailboxes', {
      params: { path: { orgId: s.org.id } },
      body: { email: 'b@rotate.test', name: 'B', dailyCap: 6 },
    });
    expect([a.data!.status, b.data!.status]).toEqual(['verified', 'verified']);
    await svc.startWorker(); // a second worker competes for the same jobs
    const people = [];
    for (let i = 0; i < 8; i += 1) people.push(await approved(s));
    // Hold everything, queue it all, then release at once so both workers race.
    await svc.admin.PATCH('/settings', { body: { emailKillSwitch: true } });
    try {
      for (const p of people) await send(s, p.drafts[0].id);
      await settle(svc);
    } finally {
      await svc.admin.PATCH('/settings', { body: { emailKillSwitch: false } });
    }
    await system(svc, (trx) =>
      sql`SELECT enqueue_job('send_step', json_build_object('organizationId', organization_id, 'queueId', id), NULL, id)
      FROM send_queue WHERE organization_id = ${s.org.id} AND state = 'deferred'`.execute(trx),
    );
    await settle(svc);
    const box = (await outbox(s.org.id)).filter((m) => m.status === 'sent');
    // 8 people x 2 steps = 16 messages wanted; the two mailboxes allow 12 in 24 hours.
    expect(box).toHaveLength(12);
    expect(box.filter((m) => m.from === 'a@rotate.test')).toHaveLength(6);
    expect(box.filter((m) => m.from === 'b@rotate.test')).toHaveLength(6);
    expect(new Set(box.map((m) => `${m.contactId}:${m.step}`)).size).toBe(12); // no step twice
    for (const p of people) {
      const mine = box.filter((m) => m.contactId === p.c.id);
      expect(new Set(mine.map((m) => m.from)).size).toBeLessThanOrEqual(1);
    }
    const held = await queueOf(s.org.id);
    expect(held).toHaveLength(4);
    for (const h of held)
      expect(h).toMatchObject({ state: 'deferred', heldBy: expect.stringMatching(/^(mailbox_daily_cap|previous_step_pending)$/) });
    expect(sink.messages.filter((m) => m.from.endsWith('@rotate.test'))).toHaveLength(12);
  });

  it('pins each sequence to a mailbox when its drafts are written, by cap left: sends of the last 24 hours and pinned sequences not started count', async () => {
    const s = await sendingOrg();
    const mailbox = async (email: string, dailyCap: number) =>
      (
        await svc.admin.POST('/organizations/{orgId}/mailboxes', {
          params: { path: { orgId: s.org.id } },
          body: { email, name: email, dailyCap },
        })
      ).data!;
    const a = await mailbox(`a@${uid('pin')}.test`, 3);
    const b = await mailbox(`b@${uid('pin')}.test`, 8);
    // b sent 3 messages in the last 24 hours (and one 30 hours ago, which no longer counts): 5 left, against a's 3.
    await system(svc, (trx) =>
      trx
        .insertInto('send_records')
        .values(
          [1, 2, 3, 30].map((h, i) => ({
            organization_id: s.org.id,
            id: uid('snd_'),
            mailbox_id: b.id,
            status: 'sent',
            sent_at: new Date(Date.now() - h * 3_600_000),
            to_email: `x${i}@earlier.example`,
          })),
        )
        .execute(),
    );
    const pins: string[] = [];
    for (let i = 0; i < 4; i += 1) {
      const c = await contact(s.api, { email: `${uid('p')}@${uid('rcpt')}.example` });
      const seq = await sequence(s.api, c.id, await template(svc, s.org.id, STEPS));
      expect(seq.mailboxId).toBeNull(); // chosen when the drafts are written, not before
      await settle(svc);
      const drafted = await getSequence(s.api, seq.id);
      expect(drafted.status).toBe('DRAFTED');
      pins.push(drafted.mailboxId!);
    }
    // b (5 left), b (4), then a and b at 3 each take one each; nothing has been sent.
    expect(pins.slice(0, 2)).toEqual([b.id, b.id]);
    expect(pins.slice(2).sort()).toEqual([a.id, b.id].sort());
    expect((await outbox(s.org.id)).filter((m) => m.draftId !== null)).toEqual([]);
    expect(await queueOf(s.org.id)).toEqual([]);
  });

  it("sends every step from the sequence's pinned mailbox, even when another mailbox has more cap left", async () => {
    const s = await sendingOrg();
    const first = (
      await svc.admin.POST('/organizations/{orgId}/mailboxes', {
        params: { path: { orgId: s.org.id } },
        body: { email: `first@${uid('pin')}.test`, name: 'Dana Reyes', dailyCap: 5 },
      })
    ).data!;
    const { c, seq, drafts } = await approved(s);
    expect((await getSequence(s.api, seq.id)).mailboxId).toBe(first.id);
    // A mailbox with far more cap left arrives after the drafts were written (signed "Dana Reyes").
    await svc.admin.POST('/organizations/{orgId}/mailboxes', {
      params: { path: { orgId: s.org.id } },
      body: { email: `roomy@${uid('pin')}.test`, name: 'Sam Lee', dailyCap: 500 },
    });
    await send(s, drafts[0].id);
    await settle(svc);
    const box = (await outbox(s.org.id)).filter((m) => m.status === 'sent');
    expect(box.map((m) => [m.step, m.mailboxId, m.from])).toEqual([
      [1, first.id, first.email],
      [2, first.id, first.email],
    ]);
    expect(forTo(c.email).map((m) => m.from)).toEqual([first.email, first.email]);
  });
});

describe('each prospect protected: the contact daily limit', () => {
  beforeAll(async () => {
    await svc.startWorker(); // a second worker competes for the same jobs
  });

  /** Contacts each in two sequences (two templates) of one step due now, every draft approved; each contact has a key of its own (the rate limit is per key). */
  async function inTwoSequences(s: DraftingOrg, n: number) {
    const tpls = [
      await template(svc, s.org.id, [STEPS[0]]),
      await template(svc, s.org.id, [{ ...STEPS[1], subject: 'Ground stations for {{company}}' }]),
    ];
    const people = [];
    for (let i = 0; i < n; i += 1) {
      const api = svc.api(await s.org.key(ALL_SCOPES, { userId: s.org.ownerId }));
      const c = await contact(api, { email: `${uid('p')}@${uid('rcpt')}.example`, name: 'Dana Whitfield' });
      const seqs = [await sequence(api, c.id, tpls[0]), await sequence(api, c.id, tpls[1])];
      people.push({ api, c, seqs });
    }
    await settle(svc);
    const withDrafts = [];
    for (const p of people) {
      const drafts = await draftsOf(p.api, p.c.id);
      expect(drafts).toHaveLength(2);
      for (const d of drafts) await p.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
      withDrafts.push({ ...p, drafts });
    }
    return withDrafts;
  }

  /** Queues every draft while the kill switch holds them, then lets every step go at once: the workers race for them. */
  async function raceAll(s: DraftingOrg, people: { api: PublicClient; drafts: { id: string }[] }[]) {
    await svc.admin.PATCH('/settings', { body: { emailKillSwitch: true } });
    try {
      for (const p of people)
        for (const d of p.drafts)
          expect((await p.api.POST('/drafts/{id}/send', { params: { path: { id: d.id } } })).data).toMatchObject({ queued: true });
      await settle(svc);
    } finally {
      await svc.admin.PATCH('/settings', { body: { emailKillSwitch: false } });
    }
    await system(svc, (trx) =>
      sql`SELECT enqueue_job('send_step', json_build_object('organizationId', organization_id, 'queueId', id), NULL, id)
      FROM send_queue WHERE organization_id = ${s.org.id} AND state = 'deferred'`.execute(trx),
    );
    await settle(svc);
  }

  it('sends a contact in two sequences one message a local day, with two workers racing; the other step waits for the next local day', async () => {
    const zone = 'Asia/Tokyo';
    const s = await sendingOrg({ timeZone: zone, contactDailyLimit: 1 });
    // More steps than one batch takes, so the two workers claim some of one contact's steps in different batches.
    const people = await inTwoSequences(s, 26);
    await raceAll(s, people);
    const tomorrow = DateTime.now().setZone(zone).startOf('day').plus({ days: 1 }).toJSDate();
    for (const p of people) expect(forTo(p.c.email), p.c.email).toHaveLength(1);
    const held = await queueOf(s.org.id);
    expect(held).toHaveLength(people.length);
    for (const h of held) {
      expect(h).toMatchObject({ state: 'deferred', heldBy: 'contact_daily_limit' });
      expect(new Date(h.nextAttemptAt).getTime()).toBe(tomorrow.getTime());
    }
    expect(new Set(held.map((h) => h.contactId)).size).toBe(people.length);
    expect(await eventsOf(svc, s.org.id, 'draft.sent')).toHaveLength(people.length);
    // The next local day (the sends moved back before today's start): the held step goes.
    const [first] = people;
    await system(svc, (trx) =>
      sql`UPDATE send_records SET sent_at = ${DateTime.now().setZone(zone).startOf('day').minus({ minutes: 1 }).toJSDate()}::timestamptz
      WHERE organization_id = ${s.org.id} AND contact_id = ${first.c.id}`.execute(trx),
    );
    await sendStep(svc.rt, s.org.id, held.find((h) => h.contactId === first.c.id)!.id);
    expect(forTo(first.c.email)).toHaveLength(2);
    expect(new Set(forTo(first.c.email).map((m) => /^Subject: (.*)$/m.exec(m.raw)?.[1])).size).toBe(2);
  });

  it('counts a message another worker claimed while this batch waited for the contact', async () => {
    const s = await sendingOrg({ contactDailyLimit: 1 });
    const [p] = await inTwoSequences(s, 1);
    await svc.admin.PATCH('/settings', { body: { emailKillSwitch: true } });
    try {
      await p.api.POST('/drafts/{id}/send', { params: { path: { id: p.drafts[0].id } } });
      await settle(svc);
    } finally {
      await killSwitchOffQuietly(svc);
    }
    const [q] = await queueOf(s.org.id);
    // Another worker's batch: it holds the contact's lock and claims a message to the contact, not committed yet.
    const other = await svc.pool.connect();
    try {
      await other.query('BEGIN');
      await other.query(`SELECT set_config('app.system', 'on', true)`);
      await other.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [`contact:${s.org.id}:${p.c.id}`]);
      await other.query(
        `INSERT INTO send_records (organization_id, id, contact_id, to_email, status, sent_at) VALUES ($1, $2, $3, $4, 'sending', now())`,
        [s.org.id, uid('snd_'), p.c.id, p.c.email.toLowerCase()],
      );
      let done = false;
      const batch = sendStep(svc.rt, s.org.id, q.id).then(() => {
        done = true;
      });
      await new Promise((r) => setTimeout(r, 500));
      expect(done).toBe(false); // waiting for the contact's lock
      await other.query('COMMIT');
      await batch;
    } finally {
      await other.query('ROLLBACK').catch(() => {});
      other.release();
    }
    expect(forTo(p.c.email)).toEqual([]);
    expect((await queueOf(s.org.id))[0]).toMatchObject({ id: q.id, state: 'deferred', heldBy: 'contact_daily_limit' });
  });

  it('sends both when sending.contactDailyLimit is 2, and refuses a limit under 1', async () => {
    const s = await sendingOrg({ contactDailyLimit: 2 });
    const people = await inTwoSequences(s, 3);
    await raceAll(s, people);
    for (const p of people) expect(forTo(p.c.email)).toHaveLength(2);
    expect(await queueOf(s.org.id)).toEqual([]);
    const org = await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { sending: {} } });
    expect(org.data!.sending).toMatchObject({ contactDailyLimit: 2 });
    for (const bad of [0, 1.5]) {
      const r = await svc.admin.PATCH('/organizations/{orgId}', {
        params: { path: { orgId: s.org.id } },
        body: { sending: { contactDailyLimit: bad } },
      });
      expect(r.response.status, String(bad)).toBe(400);
    }
    const fresh = await draftingOrg(svc);
    const shown = await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: fresh.org.id } }, body: { sending: {} } });
    expect(shown.data!.sending).toMatchObject({ contactDailyLimit: 1 });
  });
});

describe('lifecycle', () => {
  it('a step approved while its sequence is sending joins the queue', async () => {
    const s = await sendingOrg();
    const c = await contact(s.api, { name: 'Dana Whitfield' });
    const seq = await sequence(s.api, c.id, await template(svc, s.org.id, STEPS));
    await settle(svc);
    const [d1, d2] = await draftsOf(s.api, c.id);
    await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d1.id } } });
    expect((await send(s, d1.id)).data).toMatchObject({ queued: true, queuedJobCount: 1 });
    await settle(svc);
    expect((await getSequence(s.api, seq.id)).status).toBe('ACTIVE');
    await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d2.id } } });
    await settle(svc);
    expect(forTo(c.email)).toHaveLength(2);
    expect((await getSequence(s.api, seq.id)).status).toBe('COMPLETED');
  });

  it('erasing a contact takes its queued steps out of the queue; nothing is sent', async () => {
    const s = await sendingOrg({ days: [((new Date().getUTCDay() + 2) % 7) + 1] });
    const { c, drafts } = await approved(s);
    await send(s, drafts[0].id);
    await settle(svc);
    expect((await queueOf(s.org.id)).map((q) => q.heldBy).sort()).toEqual(['previous_step_pending', 'sending_window']);
    const owner = svc.api(await s.org.key(undefined, { userId: s.org.ownerId }));
    await owner.POST('/contacts/{id}/erase', { params: { path: { id: c.id } }, body: { requesterRef: 'DSR', reason: 'request' } });
    const rows = await queueOf(s.org.id);
    expect(rows.map((q) => [q.state, q.heldBy])).toEqual([
      ['skipped', 'contact_removed'],
      ['skipped', 'contact_removed'],
    ]);
    for (const q of rows) await sendStep(svc.rt, s.org.id, q.id);
    expect(forTo(c.email)).toEqual([]);
  });

  it('pauses a mailbox whose hard bounces reach 2% of 20+ sends in 28 days, and says so with org.health_changed', async () => {
    const s = await sendingOrg();
    const mb = (
      await svc.admin.POST('/organizations/{orgId}/mailboxes', {
        params: { path: { orgId: s.org.id } },
        body: { email: 'health@bounce.test' },
      })
    ).data!;
    await system(svc, (trx) =>
      trx
        .insertInto('send_records')
        .values(
          Array.from({ length: 25 }, (_, i) => ({
            organization_id: s.org.id,
            id: uid('snd_'),
            mailbox_id: mb.id,
            status: 'sent',
            sent_at: new Date(Date.now() - (i + 1) * 3_600_000),
            to_email: `x${i}@a.example`,
          })),
        )
        .execute(),
    );
    const email = `${uid('gone')}@bounce.example`;
    sink.behave(email, 'permanent');
    const { drafts } = await approved(s, email, [STEPS[0]]);
    await send(s, drafts[0].id);
    await settle(svc);
    const after = (await svc.admin.GET('/organizations/{orgId}/mailboxes', { params: { path: { orgId: s.org.id } } })).data!.data[0];
    expect(after).toMatchObject({ status: 'paused', statusReason: 'bounce_rate' });
    const h = await eventsOf(svc, s.org.id, 'org.health_changed');
    expect(h).toHaveLength(1);
    // Folded into the organization's health: the paused mailbox and the bounce rate are its reasons.
    expect(h[0].data).toMatchObject({
      organizationId: s.org.id,
      from: 'healthy',
      to: 'degraded',
      reasons: expect.arrayContaining([
        expect.objectContaining({ code: 'mailbox_paused', mailboxId: mb.id, reason: 'bounce_rate' }),
        expect.objectContaining({ code: 'bounce_rate', bounces: 1, sends: 26, windowDays: 28, thresholdPct: 2 }),
      ]),
    });
    // The operator resumes it (verifying it again).
    const resumed = await svc.admin.PATCH('/organizations/{orgId}/mailboxes/{mailboxId}', {
      params: { path: { orgId: s.org.id, mailboxId: mb.id } },
      body: { verify: true },
    });
    expect(resumed.data).toMatchObject({ status: 'verified', statusReason: null });
  });
});

describe('crash safety', () => {
  it('a worker killed between the SMTP hand-over and the record: the step is marked possibly sent and never sent again', async () => {
    const crash = await startService({ SMTP_URL: sink.url, RATE_LIMIT_PER_MINUTE: '100000' });
    const dbUrl = crash.pool.options.connectionString;
    // Node itself (tsx as a loader), so the kill reaches the process that holds the connection.
    const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('src/boot/worker-main.ts')], {
      env: { ...process.env, DATABASE_URL: dbUrl, DATA_DIR: crash.config.dataDir, SMTP_URL: sink.url, LOG_LEVEL: 'silent' },
      stdio: 'ignore',
    });
    try {
      const org = await crash.newOrg();
      const key = await org.key();
      const api = crash.api(key);
      await crash.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: org.id } }, body: { flags: { v1_2_api_send: true } } });
      const email = `${uid('kill')}@crash.example`;
      const c = await contact(api, { email });
      const tpl = (
        await crash.admin.POST('/organizations/{orgId}/sequence-templates', {
          params: { path: { orgId: org.id } },
          body: { name: 't', steps: [STEPS[0]] },
        })
      ).data!.id;
      await api.POST('/sequences', { body: { contactId: c.id, templateId: tpl } });
      const [d] = await waitFor(
        async () => {
          const r = await api.GET('/drafts', { params: { query: { contactId: c.id } } });
          return r.data?.data.length ? r.data.data : null;
        },
        30_000,
        'the draft',
      );
      await api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
      // The server receives the message; before it answers, the worker process is killed.
      let killed!: () => void;
      const done = new Promise<void>((r) => {
        killed = r;
      });
      sink.onMessage(async (m) => {
        if (!m.to.includes(email.toLowerCase())) return;
        child.kill('SIGKILL');
        await new Promise((r) => child.once('exit', r));
        killed();
      });
      await api.POST('/drafts/{id}/send', { params: { path: { id: d.id } } });
      await done;
      sink.onMessage(null);
      const q = (await crash.admin.GET('/send-queue', { params: { query: { organizationId: org.id } } })).data!.data;
      expect(q).toMatchObject([{ state: 'sending' }]);
      // The recovery sweep (every minute; here at once, with no waiting period) marks it.
      expect(await sweepSends(crash.rt.db, crash.rt.systemDb, { staleMs: 0 })).toMatchObject({ possiblySent: 1, released: 0 });
      const marked = (await crash.admin.GET('/send-queue', { params: { query: { organizationId: org.id } } })).data!.data;
      expect(marked).toMatchObject([{ state: 'possibly_sent', heldBy: 'possibly_sent' }]);
      const box = (await crash.admin.GET('/outbox', { params: { query: { organizationId: org.id } } })).data!.data;
      expect(box).toMatchObject([{ status: 'possibly_sent', to: email.toLowerCase() }]);
      // Its job, run again (as after its lock expires), sends nothing.
      await sendStep(crash.rt, org.id, marked[0].id);
      // The dead worker's job lock lapses (graphile-worker frees it after four hours; here at once).
      await crash.pool.query(`SELECT graphile_worker.force_unlock_workers(array_agg(DISTINCT locked_by))
        FROM graphile_worker._private_jobs WHERE locked_by IS NOT NULL`);
      await crash.startWorker();
      await settle(crash);
      expect(sink.messages.filter((m) => m.to.includes(email.toLowerCase()))).toHaveLength(1);
    } finally {
      child.kill('SIGKILL');
      await crash.close();
    }
  });
});
