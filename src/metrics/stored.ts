// Series derived at scrape time from the database, in one statement: the job queue (graphile-
// worker's tables) and the work the jobs did (webhook deliveries, sends and their gates, draft
// generation, inbound messages). Read from the rows rather than counted in memory, they are exact
// whichever process did the work (`npm run worker` apart from the API, several API processes) and
// survive restarts; every API process reports the same values. Outcome series are counters (their
// rows only grow, apart from erasure), states a row leaves again are gauges.
import { sql } from 'kysely';
import { Counter, Gauge, type Registry } from 'prom-client';
import { type Db, withSystem } from '../../db/database.js';

interface Row {
  m: string;
  a: string;
  b: string;
  v: number;
}

/** The scrape query's bound: a slow scrape gives up (and reports outbound_metrics_database_up 0) rather than pile up. */
const SCRAPE_TIMEOUT_MS = 5000;

async function readRows(db: Db): Promise<Row[]> {
  return withSystem(db, async (trx) => {
    await sql`SELECT set_config('statement_timeout', ${String(SCRAPE_TIMEOUT_MS)}, true)`.execute(trx);
    // Events and inbound messages are read per organization on their (organization_id, type /
    // direction) indexes; the delivery, queue and draft tables have no state index, so they are
    // counted by one scan each (see docs/metrics.md on scrape cost).
    const r = await sql<Row>`
      WITH jobs AS (
        -- Every known task with its jobs' states (job_queue_jobs(), 0021_least_privilege.sql: only
        -- the worker's role reads the queue's tables).
        SELECT task, run_at, state FROM job_queue_jobs()
      ), states AS (
        SELECT task, s.state FROM (SELECT DISTINCT task FROM jobs) k
        CROSS JOIN (VALUES ('due'), ('scheduled'), ('running'), ('failed')) AS s(state)
      )
      SELECT 'jobs' AS m, s.task AS a, s.state AS b, count(j.state)::float8 AS v
        FROM states s LEFT JOIN jobs j ON j.task = s.task AND j.state = s.state GROUP BY s.task, s.state
      UNION ALL
      SELECT 'job_age', task, '', coalesce(extract(epoch FROM now() - min(run_at) FILTER (WHERE state = 'due')), 0)::float8
        FROM jobs GROUP BY task
      UNION ALL
      SELECT 'webhook', status, '', count(*)::float8 FROM webhook_deliveries GROUP BY status
      UNION ALL
      SELECT 'send', state, coalesce(held_by, ''), count(*)::float8 FROM send_queue GROUP BY state, held_by
      UNION ALL
      SELECT 'draft', CASE WHEN provider IS NULL THEN 'manual' WHEN provider = 'fallback' THEN 'fallback' ELSE 'model' END,
             flagged::text, count(*)::float8
        FROM drafts GROUP BY 2, 3
      UNION ALL
      SELECT 'draft_failed', coalesce(f.reason, 'unknown'), '', count(*)::float8
        FROM organizations o
        CROSS JOIN LATERAL (SELECT e.data->>'reason' AS reason FROM events e WHERE e.organization_id = o.id AND e.type = 'draft.failed') f
        GROUP BY 2
      UNION ALL
      SELECT 'inbound', coalesce(i.intent, 'unclassified'), '', count(*)::float8
        FROM organizations o
        CROSS JOIN LATERAL (SELECT m.intent FROM messages m WHERE m.organization_id = o.id AND m.direction = 'INBOUND') i
        GROUP BY 2`.execute(trx);
    return r.rows;
  });
}

/** Registers the stored series; `refresh` reads them (call it before rendering a scrape). */
export function storedMetrics(register: Registry, db: Db) {
  const registers = [register];
  const jobs = new Gauge({
    name: 'outbound_job_queue_jobs',
    registers,
    labelNames: ['task', 'state'] as const,
    help: 'Background jobs by task and state: due (waiting for a worker), scheduled (run_at in the future), running (locked by a worker), failed (attempts exhausted).',
  });
  const jobAge = new Gauge({
    name: 'outbound_job_queue_oldest_due_age_seconds',
    registers,
    labelNames: ['task'] as const,
    help: 'Seconds the oldest due, unlocked job of the task has waited past its run_at (0 when none is waiting).',
  });
  const deliveries = new Counter({
    name: 'outbound_webhook_deliveries_total',
    registers,
    labelNames: ['outcome'] as const,
    help: 'Webhook deliveries that reached an outcome (succeeded, failed after the last retry or refused), from the delivery rows.',
  });
  const deliveriesOpen = new Gauge({
    name: 'outbound_webhook_deliveries_open',
    registers,
    labelNames: ['status'] as const,
    help: 'Webhook deliveries still to be attempted: pending (first attempt) or retrying.',
  });
  const sends = new Counter({
    name: 'outbound_sends_total',
    registers,
    labelNames: ['outcome', 'gate'] as const,
    help: 'Sequence steps the dispatcher finished with, by outcome (sent, possibly_sent, failed, skipped) and the gate or reason that decided it (held_by of the send queue; "none" when sent).',
  });
  const queue = new Gauge({
    name: 'outbound_send_queue_steps',
    registers,
    labelNames: ['state', 'gate'] as const,
    help: 'Steps in the send queue not finished yet, by state (queued, deferred, sending) and the gate deferring them ("none" when not held).',
  });
  const drafts = new Counter({
    name: 'outbound_drafts_generated_total',
    registers,
    labelNames: ['provider', 'flagged'] as const,
    help: 'Draft versions written, by provider (model, fallback, manual) and whether the guardrails flagged them.',
  });
  const draftFailures = new Counter({
    name: 'outbound_draft_generation_failures_total',
    registers,
    labelNames: ['reason'] as const,
    help: 'Draft steps generation could not write (the draft.failed events), by reason.',
  });
  const inbound = new Counter({
    name: 'outbound_inbound_messages_total',
    registers,
    labelNames: ['intent'] as const,
    help: 'Inbound messages stored, by classified intent ("unclassified" until classified).',
  });
  const up = new Gauge({
    name: 'outbound_metrics_database_up',
    registers,
    help: '1 when this scrape read the stored series from the database, 0 when it could not (they are then absent).',
  });
  const all = [jobs, jobAge, deliveries, deliveriesOpen, sends, queue, drafts, draftFailures, inbound];

  return async function refresh(): Promise<void> {
    let rows: Row[];
    try {
      rows = await readRows(db);
    } catch {
      for (const m of all) m.reset();
      up.set(0);
      return;
    }
    for (const m of all) m.reset();
    // A counter's value is set by inc from zero after the reset.
    for (const r of rows) {
      switch (r.m) {
        case 'jobs':
          jobs.set({ task: r.a, state: r.b }, r.v);
          break;
        case 'job_age':
          jobAge.set({ task: r.a }, r.v);
          break;
        case 'webhook':
          if (r.a === 'pending' || r.a === 'retrying') deliveriesOpen.set({ status: r.a }, r.v);
          else deliveries.inc({ outcome: r.a }, r.v);
          break;
        case 'send':
          if (r.a === 'queued' || r.a === 'deferred' || r.a === 'sending') queue.inc({ state: r.a, gate: r.b || 'none' }, r.v);
          else sends.inc({ outcome: r.a, gate: r.b || 'none' }, r.v);
          break;
        case 'draft':
          drafts.inc({ provider: r.a, flagged: r.b }, r.v);
          break;
        case 'draft_failed':
          draftFailures.inc({ reason: r.a }, r.v);
          break;
        case 'inbound':
          inbound.inc({ intent: r.a }, r.v);
          break;
      }
    }
    for (const status of ['pending', 'retrying']) deliveriesOpen.inc({ status }, 0);
    for (const outcome of ['succeeded', 'failed']) deliveries.inc({ outcome }, 0);
    up.set(1);
  };
}
