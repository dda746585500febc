import type { Task } from 'graphile-worker';
import type { TaskDeps } from './context.js';

/** One delivery attempt of one event to one endpoint (written with the webhooks work). */
export function deliverWebhook(_deps: TaskDeps): Task {
  return async () => {};
}
