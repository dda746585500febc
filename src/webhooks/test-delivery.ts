// A test delivery (POST /webhooks/{id}/test): a signed synthetic event, sent now and reported;
// nothing is stored or counted. The endpoint is read in a short transaction of its own and the
// POST waits outside any (the operation is `x-long-running`), so a receiver that never answers
// holds no database connection.
import { type Db, withOrg } from '../../db/database.js';
import type { Config } from '../platform/config.js';
import { newId } from '../platform/ids.js';
import type { SecretBox } from '../platform/secret-box.js';
import { EVENT_API_VERSION } from '../platform/spec.js';
import { findEndpoint } from './endpoints.js';
import { postWebhook } from './http.js';
import { SIGNATURE_HEADER, signatureHeader } from './signing.js';

export async function testDeliver(db: Db, orgId: string, id: string, config: Config, box: SecretBox) {
  const ep = await withOrg(db, orgId, (trx) => findEndpoint(trx, orgId, id));
  const eventId = newId('evt');
  const secret = box.open(ep.secret_ciphertext);
  if (secret === null) {
    return {
      delivered: false,
      httpStatus: null,
      errorMessage: 'the signing secret cannot be recovered; rotate it',
      durationMs: 0,
      eventId,
    };
  }
  const body = JSON.stringify({
    apiVersion: EVENT_API_VERSION,
    id: eventId,
    type: ep.event_types[0],
    createdAt: new Date().toISOString(),
    organizationId: orgId,
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
  return { delivered: r.outcome === 'success', httpStatus: r.httpStatus, errorMessage: r.error, durationMs: r.durationMs, eventId };
}
