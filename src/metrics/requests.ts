// Per-process request series: one histogram observe per request (its _count is the request
// count by operation and status) and a counter of rate-limit refusals. Label children are cached,
// so the hot path does two map lookups and the observe, and allocates nothing after warm-up.
import type { Context, Next } from 'hono';
import { routePath } from 'hono/route';
import { Counter, Histogram, type Registry } from 'prom-client';

type Observer = { observe(value: number): void };

export function requestMetrics(register: Registry) {
  const duration = new Histogram({
    name: 'outbound_http_request_duration_seconds',
    help: 'HTTP requests of this process by operation (the matched operationId; elsewhere the method and route template, e.g. "POST /capture/:formKey"; "unmatched" for no route) and status: latency in seconds; _count is the request count.',
    labelNames: ['operation', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [register],
  });
  const refusals = new Counter({
    name: 'outbound_rate_limit_refusals_total',
    help: 'Requests of this process refused with 429: limit="api_key" (RATE_LIMIT_PER_MINUTE per key), limit="lead_capture" (LEAD_CAPTURE_RATE_LIMIT per source address).',
    labelNames: ['limit'] as const,
    registers: [register],
  });
  const apiKeyRefusals = refusals.labels('api_key');
  const captureRefusals = refusals.labels('lead_capture');
  for (const c of [apiKeyRefusals, captureRefusals]) c.inc(0);
  const children = new Map<string, Map<number, Observer>>();

  const child = (operation: string, status: number): Observer => {
    let byStatus = children.get(operation);
    if (byStatus === undefined) {
      byStatus = new Map();
      children.set(operation, byStatus);
    }
    let obs = byStatus.get(status);
    if (obs === undefined) {
      obs = duration.labels(operation, String(status));
      byStatus.set(status, obs);
    }
    return obs;
  };

  return async function observeRequest(c: Context, next: Next): Promise<void> {
    const started = performance.now();
    await next();
    const status = c.res.status;
    const operationId = c.get('operationId') as string | undefined;
    // Never the raw path (unbounded): outside the API operations, the route template that answered.
    let operation = operationId;
    if (operation === undefined) {
      const template = routePath(c, -1);
      operation = template === '' || template === '*' || template === '/*' ? 'unmatched' : `${c.req.method} ${template}`;
    }
    child(operation, status).observe((performance.now() - started) / 1000);
    if (status === 429) (operationId === undefined ? captureRefusals : apiKeyRefusals).inc();
  };
}
