// Organization health: each reason driving the state (mailboxes paused or unverified, no sender,
// bounce and complaint rates against their thresholds, disabled webhook endpoints, the research
// budget), the recomputation after the changes that move it and by the sweep, org.health_changed
// emitted on a change only, and the operator rows that show it.

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runOrgHealthSweep } from '../src/account/org-health-sweep.js';
import type { SystemDeps } from '../src/platform/services.js';
import { eventsOf, mkContact, system, uid } from './crm-support.js';
import { settle } from './drafting-support.js';
import { setClock, startService, type TestOrg, type TestService } from './support/harness.js';
import { type Receiver, startReceiver } from './support/receiver.js';
import { companySite, type SiteServer, startSiteServer } from './support/site-server.js';
import { waitFor } from './support/wait.js';

let svc: TestService;
let deps: SystemDeps;
let rx: Receiver;
let site: SiteServer;
beforeAll(async () => {
  site = await startSiteServer();
  // An endpoint is disabled at its first failed attempt, so a test sees it happen.
  svc = await startService({
    WEBHOOK_DISABLE_AFTER_FAILURES: '1',
    WEBHOOK_RETRY_DELAYS_SECONDS: '1,1,1,1,1,1',
    WEBHOOK_TIMEOUT_MS: '2000',
    RATE_LIMIT_PER_MINUTE: '100000',
    RESEARCH_SITE_URL_TEMPLATE: site.template,
    RESEARCH_ALLOWED_TARGETS: `127.0.0.1:${site.port}`,
  });
  deps = { db: svc.rt.workerDb, systemDb: svc.rt.systemDb, config: svc.rt.config, services: svc.rt.services, log: svc.rt.log };
  rx = await startReceiver(() => 500);
  await svc.startWorker();
});
afterAll(async () => {
  await rx?.close();
  await svc?.close();
  await site?.close();
});

const health = async (orgId: string) => {
  const r = await svc.admin.GET('/organizations/{orgId}/health', { params: { path: { orgId } } });
  expect(r.response.status).toBe(200);
  return r.data!;
};
const changes = (orgId: string) => eventsOf(svc, orgId, 'org.health_changed');
const patchOrg = (orgId: string, body: Record<string, unknown>) =>
  svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId } }, body: body as never });
const DAY = 86_400_000;

/** Send records of the organization: `sent` sends and `bounced` bounces, within the last 28 days. */
async function sendHistory(orgId: string, sent: number, bounced = 0, mailboxId = 'deployment') {
  await system(svc, (trx) =>
    trx
      .insertInto('send_records')
      .values(
        Array.from({ length: sent + bounced }, (_, i) => ({
          organization_id: orgId,
          id: uid('snd_'),
          mailbox_id: mailboxId,
          status: i < bounced ? 'bounced' : 'sent',
          sent_at: new Date(Date.now() - ((i % 20) + 1) * 3_600_000),
          to_email: `x${i}@history.example`,
        })),
      )
      .execute(),
  );
}

describe('the health of a new organization', () => {
  it('is healthy, in the organization answer and at GET .../health; 404 for an unknown organization', async () => {
    const created = await svc.admin.POST('/organizations', { body: { name: 'Healthy Co' } });
    expect(created.data!.health).toEqual({ state: 'healthy', reasons: [], changedAt: null, checkedAt: null });
    expect(await health(created.data!.id)).toMatchObject({ state: 'healthy', reasons: [] });
    expect((await svc.admin.GET('/organizations/{orgId}/health', { params: { path: { orgId: 'org_nope' } } })).response.status).toBe(404);
    // The sweep finds nothing wrong: no event, checkedAt set.
    await runOrgHealthSweep(deps);
    const h = await health(created.data!.id);
    expect(h).toMatchObject({ state: 'healthy', reasons: [], changedAt: null });
    expect(Date.parse(h.checkedAt!)).not.toBeNaN();
    expect(await changes(created.data!.id)).toEqual([]);
  });
});

describe('mailboxes and senders', () => {
  it('a mailbox that fails verification degrades; verified again, the organization is healthy; each change emits once', async () => {
    const org = await svc.newOrg();
    const mb = await svc.admin.POST('/organizations/{orgId}/mailboxes', {
      params: { path: { orgId: org.id } },
      body: { email: `${uid('mb')}@seller.test`, smtpUrl: 'smtp://127.0.0.1:1' },
    });
    expect(mb.data!.status).toBe('failed');
    const h = await health(org.id);
    expect(h.state).toBe('degraded');
    expect(h.reasons).toEqual([
      expect.objectContaining({ code: 'mailbox_unverified', severity: 'degraded', mailboxId: mb.data!.id, email: mb.data!.email }),
    ]);
    const ev = await changes(org.id);
    expect(ev).toHaveLength(1);
    expect(ev[0]).toMatchObject({
      resource_type: 'Organization',
      resource_id: org.id,
      data: { organizationId: org.id, from: 'healthy', to: 'degraded', reasons: h.reasons },
    });
    // The sweep sees the same: no second event.
    await runOrgHealthSweep(deps);
    expect(await changes(org.id)).toHaveLength(1);
    // The operator fixes it (here: the row as a successful handshake leaves it) and verifies.
    await system(svc, (trx) => trx.updateTable('mailboxes').set({ smtp_url_sealed: null }).where('id', '=', mb.data!.id).execute());
    const fixed = await svc.admin.PATCH('/organizations/{orgId}/mailboxes/{mailboxId}', {
      params: { path: { orgId: org.id, mailboxId: mb.data!.id } },
      body: { verify: true },
    });
    expect(fixed.data!.status).toBe('verified');
    expect((await health(org.id)).state).toBe('healthy');
    expect((await changes(org.id)).map((e) => [e.data.from, e.data.to, e.data.reasons])).toEqual([
      ['healthy', 'degraded', h.reasons],
      ['degraded', 'healthy', []],
    ]);
  });

  it('no verified mailbox and the deployment sender not allowed: blocked (no_sender); a verified mailbox makes it healthy', async () => {
    const org = await svc.newOrg();
    expect((await patchOrg(org.id, { sending: { allowDeploymentSender: false } })).data!.health).toMatchObject({
      state: 'blocked',
      reasons: [{ code: 'no_sender', severity: 'blocked' }],
    });
    await svc.admin.POST('/organizations/{orgId}/mailboxes', {
      params: { path: { orgId: org.id } },
      body: { email: `${uid('ok')}@seller.test` },
    });
    expect(await health(org.id)).toMatchObject({ state: 'healthy', reasons: [] });
    expect((await changes(org.id)).map((e) => [e.data.from, e.data.to])).toEqual([
      ['healthy', 'blocked'],
      ['blocked', 'healthy'],
    ]);
  });

  it('a paused deployment sender degrades; a mailbox paused alongside keeps the state but changes the reasons (an event)', async () => {
    const org = await svc.newOrg();
    const mbox = async () =>
      (
        await svc.admin.POST('/organizations/{orgId}/mailboxes', {
          params: { path: { orgId: org.id } },
          body: { email: `${uid('p')}@seller.test` },
        })
      ).data!;
    await mbox();
    const b = await mbox();
    await patchOrg(org.id, { sending: { deploymentPaused: true } });
    expect(await health(org.id)).toMatchObject({ state: 'degraded', reasons: [{ code: 'mailbox_paused', mailboxId: 'deployment' }] });
    await system(svc, (trx) =>
      trx.updateTable('mailboxes').set({ status: 'paused', status_reason: 'bounce_rate' }).where('id', '=', b.id).execute(),
    );
    await runOrgHealthSweep(deps);
    const h = await health(org.id);
    expect(h.state).toBe('degraded');
    expect(h.reasons.map((r) => [r.code, r.mailboxId, r.reason])).toEqual([
      ['mailbox_paused', b.id, 'bounce_rate'],
      ['mailbox_paused', 'deployment', null],
    ]);
    expect((await changes(org.id)).map((e) => [e.data.from, e.data.to])).toEqual([
      ['healthy', 'degraded'],
      ['degraded', 'degraded'],
    ]);
  });
});

describe('bounce and complaint rates', () => {
  it('bounces from 2% of 20+ sends in 28 days degrade; moving figures update the reason without an event; under the threshold it is healthy', async () => {
    const org = await svc.newOrg();
    await sendHistory(org.id, 49, 1); // 2.0%
    await runOrgHealthSweep(deps);
    let h = await health(org.id);
    expect(h).toMatchObject({
      state: 'degraded',
      reasons: [{ code: 'bounce_rate', severity: 'degraded', bounces: 1, sends: 50, ratePct: 2, thresholdPct: 2, windowDays: 28 }],
    });
    await sendHistory(org.id, 0, 1); // 2 of 51: the same reason, other figures
    await runOrgHealthSweep(deps);
    h = await health(org.id);
    expect(h.reasons).toEqual([expect.objectContaining({ code: 'bounce_rate', bounces: 2, sends: 51 })]);
    expect(await changes(org.id)).toHaveLength(1);
    // Sends older than the window do not count; 2 of 151 (1.3%) is under the threshold.
    await system(svc, (trx) =>
      trx
        .insertInto('send_records')
        .values(
          Array.from({ length: 10 }, (_, i) => ({
            organization_id: org.id,
            id: uid('snd_'),
            mailbox_id: 'deployment',
            status: 'bounced',
            sent_at: new Date(Date.now() - 40 * DAY),
            to_email: `old${i}@history.example`,
          })),
        )
        .execute(),
    );
    await sendHistory(org.id, 100);
    await runOrgHealthSweep(deps);
    expect(await health(org.id)).toMatchObject({ state: 'healthy', reasons: [] });
    expect((await changes(org.id)).map((e) => e.data.to)).toEqual(['degraded', 'healthy']);
  });

  it('fewer than 20 sends never make a rate', async () => {
    const org = await svc.newOrg();
    await sendHistory(org.id, 10, 5);
    await runOrgHealthSweep(deps);
    expect(await health(org.id)).toMatchObject({ state: 'healthy', reasons: [] });
    expect(await changes(org.id)).toEqual([]);
  });

  it('a complaint report recomputes at once: from 0.1% degraded, from 0.3% blocked', async () => {
    const org = await svc.newOrg();
    const api = svc.api(await org.key());
    await sendHistory(org.id, 998);
    const complain = async () => {
      const c = await mkContact(api);
      // About one of the organization's sends: a report matched to no send of ours changes nothing.
      const messageId = `<${uid('m')}@seller.test>`;
      await system(svc, (trx) =>
        sql`UPDATE send_records SET to_email = ${c.email}, contact_id = ${c.id}, message_id = ${messageId}
          WHERE organization_id = ${org.id} AND id = (
            SELECT id FROM send_records WHERE organization_id = ${org.id} AND message_id IS NULL ORDER BY id LIMIT 1)`.execute(trx),
      );
      const r = await svc.admin.POST('/organizations/{orgId}/inbound-messages', {
        params: { path: { orgId: org.id } },
        body: { raw: arf(c.email, messageId) },
      });
      expect(r.response.status).toBe(201);
      await settle(svc);
    };
    await complain(); // 1 of 998
    expect(await health(org.id)).toMatchObject({
      state: 'degraded',
      reasons: [{ code: 'complaint_rate', severity: 'degraded', complaints: 1, sends: 998, thresholdPct: 0.1 }],
    });
    await complain();
    await complain(); // 3 of 998: 0.3%
    expect(await health(org.id)).toMatchObject({
      state: 'blocked',
      reasons: [{ code: 'complaint_rate', severity: 'blocked', complaints: 3, thresholdPct: 0.3 }],
    });
    expect(await eventsOf(svc, org.id, 'email.complained')).toHaveLength(3);
    expect((await changes(org.id)).map((e) => [e.data.from, e.data.to])).toEqual([
      ['healthy', 'degraded'],
      ['degraded', 'blocked'],
    ]);
  });
});

describe('webhook endpoints and the research budget', () => {
  it('an endpoint disabled by failed deliveries degrades at once; set active again, the organization is healthy', async () => {
    const org = await svc.newOrg();
    const api = svc.api(await org.key());
    const wh = await api.POST('/webhooks', { body: { url: `${rx.url}/${uid('h')}`, eventTypes: ['team.member_added'] } });
    expect(wh.response.status).toBe(201);
    await svc.admin.POST('/organizations/{orgId}/users', {
      params: { path: { orgId: org.id } },
      body: { name: 'New Rep', email: `${uid('r')}@acme.example`, role: 'REP' },
    });
    await waitForState(org, 'degraded');
    const h = await health(org.id);
    expect(h.reasons).toEqual([{ code: 'webhook_endpoint_disabled', severity: 'degraded', endpointId: wh.data!.id, url: wh.data!.url }]);
    expect((await api.GET('/webhooks/{id}', { params: { path: { id: wh.data!.id } } })).data!.status).toBe('disabled');
    await api.PATCH('/webhooks/{id}', { params: { path: { id: wh.data!.id } }, body: { status: 'active' } });
    expect(await health(org.id)).toMatchObject({ state: 'healthy', reasons: [] });
    expect((await changes(org.id)).map((e) => [e.data.from, e.data.to])).toEqual([
      ['healthy', 'degraded'],
      ['degraded', 'healthy'],
    ]);
  });

  it('the research budget used up degrades; a larger budget clears it', async () => {
    const clock = setClock(svc, '2031-07-31T12:00:00Z');
    const org = await svc.newOrg();
    const company = uid('cmp_');
    await system(svc, (trx) =>
      trx
        .insertInto('companies')
        .values({ organization_id: org.id, id: company, domain: 'h1.example', domain_normalized: 'h1.example' })
        .execute(),
    );
    await system(svc, (trx) =>
      trx
        .insertInto('research_runs')
        .values(
          [1, 2].map(() => ({
            organization_id: org.id,
            id: uid('rrn_'),
            company_id: company,
            status: 'completed',
            started_at: clock.now(),
          })),
        )
        .execute(),
    );
    const lowered = await patchOrg(org.id, { researchBudget: 2 });
    expect(lowered.data!.health).toMatchObject({ state: 'degraded', reasons: [{ code: 'research_budget_exhausted', used: 2, budget: 2 }] });
    expect(Date.parse(String(lowered.data!.health.reasons[0].periodEnd))).toBeGreaterThan(clock.now().getTime());
    expect((await patchOrg(org.id, { researchBudget: 3 })).data!.health).toMatchObject({ state: 'healthy', reasons: [] });
    expect((await changes(org.id)).map((e) => e.data.to)).toEqual(['degraded', 'healthy']);
  });

  it('the research run that spends the last of the budget degrades the organization in its transaction', async () => {
    const org = await svc.newOrg();
    const api = svc.api(await org.key());
    await patchOrg(org.id, { researchBudget: 1 });
    const domain = `${uid('acme')}.example`;
    site.site(domain, companySite(domain, site.origin));
    const company = (await api.POST('/companies', { body: { domain, name: 'Acme Rockets' } })).data!;
    expect((await api.POST('/companies/{id}/research', { params: { path: { id: company.id } } })).response.status).toBe(200);
    expect(await health(org.id)).toMatchObject({ state: 'degraded', reasons: [{ code: 'research_budget_exhausted', used: 1, budget: 1 }] });
    expect((await changes(org.id)).map((e) => [e.data.from, e.data.to])).toEqual([['healthy', 'degraded']]);
  });

  it('several reasons at once: blocked wins over degraded, and every reason is listed', async () => {
    const org = await svc.newOrg();
    await sendHistory(org.id, 40, 10);
    await patchOrg(org.id, { sending: { allowDeploymentSender: false } });
    const h = await health(org.id);
    expect(h.state).toBe('blocked');
    expect(h.reasons.map((r) => r.code).sort()).toEqual(['bounce_rate', 'no_sender']);
    expect((await changes(org.id)).map((e) => e.data.to)).toEqual(['blocked']);
  });
});

async function waitForState(org: TestOrg, state: string) {
  await waitFor(async () => (await health(org.id)).state === state, 30_000, `the organization to become ${state}`, 100);
}

/** An RFC 5965 abuse report about our message `messageId` to `rcpt`. */
function arf(rcpt: string, messageId: string): string {
  return [
    'From: Feedback Loop <fbl@isp.example>',
    'To: abuse-desk@seller.test',
    'Subject: Complaint about a message',
    `Message-ID: <${uid('arf')}@isp.example>`,
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=feedback-report; boundary="ARF"',
    '',
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
    'Original-Mail-From: <sales@seller.test>',
    `Original-Rcpt-To: <${rcpt}>`,
    '',
    '--ARF',
    'Content-Type: message/rfc822',
    '',
    'From: Sales <sales@seller.test>',
    `To: ${rcpt}`,
    `Message-ID: ${messageId}`,
    'Subject: A quick idea',
    '',
    'Hi',
    '',
    '--ARF--',
    '',
  ].join('\r\n');
}
