// Data that ages out: the event log, webhook deliveries, sends' bodies and inbound raw MIME, each
// kept for a number of days (the deployment's, RETENTION_*_DAYS, which an organization may
// override through the operator API). Each lives in a table partitioned by month on created_at
// (db/migrations/0034_retention.sql). The sweep, hourly:
//   1. makes the partitions of this month and the next three (before rows need them);
//   2. drops whole every month that ended before the longest retention in force (the deployment's,
//      or an organization's longer override) began;
//   3. deletes, in batches, the older rows of organizations that keep less than that (a shorter
//      override, or the deployment's days when some organization keeps longer), and the rows
//      older than that which were written outside every partition (the default partition).
// So a row is kept at least its organization's days, and gone at most a month later.
import { sql } from 'kysely';
import { type Db, withSystem } from '../../db/database.js';
import { RETENTION_BOUNDS, type RetentionDays } from './config.js';

export type RetentionKind = keyof RetentionDays;
export const RETENTION_KINDS = Object.keys(RETENTION_BOUNDS) as RetentionKind[];

/** Each kind's table and the column that, with organization_id and created_at, keys its rows. */
const TABLES: Record<RetentionKind, { table: string; id: string }> = {
  events: { table: 'events', id: 'id' },
  webhookDeliveries: { table: 'webhook_deliveries', id: 'id' },
  sendBodies: { table: 'send_bodies', id: 'send_record_id' },
  inboundRaw: { table: 'inbound_raw_messages', id: 'message_id' },
};

/** Months made ahead of the current one. */
export const PARTITIONS_AHEAD = 3;
/** Rows deleted by one statement (its own transaction), so no delete holds locks for long. */
const BATCH = 5000;
const DAY_MS = 86_400_000;

export type RetentionOverrides = Partial<RetentionDays>;

/** An organization's stored overrides (organizations.retention): the known kinds, within bounds. */
export function retentionOverrides(stored: unknown): RetentionOverrides {
  const out: RetentionOverrides = {};
  if (stored === null || typeof stored !== 'object') return out;
  for (const kind of RETENTION_KINDS) {
    const v = (stored as Record<string, unknown>)[kind];
    const b = RETENTION_BOUNDS[kind];
    if (typeof v === 'number' && Number.isInteger(v) && v >= b.min && v <= b.max) out[kind] = v;
  }
  return out;
}

/** The stored form (organizations.retention) of the operator's changes: a kind per field sent, null clearing it. */
export function retentionChanges(body: {
  eventsDays?: number | null;
  webhookDeliveriesDays?: number | null;
  sendBodiesDays?: number | null;
  inboundRawDays?: number | null;
}): Partial<Record<RetentionKind, number | null>> {
  const out: Partial<Record<RetentionKind, number | null>> = {};
  if (body.eventsDays !== undefined) out.events = body.eventsDays;
  if (body.webhookDeliveriesDays !== undefined) out.webhookDeliveries = body.webhookDeliveriesDays;
  if (body.sendBodiesDays !== undefined) out.sendBodies = body.sendBodiesDays;
  if (body.inboundRawDays !== undefined) out.inboundRaw = body.inboundRawDays;
  return out;
}

/**
 * The days in force for an organization: its overrides over the deployment's. A delivery is never
 * kept longer than its event, which a replay sends again.
 */
export function retentionInForce(deployment: RetentionDays, overrides: RetentionOverrides): RetentionDays {
  const r = { ...deployment, ...overrides };
  return { ...r, webhookDeliveries: Math.min(r.webhookDeliveries, r.events) };
}

const monthStart = (at: Date, plus = 0) => new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + plus, 1)).toISOString().slice(0, 10);
const daysBefore = (at: Date, days: number) => new Date(at.getTime() - days * DAY_MS);

type RowFilter = { org: string } | { except: string[] } | { defaultPartition: true };

/** Deletes the table's rows older than `before` that the filter selects, a batch per transaction. */
async function deleteOlder(systemDb: Db, kind: RetentionKind, before: Date, filter: RowFilter): Promise<number> {
  const { table, id } = TABLES[kind];
  const t = sql.table(table);
  const where =
    'org' in filter
      ? sql`organization_id = ${filter.org}`
      : 'except' in filter
        ? sql`organization_id <> ALL(${filter.except}::text[])`
        : sql`tableoid = ${`public.${table}_default`}::regclass`;
  let total = 0;
  for (;;) {
    const r = await withSystem(systemDb, (trx) =>
      sql`
        DELETE FROM ${t} WHERE (organization_id, ${sql.ref(id)}, created_at) IN (
          SELECT organization_id, ${sql.ref(id)}, created_at FROM ${t}
          WHERE created_at < ${before}::timestamptz AND ${where}
          LIMIT ${BATCH})`.execute(trx),
    );
    const n = Number(r.numAffectedRows ?? 0);
    total += n;
    if (n < BATCH) return total;
  }
}

export interface RetentionSweepReport {
  /** Partitions made ahead. */
  made: number;
  /** Partitions dropped, by name. */
  dropped: string[];
  /** Rows deleted one by one, per kind. */
  deleted: Record<RetentionKind, number>;
}

/** One pass of the sweep (see the top of this file) at `now`. */
export async function runRetentionSweep(
  deps: { systemDb: Db; config: { retention: RetentionDays } },
  now = new Date(),
): Promise<RetentionSweepReport> {
  const { systemDb } = deps;
  const orgs = await withSystem(systemDb, (trx) =>
    trx.selectFrom('organizations').select(['id', 'retention']).where(sql<boolean>`retention <> '{}'::jsonb`).execute(),
  );
  const deployment = retentionInForce(deps.config.retention, {});
  const overridden = orgs.map((o) => ({ id: o.id, days: retentionInForce(deps.config.retention, retentionOverrides(o.retention)) }));
  const report: RetentionSweepReport = { made: 0, dropped: [], deleted: { events: 0, webhookDeliveries: 0, sendBodies: 0, inboundRaw: 0 } };
  for (const kind of RETENTION_KINDS) {
    const { table } = TABLES[kind];
    const keep = Math.max(deployment[kind], ...overridden.map((o) => o.days[kind]));
    await withSystem(systemDb, async (trx) => {
      const made = await sql<{ n: number }>`
        SELECT retention_ensure_partitions(${table}, ${monthStart(now)}::date, ${monthStart(now, PARTITIONS_AHEAD)}::date) AS n`.execute(
        trx,
      );
      report.made += made.rows[0].n;
      const dropped = await sql<{ name: string }>`
        SELECT retention_drop_partitions(${table}, ${daysBefore(now, keep)}::timestamptz) AS name`.execute(trx);
      report.dropped.push(...dropped.rows.map((r) => r.name));
    });
    for (const o of overridden) {
      if (o.days[kind] < keep) report.deleted[kind] += await deleteOlder(systemDb, kind, daysBefore(now, o.days[kind]), { org: o.id });
    }
    if (deployment[kind] < keep) {
      report.deleted[kind] += await deleteOlder(systemDb, kind, daysBefore(now, deployment[kind]), {
        except: overridden.map((o) => o.id),
      });
    }
    report.deleted[kind] += await deleteOlder(systemDb, kind, daysBefore(now, keep), { defaultPartition: true });
  }
  return report;
}
