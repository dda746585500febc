// Webhook delivery: one row of webhook_deliveries per (event, endpoint) attempt chain, updated in
// place by each attempt; a replay is a new row. An attempt is: claim the row (with its endpoint
// and event loaded), POST the signed envelope (outside any transaction), then record the outcome,
// the endpoint's failure count and the next attempt's job in one transaction.
//
// Sent once per attempt: the row is claimed (claimed_at) in the transaction that makes or loads
// it, before the POST, and the outcome is recorded only under that claim, and only while the row
// is still at that attempt and pending or retrying. A job run that finds a row another run claimed
// less than a lease ago (the attempt's timeout plus a minute) does not send it: a job retried
// after a failure (its outcomes not recorded) sends nothing twice, and fails again until the claim
// is stale. A stale claim means its run stopped (a worker that died after sending, whose job lock
// expired): the attempt is then made again (at least once; receivers dedupe on the envelope id),
// never lost.
//
// Lock order (every job and request that touches webhook endpoints and organizations keeps it,
// so none waits in a cycle; spec/decisions/webhooks-events.md):
//   1. webhook_endpoints rows, several in ascending id: FOR KEY SHARE where the endpoint only has
//      to stay (fan-out and recording lock their endpoints this way first, which only a delete
//      waits for), FOR NO KEY UPDATE or the UPDATE itself to change one, the DELETE to remove one;
//   2. webhook_deliveries rows;
//   3. the organization's row (its health), last and once per transaction.
// The requests (src/webhooks/endpoints.ts, delivery-log.ts) each lock one endpoint before its
// deliveries and recheck the organization's health at their end; recording disables endpoints
// in id order and rechecks the health once, after the last.
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
  /** This run's claim of the attempt: the outcome is recorded only while the row holds it. */
  claimed_at: Date;
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

/** How long an attempt's claim keeps other runs from making it: its timeout, and a minute to record it. */
const claimLease = (config: Config) => sql`${config.webhookTimeoutMs + 60_000} * interval '1 millisecond'`;

/**
 * Claims deliveries and loads them with their endpoint and event. `source` is a WITH list whose
 * `src` yields (id, attempt, webhook_endpoint_id, event_id, claimed_at) of the rows this run
 * claimed, and whose `held` yields the rows of the same work another run claimed within the
 * lease. Returns the claimed rows, and how many are held.
 */
async function claim(trx: Tx, organizationId: string, source: RawBuilder<unknown>): Promise<{ rows: LoadedDelivery[]; held: number }> {
  // One row even when nothing was claimed, so `held` is always counted.
  const r = await sql<Flat & { held: number }>`
    WITH ${source}
    SELECT h.n AS held, l.* FROM (SELECT count(*)::int AS n FROM held) h
    LEFT JOIN LATERAL (
      SELECT d.id, d.attempt, d.webhook_endpoint_id, d.claimed_at, w.url, w.status AS endpoint_status, w.secret_ciphertext,
             e.id AS event_id, e.type AS event_type, e.api_version, e.data, e.resource_type, e.resource_id,
             e.created_at AS event_created_at
      FROM src d
      JOIN webhook_endpoints w ON w.organization_id = ${organizationId} AND w.id = d.webhook_endpoint_id
      JOIN events e ON e.organization_id = ${organizationId} AND e.id = d.event_id
    ) l ON true`.execute(trx);
  const rows = r.rows
    .filter((f) => f.id !== null)
    .map((f) => ({
      id: f.id,
      attempt: f.attempt,
      webhook_endpoint_id: f.webhook_endpoint_id,
      url: f.url,
      endpoint_status: f.endpoint_status,
      secret_ciphertext: f.secret_ciphertext,
      claimed_at: f.claimed_at,
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
  return { rows, held: r.rows[0]?.held ?? 0 };
}

/** Some deliveries were left to the run that claimed them: the job fails, and is tried again once the claims may be stale. */
class HeldByAnotherRun extends Error {
  constructor(n: number) {
    super(`${n} delivery attempt(s) claimed by an earlier run that has not recorded them; not sent again while the claim holds`);
  }
}

/** Locks endpoints FOR KEY SHARE in id order: the first step of the lock order (see the top of this file). */
async function lockEndpoints(trx: Tx, organizationId: string, ids: string[]): Promise<void> {
  await sql`SELECT id FROM webhook_endpoints WHERE organization_id = ${organizationId} AND id = ANY (${[...new Set(ids)].sort()}::text[])
    ORDER BY id FOR KEY SHARE`.execute(trx);
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

/** Records one attempt's outcome under this run's claim; true when it disabled the endpoint. */
async function record(deps: Deps, trx: Tx, organizationId: string, d: LoadedDelivery, r: AttemptResult): Promise<boolean> {
  const guard = sql`organization_id = ${organizationId} AND id = ${d.id} AND attempt = ${d.attempt} AND status IN ('pending', 'retrying')
    AND claimed_at = ${d.claimed_at}::timestamptz`;
  if (r.outcome === 'skip') {
    await sql`UPDATE webhook_deliveries SET status = 'failed', http_status = NULL, error_message = ${r.error}, claimed_at = NULL, updated_at = now_ms()
      WHERE ${guard}`.execute(trx);
    return false;
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
        scheduled_at = COALESCE(${nextAt}::timestamptz, scheduled_at), claimed_at = NULL, updated_at = now_ms()
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
  if (res.rows.length === 0) return false; // another run of this attempt already recorded it
  if (next && nextAt) await enqueueAttempt(trx, organizationId, d.id, next, nextAt);
  if (!ok && res.rows[0].endpoint_status === 'disabled' && d.endpoint_status === 'active') {
    deps.log.warn({ organizationId, webhookEndpointId: d.webhook_endpoint_id }, 'webhook endpoint disabled after consecutive failures');
    return true;
  }
  return false;
}

/**
 * Attempts the claimed deliveries in parallel, then records every outcome in one transaction, in
 * the lock order: the endpoints (KEY SHARE, by id), each delivery with its endpoint's count (by
 * endpoint id), and the organization's health once at the end if an endpoint was disabled.
 */
async function attemptAll(deps: Deps, organizationId: string, rows: LoadedDelivery[]): Promise<void> {
  if (rows.length === 0) return;
  const results = await Promise.all(rows.map((d) => attempt(deps, d)));
  // Fault point for tests: a run that stops after sending, before recording.
  if (deps.services.faults.has('webhook:after-send')) throw new Error('injected fault: webhook:after-send');
  const key = (d: LoadedDelivery) => `${d.webhook_endpoint_id} ${d.id}`;
  const order = rows.map((_, i) => i).sort((a, b) => (key(rows[a]) < key(rows[b]) ? -1 : 1));
  await withOrg(deps.db, organizationId, async (trx) => {
    await lockEndpoints(
      trx,
      organizationId,
      rows.map((d) => d.webhook_endpoint_id),
    );
    let disabled = false;
    for (const i of order) disabled = (await record(deps, trx, organizationId, rows[i], results[i])) || disabled;
    if (disabled) await recheckOrgHealth(trx, organizationId, deps.services.clock);
  });
}

/**
 * Fans an event out: one delivery row per active endpoint subscribed to its type, then the first
 * attempt of each, made right here (no extra job round trip). A repeated run (the job retried
 * after a failure or a crash) inserts nothing new and attempts only first attempts still
 * unrecorded that no run claimed within the lease; when another run's claims hold, it fails after
 * its own attempts, to look again later.
 */
export async function fanOut(deps: Deps, organizationId: string, eventId: string): Promise<void> {
  const lease = claimLease(deps.config);
  const { rows, held } = await withOrg(deps.db, organizationId, async (trx) => {
    // The subscribed active endpoints, locked first (the lock order), so none is deleted under the new rows.
    const endpoints = await sql<{ id: string }>`
      SELECT w.id FROM webhook_endpoints w
      JOIN events e ON e.organization_id = w.organization_id AND e.id = ${eventId} AND e.type = ANY (w.event_types)
      WHERE w.organization_id = ${organizationId} AND w.status = 'active'
      ORDER BY w.id FOR KEY SHARE OF w`.execute(trx);
    const ids = endpoints.rows.map((w) => w.id);
    // One statement: the new rows (RETURNING, claimed as they are made), the rows an earlier run
    // made but did not record whose claim is absent or stale (claimed now), and those whose claim
    // holds. The scans see the table as it was before this statement's insert and update, so
    // nothing twice.
    return claim(
      trx,
      organizationId,
      sql`
    ins AS (
      INSERT INTO webhook_deliveries (organization_id, id, webhook_endpoint_id, event_id, event_type, claimed_at)
      SELECT e.organization_id, ${FANOUT_ID(sql`e.id`, sql`w`)}, w, e.id, e.type, now_ms()
      FROM events e CROSS JOIN unnest(${ids}::text[]) AS w
      WHERE e.organization_id = ${organizationId} AND e.id = ${eventId}
      ON CONFLICT DO NOTHING
      RETURNING id, attempt, webhook_endpoint_id, event_id, claimed_at
    ), unrecorded AS (
      SELECT id, claimed_at FROM webhook_deliveries d
      WHERE d.organization_id = ${organizationId} AND d.event_id = ${eventId} AND d.status = 'pending' AND d.attempt = 1
        AND d.id = ${FANOUT_ID(sql`d.event_id`, sql`d.webhook_endpoint_id`)}
    ), mine AS (
      UPDATE webhook_deliveries d SET claimed_at = now_ms()
      FROM unrecorded u
      WHERE d.organization_id = ${organizationId} AND d.id = u.id AND (d.claimed_at IS NULL OR d.claimed_at < now_ms() - ${lease})
        AND d.status = 'pending' AND d.attempt = 1
      RETURNING d.id, d.attempt, d.webhook_endpoint_id, d.event_id, d.claimed_at
    ), held AS (
      SELECT id FROM unrecorded WHERE claimed_at >= now_ms() - ${lease}
    ), src AS (
      SELECT * FROM ins
      UNION ALL
      SELECT * FROM mine
    )`,
    );
  });
  await attemptAll(deps, organizationId, rows);
  if (held > 0) throw new HeldByAnotherRun(held);
}

/** One scheduled attempt of one delivery row (a retry, or the first attempt of a replay). */
export async function deliverAttempt(deps: Deps, organizationId: string, deliveryId: string, attemptNo: number): Promise<void> {
  const lease = claimLease(deps.config);
  const { rows, held } = await withOrg(deps.db, organizationId, (trx) =>
    claim(
      trx,
      organizationId,
      sql`
    due AS (
      SELECT id, claimed_at FROM webhook_deliveries
      WHERE organization_id = ${organizationId} AND id = ${deliveryId} AND attempt = ${attemptNo} AND status IN ('pending', 'retrying')
    ), src AS (
      UPDATE webhook_deliveries d SET claimed_at = now_ms()
      FROM due u
      WHERE d.organization_id = ${organizationId} AND d.id = u.id AND (d.claimed_at IS NULL OR d.claimed_at < now_ms() - ${lease})
        AND d.attempt = ${attemptNo} AND d.status IN ('pending', 'retrying')
      RETURNING d.id, d.attempt, d.webhook_endpoint_id, d.event_id, d.claimed_at
    ), held AS (
      SELECT id FROM due WHERE claimed_at >= now_ms() - ${lease}
    )`,
    ),
  );
  await attemptAll(deps, organizationId, rows);
  if (held > 0) throw new HeldByAnotherRun(held);
}
