// Operator row of the job queue: background jobs not yet done (a test waits for none;
// src/platform/job-queue.ts).
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { jobQueueCounts } from '../../src/platform/job-queue.js';

// Every organization's jobs: read on the cross-organization role's connection.
const adminGetQueue: AdminHandler<'adminGetQueue'> = async ({ systemDb }) => {
  return { status: 200 as const, body: await jobQueueCounts(systemDb) };
};

export const queueHandlers = { adminGetQueue } satisfies Partial<AdminHandlers>;
