// The task list and crontab of the worker; one file per task.
import type { TaskList } from 'graphile-worker';
import type { TaskDeps } from './context.js';
import { fanoutEvent } from './fanout_event.js';
import { purgeIdempotencyKeys } from './purge_idempotency_keys.js';

export function buildTaskList(deps: TaskDeps): TaskList {
  return {
    fanout_event: fanoutEvent(deps),
    purge_idempotency_keys: purgeIdempotencyKeys(deps),
  };
}

// Sweeps: idempotency keys older than 48 hours (kept at least 24) are purged hourly.
export const CRONTAB = `
15 * * * * purge_idempotency_keys ?max=1
`;
