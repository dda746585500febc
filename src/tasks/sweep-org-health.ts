import type { Task } from 'graphile-worker';
import { runOrgHealthSweep } from '../account/org-health-sweep.js';
import type { SystemDeps } from '../platform/services.js';

/** The crontab's sweep_org_health: the work is in src/account/org-health-sweep.ts. */
export function sweepOrgHealth(deps: SystemDeps): Task {
  return async () => {
    const r = await runOrgHealthSweep(deps);
    if (r.changed > 0) deps.log.info(r, 'organization health sweep');
  };
}
