// The recovery sweep (every minute): a step claimed for sending whose outcome was never recorded
// (its worker died between the SMTP hand-over and the commit, or before the hand-over) is marked
// possibly sent (markPossiblySent says what that means).
import { sql } from 'kysely';
import { type Db, withSystem } from '../../db/database.js';
import { markPossiblySent } from './outcomes.js';

/** Longer than an SMTP exchange lasts with the default socket limits (30 s a step). */
export const STALE_SENDING_MS = 10 * 60_000;

export async function sweepStaleSends(db: Db, staleMs = STALE_SENDING_MS): Promise<number> {
  return withSystem(db, async (trx) => {
    const stale = await sql<{ organization_id: string; id: string }>`
      SELECT organization_id, id FROM send_records
      WHERE status = 'sending' AND sent_at < now() - make_interval(secs => ${staleMs / 1000})
      ORDER BY sent_at LIMIT 1000 FOR UPDATE SKIP LOCKED`.execute(trx);
    let marked = 0;
    for (const row of stale.rows) {
      const detail = 'the process sending it stopped before it recorded the answer; not sent again';
      if (await markPossiblySent(trx, row.organization_id, row.id, detail)) marked += 1;
    }
    return marked;
  });
}

/** The caps' hourly buckets past any 24-hour window. */
export async function purgeLedgerHours(db: Db): Promise<void> {
  await withSystem(db, (trx) => sql`DELETE FROM send_ledger_hours WHERE hour < now() - interval '2 days'`.execute(trx));
}
