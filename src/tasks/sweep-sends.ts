import type { Task } from 'graphile-worker';
import { purgeLedgerHours, STALE_SENDING_MS, sweepStaleSends } from '../dispatch/sweep.js';
import type { SystemDeps } from '../platform/services.js';

/** Marks steps whose send was claimed but never recorded as possibly sent, and drops stale cap buckets (src/dispatch/sweep.ts). */
export function sweepSends(deps: SystemDeps): Task {
  return async () => {
    // An SMTP exchange is about ten round trips, each allowed SMTP_TIMEOUT_MS.
    const n = await sweepStaleSends(deps.systemDb, Math.max(STALE_SENDING_MS, deps.config.smtpTimeoutMs * 10));
    await purgeLedgerHours(deps.systemDb);
    if (n > 0) deps.log.warn({ steps: n }, 'steps marked possibly sent: their worker stopped mid-send');
  };
}
