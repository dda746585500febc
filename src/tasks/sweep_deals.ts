// Periodic deal sweep (crontab, every 15 minutes), across organizations. For an open deal (its
// stage is not terminal and it is not closed) whose closeDate is before today (UTC):
//   deal.next_step_overdue  once the closeDate has passed;
//   deal.slipped            once the closeDate is more than 7 days past.
// Each fires once per (deal, closeDate value): deal_sweep_marks records what was emitted, so
// moving the close date re-arms both. Marks are inserted with ON CONFLICT DO NOTHING RETURNING,
// so two overlapping sweeps never emit the same event twice.
import { sql } from 'kysely';
import type { Task } from 'graphile-worker';
import { withSystem } from '../../db/database.js';
import { emit } from '../events.js';
import type { TaskDeps } from './context.js';

/** Event type and the number of whole days past the close date after which it fires. */
export const SWEEP_RULES = [
  { kind: 'deal.next_step_overdue', afterDays: 0 },
  { kind: 'deal.slipped', afterDays: 7 },
] as const;

const BATCH = 500;

interface Due { organization_id: string; deal_id: string; deal_name: string; kind: string; close_date: string; days_overdue: number }

/** Marks and emits one batch in one transaction; returns how many events it emitted. */
async function sweepBatch(deps: TaskDeps): Promise<number> {
  return withSystem(deps.db, async (trx) => {
    const rules = sql.join(SWEEP_RULES.map((r) => sql`(${r.kind}, ${r.afterDays}::int)`));
    const { rows } = await sql<Due>`
      WITH today AS (SELECT (now() AT TIME ZONE 'UTC')::date AS d),
      due AS (
        SELECT d.organization_id, d.id AS deal_id, d.name AS deal_name, r.kind, d.close_date,
               (today.d - d.close_date) AS days_overdue
        FROM today, deals d
        CROSS JOIN (VALUES ${rules}) AS r(kind, after_days)
        LEFT JOIN deal_stages s ON s.organization_id = d.organization_id AND s.id = d.stage_id
        WHERE d.close_date IS NOT NULL AND d.actual_close_date IS NULL
          AND d.close_date < today.d - r.after_days
          AND s.is_terminal IS NOT TRUE
          AND NOT EXISTS (
            SELECT 1 FROM deal_sweep_marks m
            WHERE m.organization_id = d.organization_id AND m.deal_id = d.id AND m.kind = r.kind AND m.close_date = d.close_date)
        ORDER BY d.close_date, d.organization_id, d.id
        LIMIT ${BATCH}
      ),
      marked AS (
        INSERT INTO deal_sweep_marks (organization_id, deal_id, kind, close_date)
        SELECT organization_id, deal_id, kind, close_date FROM due
        ON CONFLICT DO NOTHING
        RETURNING organization_id, deal_id, kind
      )
      SELECT due.* FROM due JOIN marked USING (organization_id, deal_id, kind)`.execute(trx);
    for (const r of rows) {
      await emit(trx, r.organization_id, {
        type: r.kind,
        resource: { type: 'Deal', id: r.deal_id },
        data: { dealId: r.deal_id, dealName: r.deal_name, closeDate: r.close_date, daysOverdue: Number(r.days_overdue) },
      });
    }
    return rows.length;
  });
}

/** Runs the sweep to completion (batch after batch); returns the number of events emitted. */
export async function runDealSweep(deps: TaskDeps): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await sweepBatch(deps);
    total += n;
    if (n < BATCH) return total;
  }
}

export function sweepDeals(deps: TaskDeps): Task {
  return async () => {
    const emitted = await runDealSweep(deps);
    if (emitted > 0) deps.log.info({ emitted }, 'deal sweep emitted events');
  };
}
