import type { Task } from 'graphile-worker';
import type { TaskDeps } from './context.js';
import { requireFields } from './context.js';
import { classifyReply } from '../inbound/classify-reply.js';

/** Classifies a stored inbound message and applies its effects (src/inbound/classify-reply.ts); idempotent. */
export function classifyReplyTask(deps: TaskDeps): Task {
  return async (payload) => {
    const p = requireFields<{ organizationId: string; messageId: string }>(payload, ['organizationId', 'messageId']);
    await classifyReply(deps, p.organizationId, p.messageId);
  };
}
