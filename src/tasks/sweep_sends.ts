import type { Task } from 'graphile-worker';
import type { TaskDeps } from './context.js';
import { sweepStaleSends } from '../dispatch/sweep.js';

/** Marks steps whose send was claimed but never recorded as possibly sent (src/dispatch/sweep.ts). */
export function sweepSends(deps: TaskDeps): Task {
  return async () => {
    const n = await sweepStaleSends(deps.db);
    if (n > 0) deps.log.warn({ steps: n }, 'steps marked possibly sent: their worker stopped mid-send');
  };
}
