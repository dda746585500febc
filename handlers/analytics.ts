// Analytics: the outbound funnel of a window and the holdout lift, each memoized for 5 minutes per
// organization (the funnel per window) in Postgres. The rules are in spec/paths/analytics_*.yaml
// and spec/DECISIONS.md; the computation in src/analytics/. X-Service-Analytics-Max-Window-Days,
// a constant header of the funnel's 200 and 400, is added by the pipeline (src/http/app.ts).

import { memoized } from '../src/analytics/cache.js';
import { checkWindow, computeFunnel } from '../src/analytics/funnel.js';
import { computeLift } from '../src/analytics/lift.js';
import type { Handler, operations } from '../src/http/handler.js';
import { JsonText } from '../src/http/paging.js';
import { invalid } from '../src/http/problems.js';

type FunnelBody = operations['getFunnelAnalytics']['responses'][200]['content']['application/json'];
type LiftBody = operations['getLiftAnalytics']['responses'][200]['content']['application/json'];

const getFunnelAnalytics: Handler<'getFunnelAnalytics'> = async ({ trx, auth, query }) => {
  checkWindow(query.from, query.to);
  const org = auth.organizationId;
  const compute = async (): Promise<FunnelBody> => computeFunnel(trx, org, query.from, query.to);
  const r = await memoized(trx, org, `funnel:${query.from}:${query.to}`, compute);
  return { status: 200, body: new JsonText<FunnelBody>(r.text), headers: { 'X-Service-Cache': r.hit ? 'hit' : 'miss' } };
};

const getLiftAnalytics: Handler<'getLiftAnalytics'> = async ({ trx, auth, query }) => {
  // No parameters are declared; the window parameters of the funnel are refused rather than ignored.
  const q = query as Record<string, string | undefined>;
  for (const name of ['from', 'to']) {
    if (q[name] !== undefined) throw invalid(`GET /analytics/lift takes no ${name}: each experiment has its own fixed horizon.`, name);
  }
  const compute = async (): Promise<LiftBody> => computeLift(trx, auth.organizationId);
  const r = await memoized(trx, auth.organizationId, 'lift', compute);
  return { status: 200, body: new JsonText<LiftBody>(r.text), headers: { 'X-Service-Cache': r.hit ? 'hit' : 'miss' } };
};

export const analyticsHandlers = { getFunnelAnalytics, getLiftAnalytics };
