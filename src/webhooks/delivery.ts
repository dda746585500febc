// Webhook delivery: one row of webhook_deliveries per (event, endpoint) attempt chain, updated in
// place by each attempt; a replay is a new row. An attempt is: load the row with its endpoint and
// event, POST the signed envelope (outside any transaction), then record the outcome, the
// endpoint's failure count and the next attempt's job in one transaction.
//
// Exactly-once recording: the row is updated only while it still is at the attempt number and in
// a pending state the job saw, so a job that runs twice (a worker that died after sending, whose
// lock expired) re-sends at most once more (receivers dedupe on the envelope id) and never
// counts or schedules twice.
import { type RawBuilder, sql } from 'kysely';
import { type Tx, withOrg } from '../../db/database.js';
import { recheckOrgHealth } from '../account/org-health.js';
import type { Config } from '../platform/config.js';
import type { Deps } from '../platform/services.js';
import { type EventRow, envelopeBody } from './envelope.js';
import { postWebhook, type SendResult } from './http.js';
import { SIGNATURE_HEADER, signatureHeader } from './signing.js';

export const MAX_ATTEMPTS = 7;

interface LoadedDelivery {
  id: string;
  attempt: number;
  webhook_endpoint_id: string;
  url: string;
  endpoint_status: string;
  secret_ciphertext: string;
  event: EventRow;
}

type Flat = Omit<LoadedDelivery, 'event'> & {
  event_id: string;
  event_type: string;
  api_version: string;
  data: unknown;
  resource_type: string;
  resource_id: string;
  event_created_at: Date;
};

/** The id of the fan-out row of (event, endpoint): deterministic, so a repeated fan-out inserts nothing. */
const FANOUT_ID = (eventId: RawBuilder<unknown>, endpointId: RawBuilder<unknown>) =>
  sql`'whd_' || left(encode(sha256(convert_to(${eventId} || ':' || ${endpointId}, 'UTF8')), 'hex'), 24)`;

/**
 * Loads deliveries with their endpoint and event. `source` is a WITH list whose `src` yields
 * (id, attempt, webhook_endpoint_id, event_id) of the rows to load.
 */
async function load(trx: Tx, organizationId: string, source: RawBuilder<unknown>): Promise<LoadedDelivery[]> {
  const r = await sql<Flat>`
    WITH ${source}
    SELECT d.id, d.attempt, d.webhook_endpoint_id, w.url, w.status AS endpoint_status, w.secret_ciphertext,
           e.id AS event_id, e.type AS event_type, e.api_version, e.data, e.resource_type, e.resource_id,
           e.created_at AS event_created_at
    FROM src d
    JOIN webhook_endpoints w ON w.organization_id = ${organizationId} AND w.id = d.webhook_endpoint_id
    JOIN events e ON e.organization_id = ${organizationId} AND e.id = d.event_id`.execute(trx);
  return r.rows.map((f) => ({
    id: f.id,
    attempt: f.attempt,
    webhook_endpoint_id: f.webhook_endpoint_id,
    url: f.url,
    endpoint_status: f.endpoint_status,
    secret_ciphertext: f.secret_ciphertext,
    event: {
      organization_id: organizationId,
      id: f.event_id,
      type: f.event_type,
      api_version: f.api_version,
      data: f.data,
      resource_type: f.resource_type,
      resource_id: f.resource_id,
      created_at: f.event_created_at,
    },
  }));
}

/** Enqueues one attempt of a delivery row (inside the caller's transaction). */
export async function enqueueAttempt(trx: Tx, organizationId: string, deliveryId: string, attempt: number, runAt?: Date): Promise<void> {
  await sql`SELECT enqueue_job('deliver_webhook',
    json_build_object('organizationId', ${organizationId}::text, 'deliveryId', ${deliveryId}::text, 'attempt', ${attempt}::int),
    ${runAt ?? null}::timestamptz)`.execute(trx);
}

/** Delay before attempt `next` (2..7): the configured delay with ±10% jitter. */
export function retryDelayMs(config: Config, next: number): number {
  const base = config.webhookRetryDelaysSeconds[next - 2] * 1000;
  return Math.round(base * (0.9 + Math.random() * 0.2));
}

type AttemptResult = SendResult | { outcome: 'skip'; error: string };

async function attempt(deps: Deps, d: LoadedDelivery): Promise<AttemptResult> {
  // Deliveries go only to active endpoints; a paused or disabled one drops what was pending.
  if (d.endpoint_status !== 'active') return { outcome: 'skip', error: `not attempted: the endpoint is ${d.endpoint_status}` };
  const secret = deps.services.secretBox.open(d.secret_ciphertext);
  if (secret === null) return { outcome: 'skip', error: 'not attempted: the signing secret cannot be recovered; rotate it' };
  const body = envelopeBody(d.event);
  return postWebhook({
    url: d.url,
    body,
    timeoutMs: deps.config.webhookTimeoutMs,
    allowPrivate: deps.config.webhookAllowPrivateTargets,
    headers: {
      'content-type': 'application/json',
      'user-agent': 'outbound-webhooks/1.0',
      [SIGNATURE_HEADER]: signatureHeader(secret, body),
    },
  });
}

async function record(deps: Deps, trx: Tx, organizationId: string, d: LoadedDelivery, r: AttemptResult): Promise<void> {
  const guard = sql`organization_id = ${organizationId} AND id = ${d.id} AND attempt = ${d.attempt} AND status IN ('pending', 'retrying')`;
  if (r.outcome === 'skip') {
    await sql`UPDATE webhook_deliveries SET status = 'failed', http_status = NULL, error_message = ${r.error}, updated_at = now_ms() WHERE ${guard}`.execute(
      trx,
    );
    return;
  }
  const ok = r.outcome === 'success';
  const next = r.outcome === 'retry' && d.attempt < MAX_ATTEMPTS ? d.attempt + 1 : null;
  const nextAt = next ? new Date(Date.now() + retryDelayMs(deps.config, next)) : null;
  const status = ok ? 'succeeded' : next ? 'retrying' : 'failed';
  const threshold = deps.config.webhookDisableAfterFailures;
  const res = await sql<{ id: string; endpoint_status: string | null }>`
    WITH d AS (
      UPDATE webhook_deliveries SET
        status = ${status}, attempt = ${next ?? d.attempt}, http_status = ${r.httpStatus}, error_message = ${r.error},
        delivered_at = CASE WHEN ${ok} THEN now_ms() ELSE NULL END,
        scheduled_at = COALESCE(${nextAt}::timestamptz, scheduled_at), updated_at = now_ms()
      WHERE ${guard}
      RETURNING id, webhook_endpoint_id
    ), w AS (
      UPDATE webhook_endpoints w SET
        consecutive_failures = CASE WHEN ${ok} THEN 0 ELSE w.consecutive_failures + 1 END,
        last_delivery_at = CASE WHEN ${ok} THEN now_ms() ELSE w.last_delivery_at END,
        status = CASE WHEN NOT ${ok} AND w.status = 'active' AND w.consecutive_failures + 1 >= ${threshold} THEN 'disabled' ELSE w.status END,
        updated_at = now_ms()
      FROM d WHERE w.organization_id = ${organizationId} AND w.id = d.webhook_endpoint_id
        -- Every delivery of an endpoint would otherwise lock its one row: a success touches it
        -- only to reset the count or to move lastDeliveryAt on by at least a second.
        AND (NOT ${ok} OR w.consecutive_failures <> 0 OR w.last_delivery_at IS NULL OR w.last_delivery_at < now_ms() - interval '1 second')
      RETURNING w.status, w.consecutive_failures
    )
    SELECT d.id, (SELECT status FROM w) AS endpoint_status FROM d`.execute(trx);
  if (res.rows.length === 0) return; // another run of this attempt already recorded it
  if (next && nextAt) await enqueueAttempt(trx, organizationId, d.id, next, nextAt);
  if (!ok && res.rows[0].endpoint_status === 'disabled' && d.endpoint_status === 'active') {
    deps.log.warn({ organizationId, webhookEndpointId: d.webhook_endpoint_id }, 'webhook endpoint disabled after consecutive failures');
    await recheckOrgHealth(trx, organizationId, deps.services.clock);
  }
}

/** Attempts the loaded deliveries in parallel, then records every outcome in one transaction. */
async function attemptAll(deps: Deps, organizationId: string, rows: LoadedDelivery[]): Promise<void> {
  if (rows.length === 0) return;
  const results = await Promise.all(rows.map((d) => attempt(deps, d)));
  // Endpoint rows are locked in one order (by id) so concurrent recordings cannot deadlock.
  const order = rows.map((_, i) => i).sort((a, b) => (rows[a].webhook_endpoint_id < rows[b].webhook_endpoint_id ? -1 : 1));
  await withOrg(deps.db, organizationId, async (trx) => {
    for (const i of order) await record(deps, trx, organizationId, rows[i], results[i]);
  });
}

/**
 * Fans an event out: one delivery row per active endpoint subscribed to its type, then the first
 * attempt of each, made right here (no extra job round trip). A repeated run (the job retried
 * after a crash) inserts nothing new and re-attempts only first attempts still unrecorded.
 */
export async function fanOut(deps: Deps, organizationId: string, eventId: string): Promise<void> {
  // One statement: the new rows (RETURNING) plus rows an earlier run made but did not record
  // (the scan sees the table as it was before this statement's insert, so nothing twice).
  const rows = await withOrg(deps.db, organizationId, (trx) =>
    load(
      trx,
      organizationId,
      sql`
    ins AS (
      INSERT INTO webhook_deliveries (organization_id, id, webhook_endpoint_id, event_id, event_type)
      SELECT e.organization_id, ${FANOUT_ID(sql`e.id`, sql`w.id`)}, w.id, e.id, e.type
      FROM events e
      JOIN webhook_endpoints w ON w.organization_id = e.organization_id AND w.status = 'active' AND e.type = ANY (w.event_types)
      WHERE e.organization_id = ${organizationId} AND e.id = ${eventId}
      ON CONFLICT DO NOTHING
      RETURNING id, attempt, webhook_endpoint_id, event_id
    ), src AS (
      SELECT * FROM ins
      UNION ALL
      SELECT id, attempt, webhook_endpoint_id, event_id FROM webhook_deliveries d
      WHERE d.organization_id = ${organizationId} AND d.event_id = ${eventId} AND d.status = 'pending' AND d.attempt = 1
        AND d.id = ${FANOUT_ID(sql`d.event_id`, sql`d.webhook_endpoint_id`)}
    )`,
    ),
  );
  await attemptAll(deps, organizationId, rows);
}

/** One scheduled attempt of one delivery row (a retry, or the first attempt of a replay). */
export async function deliverAttempt(deps: Deps, organizationId: string, deliveryId: string, attemptNo: number): Promise<void> {
  const rows = await withOrg(deps.db, organizationId, (trx) =>
    load(
      trx,
      organizationId,
      sql`src AS (
    SELECT id, attempt, webhook_endpoint_id, event_id FROM webhook_deliveries
    WHERE organization_id = ${organizationId} AND id = ${deliveryId} AND attempt = ${attemptNo} AND status IN ('pending', 'retrying'))`,
    ),
  );
  await attemptAll(deps, organizationId, rows);
}
