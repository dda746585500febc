import type { Task } from 'graphile-worker';
import { sendStep } from '../dispatch/send.js';
import type { Deps } from '../platform/services.js';
import { requireFields } from './context.js';

/** Sends one queued step, or defers or skips it by its gates (src/dispatch/send.ts). */
export function sendStepTask(deps: Deps, runnerId: string | null): Task {
  return async (payload) => {
    const p = requireFields<{ organizationId: string; queueId: string }>(payload, ['organizationId', 'queueId']);
    await sendStep(deps, p.organizationId, p.queueId, runnerId);
  };
}
