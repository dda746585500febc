// Deal stages: default seeding, stage moves, gates, history, and the periodic deal sweep.

import { parseCrontab } from 'graphile-worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withOrg } from '../db/database.js';
import { runDealSweep } from '../src/deals/sweep.js';
import type { SystemDeps } from '../src/platform/services.js';
import { CRONTAB } from '../src/tasks/index.js';
import { type DealOrg, dealOrg, eventsOf, insertContact, utcDate } from './deal-support.js';
import { ALL_SCOPES, setClock, startService, type TestService } from './support/harness.js';
import { waitFor } from './support/wait.js';

let svc: TestService;
let deps: SystemDeps;
beforeAll(async () => {
  svc = await startService();
  deps = { db: svc.rt.workerDb, systemDb: svc.rt.systemDb, config: svc.rt.config, services: svc.rt.services, log: svc.rt.log };
});
afterAll(async () => {
  await svc?.close();
});

async function create(o: DealOrg, body: Record<string, unknown> = {}) {
  const r = await o.api.POST('/deals', { body: { name: 'Pipeline deal', ...body } as never });
  if (r.response.status !== 200) throw new Error(`POST /deals ${r.response.status}: ${JSON.stringify(r.error)}`);
  return r.data!;
}

/** An organization whose board is open (default stages seeded by a first stage-less deal). */
async function boardOrg(): Promise<DealOrg> {
  const o = await dealOrg(svc);
  await create(o, { name: 'Opener' });
  return o;
}

function move(o: DealOrg, id: string, body: Record<string, unknown>) {
  return o.api.POST('/deals/{id}/stage', { params: { path: { id } }, body: body as never });
}

const getDeal = async (o: DealOrg, id: string) => (await o.api.GET('/deals/{id}', { params: { path: { id } } })).data!;
const historyOf = async (o: DealOrg, id: string) =>
  (await o.api.GET('/deals/{id}/history', { params: { path: { id }, query: { limit: 200 } } })).data!.data;

/** A deal that meets every gate: value, primary contact and close date. */
async function qualified(o: DealOrg, extra: Record<string, unknown> = {}) {
  const contact = await insertContact(svc, o.id);
  return create(o, { valueCents: 50_000, closeDate: utcDate(30), primaryContactId: contact, ...extra });
}

describe('GET /deal-stages', () => {
  it('is empty for a new organization and never seeds', async () => {
    const o = await dealOrg(svc);
    for (let i = 0; i < 2; i += 1) {
      const r = await o.api.GET('/deal-stages');
      expect(r.response.status).toBe(200);
      expect(r.data).toEqual({ data: [] });
    }
  });

  it('lists the seven default stages, ordered by sortOrder, after the first stage-less deal', async () => {
    const o = await dealOrg(svc);
    const d = await create(o);
    const stages = (await o.api.GET('/deal-stages')).data!.data;
    expect(stages.map(({ slug, name, sortOrder, category, isTerminal }) => [slug, name, sortOrder, category, isTerminal])).toEqual([
      ['prospecting', 'Prospecting', 1, 'active', false],
      ['qualification', 'Qualification', 2, 'active', false],
      ['discovery', 'Discovery', 3, 'active', false],
      ['proposal', 'Proposal', 4, 'active', false],
      ['negotiation', 'Negotiation', 5, 'active', false],
      ['closed_won', 'Closed won', 6, 'closed_won', true],
      ['closed_lost', 'Closed lost', 7, 'closed_lost', true],
    ]);
    expect(d.stageId).toBe(stages[0].id);
    // A second stage-less deal seeds nothing more.
    await create(o);
    expect((await o.api.GET('/deal-stages')).data!.data).toEqual(stages);
    // Another organization still has none.
    const other = await dealOrg(svc);
    expect((await other.api.GET('/deal-stages')).data!.data).toEqual([]);
  });

  it('seeds once when the first deals of an organization arrive concurrently', async () => {
    const o = await dealOrg(svc);
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => o.api.POST('/deals', { body: { name: `Race ${i}` } })));
    expect(results.map((r) => r.response.status)).toEqual(Array(8).fill(200));
    const stages = (await o.api.GET('/deal-stages')).data!.data;
    expect(stages).toHaveLength(7);
    expect(new Set(results.map((r) => r.data!.stageId))).toEqual(new Set([stages[0].id]));
  });
});

describe('POST /deals/{id}/stage', () => {
  it('moves by slug or id, answers {dealId, stage, stageId, warnings}, writes history and emits deal.stage_changed', async () => {
    const o = await dealOrg(svc);
    const d = await create(o);
    const stages = (await o.api.GET('/deal-stages')).data!.data;
    const r = await move(o, d.id, { stage: 'qualification', reason: 'Budget confirmed', reasonChips: ['budget'] });
    expect(r.response.status).toBe(200);
    expect(r.data).toEqual({ dealId: d.id, stage: 'qualification', stageId: stages[1].id, warnings: [] });
    const r2 = await move(o, d.id, { stageId: stages[2].id });
    expect(r2.data).toEqual({ dealId: d.id, stage: 'discovery', stageId: stages[2].id, warnings: [] });
    const after = await getDeal(o, d.id);
    expect(after).toMatchObject({ stageId: stages[2].id, stageSlug: 'discovery', stageName: 'Discovery', forecastCategory: 'pipeline' });
    const hist = await historyOf(o, d.id);
    expect(hist.map((h) => [h.fromStageName, h.toStageName, h.reason, h.transitionedBy])).toEqual([
      ['Qualification', 'Discovery', null, o.ownerId],
      ['Prospecting', 'Qualification', 'Budget confirmed', o.ownerId],
      [null, 'Prospecting', null, o.ownerId],
    ]);
    expect(hist[1]).toMatchObject({ dealId: d.id, fromStageId: stages[0].id, toStageId: stages[1].id });
    const chips = await withOrg(svc.rt.db, o.id, (trx) =>
      trx.selectFrom('deal_stage_history').select('reason_chips').where('id', '=', hist[1].id).executeTakeFirstOrThrow(),
    );
    expect(chips.reason_chips).toEqual(['budget']);
    // Moves between open stages close nothing.
    expect(await eventsOf(svc, o.id, 'deal.won')).toEqual([]);
    expect(await eventsOf(svc, o.id, 'deal.lost')).toEqual([]);
    const events = await eventsOf(svc, o.id, 'deal.stage_changed');
    expect(events.map((e) => e.data)).toEqual([
      {
        dealId: d.id,
        dealName: 'Pipeline deal',
        fromStageId: stages[0].id,
        fromStage: 'prospecting',
        toStageId: stages[1].id,
        stage: 'qualification',
      },
      {
        dealId: d.id,
        dealName: 'Pipeline deal',
        fromStageId: stages[1].id,
        fromStage: 'qualification',
        toStageId: stages[2].id,
        stage: 'discovery',
      },
    ]);
    expect(events[0]).toMatchObject({ resource_type: 'Deal', resource_id: d.id });
  });

  it('records the key id as transitionedBy for an unattributed key', async () => {
    const o = await dealOrg(svc);
    const d = await create(o);
    const { id: keyId, key } = await o.org.keyWithId(ALL_SCOPES);
    const r = await svc.api(key).POST('/deals/{id}/stage', { params: { path: { id: d.id } }, body: { stage: 'qualification' } });
    expect(r.response.status).toBe(200);
    expect((await historyOf(o, d.id))[0].transitionedBy).toBe(keyId);
  });

  it('refuses unknown, missing, conflicting and same-stage targets with 400 and changes nothing', async () => {
    const o = await dealOrg(svc);
    const d = await create(o);
    const stages = (await o.api.GET('/deal-stages')).data!.data;
    const cases: [Record<string, unknown>, string][] = [
      [{ stage: 'no-such-stage' }, 'unknown-stage'],
      [{ stageId: 'stg_nope' }, 'unknown-stage'],
      [{ reason: 'no target' }, 'validation-failed'],
      [{}, 'validation-failed'],
      [{ stage: 'discovery', stageId: stages[1].id }, 'validation-failed'],
      [{ stage: 'prospecting' }, 'stage-transition-not-allowed'],
      [{ stage: 'discovery', colour: 'x' }, 'validation-failed'],
      [{ stage: 'discovery', reasonChips: Array(11).fill('x') }, 'validation-failed'],
      [{ stage: 'discovery', reason: '' }, 'validation-failed'],
    ];
    for (const [body, slug] of cases) {
      const r = await move(o, d.id, body);
      expect(r.response.status, JSON.stringify(body)).toBe(400);
      expect(r.error?.type).toMatch(new RegExp(`/problems/${slug}$`));
    }
    expect(await getDeal(o, d.id)).toEqual(d);
    expect(await historyOf(o, d.id)).toHaveLength(1);
    expect(await eventsOf(svc, o.id, 'deal.stage_changed')).toHaveLength(0);
    // Another organization's deal, or a stage of another organization.
    const other = await dealOrg(svc);
    const theirs = await create(other);
    expect((await move(o, theirs.id, { stage: 'qualification' })).response.status).toBe(404);
    const theirStage = (await other.api.GET('/deal-stages')).data!.data[1];
    expect((await move(o, d.id, { stageId: theirStage.id })).response.status).toBe(400);
  });

  it('value-required blocks commit and won moves without a value (422), passes with overrideReason and records it', async () => {
    const o = await boardOrg();
    const contact = await insertContact(svc, o.id);
    const d = await create(o, { primaryContactId: contact, closeDate: utcDate(20), stage: 'proposal' });
    for (const stage of ['negotiation', 'closed_won']) {
      const r = await move(o, d.id, { stage, reason: 'Verbal yes' });
      expect(r.response.status).toBe(422);
      expect(r.error).toMatchObject({ gate: 'value-required', gateMode: 'block', needsOverride: true, status: 422 });
      expect(r.error?.type).toMatch(/stage-gate-blocked$/);
    }
    expect((await getDeal(o, d.id)).stageSlug).toBe('proposal');
    expect(await historyOf(o, d.id)).toHaveLength(1);
    const ok = await move(o, d.id, { stage: 'negotiation', reason: 'Verbal yes', overrideReason: 'Value pending legal' });
    expect(ok.response.status).toBe(200);
    expect((await historyOf(o, d.id))[0].reason).toBe('override: Value pending legal; Verbal yes');
    expect((await getDeal(o, d.id)).forecastCategory).toBe('commit');
    // With a value, no override is needed (and an unneeded overrideReason is ignored).
    const v = await qualified(o, { stage: 'proposal' });
    const free = await move(o, v.id, { stage: 'negotiation', reason: 'Pricing agreed', overrideReason: 'not needed' });
    expect(free.response.status).toBe(200);
    expect((await historyOf(o, v.id))[0].reason).toBe('Pricing agreed');
  });

  it('qualification-required blocks late active stages and won without contact and close date, never lost', async () => {
    const o = await boardOrg();
    const d = await create(o, { valueCents: 1000, stage: 'discovery' });
    const r = await move(o, d.id, { stage: 'proposal' });
    expect(r.response.status).toBe(422);
    expect(r.error).toMatchObject({ gate: 'qualification-required', gateMode: 'block', needsOverride: true });
    expect(r.error?.detail).toContain('primaryContactId and closeDate');
    const won = await move(o, d.id, { stage: 'closed_won' });
    expect(won.error).toMatchObject({ gate: 'qualification-required' });
    // Early stages are not gated.
    expect((await move(o, d.id, { stage: 'qualification' })).response.status).toBe(200);
    // Setting the fields meets the gate.
    await o.api.PATCH('/deals/{id}', {
      params: { path: { id: d.id } },
      body: { primaryContactId: await insertContact(svc, o.id), closeDate: utcDate(10) },
    });
    expect((await move(o, d.id, { stage: 'proposal' })).response.status).toBe(200);
    // A bare deal can always be marked lost with a reason.
    const bare = await create(o);
    const lost = await move(o, bare.id, { stage: 'closed_lost', reason: 'No budget' });
    expect(lost.response.status).toBe(200);
    expect(lost.data!.warnings).toEqual([]);
  });

  it('value-required is checked before qualification-required', async () => {
    const o = await dealOrg(svc);
    const d = await create(o);
    const r = await move(o, d.id, { stage: 'closed_won' });
    expect(r.error).toMatchObject({ gate: 'value-required' });
    const ok = await move(o, d.id, { stage: 'closed_won', overrideReason: 'Signed on paper' });
    expect(ok.response.status).toBe(200);
    expect((await historyOf(o, d.id))[0].reason).toBe('override: Signed on paper');
  });

  it('skip-stages warns on a forward jump over more than two active stages', async () => {
    const o = await dealOrg(svc);
    const d = await qualified(o);
    const jump = await move(o, d.id, { stage: 'proposal' });
    expect(jump.response.status).toBe(200);
    expect(jump.data!.warnings).toEqual(['skip-stages']);
    const back = await move(o, d.id, { stage: 'prospecting' });
    expect(back.data!.warnings).toEqual([]);
    const two = await move(o, d.id, { stage: 'discovery' });
    expect(two.data!.warnings).toEqual([]);
  });

  it('closing as won sets actualCloseDate and forecastCategory and emits deal.won with dealId and dealName', async () => {
    const clock = setClock(svc, '2030-06-30T12:00:00Z');
    const day = (n: number) => utcDate(n, clock.now());
    const o = await boardOrg();
    const d = await qualified(o, { name: 'Big win', stage: 'negotiation' });
    const r = await move(o, d.id, { stage: 'closed_won' });
    expect(r.response.status).toBe(200);
    expect(await getDeal(o, d.id)).toMatchObject({
      stageSlug: 'closed_won',
      actualCloseDate: day(0),
      forecastCategory: 'closed_won',
      lossReason: null,
    });
    expect((await eventsOf(svc, o.id, 'deal.won')).map((e) => e.data)).toEqual([{ dealId: d.id, dealName: 'Big win', valueCents: 50_000 }]);
    expect(await eventsOf(svc, o.id, 'deal.lost')).toHaveLength(0);
  });

  it('closing as lost needs a reason, stores it as lossReason and emits deal.lost', async () => {
    const clock = setClock(svc, '2030-07-01T12:00:00Z');
    const day = (n: number) => utcDate(n, clock.now());
    const o = await dealOrg(svc);
    const d = await create(o, { name: 'Lost one' });
    for (const body of [{ stage: 'closed_lost' }, { stage: 'closed_lost', reason: '   ' }, { stage: 'closed_lost', overrideReason: 'x' }]) {
      const r = await move(o, d.id, body);
      expect(r.response.status).toBe(400);
      expect(r.error?.type).toMatch(/reason-required$/);
    }
    const r = await move(o, d.id, { stage: 'closed_lost', reason: 'Chose a competitor', reasonChips: ['competitor'] });
    expect(r.response.status).toBe(200);
    expect(await getDeal(o, d.id)).toMatchObject({
      stageSlug: 'closed_lost',
      actualCloseDate: day(0),
      forecastCategory: 'closed_lost',
      lossReason: 'Chose a competitor',
    });
    expect((await eventsOf(svc, o.id, 'deal.lost')).map((e) => e.data)).toEqual([
      { dealId: d.id, dealName: 'Lost one', lossReason: 'Chose a competitor' },
    ]);
    expect(await eventsOf(svc, o.id, 'deal.won')).toEqual([]);
  });

  it('refuses leaving a closed stage without a reason; with one it reopens the deal', async () => {
    const o = await dealOrg(svc);
    const d = await qualified(o);
    await move(o, d.id, { stage: 'closed_lost', reason: 'Went dark' });
    const refused = await move(o, d.id, { stage: 'negotiation' });
    expect(refused.response.status).toBe(400);
    expect(refused.error?.type).toMatch(/stage-transition-not-allowed$/);
    const toWon = await move(o, d.id, { stage: 'closed_won' });
    expect(toWon.error?.type).toMatch(/stage-transition-not-allowed$/);
    const reopened = await move(o, d.id, { stage: 'negotiation', reason: 'Back from the dead' });
    expect(reopened.response.status).toBe(200);
    expect(await getDeal(o, d.id)).toMatchObject({
      stageSlug: 'negotiation',
      actualCloseDate: null,
      lossReason: null,
      forecastCategory: 'commit',
    });
    expect(await eventsOf(svc, o.id, 'deal.won')).toEqual([]);
    expect(await eventsOf(svc, o.id, 'deal.lost')).toHaveLength(1);
    // Won to lost with a reason: lossReason set, deal.lost emitted.
    await move(o, d.id, { stage: 'closed_won' });
    const flipped = await move(o, d.id, { stage: 'closed_lost', reason: 'Contract rescinded' });
    expect(flipped.response.status).toBe(200);
    expect((await getDeal(o, d.id)).lossReason).toBe('Contract rescinded');
    expect((await eventsOf(svc, o.id, 'deal.won')).map((e) => e.data.dealId)).toEqual([d.id]);
    expect(await eventsOf(svc, o.id, 'deal.lost')).toHaveLength(2);
    expect((await historyOf(o, d.id)).map((h) => h.toStageName)).toEqual([
      'Closed lost',
      'Closed won',
      'Negotiation',
      'Closed lost',
      'Prospecting',
    ]);
  });

  it('serializes concurrent moves of one deal: each history row starts where the previous ended', async () => {
    const o = await dealOrg(svc);
    const d = await create(o);
    const targets = ['qualification', 'discovery', 'qualification', 'discovery', 'qualification', 'discovery'];
    const results = await Promise.all(targets.map((stage) => move(o, d.id, { stage })));
    const okCount = results.filter((r) => r.response.status === 200).length;
    expect(results.every((r) => r.response.status === 200 || r.response.status === 400)).toBe(true);
    const hist = (await historyOf(o, d.id)).reverse();
    expect(hist).toHaveLength(okCount + 1);
    for (let i = 1; i < hist.length; i += 1) expect(hist[i].fromStageId).toBe(hist[i - 1].toStageId);
  });
});

describe('GET /deals/{id}/history', () => {
  it('pages newest first with a cursor; 404 for another organization; 400 for a bad cursor', async () => {
    const o = await dealOrg(svc);
    const d = await create(o);
    for (const stage of ['qualification', 'discovery', 'qualification']) await move(o, d.id, { stage });
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const r = await o.api.GET('/deals/{id}/history', { params: { path: { id: d.id }, query: { limit: 1, cursor } } });
      expect(r.data!.data.length).toBeLessThanOrEqual(1);
      seen.push(...r.data!.data.map((h) => h.toStageName ?? ''));
      if (!r.data!.nextCursor) break;
      cursor = r.data!.nextCursor;
    }
    expect(seen).toEqual(['Qualification', 'Discovery', 'Qualification', 'Prospecting']);
    const all = await historyOf(o, d.id);
    for (let i = 1; i < all.length; i += 1) expect(Date.parse(all[i - 1].createdAt)).toBeGreaterThan(Date.parse(all[i].createdAt));
    const other = await dealOrg(svc);
    expect((await other.api.GET('/deals/{id}/history', { params: { path: { id: d.id } } })).response.status).toBe(404);
    expect((await o.api.GET('/deals/{id}/history', { params: { path: { id: 'deal_nope' } } })).response.status).toBe(404);
    expect((await o.api.GET('/deals/{id}/history', { params: { path: { id: d.id }, query: { cursor: 'x.y' } } })).response.status).toBe(
      400,
    );
  });
});

describe('deal sweep', () => {
  it('emits next_step_overdue and slipped once per deal and close date, for open deals only', async () => {
    const clock = setClock(svc, '2030-03-05T12:00:00Z');
    const day = (n: number) => utcDate(n, clock.now());
    const a = await dealOrg(svc);
    const b = await dealOrg(svc);
    const late = await create(a, { name: 'Late', closeDate: day(-2) });
    const slipped = await create(a, { name: 'Slipped', closeDate: day(-12) });
    await create(a, { name: 'Future', closeDate: day(5) });
    await create(a, { name: 'Undated' });
    const lost = await create(a, { name: 'Closed', closeDate: day(-30) });
    await move(a, lost.id, { stage: 'closed_lost', reason: 'Gone' });
    const other = await create(b, { name: 'Theirs', closeDate: day(-3) });

    await runDealSweep(deps);
    const overdue = await eventsOf(svc, a.id, 'deal.next_step_overdue');
    expect(overdue.map((e) => e.data.dealId).sort()).toEqual([late.id, slipped.id].sort());
    expect(overdue.find((e) => e.data.dealId === late.id)).toMatchObject({
      resource_type: 'Deal',
      resource_id: late.id,
      data: { dealId: late.id, dealName: 'Late', closeDate: day(-2), daysOverdue: 2 },
    });
    const slips = await eventsOf(svc, a.id, 'deal.slipped');
    expect(slips.map((e) => e.data)).toEqual([{ dealId: slipped.id, dealName: 'Slipped', closeDate: day(-12), daysOverdue: 12 }]);
    expect((await eventsOf(svc, b.id, 'deal.next_step_overdue')).map((e) => e.data.dealId)).toEqual([other.id]);

    // A second sweep emits nothing new.
    await runDealSweep(deps);
    expect(await eventsOf(svc, a.id, 'deal.next_step_overdue')).toHaveLength(2);
    expect(await eventsOf(svc, a.id, 'deal.slipped')).toHaveLength(1);

    // Moving the close date re-arms; closing the deal stops it.
    await a.api.PATCH('/deals/{id}', { params: { path: { id: late.id } }, body: { closeDate: day(-9) } });
    await move(a, slipped.id, { stage: 'closed_lost', reason: 'Slipped away' });
    await a.api.PATCH('/deals/{id}', { params: { path: { id: slipped.id } }, body: { closeDate: day(-20) } });
    await runDealSweep(deps);
    expect((await eventsOf(svc, a.id, 'deal.next_step_overdue')).map((e) => e.data.dealId)).toEqual(expect.arrayContaining([late.id]));
    expect(await eventsOf(svc, a.id, 'deal.next_step_overdue')).toHaveLength(3);
    expect((await eventsOf(svc, a.id, 'deal.slipped')).map((e) => e.data.dealId)).toEqual([slipped.id, late.id]);
  });

  it('fires overdue from the day after the close date and slipped from the eighth day after', async () => {
    const clock = setClock(svc, '2032-03-01T12:00:00Z');
    const day = (n: number) => utcDate(n, clock.now());
    const o = await dealOrg(svc);
    const today = await create(o, { name: 'Due today', closeDate: day(0) });
    const yesterday = await create(o, { name: 'Due yesterday', closeDate: day(-1) });
    const week = await create(o, { name: 'A week late', closeDate: day(-7) });
    const eight = await create(o, { name: 'Eight days late', closeDate: day(-8) });
    await runDealSweep(deps);
    expect((await eventsOf(svc, o.id, 'deal.next_step_overdue')).map((e) => e.data.dealId).sort()).toEqual(
      [yesterday.id, week.id, eight.id].sort(),
    );
    expect((await eventsOf(svc, o.id, 'deal.slipped')).map((e) => e.data)).toEqual([
      { dealId: eight.id, dealName: 'Eight days late', closeDate: day(-8), daysOverdue: 8 },
    ]);
    expect((await eventsOf(svc, o.id)).filter((e) => e.data.dealId === today.id).map((e) => e.type)).toEqual(['deal.created']);
  });

  it('is on the worker crontab every 15 minutes', () => {
    const [item] = parseCrontab(CRONTAB).filter((c) => c.task === 'sweep_deals');
    expect(item).toBeDefined();
    expect(item.match({ min: 0, hour: 3, date: 1, month: 1, dow: 0 })).toBe(true);
    expect(item.match({ min: 15, hour: 3, date: 1, month: 1, dow: 0 })).toBe(true);
    expect(item.match({ min: 7, hour: 3, date: 1, month: 1, dow: 0 })).toBe(false);
  });

  it('runs as the graphile-worker task sweep_deals', async () => {
    const o = await dealOrg(svc);
    const d = await create(o, { closeDate: utcDate(-1) });
    const worker = await svc.startWorker();
    try {
      await worker.addJob('sweep_deals', {});
      await waitFor(async () => (await eventsOf(svc, o.id, 'deal.next_step_overdue')).length > 0, 20_000, 'deal.next_step_overdue');
      expect((await eventsOf(svc, o.id, 'deal.next_step_overdue')).map((e) => e.data.dealId)).toEqual([d.id]);
    } finally {
      await worker.stop();
    }
  });
});
