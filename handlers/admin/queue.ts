// Operator row of the job queue: background jobs not yet done (a test waits for none).
import { sql } from 'kysely';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';

const adminGetQueue: AdminHandler<'adminGetQueue'> = async ({ db }) => {
  const r = await sql<{ pending: number; running: number; failed: number }>`select * from job_queue_counts()`.execute(db);
  return { status: 200 as const, body: r.rows[0] ?? { pending: 0, running: 0, failed: 0 } };
};

export const queueHandlers: AdminHandlers = { adminGetQueue };
