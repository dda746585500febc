// Webhook endpoints an organization registers: registration (re-registering an active URL updates
// it), changes, deletion and secret rotation. The signing secret is stored sealed and shown only
// when it is made.
import { type Selectable, sql } from 'kysely';
import { type Db, type Tx, withOrg } from '../../db/database.js';
import type { WebhookEndpoints } from '../../db/schema.js';
import { recheckOrgHealth } from '../account/org-health.js';
import type { operations } from '../http/handler.js';
import { keyset, page } from '../http/paging.js';
import { invalid, notFound, ProblemError } from '../http/problems.js';
import { type Lookup, ResolveError, resolveTarget, UnsafeTargetError } from '../net/address.js';
import type { Clock } from '../platform/clock.js';
import type { Config } from '../platform/config.js';
import { iso, isoNN, newId } from '../platform/ids.js';
import type { SecretBox } from '../platform/secret-box.js';
import type { Services } from '../platform/services.js';
import { isEventType } from '../platform/spec.js';
import { newSigningSecret } from './signing.js';

export type EndpointRow = Selectable<WebhookEndpoints>;
type Schemas = operations['getWebhook']['responses'][200]['content']['application/json'];
export type EventType = Schemas['eventTypes'][number];
type NewEndpoint = operations['createWebhook']['requestBody']['content']['application/json'];
type EndpointChanges = operations['updateWebhook']['requestBody']['content']['application/json'];

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

/** Event types are validated by the schema too; this keeps the rule next to the one catalogue. */
function checkEventTypes(types: string[]): string[] {
  const unknown = types.filter((t) => !isEventType(t));
  if (unknown.length > 0) throw invalid(`Unknown event type ${unknown.join(', ')}; see GET /webhooks/events.`, 'body.eventTypes');
  return [...new Set(types)];
}

/**
 * Refuses URLs whose host is, or resolves to, an address webhooks may not reach. A host that does
 * not resolve now is accepted: every delivery resolves and checks it again before connecting. It
 * waits on DNS, so it runs before any transaction is opened (the caller's handler is
 * `x-long-running`).
 */
async function checkUrl(config: Config, url: string, lookup: Lookup | undefined): Promise<void> {
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
    await resolveTarget(u, false, REGISTRATION_DNS_TIMEOUT_MS, { lookup });
  } catch (e) {
    if (e instanceof UnsafeTargetError) throw new ProblemError('unsafe-webhook-url', `Refused webhook URL: ${e.message}.`);
    if (!(e instanceof ResolveError)) throw e;
  }
}

/**
 * The endpoint; 404 when unknown or foreign. `lock`: `change` to change it (FOR NO KEY UPDATE),
 * `keep` to keep it from being deleted while rows of it are written (FOR KEY SHARE). Either is the
 * first lock of its transaction's lock order (src/webhooks/delivery.ts).
 */
export async function findEndpoint(trx: Tx, orgId: string, id: string, lock?: 'change' | 'keep'): Promise<EndpointRow> {
  let q = trx.selectFrom('webhook_endpoints').selectAll().where('organization_id', '=', orgId).where('id', '=', id);
  if (lock === 'change') q = q.forNoKeyUpdate();
  if (lock === 'keep') q = q.forKeyShare();
  const row = await q.executeTakeFirst();
  if (!row) throw notFound('webhook endpoint');
  return row;
}

/** A fresh secret, sealed for storage. */
function freshSecret(box: SecretBox): { plain: string; sealed: string } {
  const plain = newSigningSecret();
  return { plain, sealed: box.seal(plain) };
}

export async function listEndpoints(trx: Tx, orgId: string, paging: { cursor?: string; limit?: number }) {
  const limit = paging.limit ?? 50;
  const q = trx.selectFrom('webhook_endpoints').selectAll().where('organization_id', '=', orgId);
  const rows = await keyset(q, { cursor: paging.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return page(rows, limit, (r) => ({ at: r.created_at, id: r.id }), toEndpoint);
}

export async function getEndpoint(trx: Tx, orgId: string, id: string) {
  return toEndpoint(await findEndpoint(trx, orgId, id));
}

/**
 * Registers an endpoint (created: true), or re-registers the oldest ACTIVE one with the same URL
 * (created: false); either way with its signing secret in clear.
 */
export async function registerEndpoint(db: Db, orgId: string, body: NewEndpoint, config: Config, services: Services) {
  const eventTypes = checkEventTypes(body.eventTypes);
  await checkUrl(config, body.url, services.lookup);
  return withOrg(db, orgId, (trx) => storeRegistration(trx, orgId, body, eventTypes, services.secretBox));
}

async function storeRegistration(trx: Tx, orgId: string, body: NewEndpoint, eventTypes: string[], box: SecretBox) {
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
    .forNoKeyUpdate()
    .executeTakeFirst();
  if (existing) {
    let secret = box.open(existing.secret_ciphertext);
    const rotated = secret === null ? freshSecret(box) : null;
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
    return { created: false, endpoint: { ...toEndpoint(row), signingSecret: secret!, ...(rotated ? { secretRotated: true } : {}) } };
  }
  const secret = freshSecret(box);
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
  return { created: true, endpoint: { ...toEndpoint(row), signingSecret: secret.plain } };
}

/** A URL sent is checked (DNS included) before the endpoint is locked and changed in a transaction of its own. */
export async function updateEndpoint(db: Db, orgId: string, id: string, body: EndpointChanges, config: Config, services: Services) {
  const eventTypes = body.eventTypes !== undefined ? checkEventTypes(body.eventTypes) : undefined;
  if (body.url !== undefined) await checkUrl(config, body.url, services.lookup);
  return withOrg(db, orgId, (trx) => storeChanges(trx, orgId, id, body, eventTypes, services.clock));
}

async function storeChanges(trx: Tx, orgId: string, id: string, body: EndpointChanges, eventTypes: string[] | undefined, clock: Clock) {
  const current = await findEndpoint(trx, orgId, id, 'change');
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
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
  // A disabled endpoint is a reason of the organization's health; setting it active clears it.
  if (current.status === 'disabled' && row.status !== 'disabled') await recheckOrgHealth(trx, orgId, clock);
  return toEndpoint(row);
}

/** Hard delete: the delivery history goes with it; queued attempts find nothing and do nothing. */
export async function deleteEndpoint(trx: Tx, orgId: string, id: string, clock: Clock): Promise<void> {
  const gone = await trx
    .deleteFrom('webhook_endpoints')
    .where('organization_id', '=', orgId)
    .where('id', '=', id)
    .returning(['id', 'status'])
    .executeTakeFirst();
  if (!gone) throw notFound('webhook endpoint');
  await trx.deleteFrom('webhook_deliveries').where('organization_id', '=', orgId).where('webhook_endpoint_id', '=', id).execute();
  if (gone.status === 'disabled') await recheckOrgHealth(trx, orgId, clock);
}

export async function rotateEndpointSecret(trx: Tx, orgId: string, id: string, box: SecretBox) {
  await findEndpoint(trx, orgId, id, 'change');
  const secret = freshSecret(box);
  const row = await trx
    .updateTable('webhook_endpoints')
    .set({ secret_ciphertext: secret.sealed, updated_at: sql`now_ms()` })
    .where('organization_id', '=', orgId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
  return { ...toEndpoint(row), signingSecret: secret.plain, secretRotated: true };
}
