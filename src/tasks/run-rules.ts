import type { Task } from 'graphile-worker';
import { withOrg } from '../../db/database.js';
import type { Deps } from '../platform/services.js';
import { runRules } from '../rules/rules.js';
import { requireFields } from './context.js';

/**
 * Runs the organization's enabled rules on one committed event (enqueued by the emitter when an
 * enabled rule triggers on its type). Idempotent: a rule fires at most once per event.
 */
export function runRulesTask(deps: Deps): Task {
  return async (payload) => {
    const p = requireFields<{ organizationId: string; eventId: string }>(payload, ['organizationId', 'eventId']);
    const fired = await withOrg(deps.db, p.organizationId, (trx) => runRules(trx, p.organizationId, p.eventId));
    if (fired > 0) deps.log.info({ organizationId: p.organizationId, eventId: p.eventId, fired }, 'custom rules fired');
  };
}
