// An endpoint's deliveries as the API reads them, and a replay: a new delivery row (attempt 1,
// due now) for the same event; the original row is left as it is.
import type { Selectable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { WebhookDeliveries } from '../../db/schema.js';
import type { operations } from '../http/handler.js';
import { keyset, page } from '../http/paging.js';
import { notFound } from '../http/problems.js';
import { iso, isoNN, newId } from '../platform/ids.js';
import { enqueueAttempt } from './delivery.js';
import { type EventType, findEndpoint } from './endpoints.js';

type DeliveryRow = Selectable<WebhookDeliveries>;
type DeliveryStatus = operations['getWebhookDelivery']['responses'][200]['content']['application/json']['status'];

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

/** The endpoint's deliveries, newest first; 404 when the endpoint is unknown or foreign. */
export async function listDeliveries(trx: Tx, orgId: string, endpointId: string, paging: { cursor?: string; limit?: number }) {
  await findEndpoint(trx, orgId, endpointId);
  const limit = paging.limit ?? 50;
  const q = trx
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('organization_id', '=', orgId)
    .where('webhook_endpoint_id', '=', endpointId);
  const rows = await keyset(q, { cursor: paging.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return page(rows, limit, (r) => ({ at: r.created_at, id: r.id }), toDelivery);
}

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

export async function getDelivery(trx: Tx, orgId: string, endpointId: string, deliveryId: string) {
  return toDelivery(await findDelivery(trx, orgId, endpointId, deliveryId));
}

/**
 * A new row (attempt 1, due now) for the same event; the original row is left as it is. The
 * endpoint is locked first (KEY SHARE: the lock order of src/webhooks/delivery.ts), so a delete
 * of it cannot leave the new row behind.
 */
export async function replayDelivery(trx: Tx, orgId: string, endpointId: string, deliveryId: string) {
  await findEndpoint(trx, orgId, endpointId, 'keep');
  const original = await findDelivery(trx, orgId, endpointId, deliveryId);
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
  return toDelivery(row);
}
