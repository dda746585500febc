// Settings act at once, and the public API says why a step has not gone out. Against the real
// dispatcher: two graphile-worker runners on the file's database competing for the send jobs, and
// a real SMTP server on loopback. A held step is released by the change of the setting that held
// it (window, kill switch, mailbox resumed, caps, gap), within 60 seconds, with no pause, resume,
// re-approval or regenerated draft; a change that still forbids sending gives the new reason and time.

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { system, uid } from './crm-support.js';
import { contact, type DraftingOrg, draftingOrg, draftsOf, getSequence, sequence, settle, template } from './drafting-support.js';
import { startService, type TestService, waitFor } from './support/harness.js';
import { type SmtpSink, startSmtpSink } from './support/smtp-sink.js';

let svc: TestService;
let sink: SmtpSink;
beforeAll(async () => {
  sink = await startSmtpSink();
  svc = await startService({ SMTP_URL: sink.url, MAIL_FROM: 'Acme Sales <sales@acme-sender.test>' });
  // Two workers (graphile-worker runners) on one database, racing for every send job.
  await svc.startWorker();
  await svc.startWorker();
});
afterAll(async () => {
  await svc?.close();
  await sink?.close();
});

/** A held step must go within this long of the change that releases it. */
const RELEASE_MS = 60_000;

const STEPS = [
  { dayOffset: 0, subject: 'Orbit for {{company}}', body: 'Hi {{firstName}},\n\nWe fly small satellites.\n\nBest,\nSam' },
  { dayOffset: 0, subject: 'Following up', body: 'Hi {{firstName}}, one more note. Worth a call?' },
];

async function sendingOrg(settings: Record<string, unknown> = {}) {
  const s = await draftingOrg(svc);
  // Two steps of one sequence go the same day here, unless a test asks for the one-a-day default.
  await patchSending(s, { contactDailyLimit: 10, ...settings });
  await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { flags: { v1_2_api_send: true } } });
  return s;
}

async function patchSending(s: DraftingOrg, sending: Record<string, unknown>) {
  if (Object.keys(sending).length === 0) return;
  const r = await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { sending } });
  expect(r.response.status).toBe(200);
}

/** A contact with an approved sequence, sent (queued): its drafts, step order. */
async function queued(
  s: DraftingOrg,
  steps = [STEPS[0]],
  email = `${uid('p')}@${uid('rcpt')}.example`,
  beforeSend?: (c: { id: string }) => Promise<unknown>,
) {
  const c = await contact(s.api, { email, name: 'Dana Whitfield' });
  const seq = await sequence(s.api, c.id, await template(svc, s.org.id, steps));
  await settle(svc);
  const drafts = await draftsOf(s.api, c.id);
  for (const d of drafts) await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
  await beforeSend?.(c);
  const r = await s.api.POST('/drafts/{id}/send', { params: { path: { id: drafts[0].id } } });
  expect(r.data).toMatchObject({ queued: true });
  return { c, seq, drafts };
}

const queueOf = async (orgId: string) => (await svc.admin.GET('/send-queue', { params: { query: { organizationId: orgId } } })).data!.data;
const forTo = (address: string) => sink.messages.filter((m) => m.to.includes(address.toLowerCase()));
const draft = async (s: DraftingOrg, id: string) => {
  const r = await s.api.GET('/drafts/{id}', { params: { path: { id } } });
  if (!r.data) throw new Error(`GET /drafts/${id}: ${r.response.status} ${JSON.stringify(r.error)}`);
  return r.data;
};

/** Waits until the first step's draft is held with `reason` (the dispatcher gated it), and answers the draft. */
const heldWith = (s: DraftingOrg, draftId: string, reason: string) =>
  waitFor(
    async () => {
      const d = await draft(s, draftId);
      return d.holdReason === reason ? d : null;
    },
    15_000,
    `draft ${draftId} held by ${reason}`,
    500, // a key makes 60 requests a minute
  );

/** Waits until one of the organization's steps is held with `reason`; answers its contact. */
const heldContact = (s: DraftingOrg, reason: string) =>
  waitFor(async () => (await queueOf(s.org.id)).find((q) => q.heldBy === reason)?.contactId, 15_000, `a step held by ${reason}`, 250);

/** Waits for the message to `address` to reach the SMTP server; answers how long it took from `since`. */
async function deliveredWithin(address: string, since: number): Promise<number> {
  const [m] = await waitFor(() => (forTo(address).length ? forTo(address) : null), RELEASE_MS, `a message to ${address}`, 100);
  expect(m.at - since).toBeLessThan(RELEASE_MS);
  return m.at - since;
}

/**
 * A fixed-offset IANA zone (no daylight-saving time) where it is now 03:xx, and the instant its
 * local clock reads `hh:00` today: a 09:00-17:00 window there is closed now, whenever the test runs.
 */
function nightZone(now = new Date()) {
  let offset = (((3 - now.getUTCHours()) % 24) + 24) % 24;
  if (offset > 12) offset -= 24;
  const zone = offset === 0 ? 'UTC' : offset > 0 ? `Etc/GMT-${offset}` : `Etc/GMT+${-offset}`;
  const local = new Date(now.getTime() + offset * 3_600_000);
  const at = (hh: number) =>
    new Date(Date.UTC(local.getUTCFullYear(), local.getUTCMonth(), local.getUTCDate(), hh, 0) - offset * 3_600_000).toISOString();
  return { zone, at };
}

describe('a changed sending window releases the steps it held', () => {
  it('held by the window (reason and opening on the public draft, the sequence and the operator queue); a narrower change moves the time; a window that includes now sends within 60 s', async () => {
    const night = nightZone();
    const s = await sendingOrg({ timeZone: night.zone, from: '09:00', to: '17:00' });
    const { c, seq, drafts } = await queued(s, STEPS);
    const opens = night.at(9);

    // Held by the window: the reason and the opening time, in the public API and the operator's queue.
    const d1 = await heldWith(s, drafts[0].id, 'sending_window');
    expect(d1).toMatchObject({ status: 'APPROVED', sentAt: null, holdReason: 'sending_window', nextAttemptAt: opens });
    expect(await draft(s, drafts[1].id)).toMatchObject({ holdReason: 'previous_step_pending', nextAttemptAt: expect.any(String) });
    expect(await getSequence(s.api, seq.id)).toMatchObject({ status: 'QUEUED', holdReason: 'sending_window', nextAttemptAt: opens });
    const listed = (await s.api.GET('/drafts', { params: { query: { contactId: c.id } } })).data!.data;
    expect(listed.find((d) => d.step === 1)).toMatchObject({ holdReason: 'sending_window', nextAttemptAt: opens });
    const seqs = (await s.api.GET('/sequences', { params: { query: { contactId: c.id } } })).data!.data;
    expect(seqs).toEqual([expect.objectContaining({ id: seq.id, holdReason: 'sending_window', nextAttemptAt: opens })]);
    const [q1] = await queueOf(s.org.id);
    expect(q1).toMatchObject({ step: 1, state: 'deferred', heldBy: 'sending_window', nextAttemptAt: opens });
    expect(q1.heldDetail).toContain(opens);
    console.log(`held: ${night.zone} 09:00-17:00, draft holdReason=${d1.holdReason} nextAttemptAt=${d1.nextAttemptAt}`);

    // A change that still forbids sending: the step is gated again with the new opening.
    await patchSending(s, { from: '10:00' });
    const later = night.at(10);
    // Polled on the operator's queue (the public key makes 60 requests a minute), then read on the draft.
    await waitFor(async () => (await queueOf(s.org.id)).find((q) => q.step === 1)?.nextAttemptAt === later, RELEASE_MS, 'the new opening');
    expect(await draft(s, drafts[0].id)).toMatchObject({ holdReason: 'sending_window', nextAttemptAt: later });
    expect((await queueOf(s.org.id))[0]).toMatchObject({ heldBy: 'sending_window', nextAttemptAt: later });
    expect(forTo(c.email)).toEqual([]);
    console.log(`window 10:00-17:00: still held, nextAttemptAt=${later}`);

    // The window widened to include now: both steps go, in order, without pause, resume or re-approval.
    const patchedAt = Date.now();
    await patchSending(s, { from: '00:00' });
    expect((await queueOf(s.org.id)).find((q) => q.step === 1)?.heldBy ?? null).not.toBe('sending_window');
    const took = await deliveredWithin(c.email, patchedAt);
    await waitFor(() => forTo(c.email).length === 2, RELEASE_MS, 'the second step');
    console.log(`window 00:00-17:00: step 1 reached the SMTP server ${took} ms after the PATCH; step 2 followed`);
    await waitFor(async () => (await getSequence(s.api, seq.id)).status === 'COMPLETED', 15_000, 'the sequence to complete', 250);
    expect(await getSequence(s.api, seq.id)).toMatchObject({ holdReason: null, nextAttemptAt: null });
    // No draft was regenerated: the same two drafts, version 1, now sent and holding nothing.
    const after = await draftsOf(s.api, c.id, true);
    expect(after.map((d) => [d.id, d.version, d.status, d.holdReason, d.nextAttemptAt])).toEqual(
      drafts.map((d) => [d.id, 1, 'APPROVED', null, null]),
    );
    expect(after.every((d) => d.sentAt !== null)).toBe(true);
    expect(await queueOf(s.org.id)).toEqual([]);
  });
});

describe('other settings act at once', () => {
  it('the kill switch: on, a step is held with kill_switch; off, it is sent within 60 s', async () => {
    const s = await sendingOrg();
    await svc.admin.PATCH('/settings', { body: { emailKillSwitch: true } });
    try {
      const { c, drafts } = await queued(s);
      expect(await heldWith(s, drafts[0].id, 'kill_switch')).toMatchObject({
        holdReason: 'kill_switch',
        nextAttemptAt: expect.any(String),
      });
      const at = Date.now();
      await svc.admin.PATCH('/settings', { body: { emailKillSwitch: false } });
      await deliveredWithin(c.email, at);
      expect(forTo(c.email)).toHaveLength(1);
    } finally {
      await svc.admin.PATCH('/settings', { body: { emailKillSwitch: false } });
    }
  });

  it('a paused mailbox holds its steps with mailbox_paused; resumed, they are sent within 60 s', async () => {
    const s = await sendingOrg();
    const mb = (
      await svc.admin.POST('/organizations/{orgId}/mailboxes', {
        params: { path: { orgId: s.org.id } },
        body: { email: `rep@${uid('mbx')}.test`, name: 'Rep' },
      })
    ).data!;
    // Paused (as bounce-rate protection pauses it) after the sequence was pinned to it, before it is sent.
    const { c, drafts } = await queued(s, [STEPS[0]], undefined, () =>
      system(svc, (trx) =>
        sql`UPDATE mailboxes SET status = 'paused', status_reason = 'bounce_rate', paused_at = now() WHERE id = ${mb.id}`.execute(trx),
      ),
    );
    await heldWith(s, drafts[0].id, 'mailbox_paused');
    const at = Date.now();
    const resumed = await svc.admin.PATCH('/organizations/{orgId}/mailboxes/{mailboxId}', {
      params: { path: { orgId: s.org.id, mailboxId: mb.id } },
      body: { verify: true },
    });
    expect(resumed.data!.status).toBe('verified');
    await deliveredWithin(c.email, at);
    expect(forTo(c.email).map((m) => m.from)).toEqual([mb.email]);
  });

  it("a mailbox's daily cap, the recipient domain's cap and the minimum gap, raised or lowered, send the steps they held within 60 s", async () => {
    // The mailbox's cap.
    const s = await sendingOrg();
    const mb = (
      await svc.admin.POST('/organizations/{orgId}/mailboxes', {
        params: { path: { orgId: s.org.id } },
        body: { email: `capped@${uid('mbx')}.test`, dailyCap: 1 },
      })
    ).data!;
    const a = await queued(s);
    const b = await queued(s);
    const [capped, other] = (await heldContact(s, 'mailbox_daily_cap')) === a.c.id ? [a, b] : [b, a];
    await waitFor(() => forTo(other.c.email).length === 1, 15_000, 'the step within the cap');
    expect(await draft(s, capped.drafts[0].id)).toMatchObject({ holdReason: 'mailbox_daily_cap' });
    let at = Date.now();
    await svc.admin.PATCH('/organizations/{orgId}/mailboxes/{mailboxId}', {
      params: { path: { orgId: s.org.id, mailboxId: mb.id } },
      body: { dailyCap: 2 },
    });
    await deliveredWithin(capped.c.email, at);

    // The recipient domain's cap (the deployment sender).
    const d = await sendingOrg({ recipientDomainDailyCap: 1 });
    const domain = `${uid('shared')}.example`;
    const d1 = await queued(d, [STEPS[0]], `${uid('p')}@${domain}`);
    const d2 = await queued(d, [STEPS[0]], `${uid('p')}@${domain}`);
    const held = (await heldContact(d, 'recipient_domain_daily_cap')) === d1.c.id ? d1 : d2;
    expect(await draft(d, held.drafts[0].id)).toMatchObject({ holdReason: 'recipient_domain_daily_cap' });
    at = Date.now();
    await patchSending(d, { recipientDomainDailyCap: 5 });
    await deliveredWithin(held.c.email, at);

    // The minimum gap.
    const g = await sendingOrg({ minGapSeconds: 3600 });
    const g1 = await queued(g);
    const g2 = await queued(g);
    const gapped = (await heldContact(g, 'min_gap')) === g1.c.id ? g1 : g2;
    const gd = await draft(g, gapped.drafts[0].id);
    expect(gd.holdReason).toBe('min_gap');
    expect(Date.parse(gd.nextAttemptAt!) - Date.now()).toBeGreaterThan(3_000_000);
    at = Date.now();
    await patchSending(g, { minGapSeconds: 0 });
    await deliveredWithin(gapped.c.email, at);
  });

  it("a contact's daily limit raised sends the step it held within 60 s", async () => {
    const s = await sendingOrg({ contactDailyLimit: 1 });
    const q = await queued(s, STEPS);
    await waitFor(() => forTo(q.c.email).length === 1, 15_000, 'the first step');
    await waitFor(async () => (await draft(s, q.drafts[1].id)).holdReason === 'contact_daily_limit', 15_000, 'the second step held');
    const at = Date.now();
    await patchSending(s, { contactDailyLimit: 2 });
    await waitFor(() => forTo(q.c.email).length === 2, RELEASE_MS, 'the second step');
    expect(Date.now() - at).toBeLessThan(RELEASE_MS);
  });

  it('a change that still forbids sending gives the new reason: the window opened while the mailbox is paused', async () => {
    const night = nightZone();
    const s = await sendingOrg({ timeZone: night.zone, from: '09:00', to: '17:00', deploymentPaused: true });
    const { c, seq, drafts } = await queued(s);
    await heldWith(s, drafts[0].id, 'sending_window');
    await patchSending(s, { from: '00:00' });
    const d = await heldWith(s, drafts[0].id, 'mailbox_paused');
    expect(Date.parse(d.nextAttemptAt!)).toBeGreaterThan(Date.now());
    expect(await getSequence(s.api, seq.id)).toMatchObject({ holdReason: 'mailbox_paused', nextAttemptAt: d.nextAttemptAt });
    expect((await queueOf(s.org.id))[0]).toMatchObject({ heldBy: 'mailbox_paused', nextAttemptAt: d.nextAttemptAt });
    const at = Date.now();
    await patchSending(s, { deploymentPaused: false });
    await deliveredWithin(c.email, at);
  });

  it("a contact snoozed again: the steps its old snooze held wait for the new one's end", async () => {
    const s = await sendingOrg();
    const long = new Date(Date.now() + 30 * 86_400_000);
    // Snoozed for a month (as an earlier snooze leaves it) before the step is sent.
    const { c, drafts } = await queued(s, [STEPS[0]], undefined, (x) =>
      system(svc, (trx) => trx.updateTable('contacts').set({ snoozed_until: long }).where('id', '=', x.id).execute()),
    );
    expect(await heldWith(s, drafts[0].id, 'contact_snoozed')).toMatchObject({ nextAttemptAt: long.toISOString() });
    const r = await s.api.POST('/actions', { body: { action: 'snooze_contact', contactId: c.id, days: 2 } });
    expect(r.data).toMatchObject({ outcome: 'executed' });
    const until = String(r.data!.result.snoozedUntil);
    await waitFor(async () => (await queueOf(s.org.id))[0]?.nextAttemptAt === until, RELEASE_MS, 'the new snooze end');
    expect(await draft(s, drafts[0].id)).toMatchObject({ holdReason: 'contact_snoozed', nextAttemptAt: until });
    expect(forTo(c.email)).toEqual([]);
  });

  it('a possibly sent step says so on its draft and its sequence, with no next attempt', async () => {
    const s = await sendingOrg();
    const { seq, drafts } = await queued(s, STEPS);
    await waitFor(async () => (await queueOf(s.org.id)).length === 0, 15_000, 'both steps sent');
    // As the recovery sweep leaves a step whose worker died after the hand-over.
    await system(svc, (trx) =>
      sql`UPDATE send_queue SET state = 'possibly_sent', held_by = 'possibly_sent' WHERE sequence_id = ${seq.id} AND step = 2`.execute(trx),
    );
    await system(svc, (trx) => sql`UPDATE drafts SET sent_at = NULL WHERE id = ${drafts[1].id}`.execute(trx));
    expect(await draft(s, drafts[1].id)).toMatchObject({ holdReason: 'possibly_sent', nextAttemptAt: null });
    expect(await draft(s, drafts[0].id)).toMatchObject({ holdReason: null, nextAttemptAt: null });
    expect(await getSequence(s.api, seq.id)).toMatchObject({ holdReason: 'possibly_sent', nextAttemptAt: null });
  });
});
