// Holdout experiments: opt-in per organization (organizations.experiments, set by the operator),
// a deterministic arm per unit recorded when the unit is first exposed, and the question every
// AI path asks before it writes: is this unit held out?
//   ai_email_lift: unit an account (company); exposed when a draft is written for one of its
//                  contacts; held out means the plain template, no model (src/drafting/generate.ts).
//   ai_actions:    unit a deal; exposed when an AI action item about it would open; held out
//                  means the item is not opened (src/work/action-items.ts).
import crypto from 'node:crypto';
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';

export const EXPERIMENTS = ['ai_email_lift', 'ai_actions'] as const;
export type Experiment = (typeof EXPERIMENTS)[number];
export type ExperimentSettings = Record<Experiment, { holdoutPercent: number }>;

/** Stored settings with every experiment present (0 percent, i.e. off, unless set). */
export function experimentSettings(stored: unknown): ExperimentSettings {
  const s = (stored && typeof stored === 'object' ? stored : {}) as Partial<Record<Experiment, { holdoutPercent?: unknown }>>;
  const share = (e: Experiment) => {
    const v = s[e]?.holdoutPercent;
    return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 50 ? v : 0;
  };
  return { ai_email_lift: { holdoutPercent: share('ai_email_lift') }, ai_actions: { holdoutPercent: share('ai_actions') } };
}

/**
 * A unit's place in 0..9999, from the first 32 bits of SHA-256 over `organization:experiment:unit`:
 * the same unit always lands in the same place, and places are uniform, so a unit is held out
 * when its place is below 100 x holdoutPercent.
 */
export function assignmentBucket(organizationId: string, experiment: Experiment, unitId: string): number {
  return crypto.createHash('sha256').update(`${organizationId}:${experiment}:${unitId}`).digest().readUInt32BE(0) % 10_000;
}

/**
 * Records the units' exposure to the experiment (the first exposure fixes a unit's arm) and
 * returns those held out. One statement; when the experiment is off (holdoutPercent 0) it writes
 * nothing and holds out nobody. Runs in the caller's transaction, bound to the organization.
 */
export async function heldOutUnits(
  trx: Tx,
  organizationId: string,
  experiment: Experiment,
  unitIds: Iterable<string>,
): Promise<Set<string>> {
  const ids = [...new Set(unitIds)];
  if (ids.length === 0) return new Set();
  const buckets = ids.map((id) => assignmentBucket(organizationId, experiment, id));
  const r = await sql<{ unit_id: string }>`
    WITH setting AS (
      SELECT CASE WHEN jsonb_typeof(experiments -> ${experiment} -> 'holdoutPercent') = 'number'
                  THEN (experiments -> ${experiment} ->> 'holdoutPercent')::int ELSE 0 END AS share
      FROM organizations WHERE id = ${organizationId}
    ), units AS (
      SELECT u.id, CASE WHEN u.bucket < s.share * 100 THEN 'control' ELSE 'treatment' END AS arm
      FROM unnest(${ids}::text[], ${buckets}::int[]) AS u(id, bucket), setting s
      WHERE s.share > 0
    ), recorded AS (
      INSERT INTO experiment_assignments (organization_id, experiment, unit_id, arm)
      SELECT ${organizationId}, ${experiment}, u.id, u.arm FROM units u
      ON CONFLICT (organization_id, experiment, unit_id) DO NOTHING
    )
    SELECT u.id AS unit_id
    FROM units u
    LEFT JOIN experiment_assignments a ON a.organization_id = ${organizationId} AND a.experiment = ${experiment} AND a.unit_id = u.id
    WHERE coalesce(a.arm, u.arm) = 'control'`.execute(trx);
  return new Set(r.rows.map((x) => x.unit_id));
}
