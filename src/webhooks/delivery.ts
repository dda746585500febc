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
//   1. webhook_endpoints rows, several in ascending id: FOR NO KEY UPDATE to change one
//      (recording, PATCH, rotate-secret, re-registration), FOR KEY SHARE to keep one while rows of
//      it are written (a fan-out's claim, a replay: only a delete waits for it), the DELETE to
//      remove one;
//   2. webhook_deliveries rows;
//   3. the organization's row (its health), last and once per transaction.
// Recording locks and updates the endpoints whose count changes (id order) before its deliveries,
// and rechecks the organization's health once, after them all, not as each endpoint is disabled.
// The requests (src/webhooks/endpoints.ts, delivery-log.ts) each lock one endpoint before its
// deliveries and recheck the organization's health at their end.
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

/**
 * Records the outcomes in one transaction, in the lock order: (1) the endpoints whose failure
 * count or lastDeliveryAt changes, locked in id order and updated; (2) the deliveries, each only
 * while this run still holds its claim, with the next attempt's job; (3) the organization's
 * health, once, when an endpoint was disabled. A batch holds at most one delivery per endpoint (a
 * fan-out makes one row per endpoint; a scheduled attempt is one row).
 */
async function recordAll(deps: Deps, trx: Tx, org: string, rows: LoadedDelivery[], results: AttemptResult[]): Promise<void> {
  const counted = rows.map((d, i) => ({ d, r: results[i] })).filter((x) => x.r.outcome !== 'skip');
  const ok = (r: AttemptResult) => r.outcome === 'success';
  // (1) A failure counts, a success resets the count; only outcomes this run still holds the
  // claim of. Every delivery of an endpoint would otherwise lock its one row: a success touches it
  // only to reset the count or to move lastDeliveryAt on by at least a second. The endpoints are
  // locked by one statement, in id order, then changed by another.
  const o = sql`unnest(${counted.map((x) => x.d.id)}::text[], ${counted.map((x) => x.d.webhook_endpoint_id)}::text[],
    ${counted.map((x) => x.d.attempt)}::int[], ${counted.map((x) => x.d.claimed_at)}::timestamptz[], ${counted.map((x) => ok(x.r))}::boolean[])
    AS o(id, ep, attempt, claimed_at, ok)`;
  const locked =
    counted.length === 0
      ? []
      : (
          await sql<{ id: string }>`
    SELECT w.id FROM webhook_endpoints w
    JOIN ${o} ON o.ep = w.id
    JOIN webhook_deliveries d ON d.organization_id = ${org} AND d.id = o.id AND d.attempt = o.attempt
      AND d.status IN ('pending', 'retrying') AND d.claimed_at = o.claimed_at
    WHERE w.organization_id = ${org}
      AND (NOT o.ok OR w.consecutive_failures <> 0 OR w.last_delivery_at IS NULL OR w.last_delivery_at < now_ms() - interval '1 second')
    ORDER BY w.id FOR NO KEY UPDATE OF w`.execute(trx)
        ).rows.map((w) => w.id);
  const endpoints =
    locked.length === 0
      ? []
      : (
          await sql<{ id: string; status: string }>`
    UPDATE webhook_endpoints w SET
      consecutive_failures = CASE WHEN o.ok THEN 0 ELSE w.consecutive_failures + 1 END,
      last_delivery_at = CASE WHEN o.ok THEN now_ms() ELSE w.last_delivery_at END,
      status = CASE WHEN NOT o.ok AND w.status = 'active' AND w.consecutive_failures + 1 >= ${deps.config.webhookDisableAfterFailures}
               THEN 'disabled' ELSE w.status END,
      updated_at = now_ms()
    FROM ${o} WHERE w.organization_id = ${org} AND w.id = ANY (${locked}::text[]) AND w.id = o.ep
    RETURNING w.id, w.status`.execute(trx)
        ).rows;
  const disabled = counted.filter(
    (x) =>
      !ok(x.r) && x.d.endpoint_status === 'active' && endpoints.some((w) => w.id === x.d.webhook_endpoint_id && w.status === 'disabled'),
  );
  for (const x of disabled) {
    deps.log.warn(
      { organizationId: org, webhookEndpointId: x.d.webhook_endpoint_id },
      'webhook endpoint disabled after consecutive failures',
    );
  }
  // (2) Each delivery: its status, attempt number (the next one when retried), answer and due time.
  const out = rows.map((d, i) => {
    const r = results[i];
    if (r.outcome === 'skip') return { d, status: 'failed', attempt: d.attempt, httpStatus: null, error: r.error, ok: false, nextAt: null };
    const next = r.outcome === 'retry' && d.attempt < MAX_ATTEMPTS ? d.attempt + 1 : null;
    return {
      d,
      status: ok(r) ? 'succeeded' : next ? 'retrying' : 'failed',
      attempt: next ?? d.attempt,
      httpStatus: r.httpStatus,
      error: r.error,
      ok: ok(r),
      nextAt: next ? new Date(Date.now() + retryDelayMs(deps.config, next)) : null,
    };
  });
  const recorded = await sql<{ id: string; attempt: number; next_at: Date | null }>`
    UPDATE webhook_deliveries d SET
      status = v.status, attempt = v.next_attempt, http_status = v.http_status, error_message = v.error,
      delivered_at = CASE WHEN v.ok THEN now_ms() ELSE NULL END, scheduled_at = COALESCE(v.next_at, d.scheduled_at),
      claimed_at = NULL, updated_at = now_ms()
    FROM unnest(${out.map((o) => o.d.id)}::text[], ${out.map((o) => o.d.attempt)}::int[], ${out.map((o) => o.d.claimed_at)}::timestamptz[],
                ${out.map((o) => o.status)}::text[], ${out.map((o) => o.attempt)}::int[], ${out.map((o) => o.httpStatus)}::int[],
                ${out.map((o) => o.error)}::text[], ${out.map((o) => o.ok)}::boolean[], ${out.map((o) => o.nextAt)}::timestamptz[])
         AS v(id, attempt, claimed_at, status, next_attempt, http_status, error, ok, next_at)
    WHERE d.organization_id = ${org} AND d.id = v.id AND d.attempt = v.attempt AND d.status IN ('pending', 'retrying')
      AND d.claimed_at = v.claimed_at
    RETURNING d.id, d.attempt, v.next_at`.execute(trx);
  // (A row not returned was recorded by another run of this attempt, whose claim replaced this one's.)
  for (const r of recorded.rows) if (r.next_at) await enqueueAttempt(trx, org, r.id, r.attempt, r.next_at);
  // (3) Last, once.
  if (disabled.length > 0) await recheckOrgHealth(trx, org, deps.services.clock);
}

/** Attempts the claimed deliveries in parallel, then records every outcome in one transaction. */
async function attemptAll(deps: Deps, organizationId: string, rows: LoadedDelivery[]): Promise<void> {
  if (rows.length === 0) return;
  const results = await Promise.all(rows.map((d) => attempt(deps, d)));
  // Fault point for tests: a run that stops after sending, before recording.
  if (deps.services.faults.has('webhook:after-send')) throw new Error('injected fault: webhook:after-send');
  await withOrg(deps.db, organizationId, (trx) => recordAll(deps, trx, organizationId, rows, results));
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
  // One statement: the endpoints it writes rows of, locked first (KEY SHARE, by id: a delete of
  // one waits, so no row is left behind it); the new rows, one per active endpoint subscribed to
  // the type (RETURNING, claimed as they are made); the rows an earlier run made but did not
  // record whose claim is absent or stale (claimed now, each after its endpoint's lock: they are
  // joined to the locked endpoints); and those whose claim holds. The scans see the table as it
  // was before this statement's insert and update, so nothing twice.
  const { rows, held } = await withOrg(deps.db, organizationId, (trx) =>
    claim(
      trx,
      organizationId,
      sql`
    unrecorded AS (
      SELECT id, webhook_endpoint_id, claimed_at FROM webhook_deliveries d
      WHERE d.organization_id = ${organizationId} AND d.event_id = ${eventId} AND d.status = 'pending' AND d.attempt = 1
        AND d.id = ${FANOUT_ID(sql`d.event_id`, sql`d.webhook_endpoint_id`)}
    ), eps AS (
      SELECT w.id, w.status = 'active' AND e.type = ANY (w.event_types) AS subscribed
      FROM webhook_endpoints w
      JOIN events e ON e.organization_id = w.organization_id AND e.id = ${eventId}
      WHERE w.organization_id = ${organizationId}
        AND ((w.status = 'active' AND e.type = ANY (w.event_types)) OR w.id IN (SELECT webhook_endpoint_id FROM unrecorded))
      ORDER BY w.id FOR KEY SHARE OF w
    ), ins AS (
      -- At the event's time: the partition key (src/platform/retention.ts) is then the same for a
      -- repeated fan-out, whose row conflicts with the first one's.
      INSERT INTO webhook_deliveries (organization_id, id, webhook_endpoint_id, event_id, event_type, claimed_at, created_at)
      SELECT e.organization_id, ${FANOUT_ID(sql`e.id`, sql`w.id`)}, w.id, e.id, e.type, now_ms(), e.created_at
      FROM events e JOIN eps w ON w.subscribed
      WHERE e.organization_id = ${organizationId} AND e.id = ${eventId}
      ON CONFLICT DO NOTHING
      RETURNING id, attempt, webhook_endpoint_id, event_id, claimed_at
    ), mine AS (
      UPDATE webhook_deliveries d SET claimed_at = now_ms()
      FROM unrecorded u JOIN eps ON eps.id = u.webhook_endpoint_id
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
    ),
  );
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
