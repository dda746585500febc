// The analytics answers as served: the funnel of a window and the holdout lift, each memoized for
// CACHE_SECONDS per organization (the funnel per window) by cache.ts, as the JSON text sent.
import type { Tx } from '../../db/database.js';
import type { operations } from '../http/handler.js';
import type { Clock } from '../platform/clock.js';
import { type Memoized, memoized } from './cache.js';
import { checkWindow, computeFunnel } from './funnel.js';
import { computeLift } from './lift.js';

export type FunnelBody = operations['getFunnelAnalytics']['responses'][200]['content']['application/json'];
export type LiftBody = operations['getLiftAnalytics']['responses'][200]['content']['application/json'];

/** The funnel of the window (dates, UTC, inclusive); 400 for a window checkWindow refuses. */
export async function funnelReport(trx: Tx, organizationId: string, from: string, to: string): Promise<Memoized> {
  checkWindow(from, to);
  const compute = async (): Promise<FunnelBody> => computeFunnel(trx, organizationId, from, to);
  return memoized(trx, organizationId, `funnel:${from}:${to}`, compute);
}

export async function liftReport(trx: Tx, organizationId: string, clock: Clock): Promise<Memoized> {
  const compute = async (): Promise<LiftBody> => computeLift(trx, organizationId, clock.now());
  return memoized(trx, organizationId, 'lift', compute);
}
