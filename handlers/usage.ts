// GET /usage: the organization's use of the current period (calendar month, UTC) against its plan.

import { readUsage, usagePeriod } from '../src/account/usage.js';
import type { Handler } from '../src/http/handler.js';

const getUsage: Handler<'getUsage'> = async ({ trx, auth }) => {
  const period = usagePeriod();
  const u = await readUsage(trx, auth.organizationId);
  const limit = u.limit;
  return {
    status: 200,
    body: {
      periodStart: period.start.toISOString(),
      periodEnd: period.end.toISOString(),
      plan: { id: u.plan, draftsPerMonth: limit },
      drafts: {
        created: u.drafts_created,
        regenerated: u.drafts_regenerated,
        limit,
        remaining: Math.max(0, limit - u.drafts_created - u.drafts_regenerated),
      },
      sends: { attempted: u.sends_attempted },
      // Cost is kept in thousandths of a cent; the contract reports whole cents.
      llm: { tokensUsed: u.llm_tokens, costCents: Math.round(u.llm_cost_millicents / 1000) },
    },
  };
};

export const usageHandlers = { getUsage };
