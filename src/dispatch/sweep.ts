// The recovery sweep (every minute): a step claimed for sending whose outcome was never recorded
// (its worker died between the SMTP hand-over and the commit, or before the hand-over) is marked
// possibly sent, shows so in the outbox and the send queue, and is never sent again automatically:
// sending twice does more harm than not knowing.
import { sql } from 'kysely';
import { withSystem, type Db } from '../../db/database.js';

/** Longer than any SMTP exchange can last (its socket limits are 30 s a step). */
export const STALE_SENDING_MS = 10 * 60_000;

export async function sweepStaleSends(db: Db, staleMs = STALE_SENDING_MS): Promise<number> {
  return withSystem(db, async (trx) => {
    const r = await sql<{ organization_id: string; queue_id: string }>`
      UPDATE send_records SET status = 'possibly_sent'
      WHERE status = 'sending' AND sent_at < now() - make_interval(secs => ${staleMs / 1000})
      RETURNING organization_id, queue_id`.execute(trx);
    for (const row of r.rows) {
      await sql`UPDATE send_queue SET state = 'possibly_sent', held_by = 'possibly_sent',
          held_detail = 'the process sending it stopped before it recorded the answer; not sent again', updated_at = now_ms()
        WHERE organization_id = ${row.organization_id} AND id = ${row.queue_id} AND state = 'sending'`.execute(trx);
    }
    return r.rows.length;
  });
}
