import type { Task } from 'graphile-worker';
import type { SystemDeps } from '../platform/services.js';
import { runActionItemSweep } from '../work/action-item-sweep.js';

/** The crontab's sweep_action_items: the work is in src/work/action-item-sweep.ts. */
export function sweepActionItems(deps: SystemDeps): Task {
  return async () => {
    const r = await runActionItemSweep(deps);
    if (r.expired + r.unsnoozed + r.returns > 0) deps.log.info(r, 'action-item sweep');
  };
}
