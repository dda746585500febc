// Whether a worker runner is alive, as other processes can tell: each runner holds a session-level
// advisory lock on its id, on a connection of its own, for as long as it runs, and registers its id
// (with the graphile-worker pool ids that lock its jobs) in worker_runners. A killed process's
// connection closes, and Postgres frees the lock at once; the recovery sweep (src/dispatch/sweep.ts)
// then finds the lock free and takes up the runner's claims and jobs. graphile-worker alone would
// keep a dead runner's jobs locked for four hours.
//
// Liveness only speeds recovery; it never decides whether a message goes twice: a claim's hand-over
// mark (src/dispatch/send.ts) is written only while its record is still `sending`, so a claim the
// sweep took back, rightly or not, can no longer go out. Should the lock's connection drop while
// the process lives, the runner passes for dead (its claims not handed over are taken back, its
// jobs unlocked for others): that is logged as an error, and the process should be restarted.
import { sql } from 'kysely';
import type pg from 'pg';
import type { Tx } from '../../db/database.js';
import { newId } from '../platform/ids.js';

/** The advisory lock key of a runner id (one namespace of hashtextextended keys, as ledger.ts's). */
const LOCK_PREFIX = 'worker-runner:';
const lockKey = (id: string) => `${LOCK_PREFIX}${id}`;

export interface Liveness {
  /** This runner's id: claims name it (send_records.claimed_by). */
  id: string;
  /** Records a graphile-worker pool id of this runner (its jobs' locked_by). */
  addPool(poolId: string): Promise<void>;
  /** Unregisters the runner and frees its lock and connection (a clean stop). */
  close(): Promise<void>;
}

/** Takes a runner's lock and registers it, before it takes any job; `onLost` hears of the lock's connection failing. */
export async function holdLiveness(pool: pg.Pool, onLost: (e: Error) => void): Promise<Liveness> {
  const id = newId('wrk');
  // Held for the runner's life, never returned to the pool while it runs.
  const client = await pool.connect();
  let closed = false;
  client.on('error', (e) => {
    if (!closed) onLost(e);
  });
  await client.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [lockKey(id)]);
  await client.query('INSERT INTO worker_runners (id) VALUES ($1)', [id]);
  return {
    id,
    async addPool(poolId) {
      if (!closed) await client.query('UPDATE worker_runners SET pool_ids = array_append(pool_ids, $2) WHERE id = $1', [id, poolId]);
    },
    async close() {
      if (closed) return;
      closed = true;
      try {
        await client.query('DELETE FROM worker_runners WHERE id = $1', [id]);
        await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [lockKey(id)]);
        client.release();
      } catch (e) {
        client.release(e as Error);
      }
    },
  };
}

/**
 * The registered runners whose lock is free: dead (their process stopped without unregistering).
 * The lock is tried for the caller's transaction only, so it is free again when it ends.
 */
export async function deadRunners(trx: Tx): Promise<{ id: string; pool_ids: string[] }[]> {
  return (
    await sql<{ id: string; pool_ids: string[] }>`
    SELECT id, pool_ids FROM worker_runners
    WHERE pg_try_advisory_xact_lock(hashtextextended(${LOCK_PREFIX} || id, 0))`.execute(trx)
  ).rows;
}
