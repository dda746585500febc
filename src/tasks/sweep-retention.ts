import type { Task } from 'graphile-worker';
import { runRetentionSweep } from '../platform/retention.js';
import type { SystemDeps } from '../platform/services.js';

/** The crontab's sweep_retention: the work is in src/platform/retention.ts. */
export function sweepRetention(deps: SystemDeps): Task {
  return async () => {
    const r = await runRetentionSweep(deps);
    const deleted = Object.values(r.deleted).reduce((a, b) => a + b, 0);
    if (r.made > 0 || r.dropped.length > 0 || deleted > 0) deps.log.info(r, 'retention sweep');
  };
}
