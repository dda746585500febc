// Operator row of the job queue: background jobs not yet done (a test waits for none;
// src/platform/job-queue.ts).
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { jobQueueCounts } from '../../src/platform/job-queue.js';

const adminGetQueue: AdminHandler<'adminGetQueue'> = async ({ db }) => {
  return { status: 200 as const, body: await jobQueueCounts(db) };
};

export const queueHandlers = { adminGetQueue } satisfies Partial<AdminHandlers>;
