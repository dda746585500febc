// The funnel's day rollups (db/migrations/0033_funnel_rollups.sql, docs/analytics.md): the triggers
// append each change to funnel_day_deltas, so no writer waits on a shared day row; this folds them
// into funnel_days, so what a funnel reads stays a row per day, product and list plus the last
// minute's deltas. Exact whenever it runs, and however many run at once (each delta is taken by one
// fold); the funnel reads deltas not yet folded as well, so a fold only saves work.
import { sql } from 'kysely';
import { type Db, withSystem } from '../../db/database.js';

/** Folds every organization's deltas into funnel_days (one statement, in system mode). */
export async function foldFunnelDays(systemDb: Db): Promise<void> {
  await withSystem(systemDb, (trx) => sql`SELECT funnel_days_fold(NULL)`.execute(trx));
}
