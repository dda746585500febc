// GET /metrics: Prometheus text format for the operator, behind the operator token (ADMIN_TOKEN)
// or METRICS_TOKEN. Request series are this process's own; the stored series are read from the
// database at scrape time (src/metrics/stored.ts), so they are exact across processes.
import type { Env, Hono } from 'hono';
import { collectDefaultMetrics, Registry } from 'prom-client';
import type { Db } from '../../db/database.js';
import { bearerToken, tokenMatches } from '../http/auth.js';
import type { AuthThrottle } from '../http/auth-throttle.js';
import { ProblemError } from '../http/problems.js';
import type { Config } from '../platform/config.js';
import { requestMetrics } from './requests.js';
import { storedMetrics } from './stored.js';

/**
 * Installs the request observer (first, so it sees every response) and the /metrics route. `db`
 * must be the owner connection: the job queue's tables are not granted to the application role.
 * Without it the stored series are left out. `throttle`: the operator API's, whose token this
 * route accepts too.
 */
export function mountMetrics<E extends Env>(app: Hono<E>, deps: { config: Config; db?: Db; throttle: AuthThrottle }): void {
  const register = new Registry();
  collectDefaultMetrics({ register });
  app.use('*', requestMetrics(register));
  const refresh = deps.db ? storedMetrics(register, deps.db) : null;
  app.get('/metrics', async (c) => {
    const token = bearerToken(c.req.header('authorization')) ?? '';
    // Both are compared, so the time taken does not say which one a token came close to.
    const admin = tokenMatches(token, deps.config.adminToken);
    const metrics = tokenMatches(token, deps.config.metricsToken);
    if (!admin && !metrics) {
      // The operator token is accepted here too, so failures count against the same limit.
      await deps.throttle.refuse(
        c,
        new ProblemError('unauthorized', 'Send the operator token or METRICS_TOKEN as `Authorization: Bearer <token>`.'),
      );
    }
    if (refresh) await refresh();
    return c.body(await register.metrics(), 200, { 'Content-Type': register.contentType, 'Cache-Control': 'no-store' });
  });
}
