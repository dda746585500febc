import type { Task } from 'graphile-worker';
import type { TaskDeps } from './context.js';

/** Periodic deal sweep (written with the deals work). */
export function sweepDeals(_deps: TaskDeps): Task {
  return async () => {};
}
