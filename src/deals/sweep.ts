// Periodic deal sweep (crontab, every 15 minutes), across organizations. For an open deal (its
// stage is not terminal and it is not closed) whose closeDate is before today (UTC, by the clock of
// src/platform/clock.ts):
//   deal.next_step_overdue  once the closeDate has passed;
//   deal.slipped            once the closeDate is more than 7 days past.
// Each fires once per (deal, closeDate value): deal_sweep_marks records what was emitted, so
// moving the close date re-arms both. Marks are inserted with ON CONFLICT DO NOTHING RETURNING,
// so two overlapping sweeps never emit the same event twice. An overdue next step also opens an
// action item for the deal's owner in the same transaction (one per deal and closeDate).
import { sql } from 'kysely';
import { type Tx, withSystem } from '../../db/database.js';
import { assigneeFor } from '../account/people.js';
import { emit } from '../platform/events.js';
import type { SystemDeps } from '../platform/services.js';
import { openActionItem } from '../work/action-items.js';
import { expectedImpactCents } from './open-deal.js';

/** Event type and the number of whole days past the close date after which it fires. */
export const SWEEP_RULES = [
  { kind: 'deal.next_step_overdue', afterDays: 0 },
  { kind: 'deal.slipped', afterDays: 7 },
] as const;

const BATCH = 500;

interface Due {
  organization_id: string;
  deal_id: string;
  deal_name: string;
  kind: string;
  close_date: string;
  days_overdue: number;
  value_cents: number | null;
  probability: number | null;
  primary_contact_id: string | null;
  owner_id: string | null;
}

/** The work the overdue next step asks for: the deal's owner (else whoever works its contact) moves it on. */
async function openOverdueItem(trx: Tx, r: Due): Promise<void> {
  await openActionItem(trx, r.organization_id, {
    actionType: 'deal_next_step_overdue',
    title: `Next step overdue: ${r.deal_name}`,
    description: `The close date ${r.close_date} has passed and the deal is still open: agree the next step, or move the close date or the stage.`,
    priority: 'high',
    salesPersonId: r.owner_id ?? (await assigneeFor(trx, r.organization_id, r.primary_contact_id)),
    aiGenerated: true,
    entityType: 'Deal',
    entityId: r.deal_id,
    expectedImpactCents: expectedImpactCents(r.value_cents, r.probability),
    sourceKey: `deal-overdue:${r.deal_id}:${r.close_date}`,
    details: { dealId: r.deal_id, closeDate: r.close_date },
  });
}

/** Marks and emits one batch in one transaction; returns how many events it emitted. */
async function sweepBatch(deps: SystemDeps): Promise<number> {
  return withSystem(deps.systemDb, async (trx) => {
    const rules = sql.join(SWEEP_RULES.map((r) => sql`(${r.kind}, ${r.afterDays}::int)`));
    const { rows } = await sql<Due>`
      WITH today AS (SELECT ${deps.services.clock.today()}::date AS d),
      due AS (
        SELECT d.organization_id, d.id AS deal_id, d.name AS deal_name, r.kind, d.close_date,
               (today.d - d.close_date) AS days_overdue, d.value_cents, d.probability, d.primary_contact_id, u.id AS owner_id
        FROM today, deals d
        CROSS JOIN (VALUES ${rules}) AS r(kind, after_days)
        LEFT JOIN deal_stages s ON s.organization_id = d.organization_id AND s.id = d.stage_id
        LEFT JOIN users u ON u.organization_id = d.organization_id AND u.id = d.owner_sales_person_id AND u.status = 'active'
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
      if (r.kind === 'deal.next_step_overdue') await openOverdueItem(trx, r);
    }
    return rows.length;
  });
}

/** Runs the sweep to completion (batch after batch); returns the number of events emitted. */
export async function runDealSweep(deps: SystemDeps): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await sweepBatch(deps);
    total += n;
    if (n < BATCH) return total;
  }
}
