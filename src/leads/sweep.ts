// Periodic inbound lead sweep (crontab, every 5 minutes), across organizations:
//   1. qualification: NEW leads meeting the rule (src/leads/scoring.ts: fitScore >= 60 and
//      intentConfidence >= 0.5) become QUALIFIED, the rule and the scores it saw written into the
//      lead's qualification snapshot; one set-based UPDATE per batch;
//   2. conversion: QUALIFIED leads captured at least CONVERT_MIN_AGE_MINUTES ago (by the clock of
//      src/platform/clock.ts) are converted by the same function as POST /leads/{id}/convert (a
//      contact, a deal, deal.created), one transaction per lead bound to its organization, so one
//      lead that fails does not hold back the others (the worker's role, bound to it: row-level
//      security shows it nothing else); the wait gives a person time to mark a lead spam first;
//   3. capture rate-limit windows that have ended are deleted.
// Both steps select through partial indexes of exactly the leads they act on (0012_leads.sql),
// lock what they change, and are safe to run twice at once.
import { sql } from 'kysely';
import { withOrg, withSystem } from '../../db/database.js';
import { ProblemError } from '../http/problems.js';
import type { SystemDeps } from '../platform/services.js';
import { convertLead } from './convert.js';
import { CAPTURE_WINDOW_SECONDS } from './endpoint.js';
import { CONVERT_MIN_AGE_MINUTES, QUALIFY_MIN_FIT, QUALIFY_MIN_INTENT, QUALIFY_RULE } from './scoring.js';

const BATCH = 200;
/** Who the deals the sweep opens are attributed to in their stage history. */
export const SWEEP_ACTOR = 'system:lead-sweep';

async function qualifyBatch(deps: SystemDeps): Promise<number> {
  return withSystem(deps.systemDb, async (trx) => {
    // The thresholds are literals so the planner matches inbound_leads_qualify_idx.
    const { rows } = await sql<{ id: string }>`
      WITH due AS (
        SELECT organization_id, id FROM inbound_leads
        WHERE status = 'NEW' AND erased_at IS NULL
          AND fit_score >= ${sql.lit(QUALIFY_MIN_FIT)} AND intent_confidence >= ${sql.lit(QUALIFY_MIN_INTENT)}
        ORDER BY captured_at LIMIT ${sql.lit(BATCH)}
        FOR UPDATE SKIP LOCKED
      )
      UPDATE inbound_leads l SET status = 'QUALIFIED', qualified_at = now_ms(), updated_at = now_ms(),
        qual_snapshot = coalesce(l.qual_snapshot, '{}'::jsonb) || jsonb_build_object('qualification', jsonb_build_object(
          'rule', ${QUALIFY_RULE}::text, 'fitScore', l.fit_score, 'intentConfidence', l.intent_confidence,
          'qualified', true, 'at', to_jsonb(now_ms())))
      FROM due WHERE l.organization_id = due.organization_id AND l.id = due.id
      RETURNING l.id`.execute(trx);
    return rows.length;
  });
}

/** Converts one batch of due leads; ids that failed are added to `failed` (and skipped for the rest of the run). */
async function convertBatch(deps: SystemDeps, failed: string[]): Promise<{ picked: number; converted: number }> {
  const { rows } = await withSystem(deps.systemDb, (trx) =>
    sql<{ organization_id: string; id: string }>`
    SELECT organization_id, id FROM inbound_leads
    WHERE status = 'QUALIFIED' AND erased_at IS NULL
      AND captured_at <= ${deps.services.clock.now()}::timestamptz - make_interval(mins => ${CONVERT_MIN_AGE_MINUTES})
      AND NOT (id = ANY(${failed}::text[]))
    ORDER BY captured_at LIMIT ${sql.lit(BATCH)}`.execute(trx),
  );
  let converted = 0;
  for (const r of rows) {
    try {
      const result = await withOrg(deps.db, r.organization_id, (trx) =>
        convertLead(trx, r.organization_id, r.id, {
          userId: null,
          by: SWEEP_ACTOR,
          via: 'sweep',
        }),
      );
      if (!result.alreadyConverted) converted += 1;
    } catch (e) {
      failed.push(r.id);
      // Marked spam or erased since it was picked: nothing to do.
      if (e instanceof ProblemError && (e.slug === 'lead-is-spam' || e.slug === 'not-found')) continue;
      deps.log.warn({ organizationId: r.organization_id, leadId: r.id, err: (e as Error).message }, 'lead sweep: conversion failed');
    }
  }
  return { picked: rows.length, converted };
}

/** Runs the sweep to completion; returns what it did. */
export async function runLeadSweep(deps: SystemDeps): Promise<{ qualified: number; converted: number; windowsPurged: number }> {
  let qualified = 0;
  for (;;) {
    const n = await qualifyBatch(deps);
    qualified += n;
    if (n < BATCH) break;
  }
  let converted = 0;
  const failed: string[] = [];
  for (;;) {
    const b = await convertBatch(deps, failed);
    converted += b.converted;
    if (b.picked < BATCH) break;
  }
  const purged = await withSystem(deps.systemDb, (trx) =>
    sql`
    DELETE FROM lead_capture_windows WHERE window_start <= now_ms() - make_interval(secs => ${CAPTURE_WINDOW_SECONDS})`.execute(trx),
  );
  return { qualified, converted, windowsPurged: Number(purged.numAffectedRows ?? 0) };
}
