import type { Task } from 'graphile-worker';
import type { TaskDeps } from './context.js';
import { requireFields } from './context.js';

/** Fans an event out to the subscribed active webhook endpoints (delivery arrives with the webhooks work). */
export function fanoutEvent(deps: TaskDeps): Task {
  return async (payload) => {
    const p = requireFields<{ organizationId: string; eventId: string }>(payload, ['organizationId', 'eventId']);
    deps.log.debug({ eventId: p.eventId }, 'fan-out pending webhook delivery support');
  };
}
