import type { Task } from 'graphile-worker';
import type { Deps } from '../platform/services.js';
import { deliverAttempt, MAX_ATTEMPTS } from '../webhooks/delivery.js';
import { requireFields } from './context.js';

/**
 * One attempt of one delivery row: a retry, or the first attempt of a replay. A job whose attempt
 * was already recorded (or whose endpoint was deleted) does nothing.
 */
export function deliverWebhook(deps: Deps): Task {
  return async (payload) => {
    const p = requireFields<{ organizationId: string; deliveryId: string; attempt: number }>(payload, ['organizationId', 'deliveryId']);
    if (!Number.isInteger(p.attempt) || p.attempt < 1 || p.attempt > MAX_ATTEMPTS) throw new Error('task payload lacks a valid attempt');
    await deliverAttempt(deps, p.organizationId, p.deliveryId, p.attempt);
  };
}
