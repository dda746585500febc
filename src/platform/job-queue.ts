// The background job queue's counts (job_queue_counts(), 0001_foundation.sql): jobs pending,
// running and failed, sweeps and purges not counted, so a client waiting for the queue to drain
// waits for the work its own requests caused.
import { sql } from 'kysely';
import type { Db } from '../../db/database.js';

export async function jobQueueCounts(db: Db): Promise<{ pending: number; running: number; failed: number }> {
  const r = await sql<{ pending: number; running: number; failed: number }>`select * from job_queue_counts()`.execute(db);
  return r.rows[0] ?? { pending: 0, running: 0, failed: 0 };
}
