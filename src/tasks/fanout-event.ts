import type { Task } from 'graphile-worker';
import type { Deps } from '../platform/services.js';
import { fanOut } from '../webhooks/delivery.js';
import { requireFields } from './context.js';

/**
 * Fans an event out to the subscribed active webhook endpoints and makes each first attempt.
 * Idempotent: delivery rows have deterministic ids, and only unrecorded first attempts are made.
 */
export function fanoutEvent(deps: Deps): Task {
  return async (payload) => {
    const p = requireFields<{ organizationId: string; eventId: string }>(payload, ['organizationId', 'eventId']);
    await fanOut(deps, p.organizationId, p.eventId);
  };
}
