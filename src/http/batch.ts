// Batch operations (POST /drafts/batch/...): each item decided by the single operation's own code,
// independently. Every item runs in a savepoint of the request's transaction, so an item refused
// with a problem leaves nothing of its own behind and the others go on; its problem is answered as
// the single operation would have answered it. Any other failure fails the whole request (nothing
// is kept). The batch is one request: one Idempotency-Key, one unit of the rate limit.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { ProblemError, problemBody } from './problems.js';

export interface BatchOutcome<R> {
  succeeded: number;
  failed: number;
  results: Array<{ id: string; status: number; result: R | null; problem: ReturnType<typeof problemBody> | null }>;
}

/**
 * Runs `decide` for each item in order. `instanceOf` gives an item's problem the `instance` the
 * single operation's would have (its path and the request id).
 */
export async function eachIndependently<I extends { id: string }, R>(
  trx: Tx,
  items: readonly I[],
  problems: { baseUrl: string; instanceOf: (item: I) => string },
  decide: (item: I) => Promise<R>,
): Promise<BatchOutcome<R>> {
  const out: BatchOutcome<R> = { succeeded: 0, failed: 0, results: [] };
  for (const item of items) {
    await sql`SAVEPOINT batch_item`.execute(trx);
    try {
      const result = await decide(item);
      await sql`RELEASE SAVEPOINT batch_item`.execute(trx);
      out.succeeded += 1;
      out.results.push({ id: item.id, status: 200, result, problem: null });
    } catch (e) {
      if (!(e instanceof ProblemError)) throw e;
      await sql`ROLLBACK TO SAVEPOINT batch_item`.execute(trx);
      out.failed += 1;
      out.results.push({
        id: item.id,
        status: e.status,
        result: null,
        problem: problemBody(problems.baseUrl, e, problems.instanceOf(item)),
      });
    }
  }
  return out;
}
