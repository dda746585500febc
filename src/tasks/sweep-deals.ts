import type { Task } from 'graphile-worker';
import { runDealSweep } from '../deals/sweep.js';
import type { SystemDeps } from '../platform/services.js';

/** The crontab's sweep_deals: the work is in src/deals/sweep.ts. */
export function sweepDeals(deps: SystemDeps): Task {
  return async () => {
    const emitted = await runDealSweep(deps);
    if (emitted > 0) deps.log.info({ emitted }, 'deal sweep emitted events');
  };
}
