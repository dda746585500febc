import type { Task } from 'graphile-worker';
import { purgeLedgerHours, STALE_SENDING_MS, sweepSends as sweep } from '../dispatch/sweep.js';
import type { SystemDeps } from '../platform/services.js';

/** Settles the claims of dead runners and stale claims, gives jobless due steps a job, drops stale cap buckets (src/dispatch/sweep.ts). */
export function sweepSends(deps: SystemDeps): Task {
  return async () => {
    // An SMTP exchange is about ten round trips, each allowed SMTP_TIMEOUT_MS.
    const r = await sweep(deps.db, deps.systemDb, { staleMs: Math.max(STALE_SENDING_MS, deps.config.smtpTimeoutMs * 10) });
    await purgeLedgerHours(deps.systemDb);
    if (r.possiblySent + r.released + r.requeued + r.deadRunners > 0)
      deps.log.warn(r, 'send sweep: claims of stopped workers settled, jobless steps given a job');
  };
}
