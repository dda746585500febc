// Webhook endpoints, their deliveries, and the event-type catalogue (tag webhooks). Endpoints are
// managed in src/webhooks/endpoints.ts, deliveries read and replayed in src/webhooks/delivery-log.ts.
// The operations that wait on the outside world (registration and changes resolve the URL's host,
// a test delivery POSTs to it) are `x-long-running`: they get no request connection and open
// their own short transactions.
import type { Handler, Handlers, LongHandler } from '../src/http/handler.js';
import { getDelivery, listDeliveries, replayDelivery } from '../src/webhooks/delivery-log.js';
import {
  deleteEndpoint,
  getEndpoint,
  listEndpoints,
  registerEndpoint,
  rotateEndpointSecret,
  updateEndpoint,
} from '../src/webhooks/endpoints.js';
import { eventCatalogue } from '../src/webhooks/event-catalogue.js';
import { testDeliver } from '../src/webhooks/test-delivery.js';

const listWebhooks: Handler<'listWebhooks'> = async ({ trx, auth, query }) => {
  return { status: 200, body: await listEndpoints(trx, auth.organizationId, query) };
};

/**
 * Registers an endpoint, or re-registers the oldest ACTIVE one with the same URL (200).
 * `x-long-running`: the URL's host is resolved before the registration's own transaction.
 */
const createWebhook: LongHandler<'createWebhook'> = async ({ db, auth, body, config, services }) => {
  const r = await registerEndpoint(db, auth.organizationId, body, config, services);
  return r.created ? { status: 201, body: r.endpoint } : { status: 200, body: r.endpoint };
};

const getWebhook: Handler<'getWebhook'> = async ({ trx, auth, params }) => {
  return { status: 200, body: await getEndpoint(trx, auth.organizationId, params.id) };
};

/** `x-long-running`: a new URL's host is resolved before the change's own transaction. */
const updateWebhook: LongHandler<'updateWebhook'> = async ({ db, auth, params, body, config, services }) => {
  return { status: 200, body: await updateEndpoint(db, auth.organizationId, params.id, body, config, services) };
};

/** Hard delete: the delivery history goes with it; queued attempts find nothing and do nothing. */
const deleteWebhook: Handler<'deleteWebhook'> = async ({ trx, auth, params, services }) => {
  await deleteEndpoint(trx, auth.organizationId, params.id, services.clock);
  return { status: 200, body: { id: params.id, deleted: true as const } };
};

const rotateWebhookSecret: Handler<'rotateWebhookSecret'> = async ({ trx, auth, params, services }) => {
  return { status: 200, body: await rotateEndpointSecret(trx, auth.organizationId, params.id, services.secretBox) };
};

/** A signed synthetic event, sent now and reported; nothing is stored or counted. `x-long-running`: the POST holds no connection. */
const testDeliverWebhook: LongHandler<'testDeliverWebhook'> = async ({ db, auth, params, config, services }) => {
  return { status: 200, body: await testDeliver(db, auth.organizationId, params.id, config, services.secretBox) };
};

const listWebhookDeliveries: Handler<'listWebhookDeliveries'> = async ({ trx, auth, params, query }) => {
  return { status: 200, body: await listDeliveries(trx, auth.organizationId, params.id, query) };
};

const getWebhookDelivery: Handler<'getWebhookDelivery'> = async ({ trx, auth, params }) => {
  return { status: 200, body: await getDelivery(trx, auth.organizationId, params.id, params.deliveryId) };
};

/** A new row (attempt 1, due now) for the same event; the original row is left as it is. */
const replayWebhookDelivery: Handler<'replayWebhookDelivery'> = async ({ trx, auth, params }) => {
  return { status: 201, body: await replayDelivery(trx, auth.organizationId, params.id, params.deliveryId) };
};

const listWebhookEventTypes: Handler<'listWebhookEventTypes'> = async () => {
  return { status: 200, body: eventCatalogue() };
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
} satisfies Partial<Handlers>;
