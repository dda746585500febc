import type { Task } from 'graphile-worker';
import { classifyReply } from '../inbound/classify-reply.js';
import type { Deps } from '../platform/services.js';
import { requireFields } from './context.js';

/** Classifies a stored inbound message and applies its effects (src/inbound/classify-reply.ts); idempotent. */
export function classifyReplyTask(deps: Deps): Task {
  return async (payload) => {
    const p = requireFields<{ organizationId: string; messageId: string }>(payload, ['organizationId', 'messageId']);
    await classifyReply(deps, p.organizationId, p.messageId);
  };
}
