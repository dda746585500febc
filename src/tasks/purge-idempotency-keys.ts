import type { Task } from 'graphile-worker';
import { sql } from 'kysely';
import { withSystem } from '../../db/database.js';
import type { SystemDeps } from '../platform/services.js';

/** Removes Idempotency-Key records older than 48 hours: clients can rely on 24. */
export function purgeIdempotencyKeys(deps: SystemDeps): Task {
  return async () => {
    await withSystem(deps.systemDb, (trx) => sql`DELETE FROM idempotency_keys WHERE created_at < now() - interval '48 hours'`.execute(trx));
  };
}
