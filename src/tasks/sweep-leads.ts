import type { Task } from 'graphile-worker';
import { runLeadSweep } from '../leads/sweep.js';
import type { SystemDeps } from '../platform/services.js';

/** The crontab's sweep_leads: the work is in src/leads/sweep.ts. */
export function sweepLeads(deps: SystemDeps): Task {
  return async () => {
    const r = await runLeadSweep(deps);
    if (r.qualified > 0 || r.converted > 0) deps.log.info(r, 'lead sweep');
  };
}
