import type { Task } from 'graphile-worker';
import { foldFunnelDays as fold } from '../analytics/rollups.js';
import type { SystemDeps } from '../platform/services.js';

/** The crontab's fold_funnel_days: the work is in src/analytics/rollups.ts. */
export function foldFunnelDays(deps: SystemDeps): Task {
  return async () => {
    await fold(deps.systemDb);
  };
}
