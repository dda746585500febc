// Analytics: the outbound funnel of a window and the holdout lift, each memoized for 5 minutes per
// organization (the funnel per window) in Postgres. The rules are in spec/paths/analytics_*.yaml
// and spec/DECISIONS.md; the computation in src/analytics/ (served by src/analytics/reports.ts).
// X-Service-Analytics-Max-Window-Days, a constant header of the funnel's 200 and 400, is added by
// the pipeline (src/http/pipeline.ts).

import { type FunnelBody, funnelReport, type LiftBody, liftReport } from '../src/analytics/reports.js';
import type { Handler, Handlers } from '../src/http/handler.js';
import { JsonText } from '../src/http/paging.js';
import { invalid } from '../src/http/problems.js';

const getFunnelAnalytics: Handler<'getFunnelAnalytics'> = async ({ trx, auth, query }) => {
  const r = await funnelReport(trx, auth.organizationId, query.from, query.to);
  return { status: 200, body: new JsonText<FunnelBody>(r.text), headers: { 'X-Service-Cache': r.hit ? 'hit' : 'miss' } };
};

const getLiftAnalytics: Handler<'getLiftAnalytics'> = async ({ trx, auth, query, services }) => {
  // No parameters are declared; the window parameters of the funnel are refused rather than ignored.
  const q = query as Record<string, string | undefined>;
  for (const name of ['from', 'to']) {
    if (q[name] !== undefined) throw invalid(`GET /analytics/lift takes no ${name}: each experiment has its own fixed horizon.`, name);
  }
  const r = await liftReport(trx, auth.organizationId, services.clock);
  return { status: 200, body: new JsonText<LiftBody>(r.text), headers: { 'X-Service-Cache': r.hit ? 'hit' : 'miss' } };
};

export const analyticsHandlers = { getFunnelAnalytics, getLiftAnalytics } satisfies Partial<Handlers>;
