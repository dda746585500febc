// The service's clock for business dates: what "today" is (UTC), the usage period (the calendar
// month, UTC) and the research budget's period, research freshness, a deal's actualCloseDate and
// how many days its close date is overdue or slipped, action-item expiry, snooze and
// out-of-office returns, the lead sweep's conversion age, organization-health windows and the lift
// horizon of analytics. Statements that compare with the current date take the clock's reading as
// a parameter (`${clock.now()}::timestamptz`, `${clock.today()}::date`) instead of calling now();
// where such a comparison reads a time the service wrote (a research run's started_at, a
// dossier's research_updated_at, an item's expires_at or snoozed_until_at), that time is written
// from the same clock.
//
// Everything else stays on the real clock (Date.now(), now(), now_ms()): elapsed-time
// measurements, timeouts and deadlines, retry and backoff delays, rate-limit and cache windows,
// sending schedules and send gates, signature timestamps, ids, log and metric timing, and row
// timestamps the database writes (created_at DEFAULT now_ms(), updated_at, ...).
//
// In production it is `systemClock`. Tests build the service with a `SettableClock` (see
// test/support/harness.ts) and set the date instead of waiting for a UTC midnight to pass.

export interface Clock {
  /** The current instant. */
  now(): Date;
  /** The current date in UTC, 'YYYY-MM-DD'. */
  today(): string;
}

/** The UTC date of an instant, 'YYYY-MM-DD'. */
export const utcDate = (at: Date): string => at.toISOString().slice(0, 10);

/** The wall clock. */
export const systemClock: Clock = {
  now: () => new Date(),
  today: () => utcDate(new Date()),
};

/**
 * A clock for tests: the wall clock shifted by an offset, zero until set. It keeps running:
 * `set(instant)` makes now() read `instant` at the moment of the call, and time passes from there
 * at the wall clock's pace (so ages measured on the clock, such as a stale research run's, still
 * grow). A test that sets it to noon UTC has twelve hours before its "today" changes.
 * `advance(ms)` moves it on (or back, negative) by `ms`; `reset()` returns it to the wall clock.
 */
export class SettableClock implements Clock {
  private offsetMs = 0;

  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }

  today(): string {
    return utcDate(this.now());
  }

  /** From now on the clock reads `instant`, and runs on from there. */
  set(instant: Date | string | number): void {
    const t = new Date(instant).getTime();
    if (Number.isNaN(t)) throw new Error(`not an instant: ${String(instant)}`);
    this.offsetMs = t - Date.now();
  }

  /** Moves the clock on by `ms` (back when negative). */
  advance(ms: number): void {
    this.offsetMs += ms;
  }

  /** Back to the wall clock. */
  reset(): void {
    this.offsetMs = 0;
  }
}
