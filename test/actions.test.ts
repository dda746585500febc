// POST /actions: every action with its scope, the order of checks (400, 403, 404), executed /
// noop / advisory outcomes and the events and state each leaves; resume never sends, snooze holds
// the dispatcher, the handoff package, reply drafts with the fallback and with a (fake) model;
// and erasure of the action items and handoff packages about a contact.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACTION_SCOPES } from '../src/platform/spec.js';
import { eventsOf, system, uid, uniqueEmail } from './crm-support.js';
import { contact, draftsOf, getSequence, STEP_ONE, STEP_TWO, sequence, settle, template } from './drafting-support.js';
import { type FakeModel, startFakeModel } from './support/fake-llm.js';
import { ALL_SCOPES, type PublicClient, startService, type TestOrg, type TestService, waitFor } from './support/harness.js';
import { companySite, type SiteServer, startSiteServer } from './support/site-server.js';

let svc: TestService;
let msvc: TestService;
let site: SiteServer;
let model: FakeModel;
beforeAll(async () => {
  site = await startSiteServer();
  model = await startFakeModel();
  const research = { RESEARCH_SITE_URL_TEMPLATE: site.template, RESEARCH_ALLOW_PRIVATE_TARGETS: 'true' };
  svc = await startService(research);
  await svc.startWorker();
  msvc = await startService({
    ...research,
    LLM_BASE_URL: model.baseUrl,
    LLM_MODEL: 'gpt-4o-mini',
    LLM_API_KEY: 'sk-test',
    LLM_TIMEOUT_MS: '2000',
    LLM_MAX_RETRIES: '1',
  });
}, 60_000);
afterAll(async () => {
  await svc?.close();
  await msvc?.close();
  await model?.close();
  await site?.close();
});

type ActionBody = { action: string; contactId: string; days?: number; tag?: string; reason?: string };
interface Setup {
  org: TestOrg;
  api: PublicClient;
  key: string;
}

async function setup(s: TestService = svc, opts: { plan?: 'free' | 'starter' | 'growth' } = {}): Promise<Setup> {
  const org = await s.newOrg(opts);
  const key = await org.key(ALL_SCOPES, { userId: org.ownerId });
  return { org, key, api: s.api(key) };
}

const act = (api: PublicClient, body: ActionBody) => api.POST('/actions', { body: body as never });
async function ok(api: PublicClient, body: ActionBody) {
  const r = await act(api, body);
  if (r.response.status !== 200 || !r.data) throw new Error(`${body.action}: ${r.response.status} ${JSON.stringify(r.error)}`);
  return r.data;
}
const contactRow = (orgId: string, id: string) =>
  system(svc, (trx) =>
    trx.selectFrom('contacts').selectAll().where('organization_id', '=', orgId).where('id', '=', id).executeTakeFirstOrThrow(),
  );
const itemsOf = (s: TestService, orgId: string) =>
  system(s, (trx) => trx.selectFrom('action_items').selectAll().where('organization_id', '=', orgId).orderBy('created_at').execute());
const queueOf = async (orgId: string) => (await svc.admin.GET('/send-queue', { params: { query: { organizationId: orgId } } })).data!.data;
const outbox = async (orgId: string) => (await svc.admin.GET('/outbox', { params: { query: { organizationId: orgId } } })).data!.data;
const DAY = 86_400_000;

/** Inbound (or outbound) messages of a contact, as the inbound pipeline stores them. */
async function message(
  s: TestService,
  orgId: string,
  contactId: string,
  m: {
    direction?: 'INBOUND' | 'OUTBOUND';
    subject?: string;
    body?: string;
    stripped?: string | null;
    intent?: string | null;
    automatic?: boolean;
    at?: Date;
    messageId?: string;
  },
): Promise<string> {
  const id = uid('msg_');
  await system(s, (trx) =>
    trx
      .insertInto('messages')
      .values({
        organization_id: orgId,
        id,
        contact_id: contactId,
        direction: m.direction ?? 'INBOUND',
        from_email: 'x@example.com',
        subject: m.subject ?? 'Orbit for Acme',
        body: m.body ?? 'Sounds interesting.',
        stripped_text: m.stripped === undefined ? null : m.stripped,
        intent: m.intent ?? null,
        automatic: m.automatic ?? false,
        created_at: m.at ?? new Date(),
        message_id: m.messageId ?? null,
      })
      .execute(),
  );
  return id;
}

/** A contact at a researched company (its dossier and the contact's research are stored). */
async function researched(_s: TestService, x: Setup, body: Record<string, unknown> = {}) {
  const domain = `${uid('acme')}.example`;
  site.site(domain, companySite(domain, site.origin));
  const c = await contact(x.api, {
    name: 'Dana Whitfield',
    title: 'VP of Engineering',
    company: { domain, name: 'Acme Rockets' },
    ...body,
  });
  expect((await x.api.POST('/contacts/{id}/research', { params: { path: { id: c.id } } })).response.status).toBe(200);
  return c;
}

/** A contact with a generated, approved sequence (fallback drafts). */
async function approvedSequence(x: Setup, steps = [STEP_ONE, STEP_TWO]) {
  const c = await contact(x.api, { email: uniqueEmail() });
  const seq = await sequence(x.api, c.id, await template(svc, x.org.id, steps));
  await settle(svc);
  for (const d of await draftsOf(x.api, c.id)) {
    expect((await x.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } })).response.status).toBe(200);
  }
  return { c, seq };
}

/** Sending on, with a window closed today (so nothing due goes out; held steps show their gate). */
async function sendingOn(orgId: string) {
  const closed = ((new Date().getUTCDay() + 2) % 7) + 1;
  await svc.admin.PATCH('/organizations/{orgId}', {
    params: { path: { orgId } },
    body: { flags: { v1_2_api_send: true }, sending: { days: [closed] } },
  });
}

describe("checks: body, then the action's scope, then the contact", () => {
  it('each action needs its own scope (from x-action-scopes); the 403 names it, even for an unknown contact', async () => {
    const x = await setup();
    const c = await contact(x.api);
    expect(Object.keys(ACTION_SCOPES).sort()).toEqual([
      'add_to_suppression',
      'draft_reply',
      'handoff_to_ae',
      'pause_sequence',
      'resume_sequence',
      'snooze_contact',
      'tag_contact',
    ]);
    for (const [action, scope] of Object.entries(ACTION_SCOPES)) {
      const without = x.org.key(
        ALL_SCOPES.filter((s) => s !== scope),
        { userId: x.org.ownerId },
      );
      const api = svc.api(await without);
      const extra = action === 'snooze_contact' ? { days: 2 } : action === 'tag_contact' ? { tag: 'vip' } : {};
      for (const contactId of [c.id, 'con_000000000000000000000000']) {
        const r = await act(api, { action, contactId, ...extra });
        expect(r.response.status, action).toBe(403);
        expect(r.error).toMatchObject({ type: expect.stringMatching(/insufficient-scope$/), detail: expect.stringContaining(scope) });
      }
    }
    // The one scope is enough: a key holding only contacts.write tags.
    const tagger = svc.api(await x.org.key(['contacts.write']));
    expect((await ok(tagger, { action: 'tag_contact', contactId: c.id, tag: 'vip' })).outcome).toBe('executed');
    expect(await eventsOf(svc, x.org.id, 'contact.snoozed')).toEqual([]);
  });

  it('refuses a bad body with 400 before the scope: unknown action, missing or misplaced days and tag, unknown fields', async () => {
    const x = await setup();
    const c = await contact(x.api);
    const noScopes = svc.api(await x.org.key(['actions.read']));
    const bodies: Array<Record<string, unknown>> = [
      {},
      { action: 'launch_rocket', contactId: c.id },
      { action: 'pause_sequence' },
      { action: 'snooze_contact', contactId: c.id },
      { action: 'snooze_contact', contactId: c.id, days: 0 },
      { action: 'snooze_contact', contactId: c.id, days: 366 },
      { action: 'tag_contact', contactId: c.id },
      { action: 'tag_contact', contactId: c.id, tag: 'x'.repeat(51) },
      { action: 'pause_sequence', contactId: c.id, days: 3 },
      { action: 'pause_sequence', contactId: c.id, tag: 'x' },
      { action: 'pause_sequence', contactId: c.id, reason: 'x'.repeat(501) },
      { action: 'pause_sequence', contactId: c.id, extra: 1 },
    ];
    for (const body of bodies) {
      for (const api of [noScopes, x.api]) {
        const r = await act(api, body as ActionBody);
        expect(r.response.status, JSON.stringify(body)).toBe(400);
        expect(r.error!.type).toMatch(/validation-failed$/);
      }
    }
    expect(await eventsOf(svc, x.org.id, 'contact.tagged')).toEqual([]);
  });

  it('answers 404 for an unknown, deleted, erased or foreign contact, for every action', async () => {
    const x = await setup();
    const other = await setup();
    const deleted = await contact(x.api);
    await x.api.DELETE('/contacts/{id}', { params: { path: { id: deleted.id } } });
    const erased = await contact(x.api);
    expect(
      (await x.api.POST('/contacts/{id}/erase', { params: { path: { id: erased.id } }, body: { requesterRef: 'r', reason: 'r' } })).response
        .status,
    ).toBe(200);
    const foreign = await contact(other.api);
    for (const action of Object.keys(ACTION_SCOPES)) {
      const extra = action === 'snooze_contact' ? { days: 2 } : action === 'tag_contact' ? { tag: 'vip' } : {};
      for (const contactId of ['con_000000000000000000000000', deleted.id, erased.id, foreign.id]) {
        const r = await act(x.api, { action, contactId, ...extra });
        expect(r.response.status, `${action} ${contactId}`).toBe(404);
      }
    }
    expect((await contactRow(other.org.id, foreign.id)).tags).toEqual([]);
  });
});

describe('sequences', () => {
  it('pause_sequence pauses what is in flight (sequence.paused with the reason), then is a noop', async () => {
    const x = await setup();
    const { c, seq } = await approvedSequence(x);
    const r = await ok(x.api, { action: 'pause_sequence', contactId: c.id, reason: 'Asked for a break' });
    expect(r).toEqual({
      action: 'pause_sequence',
      contactId: c.id,
      outcome: 'executed',
      detail: expect.any(String),
      actionItemId: null,
      result: { pausedCount: 1 },
    });
    expect((await getSequence(x.api, seq.id)).status).toBe('PAUSED');
    expect((await eventsOf(svc, x.org.id, 'sequence.paused')).map((e) => e.data)).toEqual([
      { sequenceId: seq.id, contactId: c.id, reason: 'Asked for a break', pausedFrom: 'APPROVED' },
    ]);
    const again = await ok(x.api, { action: 'pause_sequence', contactId: c.id });
    expect(again).toMatchObject({ outcome: 'noop', actionItemId: null, result: {} });
    expect(await eventsOf(svc, x.org.id, 'sequence.paused')).toHaveLength(1);
  });

  it('resume_sequence regenerates the unsent steps for approval and never sends or queues; then is a noop', async () => {
    const x = await setup();
    await sendingOn(x.org.id);
    const { c, seq } = await approvedSequence(x);
    const before = await draftsOf(x.api, c.id);
    expect((await x.api.POST('/drafts/{id}/send', { params: { path: { id: before[0].id } } })).data).toMatchObject({ queued: true });
    await ok(x.api, { action: 'pause_sequence', contactId: c.id });
    expect((await queueOf(x.org.id)).every((q) => q.state === 'skipped')).toBe(true);
    const r = await ok(x.api, { action: 'resume_sequence', contactId: c.id, reason: 'Back on' });
    expect(r).toMatchObject({ outcome: 'executed', result: { resumedCount: 1, sequenceIds: [seq.id] } });
    await settle(svc);
    const after = await draftsOf(x.api, c.id);
    expect(after.map((d) => [d.step, d.status, d.version])).toEqual([
      [1, 'REGENERATED', 2],
      [2, 'REGENERATED', 2],
    ]);
    expect((await getSequence(x.api, seq.id)).status).toBe('DRAFTED');
    const queue = await queueOf(x.org.id);
    expect(queue.filter((q) => q.state !== 'skipped')).toEqual([]);
    expect(await outbox(x.org.id)).toEqual([]);
    expect((await eventsOf(svc, x.org.id, 'sequence.resumed')).map((e) => e.data)).toEqual([
      { sequenceId: seq.id, contactId: c.id, reason: 'Back on', pausedFrom: 'QUEUED' },
    ]);
    expect((await ok(x.api, { action: 'resume_sequence', contactId: c.id })).outcome).toBe('noop');
    expect(await eventsOf(svc, x.org.id, 'sequence.resumed')).toHaveLength(1);
  });
});

describe('contacts', () => {
  it("snooze_contact sets snoozedUntil = now + days (contact.snoozed) and the dispatcher holds the contact's steps until then", async () => {
    const x = await setup();
    const { c } = await approvedSequence(x, [STEP_ONE]);
    const t0 = Date.now();
    const r = await ok(x.api, { action: 'snooze_contact', contactId: c.id, days: 3, reason: 'On leave' });
    expect(r).toMatchObject({ outcome: 'executed', result: { days: 3, snoozedUntil: expect.any(String) } });
    const until = Date.parse(r.result.snoozedUntil as string);
    expect(until).toBeGreaterThanOrEqual(t0 + 3 * DAY - 1000);
    expect(until).toBeLessThanOrEqual(Date.now() + 3 * DAY);
    expect((await contactRow(x.org.id, c.id)).snoozed_until!.getTime()).toBe(until);
    expect((await eventsOf(svc, x.org.id, 'contact.snoozed')).map((e) => e.data)).toEqual([
      { contactId: c.id, days: 3, snoozedUntil: r.result.snoozedUntil, reason: 'On leave' },
    ]);
    await sendingOn(x.org.id);
    const [d] = await draftsOf(x.api, c.id);
    expect((await x.api.POST('/drafts/{id}/send', { params: { path: { id: d.id } } })).data).toMatchObject({ queued: true });
    const held = await waitFor(
      async () => (await queueOf(x.org.id)).find((q) => q.heldBy === 'contact_snoozed'),
      15_000,
      'the snooze gate',
    );
    expect(held).toMatchObject({ contactId: c.id, state: 'deferred' });
    expect(Date.parse((held as { nextAttemptAt: string }).nextAttemptAt)).toBe(until);
    expect(await outbox(x.org.id)).toEqual([]);
  });

  it('tag_contact adds the tag (contact.tagged), is a noop when present in any case, and do-not-contact takes queued steps out', async () => {
    const x = await setup();
    await sendingOn(x.org.id);
    const { c } = await approvedSequence(x);
    expect(await ok(x.api, { action: 'tag_contact', contactId: c.id, tag: 'VIP' })).toMatchObject({
      outcome: 'executed',
      result: { tag: 'VIP', stepsCancelled: 0 },
    });
    expect((await ok(x.api, { action: 'tag_contact', contactId: c.id, tag: 'vip' })).outcome).toBe('noop');
    const [d] = await draftsOf(x.api, c.id);
    await x.api.POST('/drafts/{id}/send', { params: { path: { id: d.id } } });
    const r = await ok(x.api, { action: 'tag_contact', contactId: c.id, tag: 'do-not-contact' });
    expect(r).toMatchObject({ outcome: 'executed', result: { tag: 'do-not-contact', stepsCancelled: 2 } });
    expect((await contactRow(x.org.id, c.id)).tags).toEqual(['VIP', 'do-not-contact']);
    expect((await queueOf(x.org.id)).map((q) => [q.state, q.heldBy])).toEqual([
      ['skipped', 'do_not_contact'],
      ['skipped', 'do_not_contact'],
    ]);
    expect((await eventsOf(svc, x.org.id, 'contact.tagged')).map((e) => e.data.tag)).toEqual(['VIP', 'do-not-contact']);
    // A contact carries at most 100 tags.
    const full = await contact(x.api);
    await system(svc, (trx) =>
      trx
        .updateTable('contacts')
        .set({ tags: Array.from({ length: 100 }, (_, i) => `t${i}`) })
        .where('organization_id', '=', x.org.id)
        .where('id', '=', full.id)
        .execute(),
    );
    const over = await act(x.api, { action: 'tag_contact', contactId: full.id, tag: 'one-more' });
    expect(over.response.status).toBe(400);
    expect((await ok(x.api, { action: 'tag_contact', contactId: full.id, tag: 'T5' })).outcome).toBe('noop');
  });

  it('add_to_suppression suppresses the address (MANUAL_BLOCK, source action; suppression.added), then is a noop, also under a domain entry', async () => {
    const x = await setup();
    const c = await contact(x.api);
    const r = await ok(x.api, { action: 'add_to_suppression', contactId: c.id, reason: 'Asked by phone' });
    expect(r).toMatchObject({ outcome: 'executed', result: { suppressionEntryId: expect.stringMatching(/^sup_/) } });
    const check = await x.api.GET('/suppression', { params: { query: { email: c.email } } });
    expect(check.data).toMatchObject({
      suppressed: true,
      entry: { reason: 'MANUAL_BLOCK', source: 'action', id: r.result.suppressionEntryId },
    });
    expect((await eventsOf(svc, x.org.id, 'suppression.added')).map((e) => e.data)).toEqual([
      { email: c.email, level: 'ADDRESS', reason: 'MANUAL_BLOCK', source: 'action' },
    ]);
    expect((await ok(x.api, { action: 'add_to_suppression', contactId: c.id })).outcome).toBe('noop');
    const domain = `${uid('blocked')}.example`;
    await svc.admin.POST('/organizations/{orgId}/suppression-domains', { params: { path: { orgId: x.org.id } }, body: { domain } });
    const covered = await contact(x.api, { email: `ann@${domain}` });
    expect((await ok(x.api, { action: 'add_to_suppression', contactId: covered.id })).outcome).toBe('noop');
    expect(await eventsOf(svc, x.org.id, 'suppression.added')).toHaveLength(2); // the contact's and the domain's
  });
});

describe('handoff_to_ae', () => {
  it('files the package (contact, company research, conversation, open deal) for the longest-standing MANAGER, with an action item', async () => {
    const x = await setup();
    await x.org.user('ADMIN');
    const manager = await x.org.user('MANAGER');
    await x.org.user('MANAGER');
    const c = await researched(svc, x);
    const t = Date.now() - 3600_000;
    const m1 = await message(svc, x.org.id, c.id, { direction: 'OUTBOUND', body: 'Hi Dana, a quick idea.', at: new Date(t) });
    const m2 = await message(svc, x.org.id, c.id, {
      body: `Sounds interesting.\n\n> quoted ${'x'.repeat(6000)}`,
      stripped: 'Sounds interesting.',
      intent: 'interested',
      at: new Date(t + 1000),
    });
    const deal = (
      await x.api.POST('/deals', { body: { name: 'Acme launch', valueCents: 500_000, probability: 50, primaryContactId: c.id } })
    ).data!;
    const r = await ok(x.api, { action: 'handoff_to_ae', contactId: c.id, reason: 'Ready for a demo' });
    expect(r).toMatchObject({
      outcome: 'executed',
      result: { handoffId: expect.stringMatching(/^hnd_/), toUserId: manager.id, dealId: deal.id, actionItemId: expect.any(String) },
    });
    const h = await system(svc, (trx) =>
      trx.selectFrom('handoffs').selectAll().where('organization_id', '=', x.org.id).executeTakeFirstOrThrow(),
    );
    expect(h).toMatchObject({
      id: r.result.handoffId,
      contact_id: c.id,
      deal_id: deal.id,
      from_user_id: x.org.ownerId,
      to_user_id: manager.id,
      reason: 'Ready for a demo',
    });
    const p = h.package as Record<string, any>;
    expect(p.contact).toMatchObject({ id: c.id, email: c.email, name: 'Dana Whitfield', title: 'VP of Engineering' });
    expect(p.contact.research).toMatchObject({ facts: expect.any(Array) });
    expect(p.company).toMatchObject({ name: 'Acme Rockets', research: expect.any(Object) });
    expect(JSON.stringify(p.company.research)).toContain('Acme raises $40M Series B');
    expect(p.conversation.map((m: { id: string; direction: string; text: string }) => [m.id, m.direction, m.text])).toEqual([
      [m1, 'OUTBOUND', 'Hi Dana, a quick idea.'],
      [m2, 'INBOUND', 'Sounds interesting.'],
    ]);
    expect(p).toMatchObject({
      conversationTruncated: false,
      reason: 'Ready for a demo',
      deal: { id: deal.id, valueCents: 500_000, probability: 50 },
    });
    const [item] = await itemsOf(svc, x.org.id);
    expect(item).toMatchObject({
      id: r.result.actionItemId,
      action_type: 'handoff',
      priority: 'high',
      sales_person_id: manager.id,
      ai_generated: false,
      entity_type: 'Contact',
      entity_id: c.id,
      expected_impact_cents: 250_000,
      status: 'pending',
    });
    expect((await eventsOf(svc, x.org.id, 'handoff.created')).map((e) => [e.resource_type, e.data])).toEqual([
      ['Handoff', { handoffId: h.id, contactId: c.id, dealId: deal.id, toUserId: manager.id }],
    ]);
    // While the item is pending a second handoff is a noop; once done, a new one goes out.
    expect((await ok(x.api, { action: 'handoff_to_ae', contactId: c.id })).outcome).toBe('noop');
    const mgrApi = svc.api(await x.org.key(['contacts.write'], { userId: manager.id }));
    await mgrApi.POST('/action-items/{id}/{verb}', { params: { path: { id: item.id, verb: 'complete' } } });
    expect((await ok(x.api, { action: 'handoff_to_ae', contactId: c.id })).outcome).toBe('executed');
    expect(await eventsOf(svc, x.org.id, 'handoff.created')).toHaveLength(2);
  });

  it('goes to an ADMIN when there is no MANAGER, else to the OWNER; the conversation keeps the last 50 messages, each bounded', async () => {
    const x = await setup();
    const c = await contact(x.api);
    const t = Date.now() - DAY;
    for (let i = 0; i < 55; i += 1)
      await message(svc, x.org.id, c.id, { body: i === 54 ? 'y'.repeat(6000) : `m${i}`, at: new Date(t + i * 1000) });
    const toOwner = await ok(x.api, { action: 'handoff_to_ae', contactId: c.id });
    expect(toOwner.result).toMatchObject({ toUserId: x.org.ownerId, dealId: null });
    const h = await system(svc, (trx) =>
      trx.selectFrom('handoffs').select('package').where('organization_id', '=', x.org.id).executeTakeFirstOrThrow(),
    );
    const p = h.package as { conversation: Array<{ text: string }>; conversationTruncated: boolean; company: unknown; deal: unknown };
    expect(p.conversation).toHaveLength(50);
    expect(p.conversation[0].text).toBe('m5');
    expect(p.conversation[49].text).toBe(`${'y'.repeat(5000)}…`);
    expect(p).toMatchObject({ conversationTruncated: true, company: null, deal: null });
    const admin = await x.org.user('ADMIN');
    const other = await contact(x.api);
    expect((await ok(x.api, { action: 'handoff_to_ae', contactId: other.id })).result.toUserId).toBe(admin.id);
  });
});

describe('draft_reply', () => {
  it('drafts a reply to the latest message from a person with the fallback, citing the message and the research; never sendable', async () => {
    const x = await setup();
    await sendingOn(x.org.id);
    const c = await researched(svc, x);
    const t = Date.now() - 3600_000;
    await message(svc, x.org.id, c.id, { body: 'An older note.', at: new Date(t) });
    const replied = await message(svc, x.org.id, c.id, {
      subject: 'Re: Orbit for Acme',
      body: 'Sounds interesting. How does pricing work?\n\nOn Mon, Sam wrote:\n> old',
      stripped: 'Sounds interesting. How does pricing work?',
      intent: 'interested',
      at: new Date(t + 1000),
      messageId: '<abc@mail.example>',
    });
    await message(svc, x.org.id, c.id, {
      body: 'I am out of office until Monday.',
      automatic: true,
      intent: 'out_of_office',
      at: new Date(t + 2000),
    });
    await message(svc, x.org.id, c.id, { direction: 'OUTBOUND', body: 'Following up', at: new Date(t + 3000) });
    const usage = async () => (await x.api.GET('/usage')).data!.drafts.created;
    const used = await usage();
    const r = await ok(x.api, { action: 'draft_reply', contactId: c.id });
    expect(r).toMatchObject({
      outcome: 'executed',
      result: { draftId: expect.stringMatching(/^drf_/), messageId: replied, provider: 'fallback', flagged: false },
    });
    const d = (await x.api.GET('/drafts/{id}', { params: { path: { id: r.result.draftId as string }, query: { include: 'evidence' } } }))
      .data!;
    expect(d).toMatchObject({
      contactId: c.id,
      sequenceId: null,
      status: 'DRAFT_GENERATED',
      version: 1,
      step: 1,
      provider: 'fallback',
      subject: 'Re: Orbit for Acme',
    });
    expect(d.body).toBe(
      'Hi Dana,\n\nThank you for your message. You wrote: "Sounds interesting." Great to hear that this is of interest. ' +
        'I saw the news of your funding: "Acme raises $40M Series B".\n\nWould a 20-minute call next week work for you? Let me know a time that suits you.\n\nBest regards',
    );
    const research = (await x.api.GET('/contacts/{id}/research', { params: { path: { id: c.id } } })).data!;
    expect(d.citations).toEqual([
      {
        text: 'You wrote: "Sounds interesting."',
        sourceIndex: research.sources.length + 1,
        resolved: true,
        sourceUrl: 'mid:abc%40mail.example',
        sourceTitle: 'Message: Re: Orbit for Acme',
        sourceDomain: null,
        sourceSnippet: 'Sounds interesting. How does pricing work?',
      },
      expect.objectContaining({
        text: 'I saw the news of your funding: "Acme raises $40M Series B".',
        resolved: true,
        sourceUrl: (research.sources[d.citations![1].sourceIndex - 1] as { url: string }).url,
      }),
    ]);
    expect(d.guardrailReport).toMatchObject({ clean: true, flags: [] });
    expect(await usage()).toBe(used + 1);
    expect((await eventsOf(svc, x.org.id, 'draft.created')).filter((e) => e.data.draftId === d.id).map((e) => e.data)).toEqual([
      {
        draftId: d.id,
        contactId: c.id,
        sequenceId: null,
        step: 1,
        version: 1,
        provider: 'fallback',
        inReplyToMessageId: replied,
        flagged: false,
      },
    ]);
    // For review only: approvable, never sendable on its own.
    expect((await x.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } })).response.status).toBe(200);
    const send = await x.api.POST('/drafts/{id}/send', { params: { path: { id: d.id } } });
    expect(send.response.status).toBe(400);
    expect(await queueOf(x.org.id)).toEqual([]);
  });

  it('is a noop with no message from a person (none, or only automatic mail and our own)', async () => {
    const x = await setup();
    const c = await contact(x.api);
    expect(await ok(x.api, { action: 'draft_reply', contactId: c.id })).toMatchObject({ outcome: 'noop', actionItemId: null, result: {} });
    await message(svc, x.org.id, c.id, { body: 'Out of office', automatic: true });
    await message(svc, x.org.id, c.id, { direction: 'OUTBOUND', body: 'Hello' });
    expect((await ok(x.api, { action: 'draft_reply', contactId: c.id })).outcome).toBe('noop');
    expect(await draftsOf(x.api, c.id)).toEqual([]);
    expect(await eventsOf(svc, x.org.id, 'draft.created')).toEqual([]);
  });

  it('answers a not-interested message without selling, and without a name still greets', async () => {
    const x = await setup();
    const c = await contact(x.api, { name: undefined });
    await message(svc, x.org.id, c.id, { subject: 'Fwd: RE: Hello', body: 'Not interested, thanks.', intent: 'not_interested' });
    const r = await ok(x.api, { action: 'draft_reply', contactId: c.id });
    const d = (await x.api.GET('/drafts/{id}', { params: { path: { id: r.result.draftId as string } } })).data!;
    expect(d.subject).toBe('Re: Hello');
    expect(d.body).toBe(
      'Hello,\n\nThank you for your message. You wrote: "Not interested, thanks." Understood, and thank you for letting me know.\n\nI will not follow up on this again.\n\nBest regards',
    );
  });

  it("with a model: the model writes the reply from the message and the research, the subject stays the thread's; a failing model falls back", async () => {
    const x = await setup(msvc);
    const c = await researched(msvc, x, { name: 'Modelled Reader' });
    const m = await message(msvc, x.org.id, c.id, { subject: 'Orbit', body: 'We have 40 reps. What does it cost?', intent: 'interested' });
    model.answer((call) => {
      const p = JSON.parse(call.body.messages[1].content.split('\n\n')[0]);
      if (p.recipient.name.startsWith('Failing')) return { status: 500 };
      const sentence = 'You mentioned 40 reps, so I will send pricing for that team size.';
      return {
        content: JSON.stringify({
          subject: 'Pricing',
          body: `Hi Modelled,\n\n${sentence}\n\nBest,\nSam`,
          citations: [{ sentence, sourceIndex: p.message.sourceIndex }],
        }),
      };
    });
    const r = await ok(x.api, { action: 'draft_reply', contactId: c.id });
    expect(r.result).toMatchObject({ provider: 'gpt-4o-mini', flagged: false, messageId: m });
    const call = model.calls.at(-1)!;
    const prompt = JSON.parse(call.body.messages[1].content);
    expect(prompt.message).toMatchObject({ text: 'We have 40 reps. What does it cost?', intent: 'interested' });
    expect(prompt.sources.at(-1)).toMatchObject({ kind: 'message', sourceIndex: prompt.message.sourceIndex });
    expect(prompt.sources.some((s: { facts?: string[] }) => (s.facts ?? []).some((f) => f.includes('Series B')))).toBe(true);
    expect(prompt.draft.subject).toBe('Re: Orbit');
    const d = (await x.api.GET('/drafts/{id}', { params: { path: { id: r.result.draftId as string }, query: { include: 'evidence' } } }))
      .data!;
    expect(d).toMatchObject({
      subject: 'Re: Orbit',
      body: 'Hi Modelled,\n\nYou mentioned 40 reps, so I will send pricing for that team size.\n\nBest,\nSam',
      provider: 'gpt-4o-mini',
      sequenceId: null,
    });
    expect(d.citations).toEqual([
      expect.objectContaining({
        text: 'You mentioned 40 reps, so I will send pricing for that team size.',
        resolved: true,
        sourceSnippet: 'We have 40 reps. What does it cost?',
      }),
    ]);

    const failing = await contact(x.api, { name: 'Failing Reader' });
    await message(msvc, x.org.id, failing.id, { body: 'Tell me more.', intent: 'interested' });
    const fb = await ok(x.api, { action: 'draft_reply', contactId: failing.id });
    expect(fb.result).toMatchObject({ provider: 'fallback' });
    const fd = (await x.api.GET('/drafts/{id}', { params: { path: { id: fb.result.draftId as string }, query: { include: 'evidence' } } }))
      .data!;
    expect(fd.guardrailReport!.advisories[0]).toMatch(/^model-unavailable: gpt-4o-mini failed \(server\)/);
  });

  it("signs as the sender of the contact's sequences and takes the list's context as the sender's own words, with a model and without", async () => {
    const x = await setup(msvc);
    await msvc.admin.PATCH('/organizations/{orgId}/users/{userId}', {
      params: { path: { orgId: x.org.id, userId: x.org.ownerId } },
      body: { name: 'Sam Lee', title: 'Head of Sales' },
    });
    const list = await x.api.POST('/lists', {
      body: {
        name: uid('Pilots '),
        connectionPoint: 'We met at the Austin Space Summit.',
        goal: 'Offer a free 30-day pilot to rocket companies.',
      },
    });
    const c = await contact(x.api, { name: 'Pilot Reader', listId: list.data!.id });
    await message(msvc, x.org.id, c.id, { subject: 'Orbit', body: 'Could we try it first?', intent: 'interested' });
    // The list's goal offers the pilot and its connection point names the summit: the sender's own, not an offer or a claim to flag.
    const sentence = 'Happy to set up the free 30-day pilot we talked about at the Austin Space Summit.';
    model.answer((call) => {
      const p = JSON.parse(call.body.messages[1].content.split('\n\n')[0]);
      if (p.recipient.name !== 'Pilot Reader') return { status: 500 };
      return { content: JSON.stringify({ subject: 'Orbit', body: `Hi Pilot,\n\n${sentence}\n\nBest,\nSam Lee`, citations: [] }) };
    });
    const r = await ok(x.api, { action: 'draft_reply', contactId: c.id });
    expect(r.result).toMatchObject({ provider: 'gpt-4o-mini', flagged: false });
    const prompt = JSON.parse(model.calls.at(-1)!.body.messages[1].content);
    expect(prompt.sender).toMatchObject({ name: 'Sam Lee', title: 'Head of Sales' });
    expect(prompt.listContext).toEqual({
      connectionPoint: 'We met at the Austin Space Summit.',
      goal: 'Offer a free 30-day pilot to rocket companies.',
    });
    const d = (await x.api.GET('/drafts/{id}', { params: { path: { id: r.result.draftId as string }, query: { include: 'evidence' } } }))
      .data!;
    expect(d.body).toBe(`Hi Pilot,\n\n${sentence}\n\nBest,\nSam Lee`);
    expect(d.guardrailReport).toMatchObject({ flags: [] });
    // Without a model the fallback signs with the sender's name.
    const y = await setup();
    await svc.admin.PATCH('/organizations/{orgId}/users/{userId}', {
      params: { path: { orgId: y.org.id, userId: y.org.ownerId } },
      body: { name: 'Sam Lee', title: 'Head of Sales' },
    });
    const other = await contact(y.api, {
      name: 'Dana Whitfield',
      listId: (await y.api.POST('/lists', { body: { name: uid('L ') } })).data!.id,
    });
    await message(svc, y.org.id, other.id, { body: 'Not interested, thanks.', intent: 'not_interested' });
    const fb = await ok(y.api, { action: 'draft_reply', contactId: other.id });
    const fd = (await y.api.GET('/drafts/{id}', { params: { path: { id: fb.result.draftId as string } } })).data!;
    expect(fd.body).toBe(
      'Hi Dana,\n\nThank you for your message. You wrote: "Not interested, thanks." Understood, and thank you for letting me know.\n\nI will not follow up on this again.\n\nBest regards,\nSam Lee',
    );
  });
});

describe('degrading to an advisory action item', () => {
  it("an advisory-locked action opens an item for the contact's owner instead, says so, and answers the same item while it is pending", async () => {
    const x = await setup();
    const rep = await x.org.user('REP');
    const repApi = svc.api(await x.org.key(ALL_SCOPES, { userId: rep.id }));
    const c = await contact(repApi, { name: 'Locked Larry' });
    const patched = await svc.admin.PATCH('/organizations/{orgId}', {
      params: { path: { orgId: x.org.id } },
      body: { advisoryActions: ['tag_contact', 'pause_sequence'] },
    });
    expect(patched.data!.advisoryActions).toEqual(['tag_contact', 'pause_sequence']);
    const r = await ok(x.api, { action: 'tag_contact', contactId: c.id, tag: 'vip', reason: 'Big account' });
    expect(r).toMatchObject({
      outcome: 'advisory',
      actionItemId: expect.any(String),
      result: {},
      detail: expect.stringContaining('advisory-locked'),
    });
    const item = (await x.api.GET('/action-items/{id}', { params: { path: { id: r.actionItemId! } } })).data!;
    expect(item).toMatchObject({
      actionType: 'tag_contact',
      title: 'Tag Locked Larry with "vip"',
      priority: 'medium',
      status: 'pending',
      aiGenerated: true,
      entityType: 'Contact',
      entityId: c.id,
      salesPersonId: rep.id,
      expectedImpactCents: null,
    });
    expect(item.description).toContain('Big account');
    // Set by the service's clock at creation: 14 days on (the two clocks may differ by a moment).
    expect(Math.abs(Date.parse(item.expiresAt!) - Date.parse(item.createdAt) - 14 * DAY)).toBeLessThan(60_000);
    expect((await contactRow(x.org.id, c.id)).tags).toEqual([]);
    expect(await eventsOf(svc, x.org.id, 'contact.tagged')).toEqual([]);
    expect((await ok(x.api, { action: 'tag_contact', contactId: c.id, tag: 'vip' })).actionItemId).toBe(r.actionItemId);
    const otherTag = await ok(x.api, { action: 'tag_contact', contactId: c.id, tag: 'gold' });
    expect(otherTag.actionItemId).not.toBe(r.actionItemId);
    // Nothing to do is a noop, locked or not.
    expect((await ok(x.api, { action: 'pause_sequence', contactId: c.id })).outcome).toBe('noop');
    // Not locked: runs.
    expect((await ok(x.api, { action: 'snooze_contact', contactId: c.id, days: 1 })).outcome).toBe('executed');
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: x.org.id } }, body: { advisoryActions: [] } });
    expect((await ok(x.api, { action: 'tag_contact', contactId: c.id, tag: 'vip' })).outcome).toBe('executed');
    expect(
      (
        await svc.admin.PATCH('/organizations/{orgId}', {
          params: { path: { orgId: x.org.id } },
          body: { advisoryActions: ['fly'] } as never,
        })
      ).response.status,
    ).toBe(400);
  });

  it('on the free plan resume_sequence and draft_reply degrade; draft_reply degrades once the drafts allowance is used up', async () => {
    const x = await setup(svc, { plan: 'free' });
    const c = await contact(x.api);
    await system(svc, (trx) =>
      trx
        .insertInto('contact_sequences')
        .values({ organization_id: x.org.id, id: uid('seq_'), contact_id: c.id, template_id: 'tpl_x', status: 'PAUSED' })
        .execute(),
    );
    await message(svc, x.org.id, c.id, { body: 'Interested!' });
    const resume = await ok(x.api, { action: 'resume_sequence', contactId: c.id });
    expect(resume).toMatchObject({ outcome: 'advisory', detail: expect.stringContaining('free plan') });
    const reply = await ok(x.api, { action: 'draft_reply', contactId: c.id });
    expect(reply.outcome).toBe('advisory');
    expect(await eventsOf(svc, x.org.id, 'sequence.resumed')).toEqual([]);
    expect(await draftsOf(x.api, c.id)).toEqual([]);
    expect((await itemsOf(svc, x.org.id)).map((i) => i.action_type).sort()).toEqual(['draft_reply', 'resume_sequence']);

    const y = await setup();
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: y.org.id } }, body: { draftsPerMonth: 0 } });
    const d = await contact(y.api);
    await message(svc, y.org.id, d.id, { body: 'Interested!' });
    const out = await ok(y.api, { action: 'draft_reply', contactId: d.id });
    expect(out).toMatchObject({ outcome: 'advisory', detail: expect.stringContaining('allowance') });
    expect(await draftsOf(y.api, d.id)).toEqual([]);
  });
});

describe('erasure', () => {
  it('redacts the action items about the contact and its handoff packages, and the address in other packages', async () => {
    const x = await setup();
    const c = await contact(x.api, { name: 'Erin Erased' });
    const bystander = await contact(x.api, { name: 'Bea Bystander' });
    await message(svc, x.org.id, c.id, { body: 'Please hand me over.' });
    await message(svc, x.org.id, bystander.id, { body: `My colleague ${c.email} is also interested.` });
    await svc.admin.PATCH('/organizations/{orgId}', {
      params: { path: { orgId: x.org.id } },
      body: { advisoryActions: ['snooze_contact'] },
    });
    const advisory = await ok(x.api, { action: 'snooze_contact', contactId: c.id, days: 2, reason: 'Erin is away' });
    const handed = await ok(x.api, { action: 'handoff_to_ae', contactId: c.id, reason: 'Erin wants a demo' });
    await ok(x.api, { action: 'handoff_to_ae', contactId: bystander.id });
    const keep = (await itemsOf(svc, x.org.id)).find((i) => i.entity_id === bystander.id)!;
    expect(
      (await x.api.POST('/contacts/{id}/erase', { params: { path: { id: c.id } }, body: { requesterRef: 'DSR-1', reason: 'asked' } }))
        .response.status,
    ).toBe(200);

    const items = await itemsOf(svc, x.org.id);
    for (const id of [advisory.actionItemId, handed.result.actionItemId]) {
      expect(items.find((i) => i.id === id)).toMatchObject({
        title: 'Action item about an erased contact',
        description: 'The contact was erased; what this item said about them was removed.',
        details: null,
        dismiss_reason: null,
        snooze_reason: null,
        entity_id: c.id,
      });
    }
    expect(items.find((i) => i.id === keep.id)!.title).toBe(keep.title);
    const handoffs = await system(svc, (trx) => trx.selectFrom('handoffs').selectAll().where('organization_id', '=', x.org.id).execute());
    const own = handoffs.find((h) => h.contact_id === c.id)!;
    expect(own).toMatchObject({ package: { version: 1, erased: true }, reason: null });
    const other = JSON.stringify(handoffs.find((h) => h.contact_id === bystander.id)!.package);
    expect(other).not.toContain(c.email);
    expect(other).toContain('My colleague [erased] is also interested.');
    expect(other).toContain('Bea Bystander');
  });
});
