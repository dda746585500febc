// The dispatcher against a real SMTP server on loopback: POST /drafts/{id}/send, the message and
// its headers, threading, DKIM, one-click unsubscribe, tracking, outcomes (sent, bounced, retried),
// every gate, rotation and caps, and recovery after a worker is killed mid-send.
import crypto from 'node:crypto';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { simpleParser } from 'mailparser';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { raw, startService, waitFor, type TestService } from './support/harness.js';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.js';
import { eventsOf, system, uid } from './crm-support.js';
import { contact, draftingOrg, draftsOf, getSequence, sequence, settle, template, type DraftingOrg } from './drafting-support.js';
import { withOrg } from '../db/database.js';
import { sendStep } from '../src/dispatch/send.js';
import { sweepStaleSends } from '../src/dispatch/sweep.js';

let svc: TestService;
let sink: SmtpSink;
beforeAll(async () => {
  sink = await startSmtpSink();
  svc = await startService({ SMTP_URL: sink.url, MAIL_FROM: 'Acme Sales <sales@acme-sender.test>' });
  await svc.startWorker();
});
afterAll(async () => { await svc?.close(); await sink?.close(); });

const STEPS = [
  { dayOffset: 0, subject: 'Orbit for {{company}}', body: 'Hi {{firstName}},\n\nWe fly small satellites: https://acme.example/launch\n\nBest,\nSam' },
  { dayOffset: 0, subject: 'Following up', body: 'Hi {{firstName}}, one more note. Worth a call?' },
];

async function sendingOrg(settings: Record<string, unknown> = {}) {
  const s = await draftingOrg(svc);
  await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { flags: { v1_2_api_send: true }, ...(Object.keys(settings).length ? { sending: settings } : {}) } });
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
    await system(svc, (trx) => trx.insertInto('drafts').values({ organization_id: s.org.id, id: loose, contact_id: c.id, status: 'APPROVED', subject: 's', body: 'b' }).execute());
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
    expect(await reason(async (c) => { await s.api.POST('/suppression', { body: { email: c.email, reason: 'asked' } }); })).toEqual({ draftId: expect.any(String), queued: false, queuedJobCount: 0, skippedReason: 'suppressed' });
    expect((await reason(async (c) => { await s.api.DELETE('/contacts/{id}', { params: { path: { id: c.id } } }); })).skippedReason).toBe('contact_removed');
    expect((await reason(async (c) => { await system(svc, (trx) => trx.updateTable('contacts').set({ tags: ['do-not-contact'] } as never).where('id', '=', c.id).execute()); })).skippedReason).toBe('do_not_contact');
    expect((await reason(async (c) => { await s.api.POST('/deals', { body: { name: 'Open deal', primaryContactId: c.id } }); })).skippedReason).toBe('already_in_pipeline');
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
      const header = (name: string) => m.headerLines.find((h) => h.key === name)?.line.slice(name.length + 1).trim();
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
      [1, 'sent', c.email.toLowerCase(), 'sales@acme-sender.test', m1.messageId], [2, 'sent', c.email.toLowerCase(), 'sales@acme-sender.test', m2.messageId],
    ]);
    expect(box[0].headers['List-Unsubscribe-Post']).toBe('List-Unsubscribe=One-Click');
    expect(await queueOf(s.org.id)).toEqual([]);
  });

  it('signs with the mailbox\'s DKIM key, covering both unsubscribe headers (verified with mailauth and an injected resolver)', async () => {
    const s = await sendingOrg();
    const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const mb = await svc.admin.POST('/organizations/{orgId}/mailboxes', {
      params: { path: { orgId: s.org.id } },
      body: { email: 'rep@signed.test', name: 'Rep', smtpUrl: sink.url, dkim: { domainName: 'signed.test', keySelector: 'sel1', privateKey: pem } },
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
    const signed = String(/[;\s]h=([^;]+)/.exec(signature)?.[1]).toLowerCase().replace(/\s/g, '').split(':');
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
    for (const type of ['email.bounced', 'send.failed', 'sequence.step_failed', 'suppression.added']) expect(await eventsOf(svc, s.org.id, type), type).toHaveLength(1);
    expect((await eventsOf(svc, s.org.id, 'email.bounced'))[0].data).toMatchObject({ contactId: c.id, step: 1, code: 550, kind: 'hard' });
    expect(await getSequence(s.api, seq.id)).toMatchObject({ status: 'PAUSED', pausedFrom: 'QUEUED' });
    const q = await queueOf(s.org.id);
    expect(q.map((r) => [r.step, r.state, r.heldBy])).toEqual([[1, 'failed', 'hard_bounce'], [2, 'skipped', 'sequence_not_active']]);
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
    await sendStep(svc.rt as never, s.org.id, q.id);
    [q] = await queueOf(s.org.id);
    expect(q).toMatchObject({ state: 'failed', heldBy: 'transport_failed', attempts: 5 });
    expect((await eventsOf(svc, s.org.id, 'send.failed'))[0].data).toMatchObject({ permanent: false, attempts: 5 });
    expect(await eventsOf(svc, s.org.id, 'sequence.step_failed')).toHaveLength(1);
    expect((await s.api.GET('/usage', {})).data!.sends.attempted).toBe(2);
  });
});
