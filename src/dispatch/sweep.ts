// The recovery sweep (every minute): no claimed step is left unsettled and no due step without a
// job. A claim whose outcome was never recorded, because its worker runner died (its liveness lock
// is free: src/dispatch/liveness.ts) or it went stale, is settled by its hand-over mark: possibly
// sent once its message was handed over, else released and tried again (src/dispatch/resolve.ts);
// the dead runner's jobs are unlocked at once (graphile-worker would wait four hours) and it is
// forgotten. A queued step overdue with no job (its job ran while another batch held it, and that
// batch died) gets one again.
import { sql } from 'kysely';
import { type Db, withOrg, withSystem } from '../../db/database.js';
import { deadRunners } from './liveness.js';
import { scheduleSends } from './queue.js';
import { settleAbandonedClaims } from './resolve.js';

/** Longer than an SMTP exchange lasts with the default socket limits (30 s a step). */
export const STALE_SENDING_MS = 10 * 60_000;
/** How long a due step may wait with no job before the sweep gives it one (a job normally runs within seconds). */
export const JOBLESS_AFTER_MS = 5 * 60_000;
/** Rows a sweep takes of each kind; the next sweep takes the rest. */
const SWEEP_LIMIT = 1000;

export interface SendSweep {
  deadRunners: number;
  released: number;
  possiblySent: number;
  requeued: number;
}

/**
 * One pass. `db`: a role bound to one organization at a time (the claims are settled in each
 * organization's transaction); `systemDb`: the cross-organization reads.
 */
export async function sweepSends(db: Db, systemDb: Db, opts: { staleMs?: number; joblessMs?: number } = {}): Promise<SendSweep> {
  const staleMs = opts.staleMs ?? STALE_SENDING_MS;
  const joblessMs = opts.joblessMs ?? JOBLESS_AFTER_MS;
  const { dead, claims } = await withSystem(systemDb, async (trx) => {
    const dead = await deadRunners(trx);
    const claims = await sql<{ organization_id: string; id: string }>`
      SELECT organization_id, id FROM send_records
      WHERE status = 'sending' AND (claimed_by = ANY(${dead.map((d) => d.id)}::text[]) OR sent_at < now() - make_interval(secs => ${staleMs / 1000}))
      ORDER BY sent_at LIMIT ${SWEEP_LIMIT}`.execute(trx);
    return { dead, claims: claims.rows };
  });
  const out: SendSweep = { deadRunners: 0, released: 0, possiblySent: 0, requeued: 0 };
  for (const [org, ids] of byOrganization(claims)) {
    const r = await withOrg(db, org, (trx) =>
      settleAbandonedClaims(trx, org, ids, 'the process sending it stopped after it handed the message over; not sent again'),
    );
    out.released += r.released;
    out.possiblySent += r.possiblySent;
  }
  for (const d of dead) {
    // The runner is forgotten once none of its claims is left (a sweep takes SWEEP_LIMIT at most).
    const forgotten = await sql`
      DELETE FROM worker_runners w WHERE w.id = ${d.id}
        AND NOT EXISTS (SELECT 1 FROM send_records r WHERE r.claimed_by = w.id AND r.status = 'sending')`.execute(db);
    if (d.pool_ids.length) await sql`SELECT unlock_dead_jobs(${d.pool_ids}::text[])`.execute(db);
    if (Number(forgotten.numAffectedRows ?? 0) > 0) out.deadRunners += 1;
  }
  const jobless = await withSystem(systemDb, async (trx) => {
    const overdue = await sql<{ organization_id: string; id: string }>`
      SELECT organization_id, id FROM send_queue
      WHERE state IN ('queued', 'deferred') AND next_attempt_at < now() - make_interval(secs => ${joblessMs / 1000})
      ORDER BY next_attempt_at LIMIT ${SWEEP_LIMIT}`.execute(trx);
    if (overdue.rows.length === 0) return [];
    const without = new Set(
      (await sql<{ k: string }>`SELECT k FROM keys_without_job(${overdue.rows.map((r) => r.id)}::text[]) AS k`.execute(trx)).rows.map(
        (r) => r.k,
      ),
    );
    return overdue.rows.filter((r) => without.has(r.id));
  });
  for (const [org, ids] of byOrganization(jobless)) {
    await withOrg(db, org, (trx) =>
      scheduleSends(
        trx,
        org,
        ids.map((id) => ({ queueId: id, runAt: null })),
      ),
    );
    out.requeued += ids.length;
  }
  return out;
}

function byOrganization(rows: { organization_id: string; id: string }[]): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const r of rows) m.set(r.organization_id, [...(m.get(r.organization_id) ?? []), r.id]);
  return m;
}

/** The caps' hourly buckets past any 24-hour window. */
export async function purgeLedgerHours(db: Db): Promise<void> {
  await withSystem(db, (trx) => sql`DELETE FROM send_ledger_hours WHERE hour < now() - interval '2 days'`.execute(trx));
}
