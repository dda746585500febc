// The suppression list: addresses and domains that must never be contacted. Whether an address
// is suppressed is decided by the one matching rule of src/compliance/suppression-match.ts; the
// operations are src/compliance/suppression-list.ts.
import { blockAddress, liftAddress, suppressionOf, suppressionPage } from '../src/compliance/suppression-list.js';
import type { Handler, Handlers } from '../src/http/handler.js';

const getSuppression: Handler<'getSuppression'> = async ({ trx, auth, query, config }) => {
  const org = auth.organizationId;
  if (query.email !== undefined) return { status: 200, body: await suppressionOf(trx, org, query.email, config.erasureHashSecret) };
  return { status: 200, body: await suppressionPage(trx, org, query) };
};

/** Adds the address's own MANUAL_BLOCK entry; an existing live entry is left as it is. */
const addSuppression: Handler<'addSuppression'> = async ({ trx, auth, body, config }) => ({
  status: 200,
  body: await blockAddress(trx, auth.organizationId, body, config.erasureHashSecret),
});

/** Lifts the address's own entry only; `suppressed` says whether a DOMAIN entry or erasure hash still holds. */
const removeSuppression: Handler<'removeSuppression'> = async ({ trx, auth, query, config }) => ({
  status: 200,
  body: await liftAddress(trx, auth.organizationId, query.email, config.erasureHashSecret),
});

export const suppressionHandlers = { getSuppression, addSuppression, removeSuppression } satisfies Partial<Handlers>;
