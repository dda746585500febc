// Reviewing drafts at volume, through HTTP: editing (PATCH /drafts/{id}) and regenerating a step's
// draft as new versions, a rejection's reason, the GET /drafts filters, batch approve, reject and
// send (each item independent, one idempotent request, one unit of the rate limit), the send's 404
// detail, and a 485-draft list reviewed in a handful of requests after its generation.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/platform/ids.js';
import { eventsOf, system, uid, uniqueEmail } from './crm-support.js';
import {
  contact,
  type DraftingOrg,
  draftingOrg,
  draftsOf,
  getSequence,
  STEP_ONE,
  STEP_TWO,
  sequence,
  settle,
  template,
} from './drafting-support.js';
import { raw, startService, type TestService } from './support/harness.js';
import { companySite, type SiteServer, startSiteServer } from './support/site-server.js';

let svc: TestService;
let site: SiteServer;
beforeAll(async () => {
  site = await startSiteServer();
  svc = await startService({
    RESEARCH_SITE_URL_TEMPLATE: site.template,
    RESEARCH_ALLOW_PRIVATE_TARGETS: 'true',
    RATE_LIMIT_PER_MINUTE: '1000',
  });
  await svc.startWorker();
});
afterAll(async () => {
  await svc?.close();
  await site?.close();
});

/** A contact at a company whose site has been researched (so the fallback cites a fact). */
async function researchedContact(s: DraftingOrg) {
  const domain = `${uid('acme')}.example`;
  site.site(domain, companySite(domain, site.origin));
  const c = await contact(s.api, { name: 'Dana Whitfield', title: 'VP of Engineering', company: { domain, name: 'Acme Rockets' } });
  expect((await s.api.POST('/contacts/{id}/research', { params: { path: { id: c.id } } })).response.status).toBe(200);
  return c;
}

async function generated(s: DraftingOrg, steps = [STEP_ONE, STEP_TWO]) {
  const c = await researchedContact(s);
  const seq = await sequence(s.api, c.id, await template(svc, s.org.id, steps));
  await settle(svc);
  return { c, seq, drafts: await draftsOf(s.api, c.id) };
}

const evidence = async (s: DraftingOrg, id: string) =>
  (await s.api.GET('/drafts/{id}', { params: { path: { id }, query: { include: 'evidence' } } })).data!;
const edit = (s: DraftingOrg, id: string, body: { subject?: string; body?: string }) =>
  s.api.PATCH('/drafts/{id}', { params: { path: { id } }, body: body as never });
const regenerate = (s: DraftingOrg, id: string, instructions?: string) =>
  s.api.POST('/drafts/{id}/regenerate', { params: { path: { id } }, ...(instructions ? { body: { instructions } } : {}) });
const approve = (s: DraftingOrg, id: string) => s.api.POST('/drafts/{id}/approve', { params: { path: { id } } });
const usage = async (s: DraftingOrg) => (await s.api.GET('/usage')).data!.drafts;
const queueOf = async (orgId: string) => (await svc.admin.GET('/send-queue', { params: { query: { organizationId: orgId } } })).data!.data;
const outbox = async (orgId: string) => (await svc.admin.GET('/outbox', { params: { query: { organizationId: orgId } } })).data!.data;
const enableSending = (orgId: string) =>
  svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId } }, body: { flags: { v1_2_api_send: true } } });

const CLAIM = 'Congrats on your 500 new customers in Berlin.';

describe('PATCH /drafts/{id}', () => {
  it('writes an EDITED version that supersedes the old one, keeps the citations of unchanged sentences, flags a new unsupported claim, and takes no allowance', async () => {
    const s = await draftingOrg(svc);
    const {
      drafts: [d],
    } = await generated(s, [STEP_ONE]);
    const before = await evidence(s, d.id);
    expect(before.citations!.length).toBeGreaterThan(0);
    expect(before.flagged).toBe(false);
    const cited = before.citations![0].text;
    const used = await usage(s);

    const r = await edit(s, d.id, { body: `${before.body}\n\n${CLAIM}` });
    expect(r.response.status).toBe(200);
    expect(r.data).toMatchObject({ status: 'EDITED', version: 2, flagged: true, supersededAt: null, rejectionReason: null });
    expect(r.data!.id).not.toBe(d.id);
    expect(r.data!.body).toContain(CLAIM);
    const after = await evidence(s, r.data!.id);
    // The unchanged cited sentence keeps its citation (still resolved); the new claim is flagged.
    expect(after.citations!.map((c) => [c.text, c.resolved])).toEqual([[cited, true]]);
    expect(after.guardrailReport!.flags).toEqual([expect.objectContaining({ kind: 'unsupported-claim', sentence: CLAIM })]);
    expect(after.provider).toBe(before.provider);
    expect((await s.api.GET('/drafts/{id}', { params: { path: { id: d.id } } })).data!.supersededAt).not.toBeNull();
    const versions = await draftsOf(s.api, d.contactId, true);
    expect(versions.map((v) => [v.version, v.status, v.supersededAt === null])).toEqual([
      [1, 'DRAFT_GENERATED', false],
      [2, 'EDITED', true],
    ]);
    // The new version is announced with the catalogue's draft.created; an edit takes no allowance.
    const created = await eventsOf(svc, s.org.id, 'draft.created');
    expect(created.find((e) => e.resource_id === r.data!.id)?.data).toMatchObject({ draftId: r.data!.id, version: 2, flagged: true });
    expect(await usage(s)).toEqual(used);
    // Approval then needs the acknowledgement, as for a generated flagged draft.
    expect((await approve(s, r.data!.id)).response.status).toBe(400);

    // The same text again changes nothing: the live draft, no new version.
    const same = await edit(s, r.data!.id, { body: r.data!.body });
    expect(same.response.status).toBe(200);
    expect(same.data).toMatchObject({ id: r.data!.id, version: 2 });
    // Removing the claim (a subject change too) clears the flag; the cited sentence still carries its citation.
    const fixed = await edit(s, r.data!.id, { subject: 'A thought for Acme Rockets', body: before.body });
    expect(fixed.data).toMatchObject({ status: 'EDITED', version: 3, flagged: false, subject: 'A thought for Acme Rockets' });
    expect((await evidence(s, fixed.data!.id)).citations!.map((c) => c.text)).toEqual([cited]);
  });

  it('takes an approved, queued step out of the send queue (nothing is sent) until the new version is approved again', async () => {
    const s = await draftingOrg(svc);
    await enableSending(s.org.id);
    const { seq, drafts } = await generated(s);
    for (const d of drafts) expect((await approve(s, d.id)).response.status).toBe(200);
    const sent = await s.api.POST('/drafts/{id}/send', { params: { path: { id: drafts[0].id } } });
    expect(sent.data).toMatchObject({ queued: true, queuedJobCount: 2 });
    // Step 1 is due now and goes out; step 2 waits three days in the queue.
    await settle(svc);
    expect((await outbox(s.org.id)).length).toBe(1);
    const step2 = drafts[1];
    expect((await queueOf(s.org.id)).find((q) => q.step === 2)).toMatchObject({ draftId: step2.id, state: 'queued' });

    const r = await edit(s, step2.id, {
      body: `Hello again Dana, one short note before I go quiet. Worth a call?`,
    });
    expect(r.response.status).toBe(200);
    expect(r.data).toMatchObject({ status: 'EDITED', version: 2, step: 2 });
    const q2 = (await queueOf(s.org.id)).filter((q) => q.step === 2);
    expect(q2).toEqual([expect.objectContaining({ draftId: step2.id, state: 'skipped', heldBy: 'draft_superseded' })]);
    expect((await getSequence(s.api, seq.id)).status).toBe('ACTIVE');
    await settle(svc);
    expect((await outbox(s.org.id)).length).toBe(1);

    // Approving the edited version queues the step again (the sequence is sending).
    expect((await approve(s, r.data!.id)).data).toMatchObject({ status: 'approved', allApproved: true });
    const requeued = (await queueOf(s.org.id)).filter((q) => q.step === 2 && q.state === 'queued');
    expect(requeued).toEqual([expect.objectContaining({ draftId: r.data!.id })]);
    // The sent step cannot change.
    const refused = await edit(s, drafts[0].id, { body: 'Too late.' });
    expect(refused.response.status).toBe(409);
    expect(refused.error!.type).toMatch(/\/problems\/draft-not-editable$/);
  });

  it('turns an APPROVED sequence back to DRAFTED when an approved step gets a new version', async () => {
    const s = await draftingOrg(svc);
    const { seq, drafts } = await generated(s);
    for (const d of drafts) await approve(s, d.id);
    expect((await getSequence(s.api, seq.id)).status).toBe('APPROVED');
    const r = await edit(s, drafts[0].id, { subject: 'Another idea for Acme Rockets' });
    expect(r.data).toMatchObject({ status: 'EDITED', version: 2 });
    expect((await getSequence(s.api, seq.id)).status).toBe('DRAFTED');
    const pending = await eventsOf(svc, s.org.id, 'draft.pending_approval');
    expect(pending.at(-1)?.data).toMatchObject({ sequenceId: seq.id, draftIds: [r.data!.id] });
  });

  it('refuses: 400 empty body, superseded version or draft outside a sequence; 404 unknown; 409 sent or paused sequence', async () => {
    const s = await draftingOrg(svc);
    const { c, drafts } = await generated(s);
    const [d1, d2] = drafts;
    expect((await edit(s, d1.id, {})).response.status).toBe(400);
    expect(
      (
        await raw(svc.baseUrl, 'PATCH', `/api/v1/drafts/${d1.id}`, {
          key: s.key,
          body: '{"status":"APPROVED"}',
          headers: { 'content-type': 'application/json' },
        })
      ).status,
    ).toBe(400);
    expect((await edit(s, uid('drf_'), { body: 'x' })).response.status).toBe(404);
    const v2 = await edit(s, d1.id, { body: 'Hi Dana, a shorter note. Worth a call?' });
    const old = await edit(s, d1.id, { body: 'Hi again.' });
    expect(old.response.status).toBe(400);
    expect(old.error!.detail).toContain('superseded');
    expect((await regenerate(s, d1.id)).response.status).toBe(400);
    const loose = uid('drf_');
    await system(svc, (trx) =>
      trx
        .insertInto('drafts')
        .values({ organization_id: s.org.id, id: loose, contact_id: c.id, status: 'DRAFT_GENERATED', subject: 's', body: 'b' })
        .execute(),
    );
    expect((await edit(s, loose, { body: 'x' })).response.status).toBe(400);
    await system(svc, (trx) => trx.updateTable('drafts').set({ sent_at: new Date() }).where('id', '=', v2.data!.id).execute());
    expect((await edit(s, v2.data!.id, { body: 'x' })).response.status).toBe(409);
    expect((await regenerate(s, v2.data!.id)).response.status).toBe(409);
    expect((await s.api.POST('/contacts/{id}/pause-sequence', { params: { path: { id: c.id } }, body: {} as never })).response.status).toBe(
      200,
    );
    const paused = await edit(s, d2.id, { body: 'x' });
    expect(paused.response.status).toBe(409);
    expect(paused.error!.detail).toContain('PAUSED');
  });
});

describe('POST /drafts/{id}/regenerate', () => {
  it('writes a REGENERATED version counted against the allowance, and is refused with 429 when none is left', async () => {
    const s = await draftingOrg(svc);
    const {
      drafts: [d],
    } = await generated(s, [STEP_ONE]);
    await approve(s, d.id);
    const used = await usage(s);
    const r = await regenerate(s, d.id, 'Shorter, and mention the Chicago office.');
    expect(r.response.status).toBe(200);
    expect(r.data).toMatchObject({ status: 'REGENERATED', version: 2, step: 1, supersededAt: null });
    expect(await usage(s)).toMatchObject({ created: used.created, regenerated: used.regenerated + 1, remaining: used.remaining - 1 });
    const created = await eventsOf(svc, s.org.id, 'draft.created');
    expect(created.find((e) => e.resource_id === r.data!.id)?.data).toMatchObject({ version: 2 });

    // No allowance left: 429, nothing written.
    const u = await usage(s);
    await svc.admin.PATCH('/organizations/{orgId}', {
      params: { path: { orgId: s.org.id } },
      body: { draftsPerMonth: u.created + u.regenerated },
    });
    const refused = await regenerate(s, r.data!.id);
    expect(refused.response.status).toBe(429);
    expect(refused.error!.type).toMatch(/\/problems\/drafts-allowance-exhausted$/);
    expect((await draftsOf(s.api, d.contactId, true)).map((v) => v.version)).toEqual([1, 2]);
    // An edit takes no allowance, so it still works.
    expect((await edit(s, r.data!.id, { subject: 'Edited without allowance' })).data).toMatchObject({ status: 'EDITED', version: 3 });
  });
});

describe('POST /drafts/{id}/reject', () => {
  it('keeps the reason and shows it on the draft; a rejected draft can be regenerated into a new version to review', async () => {
    const s = await draftingOrg(svc);
    const {
      drafts: [d1, d2],
    } = await generated(s);
    const r = await s.api.POST('/drafts/{id}/reject', {
      params: { path: { id: d1.id } },
      body: { reason: 'Too pushy for a first email.' },
    });
    expect(r.data).toMatchObject({ draftId: d1.id, status: 'rejected' });
    const got = await s.api.GET('/drafts/{id}', { params: { path: { id: d1.id } } });
    expect(got.data).toMatchObject({ status: 'REJECTED', rejectionReason: 'Too pushy for a first email.' });
    // Without a body, as before: no reason.
    expect((await s.api.POST('/drafts/{id}/reject', { params: { path: { id: d2.id } } })).response.status).toBe(200);
    expect((await s.api.GET('/drafts/{id}', { params: { path: { id: d2.id } } })).data!.rejectionReason).toBeNull();
    const again = await regenerate(s, d1.id);
    expect(again.data).toMatchObject({ status: 'REGENERATED', version: 2, rejectionReason: null });
  });
});

describe('GET /drafts filters', () => {
  it('filters by sequenceId, listId and flagged, combined, with keyset paging', async () => {
    const s = await draftingOrg(svc);
    const l = await s.api.POST('/lists', { body: { name: uid('Expo '), useCaseTemplateId: await template(svc, s.org.id) } as never });
    const onList = await Promise.all([0, 1, 2].map(() => contact(s.api, { listId: l.data!.id })));
    expect((await s.api.POST('/lists/{id}/generate', { params: { path: { id: l.data!.id } } })).response.status).toBe(200);
    const other = await generated(s);
    await settle(svc);
    const page = (query: Record<string, string | number>) => s.api.GET('/drafts', { params: { query: query as never } });

    const bySeq = await page({ sequenceId: other.seq.id });
    expect(bySeq.data!.data.map((d) => d.id).sort()).toEqual(other.drafts.map((d) => d.id).sort());
    const byList = await page({ listId: l.data!.id, limit: 4 });
    expect(byList.data!.data).toHaveLength(4);
    const rest = await page({ listId: l.data!.id, limit: 4, cursor: byList.data!.nextCursor! });
    const listed = [...byList.data!.data, ...rest.data!.data];
    expect(listed).toHaveLength(6);
    expect(new Set(listed.map((d) => d.contactId))).toEqual(new Set(onList.map((c) => c.id)));
    expect(rest.data!.nextCursor).toBeNull();
    expect((await page({ listId: uid('lst_') })).data!.data).toEqual([]);

    await system(svc, (trx) => trx.updateTable('drafts').set({ flagged: true }).where('id', '=', listed[1].id).execute());
    expect((await page({ listId: l.data!.id, flagged: 'true' })).data!.data.map((d) => d.id)).toEqual([listed[1].id]);
    expect((await page({ listId: l.data!.id, flagged: 'false' })).data!.data).toHaveLength(5);
    expect((await page({ sequenceId: other.seq.id, flagged: 'true' })).data!.data).toEqual([]);
    expect((await raw(svc.baseUrl, 'GET', '/api/v1/drafts?flagged=yes', { key: s.key })).status).toBe(400);
  });
});

describe('batch decisions', () => {
  it('approves each item independently with its own result; a retry with the same Idempotency-Key replays; one request of the rate limit', async () => {
    const s = await draftingOrg(svc);
    const a = await generated(s, [STEP_ONE]);
    const b = await generated(s, [STEP_ONE]);
    const f = await generated(s, [STEP_ONE]);
    await system(svc, (trx) =>
      trx
        .updateTable('drafts')
        .set({
          flagged: true,
          guardrail: JSON.stringify({
            clean: false,
            attempts: 1,
            repaired: [],
            advisories: [],
            flags: [{ kind: 'offer', sentence: 'Half price.', claims: ['half price'] }],
          }),
        })
        .where('id', '=', f.drafts[0].id)
        .execute(),
    );
    const unknown = uid('drf_');
    const items = [{ id: a.drafts[0].id }, { id: unknown }, { id: f.drafts[0].id }, { id: b.drafts[0].id }];
    const key = uid('idem-');
    const r = await s.api.POST('/drafts/batch/approve', { params: { header: { 'Idempotency-Key': key } }, body: { items } });
    expect(r.response.status).toBe(200);
    const remaining = Number(r.response.headers.get('x-ratelimit-remaining'));
    // The same key and body replays the first answer (one more request of the limit, as any batch).
    const again = await s.api.POST('/drafts/batch/approve', { params: { header: { 'Idempotency-Key': key } }, body: { items } });
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
    expect(again.data).toEqual(r.data);
    expect(Number(again.response.headers.get('x-ratelimit-remaining'))).toBe(remaining - 1);
    expect(r.data).toMatchObject({ succeeded: 2, failed: 2 });
    expect(r.data!.results.map((x) => [x.id, x.status])).toEqual([
      [a.drafts[0].id, 200],
      [unknown, 404],
      [f.drafts[0].id, 400],
      [b.drafts[0].id, 200],
    ]);
    expect(r.data!.results[0].result).toMatchObject({ draftId: a.drafts[0].id, status: 'approved', allApproved: true });
    expect(r.data!.results[2].problem).toMatchObject({
      status: 400,
      type: expect.stringMatching(/validation-failed$/),
      flags: expect.any(Array),
    });
    expect(r.data!.results[1].problem!.instance).toContain(`/drafts/${unknown}/approve#`);
    expect((await s.api.GET('/drafts/{id}', { params: { path: { id: f.drafts[0].id } } })).data!.status).toBe('DRAFT_GENERATED');
    expect((await s.api.GET('/drafts/{id}', { params: { path: { id: b.drafts[0].id } } })).data!.status).toBe('APPROVED');
    expect((await eventsOf(svc, s.org.id, 'draft.approved')).filter((e) => e.resource_type === 'Draft')).toHaveLength(2);

    // Another body with the key is refused.
    const reused = await s.api.POST('/drafts/batch/approve', {
      params: { header: { 'Idempotency-Key': key } },
      body: { items: [items[0]] },
    });
    expect(reused.response.status).toBe(422);
    // The flagged one with its acknowledgement.
    const ack = await s.api.POST('/drafts/batch/approve', { body: { items: [{ id: f.drafts[0].id, acknowledgeFlags: true }] } });
    expect(ack.data).toMatchObject({ succeeded: 1, failed: 0 });
    // More than 500 items, or none, are refused as a whole.
    const tooMany = Array.from({ length: 501 }, () => ({ id: a.drafts[0].id }));
    expect((await s.api.POST('/drafts/batch/approve', { body: { items: tooMany } })).response.status).toBe(400);
    expect((await s.api.POST('/drafts/batch/approve', { body: { items: [] } })).response.status).toBe(400);
  });

  it('rejects with reasons, each item independently', async () => {
    const s = await draftingOrg(svc);
    const a = await generated(s, [STEP_ONE]);
    const b = await generated(s, [STEP_ONE]);
    await approve(s, b.drafts[0].id);
    const r = await s.api.POST('/drafts/batch/reject', {
      body: { items: [{ id: a.drafts[0].id, reason: 'Wrong persona.' }, { id: b.drafts[0].id }] },
    });
    expect(r.data).toMatchObject({ succeeded: 1, failed: 1 });
    expect(r.data!.results[1]).toMatchObject({ status: 400, result: null });
    expect((await s.api.GET('/drafts/{id}', { params: { path: { id: a.drafts[0].id } } })).data).toMatchObject({
      status: 'REJECTED',
      rejectionReason: 'Wrong persona.',
    });
  });

  it('sends: 404 as a whole while the flag is off (the detail names the flag), then queues each item as the single send does', async () => {
    const s = await draftingOrg(svc);
    const a = await generated(s);
    const b = await generated(s, [STEP_ONE]);
    for (const d of [...a.drafts, ...b.drafts]) await approve(s, d.id);
    const single = await s.api.POST('/drafts/{id}/send', { params: { path: { id: a.drafts[0].id } } });
    expect(single.response.status).toBe(404);
    expect(single.error!.detail).toMatch(/No draft with that id, or API sending is not enabled for the organization/);
    const off = await s.api.POST('/drafts/batch/send', { body: { items: [{ id: a.drafts[0].id }] } });
    expect(off.response.status).toBe(404);
    expect(off.error!.detail).toContain('API sending is not enabled');
    expect(await queueOf(s.org.id)).toEqual([]);

    await enableSending(s.org.id);
    const unknown = await s.api.POST('/drafts/{id}/send', { params: { path: { id: uid('drf_') } } });
    expect(unknown.error!.detail).toContain('No draft with that id');
    const r = await s.api.POST('/drafts/batch/send', {
      body: { items: [{ id: a.drafts[0].id }, { id: b.drafts[0].id }, { id: a.drafts[1].id }, { id: uid('drf_') }] },
    });
    expect(r.data!.results.map((x) => [x.status, (x.result as { queuedJobCount?: number } | null)?.queuedJobCount ?? null])).toEqual([
      [200, 2],
      [200, 1],
      [200, 0],
      [404, null],
    ]);
    expect(r.data!.results[2].result).toMatchObject({ queued: false, skippedReason: 'already_queued' });
    expect(r.data).toMatchObject({ succeeded: 3, failed: 1 });
  });
});

describe('a 485-contact list reviewed at volume', () => {
  it('generates 485 drafts, then reads, approves and sends them all in at most 10 requests', async () => {
    const s = await draftingOrg(svc);
    await enableSending(s.org.id);
    const l = await s.api.POST('/lists', {
      body: { name: uid('Conference '), useCaseTemplateId: await template(svc, s.org.id, [STEP_ONE]) } as never,
    });
    const listId = l.data!.id;
    await system(svc, (trx) =>
      trx
        .insertInto('contacts')
        .values(
          Array.from({ length: 485 }, (_, i) => {
            const email = uniqueEmail(`bulk${i}`);
            return { organization_id: s.org.id, id: newId('con'), list_id: listId, email, email_normalized: email, name: `Person ${i}` };
          }),
        )
        .execute(),
    );
    expect((await s.api.POST('/lists/{id}/generate', { params: { path: { id: listId } } })).data).toMatchObject({ generationQueued: true });
    await settle(svc, 120_000);

    // The review, counted request by request from here on.
    let requests = 0;
    const api = svc.api(s.key);
    api.use({
      onRequest() {
        requests += 1;
        return undefined;
      },
    });
    const ids: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await api.GET('/drafts', { params: { query: { listId, limit: 200, ...(cursor ? { cursor } : {}) } } });
      ids.push(...page.data!.data.map((d) => d.id));
      cursor = page.data!.nextCursor ?? undefined;
    } while (cursor);
    expect(ids).toHaveLength(485);
    const approved = await api.POST('/drafts/batch/approve', { body: { items: ids.map((id) => ({ id })) } });
    expect(approved.data).toMatchObject({ succeeded: 485, failed: 0 });
    const sent = await api.POST('/drafts/batch/send', { body: { items: ids.map((id) => ({ id })) } });
    expect(sent.data).toMatchObject({ succeeded: 485, failed: 0 });
    expect(sent.data!.results.every((x) => (x.result as { queued: boolean }).queued)).toBe(true);
    console.log(`485-draft review after generation: ${requests} requests`);
    expect(requests).toBeLessThanOrEqual(10);
    const queued = await system(svc, (trx) =>
      trx
        .selectFrom('send_queue')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('organization_id', '=', s.org.id)
        .executeTakeFirstOrThrow(),
    );
    expect(Number(queued.n)).toBe(485);
  }, 240_000);
});
