import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/platform/ids.js';
import { eventsOf, system, uid, uniqueEmail } from './crm-support.js';
import { contact, type DraftingOrg, draftingOrg, draftsOf, product, STEP_ONE, sequence, settle, template } from './drafting-support.js';
import { raw, startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

async function list(s: DraftingOrg, body: Record<string, unknown>) {
  const r = await s.api.POST('/lists', { body: { name: uid('Outbound '), ...body } as never });
  expect(r.response.status).toBe(201);
  return r.data!;
}
const generate = (s: DraftingOrg, id: string, body?: { regenerate?: boolean }) =>
  s.api.POST('/lists/{id}/generate', { params: { path: { id } }, ...(body ? { body } : {}) });
const getRun = (s: DraftingOrg, id: string, runId: string) =>
  s.api.GET('/lists/{id}/generation-runs/{runId}', { params: { path: { id, runId } } });
const runOf = (orgId: string, id: string) =>
  system(svc, (trx) =>
    trx.selectFrom('list_generation_runs').selectAll().where('organization_id', '=', orgId).where('id', '=', id).executeTakeFirstOrThrow(),
  );

describe('POST /lists/{id}/generate', () => {
  it("runs over the list's own contacts, skipping suppressed, do-not-contact and colliding ones under their reasons, answers a no-op while in flight, and is readable queued and completed", async () => {
    const s = await draftingOrg(svc);
    const [p1, p2] = [await product(svc, s.org.id), await product(svc, s.org.id)];
    const tpl = await template(svc, s.org.id, [STEP_ONE]);
    const l = await list(s, { useCaseTemplateId: tpl, productId: p1 });
    const own = [await contact(s.api, { listId: l.id }), await contact(s.api, { listId: l.id }), await contact(s.api, { listId: l.id })];
    const suppressed = await contact(s.api, { listId: l.id });
    await s.api.POST('/suppression', { body: { email: suppressed.email, reason: 'asked' } });
    const busy = await contact(s.api, { listId: l.id });
    await sequence(s.api, busy.id, await template(svc, s.org.id, [STEP_ONE], p2));
    const elsewhere = await contact(s.api);
    await s.api.POST('/contacts', { body: { email: elsewhere.email, listId: l.id } }); // attached, not own
    const dnc = await contact(s.api, { listId: l.id });
    await system(svc, (trx) => sql`UPDATE contacts SET tags = '{Do-Not-Contact}' WHERE id = ${dnc.id}`.execute(trx));

    const first = await generate(s, l.id);
    expect(first.response.status).toBe(200);
    expect(first.data).toEqual({
      listId: l.id,
      runId: expect.stringMatching(/^lgr_/),
      generationQueued: true,
      chunkCount: 1,
      totalContacts: 6,
      // One step for each of the three contacts it drafts for (not the suppressed, do-not-contact or colliding ones).
      draftsToWrite: 3,
      allowanceRemaining: 1_000,
    });
    const again = await generate(s, l.id);
    expect(again.data).toEqual({ listId: l.id, runId: first.data!.runId, generationQueued: false, generationRunning: true });
    // Readable before any chunk began (the worker is not running yet): queued.
    const queued = await getRun(s, l.id, first.data!.runId);
    expect(queued.response.status).toBe(200);
    expect(queued.data).toEqual({
      id: first.data!.runId,
      listId: l.id,
      state: 'queued',
      regenerate: false,
      totalContacts: 6,
      chunkCount: 1,
      chunksDone: 0,
      draftsToWrite: 3,
      allowanceRemaining: 1_000,
      sequencesCreated: 0,
      sequencesReused: 0,
      draftsGenerated: 0,
      draftsFailed: 0,
      failedReasons: {},
      skipped: { suppressed: 0, doNotContact: 0, productCollision: 0, contactUnavailable: 0, sequenceActive: 0, liveDraft: 0 },
      allowanceUsed: 0,
      createdAt: expect.any(String),
      startedAt: null,
      finishedAt: null,
    });

    await svc.startWorker();
    await settle(svc);
    const done = (await getRun(s, l.id, first.data!.runId)).data!;
    expect(done).toMatchObject({
      state: 'completed',
      chunksDone: 1,
      sequencesCreated: 3,
      sequencesReused: 0,
      draftsGenerated: 3,
      draftsFailed: 0,
      // Each skipped contact under its reason.
      skipped: { suppressed: 1, doNotContact: 1, productCollision: 1, contactUnavailable: 0, sequenceActive: 0, liveDraft: 0 },
      allowanceUsed: 3,
      startedAt: expect.any(String),
      finishedAt: expect.any(String),
    });
    // The latest run is the first of the list's runs.
    const runs = await s.api.GET('/lists/{id}/generation-runs', { params: { path: { id: l.id } } });
    expect(runs.data).toEqual({ data: [done], nextCursor: null });
    // Unknown run, another list's run, another organization: 404.
    const otherList = await list(s, {});
    expect((await getRun(s, l.id, 'lgr_000000000000000000000000')).response.status).toBe(404);
    expect((await getRun(s, otherList.id, first.data!.runId)).response.status).toBe(404);
    const stranger = await draftingOrg(svc);
    expect((await getRun(stranger, l.id, first.data!.runId)).response.status).toBe(404);
    expect((await stranger.api.GET('/lists/{id}/generation-runs', { params: { path: { id: l.id } } })).response.status).toBe(404);
    for (const c of own) {
      const [d] = await draftsOf(s.api, c.id);
      expect(d).toMatchObject({ status: 'DRAFT_GENERATED', step: 1 });
    }
    expect(await draftsOf(s.api, suppressed.id)).toEqual([]);
    expect(await draftsOf(s.api, dnc.id)).toEqual([]);
    expect((await s.api.GET('/sequences', { params: { query: { contactId: busy.id } } })).data!.data).toHaveLength(1);
    expect((await s.api.GET('/sequences', { params: { query: { contactId: elsewhere.id } } })).data!.data).toEqual([]);
    const generated = await s.api.GET('/drafts', { params: { query: { status: 'DRAFT_GENERATED' } } });
    expect(generated.data!.data.filter((d) => own.some((c) => c.id === d.contactId))).toHaveLength(3);
  });

  it("emits the list-level draft.approved once the run's drafts are all approved; a re-run regenerates only what was not approved", async () => {
    const s = await draftingOrg(svc);
    const l = await list(s, { useCaseTemplateId: await template(svc, s.org.id, [STEP_ONE]) });
    const cs = [await contact(s.api, { listId: l.id }), await contact(s.api, { listId: l.id }), await contact(s.api, { listId: l.id })];
    const run = (await generate(s, l.id)).data!;
    await settle(svc);
    const drafts = (await Promise.all(cs.map((c) => draftsOf(s.api, c.id)))).map((d) => d[0]);
    for (const d of drafts) await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
    const listLevel = (await eventsOf(svc, s.org.id, 'draft.approved')).filter((e) => e.resource_type === 'ContactList');
    expect(listLevel).toHaveLength(1);
    expect(listLevel[0]).toMatchObject({ resource_id: l.id, data: { listId: l.id, generationRunId: run.runId, approvedCount: 3 } });

    // A re-run asked to regenerate: the reused sequences keep their approved drafts; a rejected one is written anew.
    await system(svc, (trx) => sql`UPDATE drafts SET status = 'REJECTED' WHERE id = ${drafts[2].id}`.execute(trx));
    const rerun = (await generate(s, l.id, { regenerate: true })).data!;
    expect(rerun).toMatchObject({ generationQueued: true, totalContacts: 3 });
    await settle(svc);
    expect(await runOf(s.org.id, rerun.runId)).toMatchObject({
      sequences_created: 0,
      sequences_reused: 3,
      drafts_generated: 1,
      status: 'completed',
    });
    const after = await draftsOf(s.api, cs[2].id, true);
    expect(after.map((d) => [d.version, d.status, d.supersededAt === null])).toEqual([
      [1, 'REJECTED', false],
      [2, 'REGENERATED', true],
    ]);
    expect((await draftsOf(s.api, cs[0].id, true)).map((d) => d.status)).toEqual(['APPROVED']);
  });

  it('a repeated call writes only the missing drafts and spends no allowance on the others, unless asked to regenerate', async () => {
    const s = await draftingOrg(svc);
    const l = await list(s, { useCaseTemplateId: await template(svc, s.org.id, [STEP_ONE]) });
    const cs = [await contact(s.api, { listId: l.id }), await contact(s.api, { listId: l.id })];
    const held = await contact(s.api, { listId: l.id });
    await s.api.POST('/suppression', { body: { email: held.email, reason: 'asked' } });
    expect((await generate(s, l.id)).data).toMatchObject({ generationQueued: true, draftsToWrite: 2 });
    await settle(svc);
    const [rejected] = await draftsOf(s.api, cs[1].id);
    await s.api.POST('/drafts/{id}/reject', { params: { path: { id: rejected.id } } });
    const used = async () => (await s.api.GET('/usage')).data!.drafts;
    const before = await used();
    expect(before).toMatchObject({ created: 2, regenerated: 0 });

    // The suppression lifted and a contact added: the repeated call writes their drafts only.
    await system(svc, (trx) => sql`DELETE FROM suppression_entries WHERE organization_id = ${s.org.id}`.execute(trx));
    const added = await contact(s.api, { listId: l.id });
    const again = await generate(s, l.id);
    expect(again.data).toMatchObject({ generationQueued: true, totalContacts: 4, draftsToWrite: 2, allowanceRemaining: before.remaining });
    await settle(svc);
    expect((await getRun(s, l.id, again.data!.runId)).data).toMatchObject({
      state: 'completed',
      regenerate: false,
      sequencesCreated: 2,
      sequencesReused: 2,
      draftsGenerated: 2,
      skipped: { suppressed: 0, liveDraft: 2 },
      allowanceUsed: 2,
    });
    expect(await used()).toMatchObject({ created: 4, regenerated: 0, remaining: before.remaining - 2 });
    for (const c of [held, added]) expect((await draftsOf(s.api, c.id, true)).map((d) => d.status)).toEqual(['DRAFT_GENERATED']);
    expect((await draftsOf(s.api, cs[0].id, true)).map((d) => d.version)).toEqual([1]);
    expect((await draftsOf(s.api, cs[1].id, true)).map((d) => d.status)).toEqual(['REJECTED']);

    // Asked to regenerate: every live draft not approved is written anew, and counted.
    const regen = await generate(s, l.id, { regenerate: true });
    expect(regen.data).toMatchObject({ generationQueued: true, draftsToWrite: 4 });
    await settle(svc);
    expect((await getRun(s, l.id, regen.data!.runId)).data).toMatchObject({ regenerate: true, draftsGenerated: 4, allowanceUsed: 4 });
    expect(await used()).toMatchObject({ created: 4, regenerated: 4 });
    expect((await generate(s, l.id, { regenerate: 'yes' } as never)).response.status).toBe(400);
  });

  it('a run that would exceed the allowance is not started: 200 with the figures, recorded not_started, nothing written', async () => {
    const s = await draftingOrg(svc);
    const l = await list(s, { useCaseTemplateId: await template(svc, s.org.id, [STEP_ONE]) });
    for (let i = 0; i < 3; i++) await contact(s.api, { listId: l.id });
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { draftsPerMonth: 2 } });
    const r = await generate(s, l.id);
    expect(r.response.status).toBe(200);
    expect(r.data).toEqual({
      listId: l.id,
      runId: expect.stringMatching(/^lgr_/),
      generationQueued: false,
      allowanceExceeded: true,
      draftsToWrite: 3,
      allowanceRemaining: 2,
    });
    expect((await getRun(s, l.id, r.data!.runId)).data).toMatchObject({
      state: 'not_started',
      totalContacts: 3,
      chunkCount: 0,
      draftsToWrite: 3,
      allowanceRemaining: 2,
      draftsGenerated: 0,
      allowanceUsed: 0,
      startedAt: null,
      finishedAt: expect.any(String),
    });
    await settle(svc);
    expect((await s.api.GET('/drafts')).data!.data).toEqual([]);
    expect((await s.api.GET('/usage')).data!.drafts).toMatchObject({ created: 0, remaining: 2 });
    // The list is not held: within the allowance a run starts.
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { draftsPerMonth: 3 } });
    expect((await generate(s, l.id)).data).toMatchObject({ generationQueued: true, draftsToWrite: 3, allowanceRemaining: 3 });
    await settle(svc);
    const runs = (await s.api.GET('/lists/{id}/generation-runs', { params: { path: { id: l.id } } })).data!.data;
    expect(runs.map((x) => x.state)).toEqual(['completed', 'not_started']);
  });

  it('splits a large list into chunks of 100 and generates them all', async () => {
    const s = await draftingOrg(svc);
    const l = await list(s, { useCaseTemplateId: await template(svc, s.org.id, [STEP_ONE]) });
    await system(svc, (trx) =>
      trx
        .insertInto('contacts')
        .values(
          Array.from({ length: 250 }, (_, i) => {
            const email = uniqueEmail(`bulk${i}`);
            return { organization_id: s.org.id, id: newId('con'), list_id: l.id, email, email_normalized: email, name: `Person ${i}` };
          }),
        )
        .execute(),
    );
    const r = await generate(s, l.id);
    expect(r.data).toMatchObject({ generationQueued: true, chunkCount: 3, totalContacts: 250 });
    await settle(svc, 60_000);
    expect(await runOf(s.org.id, r.data!.runId)).toMatchObject({ status: 'completed', sequences_created: 250, drafts_generated: 250 });
    const n = await system(svc, (trx) =>
      trx
        .selectFrom('drafts')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('organization_id', '=', s.org.id)
        .executeTakeFirstOrThrow(),
    );
    expect(Number(n.n)).toBe(250);
  });

  it('uses a public template, and refuses: 404 unknown, foreign or deleted list; 403 free plan; 400 no template; 400 no contacts of its own', async () => {
    const s = await draftingOrg(svc);
    const pub = await svc.admin.POST('/public-templates', {
      body: { name: uid('Pub '), useCase: uid('uc'), industry: 'software', steps: [STEP_ONE] },
    });
    const withPublic = await list(s, { useCaseTemplateId: pub.data!.id });
    const c = await contact(s.api, { listId: withPublic.id });
    expect((await generate(s, withPublic.id)).data).toMatchObject({ generationQueued: true, totalContacts: 1 });
    await settle(svc);
    expect((await draftsOf(s.api, c.id)).map((d) => d.status)).toEqual(['DRAFT_GENERATED']);

    const other = await draftingOrg(svc);
    expect((await generate(other, withPublic.id)).response.status).toBe(404);
    expect((await raw(svc.baseUrl, 'POST', '/api/v1/lists/lst_000000000000000000000000/generate', { key: s.key })).status).toBe(404);
    // A list without a template uses the built-in sequence: a first touch written from its
    // connection point, a follow-up and a break-up. Signed by nobody yet: the organization's owner
    // still has its generated name and the deployment sender is no person, so only the
    // organization signs, and the sentence that would name the sender is left out.
    const bare = await list(s, { connectionPoint: 'We met at the Austin Space Summit in October' });
    const bc = await contact(s.api, { listId: bare.id, name: 'Rae Lind' });
    expect((await generate(s, bare.id)).data).toMatchObject({ generationQueued: true, totalContacts: 1 });
    await settle(svc);
    const { name: orgName } = await system(svc, (trx) =>
      trx.selectFrom('organizations').select('name').where('id', '=', s.org.id).executeTakeFirstOrThrow(),
    );
    const bodies = [];
    for (const d of await draftsOf(s.api, bc.id))
      bodies.push((await s.api.GET('/drafts/{id}', { params: { path: { id: d.id } } })).data!.body);
    expect(bodies).toEqual([
      `Hi Rae,\n\nWe met at the Austin Space Summit in October.\n\nWould you be open to a 15-minute call next week?\n\nBest regards,\n${orgName}`,
      `Hi Rae,\n\nI'm following up on my note from a few days ago in case it got buried.\n\nIf a call is too much right now, I can send a short overview you can read in two minutes. Would that be useful?\n\nBest,\n${orgName}`,
      `Hi Rae,\n\nI haven't heard back, so I'll assume the timing isn't right and won't keep writing.\n\nIf that changes, just reply to this email and I'll pick it up from there.\n\nAll the best,\n${orgName}`,
    ]);
    const seq = (await s.api.GET('/sequences', { params: { query: { contactId: bc.id } } })).data!.data[0];
    expect(seq).toMatchObject({ templateId: 'builtin-sequence', mailboxId: 'deployment' });
    // Once the operator names the owner, a re-run asked to regenerate signs with the person (the deployment sender is no person).
    await svc.admin.PATCH('/organizations/{orgId}/users/{userId}', {
      params: { path: { orgId: s.org.id, userId: s.org.ownerId } },
      body: { name: 'Sam Lee', title: 'Head of Sales' },
    });
    await generate(s, bare.id, { regenerate: true });
    await settle(svc);
    const [again] = await draftsOf(s.api, bc.id);
    const signed = (await s.api.GET('/drafts/{id}', { params: { path: { id: again.id } } })).data!;
    expect(signed).toMatchObject({ version: 2, status: 'REGENERATED' });
    expect(signed.body).toBe(
      `Hi Rae,\n\nWe met at the Austin Space Summit in October.\n\nI'm Sam from ${orgName}.\n\nWould you be open to a 15-minute call next week?\n\nBest regards,\nSam Lee\nHead of Sales\n${orgName}`,
    );
    // A template that is no longer active is refused.
    const gone = await svc.admin.POST('/public-templates', {
      body: { name: uid('Pub '), useCase: uid('uc'), industry: null, steps: [STEP_ONE], active: false },
    });
    const stale = await system(svc, (trx) =>
      trx
        .insertInto('contact_lists')
        .values({ organization_id: s.org.id, id: newId('lst'), name: 'Stale', use_case_template_id: gone.data!.id })
        .returning('id')
        .executeTakeFirstOrThrow(),
    );
    await contact(s.api, { listId: stale.id });
    const noTemplate = await generate(s, stale.id);
    expect(noTemplate.response.status).toBe(400);
    expect(noTemplate.error?.type).toMatch(/list-template-unavailable$/);
    const attachedOnly = await list(s, { useCaseTemplateId: pub.data!.id });
    await s.api.POST('/contacts', { body: { email: c.email, listId: attachedOnly.id } });
    const empty = await generate(s, attachedOnly.id);
    expect(empty.response.status).toBe(400);
    expect(empty.error?.type).toMatch(/validation-failed$/);
    await s.api.DELETE('/lists/{id}', { params: { path: { id: attachedOnly.id } } });
    expect((await generate(s, attachedOnly.id)).response.status).toBe(404);
    const free = await draftingOrg(svc, 'free');
    const fl = await list(free, { useCaseTemplateId: pub.data!.id });
    await contact(free.api, { listId: fl.id });
    const refused = await generate(free, fl.id);
    expect(refused.response.status).toBe(403);
    expect(refused.error?.type).toMatch(/not-entitled$/);
    expect(
      await system(svc, (trx) =>
        trx.selectFrom('list_generation_runs').select('id').where('organization_id', 'in', [free.org.id, other.org.id]).execute(),
      ),
    ).toEqual([]);
  });
});
