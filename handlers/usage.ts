// GET /usage: the organization's use of the current period (calendar month, UTC) against its plan
// (src/account/usage.ts).
import { usageReport } from '../src/account/usage.js';
import type { Handler, Handlers } from '../src/http/handler.js';

const getUsage: Handler<'getUsage'> = async ({ trx, auth, services }) => {
  return { status: 200, body: await usageReport(trx, auth.organizationId, services.clock) };
};

export const usageHandlers = { getUsage } satisfies Partial<Handlers>;
