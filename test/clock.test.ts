// The clock of business dates (src/platform/clock.ts): the settable clock the tests use, and the
// service honouring it end to end (what it says "today" and "this month" are follow the clock).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SettableClock } from '../src/platform/clock.js';
import { type DealOrg, dealOrg } from './deal-support.js';
import { setClock, startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

const near = (a: Date, b: number) => Math.abs(a.getTime() - b) < 1000;

describe('the settable clock', () => {
  it('reads the wall clock until set, runs on from the instant it is set to, moves on, and resets to the wall clock', () => {
    const clock = new SettableClock();
    expect(near(clock.now(), Date.now())).toBe(true);
    clock.set('2030-02-28T23:00:00Z');
    expect(near(clock.now(), Date.parse('2030-02-28T23:00:00Z'))).toBe(true);
    expect(clock.today()).toBe('2030-02-28');
    clock.advance(2 * 3_600_000);
    expect(clock.today()).toBe('2030-03-01');
    clock.set(new Date('2031-12-31T12:00:00Z'));
    expect(clock.today()).toBe('2031-12-31');
    expect(() => clock.set('not a date')).toThrow();
    clock.reset();
    expect(near(clock.now(), Date.now())).toBe(true);
  });

  it('is the one the service and its worker run on', () => {
    expect(svc.rt.services.clock).toBe(svc.clock);
  });
});

describe('the service honours the clock', () => {
  const move = (o: DealOrg, id: string, body: Record<string, unknown>) =>
    o.api.POST('/deals/{id}/stage', { params: { path: { id } }, body: body as never });
  const closeDate = async (o: DealOrg, id: string) => (await o.api.GET('/deals/{id}', { params: { path: { id } } })).data!.actualCloseDate;
  const period = async (o: DealOrg) => {
    const u = (await o.api.GET('/usage', {})).data!;
    return [u.periodStart, u.periodEnd];
  };

  it("a deal closed while the clock says a date gets that actualCloseDate, and GET /usage reports the clock's month", async () => {
    const clock = setClock(svc, '2033-05-20T12:00:00Z');
    const o = await dealOrg(svc);
    expect(await period(o)).toEqual(['2033-05-01T00:00:00.000Z', '2033-06-01T00:00:00.000Z']);
    const d = (await o.api.POST('/deals', { body: { name: 'Clockwork' } })).data!;
    expect((await move(o, d.id, { stage: 'closed_lost', reason: 'Timing' })).response.status).toBe(200);
    expect(await closeDate(o, d.id)).toBe('2033-05-20');

    // The next month: reopened and closed again, the deal gets the new date; the period is June.
    clock.set('2033-06-02T12:00:00Z');
    expect((await move(o, d.id, { stage: 'prospecting', reason: 'Back' })).response.status).toBe(200);
    expect(await closeDate(o, d.id)).toBeNull();
    expect((await move(o, d.id, { stage: 'closed_lost', reason: 'Timing again' })).response.status).toBe(200);
    expect(await closeDate(o, d.id)).toBe('2033-06-02');
    expect(await period(o)).toEqual(['2033-06-01T00:00:00.000Z', '2033-07-01T00:00:00.000Z']);
  });

  it('is back on the wall clock in the next test', async () => {
    expect(near(svc.clock.now(), Date.now())).toBe(true);
    const o = await dealOrg(svc);
    const now = new Date();
    const [start] = await period(o);
    // The month of the wall clock (read on either side of the request, in case a month ends between).
    const months = [now, new Date()].map((t) => new Date(Date.UTC(t.getUTCFullYear(), t.getUTCMonth(), 1)).toISOString());
    expect(months).toContain(start);
  });
});
