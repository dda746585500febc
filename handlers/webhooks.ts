// Webhook endpoints, their deliveries, and the event-type catalogue (tag webhooks).
import { type Selectable, sql } from 'kysely';
import type { Tx } from '../db/database.js';
import type { WebhookDeliveriesTable, WebhookEndpointsTable } from '../db/schema.js';
import { recheckOrgHealth } from '../src/account/org-health.js';
import type { Handler, operations } from '../src/http/handler.js';
import { keyset, page } from '../src/http/paging.js';
import { invalid, notFound, ProblemError } from '../src/http/problems.js';
import { ResolveError, resolveTarget, UnsafeTargetError } from '../src/net/address.js';
import type { Config } from '../src/platform/config.js';
import { iso, isoNN, newId } from '../src/platform/ids.js';
import type { SecretBox } from '../src/platform/secret-box.js';
import { EVENT_API_VERSION, EVENT_GROUP, EVENT_TYPES, isEventType, NEVER_EMITTED } from '../src/platform/spec.js';
import { enqueueAttempt } from '../src/webhooks/delivery.js';
import { postWebhook } from '../src/webhooks/http.js';
import { newSigningSecret, SIGNATURE_HEADER, signatureHeader } from '../src/webhooks/signing.js';

type EndpointRow = Selectable<WebhookEndpointsTable>;
type DeliveryRow = Selectable<WebhookDeliveriesTable>;
type Schemas = operations['getWebhook']['responses'][200]['content']['application/json'];
type EventType = Schemas['eventTypes'][number];
type DeliveryStatus = operations['getWebhookDelivery']['responses'][200]['content']['application/json']['status'];

/** How long registration waits for DNS before accepting the URL (delivery checks it again anyway). */
const REGISTRATION_DNS_TIMEOUT_MS = 3000;

export function toEndpoint(r: EndpointRow) {
  return {
    id: r.id,
    url: r.url,
    eventTypes: r.event_types as EventType[],
    status: r.status as 'active' | 'paused' | 'disabled',
    description: r.description,
    lastDeliveryAt: iso(r.last_delivery_at),
    consecutiveFailures: r.consecutive_failures,
    createdAt: isoNN(r.created_at),
  };
}

export function toDelivery(r: DeliveryRow) {
  return {
    id: r.id,
    webhookEndpointId: r.webhook_endpoint_id,
    eventId: r.event_id,
    eventType: r.event_type as EventType,
    status: r.status as DeliveryStatus,
    attempt: r.attempt,
    httpStatus: r.http_status,
    errorMessage: r.error_message,
    deliveredAt: iso(r.delivered_at),
    scheduledAt: isoNN(r.scheduled_at),
    createdAt: isoNN(r.created_at),
  };
}

/** Event types are validated by the schema too; this keeps the rule next to the one catalogue. */
function checkEventTypes(types: string[]): string[] {
  const unknown = types.filter((t) => !isEventType(t));
  if (unknown.length > 0) throw invalid(`Unknown event type ${unknown.join(', ')}; see GET /webhooks/events.`, 'body.eventTypes');
  return [...new Set(types)];
}

/**
 * Refuses URLs whose host is, or resolves to, an address webhooks may not reach. A host that does
 * not resolve now is accepted: every delivery resolves and checks it again before connecting.
 */
async function checkUrl(config: Config, url: string): Promise<void> {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw invalid('url is not an absolute http(s) URL.', 'body.url');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw invalid('url must use http or https.', 'body.url');
  if (u.hostname === '') throw invalid('url has no host.', 'body.url');
  if (config.webhookAllowPrivateTargets) return;
  try {
    await resolveTarget(u, false, REGISTRATION_DNS_TIMEOUT_MS);
  } catch (e) {
    if (e instanceof UnsafeTargetError) throw new ProblemError('unsafe-webhook-url', `Refused webhook URL: ${e.message}.`);
    if (!(e instanceof ResolveError)) throw e;
  }
}

async function findEndpoint(trx: Tx, orgId: string, id: string, lock = false): Promise<EndpointRow> {
  let q = trx.selectFrom('webhook_endpoints').selectAll().where('organization_id', '=', orgId).where('id', '=', id);
  if (lock) q = q.forUpdate();
  const row = await q.executeTakeFirst();
  if (!row) throw notFound('webhook endpoint');
  return row;
}

/** A fresh secret, sealed for storage. */
function freshSecret(box: SecretBox): { plain: string; sealed: string } {
  const plain = newSigningSecret();
  return { plain, sealed: box.seal(plain) };
}

const listWebhooks: Handler<'listWebhooks'> = async ({ trx, auth, query }) => {
  const limit = query.limit ?? 50;
  const q = trx.selectFrom('webhook_endpoints').selectAll().where('organization_id', '=', auth.organizationId);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return { status: 200, body: page(rows, limit, (r) => ({ at: r.created_at, id: r.id }), toEndpoint) };
};

/** Registers an endpoint, or re-registers the oldest ACTIVE one with the same URL (200). */
const createWebhook: Handler<'createWebhook'> = async ({ trx, auth, body, config, services }) => {
  const orgId = auth.organizationId;
  const eventTypes = checkEventTypes(body.eventTypes);
  await checkUrl(config, body.url);
  // Serializes registrations of one URL in one organization, so two concurrent ones make one endpoint.
  await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`webhook-url:${orgId}:${body.url}`}, 0))`.execute(trx);
  const existing = await trx
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('organization_id', '=', orgId)
    .where('url', '=', body.url)
    .where('status', '=', 'active')
    .orderBy('created_at')
    .orderBy('id')
    .limit(1)
    .forUpdate()
    .executeTakeFirst();
  if (existing) {
    let secret = services.secretBox.open(existing.secret_ciphertext);
    const rotated = secret === null ? freshSecret(services.secretBox) : null;
    if (rotated) secret = rotated.plain;
    const row = await trx
      .updateTable('webhook_endpoints')
      .set({
        event_types: eventTypes,
        updated_at: sql`now_ms()`,
        ...(body.description !== undefined ? { description: body.description } : {}),
        ...(rotated ? { secret_ciphertext: rotated.sealed } : {}),
      })
      .where('organization_id', '=', orgId)
      .where('id', '=', existing.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return { status: 200, body: { ...toEndpoint(row), signingSecret: secret!, ...(rotated ? { secretRotated: true } : {}) } };
  }
  const secret = freshSecret(services.secretBox);
  const row = await trx
    .insertInto('webhook_endpoints')
    .values({
      organization_id: orgId,
      id: newId('whe'),
      url: body.url,
      event_types: eventTypes,
      description: body.description ?? null,
      secret_ciphertext: secret.sealed,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { status: 201, body: { ...toEndpoint(row), signingSecret: secret.plain } };
};

const getWebhook: Handler<'getWebhook'> = async ({ trx, auth, params }) => {
  return { status: 200, body: toEndpoint(await findEndpoint(trx, auth.organizationId, params.id)) };
};

const updateWebhook: Handler<'updateWebhook'> = async ({ trx, auth, params, body, config }) => {
  const orgId = auth.organizationId;
  const current = await findEndpoint(trx, orgId, params.id, true);
  const eventTypes = body.eventTypes !== undefined ? checkEventTypes(body.eventTypes) : undefined;
  if (body.url !== undefined && body.url !== current.url) await checkUrl(config, body.url);
  const row = await trx
    .updateTable('webhook_endpoints')
    .set({
      updated_at: sql`now_ms()`,
      ...(body.url !== undefined ? { url: body.url } : {}),
      ...(eventTypes !== undefined ? { event_types: eventTypes } : {}),
      ...(body.description !== undefined ? { description: body.description } : {}),
      ...(body.status !== undefined ? { status: body.status } : {}),
      // Setting active (again) is how a client says "the receiver is fixed": the count restarts.
      ...(body.status === 'active' ? { consecutive_failures: 0 } : {}),
    })
    .where('organization_id', '=', orgId)
    .where('id', '=', params.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  // A disabled endpoint is a reason of the organization's health; setting it active clears it.
  if (current.status === 'disabled' && row.status !== 'disabled') await recheckOrgHealth(trx, orgId);
  return { status: 200, body: toEndpoint(row) };
};

/** Hard delete: the delivery history goes with it; queued attempts find nothing and do nothing. */
const deleteWebhook: Handler<'deleteWebhook'> = async ({ trx, auth, params }) => {
  const orgId = auth.organizationId;
  const gone = await trx
    .deleteFrom('webhook_endpoints')
    .where('organization_id', '=', orgId)
    .where('id', '=', params.id)
    .returning(['id', 'status'])
    .executeTakeFirst();
  if (!gone) throw notFound('webhook endpoint');
  await trx.deleteFrom('webhook_deliveries').where('organization_id', '=', orgId).where('webhook_endpoint_id', '=', params.id).execute();
  if (gone.status === 'disabled') await recheckOrgHealth(trx, orgId);
  return { status: 200, body: { id: params.id, deleted: true as const } };
};

const rotateWebhookSecret: Handler<'rotateWebhookSecret'> = async ({ trx, auth, params, services }) => {
  const orgId = auth.organizationId;
  await findEndpoint(trx, orgId, params.id, true);
  const secret = freshSecret(services.secretBox);
  const row = await trx
    .updateTable('webhook_endpoints')
    .set({ secret_ciphertext: secret.sealed, updated_at: sql`now_ms()` })
    .where('organization_id', '=', orgId)
    .where('id', '=', params.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  return { status: 200, body: { ...toEndpoint(row), signingSecret: secret.plain, secretRotated: true } };
};

/** A signed synthetic event, sent now and reported; nothing is stored or counted. */
const testDeliverWebhook: Handler<'testDeliverWebhook'> = async ({ trx, auth, params, config, services }) => {
  const ep = await findEndpoint(trx, auth.organizationId, params.id);
  const eventId = newId('evt');
  const secret = services.secretBox.open(ep.secret_ciphertext);
  if (secret === null) {
    return {
      status: 200,
      body: {
        delivered: false,
        httpStatus: null,
        errorMessage: 'the signing secret cannot be recovered; rotate it',
        durationMs: 0,
        eventId,
      },
    };
  }
  const body = JSON.stringify({
    apiVersion: EVENT_API_VERSION,
    id: eventId,
    type: ep.event_types[0],
    createdAt: new Date().toISOString(),
    organizationId: auth.organizationId,
    data: { test: true },
    resource: { type: 'WebhookEndpoint', id: ep.id },
  });
  const r = await postWebhook({
    url: ep.url,
    body,
    timeoutMs: config.webhookTimeoutMs,
    allowPrivate: config.webhookAllowPrivateTargets,
    headers: {
      'content-type': 'application/json',
      'user-agent': 'outbound-webhooks/1.0',
      [SIGNATURE_HEADER]: signatureHeader(secret, body),
    },
  });
  return {
    status: 200,
    body: { delivered: r.outcome === 'success', httpStatus: r.httpStatus, errorMessage: r.error, durationMs: r.durationMs, eventId },
  };
};

const listWebhookDeliveries: Handler<'listWebhookDeliveries'> = async ({ trx, auth, params, query }) => {
  const orgId = auth.organizationId;
  await findEndpoint(trx, orgId, params.id);
  const limit = query.limit ?? 50;
  const q = trx
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('organization_id', '=', orgId)
    .where('webhook_endpoint_id', '=', params.id);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return { status: 200, body: page(rows, limit, (r) => ({ at: r.created_at, id: r.id }), toDelivery) };
};

async function findDelivery(trx: Tx, orgId: string, endpointId: string, deliveryId: string): Promise<DeliveryRow> {
  const row = await trx
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('organization_id', '=', orgId)
    .where('webhook_endpoint_id', '=', endpointId)
    .where('id', '=', deliveryId)
    .executeTakeFirst();
  if (!row) throw notFound('webhook delivery');
  return row;
}

const getWebhookDelivery: Handler<'getWebhookDelivery'> = async ({ trx, auth, params }) => {
  return { status: 200, body: toDelivery(await findDelivery(trx, auth.organizationId, params.id, params.deliveryId)) };
};

/** A new row (attempt 1, due now) for the same event; the original row is left as it is. */
const replayWebhookDelivery: Handler<'replayWebhookDelivery'> = async ({ trx, auth, params }) => {
  const orgId = auth.organizationId;
  const original = await findDelivery(trx, orgId, params.id, params.deliveryId);
  const row = await trx
    .insertInto('webhook_deliveries')
    .values({
      organization_id: orgId,
      id: newId('whd'),
      webhook_endpoint_id: original.webhook_endpoint_id,
      event_id: original.event_id,
      event_type: original.event_type,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await enqueueAttempt(trx, orgId, row.id, 1);
  return { status: 201, body: toDelivery(row) };
};

const CATALOGUE = EVENT_TYPES.map((type) => ({
  type: type as EventType,
  group: EVENT_GROUP.get(type) ?? 'Other',
  emitted: !NEVER_EMITTED.has(type),
})).sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0));

const listWebhookEventTypes: Handler<'listWebhookEventTypes'> = async () => {
  return { status: 200, body: { apiVersion: EVENT_API_VERSION as '2026-07-21', data: CATALOGUE } };
};

export const webhookHandlers = {
  listWebhooks,
  createWebhook,
  getWebhook,
  updateWebhook,
  deleteWebhook,
  rotateWebhookSecret,
  testDeliverWebhook,
  listWebhookDeliveries,
  getWebhookDelivery,
  replayWebhookDelivery,
  listWebhookEventTypes,
};
