// Links that work: while PUBLIC_BASE_URL is loopback, private, local or plain http, a step that
// would go over a real SMTP server (SMTP_URL, or its mailbox's own server) waits with
// `insecure_links`; a step going through the capture transport goes. ALLOW_INSECURE_LINKS=true
// (local testing) and a public https base let it go. Real dispatcher, real SMTP on loopback, two
// workers per service. (The startup warning is in test/startup.test.ts.)

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendStep } from '../src/dispatch/send.js';
import type { Config } from '../src/platform/config.js';
import { uid } from './crm-support.js';
import { contact, type DraftingOrg, draftingOrg, draftsOf, sequence, settle, template } from './drafting-support.js';
import { startService, type TestService, waitFor } from './support/harness.js';
import { type SmtpSink, startSmtpSink } from './support/smtp-sink.js';

let sink: SmtpSink;
/** No SMTP_URL: the deployment sender is the capture transport. */
let capture: TestService;
/** SMTP_URL on the loopback sink: every step goes over SMTP. */
let smtp: TestService;
beforeAll(async () => {
  sink = await startSmtpSink();
  capture = await startService({ ALLOW_INSECURE_LINKS: 'false' });
  smtp = await startService({ ALLOW_INSECURE_LINKS: 'false', SMTP_URL: sink.url, MAIL_FROM: 'Acme <sales@acme-sender.test>' });
  for (const svc of [capture, smtp]) {
    await svc.startWorker();
    await svc.startWorker();
  }
});
afterAll(async () => {
  await capture?.close();
  await smtp?.close();
  await sink?.close();
});

const STEP = { dayOffset: 0, subject: 'Orbit for {{company}}', body: 'Hi {{firstName}},\n\nWorth a call?\n\nBest,\nSam' };

async function sendingOrg(svc: TestService) {
  const s = await draftingOrg(svc);
  await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { flags: { v1_2_api_send: true } } });
  return s;
}

/** A one-step sequence, approved and asked to be sent; answers the recipient's address. */
async function sendOne(svc: TestService, s: DraftingOrg): Promise<string> {
  const email = `${uid('p')}@${uid('rcpt')}.example`;
  const c = await contact(s.api, { email, name: 'Dana Whitfield' });
  await sequence(s.api, c.id, await template(svc, s.org.id, [STEP]));
  await settle(svc);
  const [d] = await draftsOf(s.api, c.id);
  await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
  const r = await s.api.POST('/drafts/{id}/send', { params: { path: { id: d.id } } });
  expect(r.data).toMatchObject({ queued: true });
  return email.toLowerCase();
}

const queueOf = async (svc: TestService, orgId: string) =>
  (await svc.admin.GET('/send-queue', { params: { query: { organizationId: orgId } } })).data!.data;
const outbox = async (svc: TestService, orgId: string) =>
  (await svc.admin.GET('/outbox', { params: { query: { organizationId: orgId } } })).data!.data;
const held = (svc: TestService, orgId: string) =>
  waitFor(
    async () => {
      const [q] = await queueOf(svc, orgId);
      return q?.heldBy === 'insecure_links' ? q : null;
    },
    20_000,
    'the step to be held by insecure_links',
  );
const received = (to: string) => sink.messages.filter((m) => m.to.includes(to));

describe('insecure_links', () => {
  it("holds a step going over its mailbox's own SMTP server while PUBLIC_BASE_URL is loopback http, not one going to the capture; ALLOW_INSECURE_LINKS=true lets it go", async () => {
    expect(capture.rt.config.publicBaseUrl).toMatch(/^http:\/\/127\.0\.0\.1:/);
    const own = await sendingOrg(capture);
    const mb = await capture.admin.POST('/organizations/{orgId}/mailboxes', {
      params: { path: { orgId: own.org.id } },
      body: { email: 'rep@own-server.test', name: 'Rep', smtpUrl: sink.url },
    });
    expect(mb.data).toMatchObject({ status: 'verified', ownSmtp: true });
    const to = await sendOne(capture, own);
    const q = await held(capture, own.org.id);
    expect(q).toMatchObject({
      state: 'deferred',
      heldDetail: expect.stringMatching(/^PUBLIC_BASE_URL http:\/\/127\.0\.0\.1:\d+ names a loopback/),
    });
    expect(Date.parse(q.nextAttemptAt) - Date.now()).toBeGreaterThan(10 * 60_000);
    expect(received(to)).toEqual([]);
    expect(await outbox(capture, own.org.id)).toEqual([]);

    // The deployment sender without SMTP_URL is the capture transport: it delivers nothing, so it is not held.
    const deployment = await sendingOrg(capture);
    await sendOne(capture, deployment);
    await settle(capture);
    expect((await outbox(capture, deployment.org.id)).map((m) => m.status)).toEqual(['sent']);
    expect(await queueOf(capture, deployment.org.id)).toEqual([]);

    // As a restart with ALLOW_INSECURE_LINKS=true would: the held step goes at its next look.
    (capture.rt.config as Config).allowInsecureLinks = true;
    try {
      await sendStep(capture.rt, own.org.id, q.id);
      await settle(capture);
      expect(received(to)).toHaveLength(1);
      expect(await queueOf(capture, own.org.id)).toEqual([]);
    } finally {
      (capture.rt.config as Config).allowInsecureLinks = false;
    }
  });

  it('with SMTP_URL holds every step, first of the gates after the kill switch, until PUBLIC_BASE_URL is a public https URL', async () => {
    const s = await sendingOrg(smtp);
    // A closed window would hold it too; insecure_links is named first.
    await smtp.admin.PATCH('/organizations/{orgId}', {
      params: { path: { orgId: s.org.id } },
      body: { sending: { days: [((new Date().getUTCDay() + 2) % 7) + 1] } },
    });
    const to = await sendOne(smtp, s);
    const q = await held(smtp, s.org.id);
    expect(q.heldDetail).toMatch(/names a loopback/);
    expect(received(to)).toEqual([]);
    await smtp.admin.PATCH('/organizations/{orgId}', {
      params: { path: { orgId: s.org.id } },
      body: { sending: { days: [1, 2, 3, 4, 5, 6, 7] } },
    });

    const base = smtp.rt.config.publicBaseUrl;
    (smtp.rt.config as Config).publicBaseUrl = 'http://outbound.example.com';
    try {
      await sendStep(smtp.rt, s.org.id, q.id);
      const [plain] = await queueOf(smtp, s.org.id);
      expect(plain).toMatchObject({ heldBy: 'insecure_links', heldDetail: expect.stringMatching(/is not https/) });
      (smtp.rt.config as Config).publicBaseUrl = 'https://outbound.example.com';
      await sendStep(smtp.rt, s.org.id, q.id);
      await settle(smtp);
      const [m] = received(to);
      expect(m.raw.replace(/\r?\n[ \t]+/g, ' ')).toMatch(/^List-Unsubscribe: <https:\/\/outbound\.example\.com\/unsubscribe\//m);
      expect(await queueOf(smtp, s.org.id)).toEqual([]);
    } finally {
      (smtp.rt.config as Config).publicBaseUrl = base;
    }
  });
});
