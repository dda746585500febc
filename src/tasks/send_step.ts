import type { Task } from 'graphile-worker';
import type { TaskDeps } from './context.js';
import { requireFields } from './context.js';
import { sendStep } from '../dispatch/send.js';

/** Sends one queued step, or defers or skips it by its gates (src/dispatch/send.ts). */
export function sendStepTask(deps: TaskDeps): Task {
  return async (payload) => {
    const p = requireFields<{ organizationId: string; queueId: string }>(payload, ['organizationId', 'queueId']);
    await sendStep(deps, p.organizationId, p.queueId);
  };
}
