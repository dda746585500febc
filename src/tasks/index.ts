// The task list and crontab of the worker; one file per task.
import type { TaskList } from 'graphile-worker';
import type { SystemDeps } from '../platform/services.js';
import { classifyReplyTask } from './classify-reply.js';
import { deliverWebhook } from './deliver-webhook.js';
import { fanoutEvent } from './fanout-event.js';
import { foldFunnelDays } from './fold-funnel-days.js';
import { generateDraftsTask } from './generate-drafts.js';
import { generateListChunk } from './generate-list-chunk.js';
import { purgeIdempotencyKeys } from './purge-idempotency-keys.js';
import { runRulesTask } from './run-rules.js';
import { sendStepTask } from './send-step.js';
import { sweepActionItems } from './sweep-action-items.js';
import { sweepDeals } from './sweep-deals.js';
import { sweepLeads } from './sweep-leads.js';
import { sweepOrgHealth } from './sweep-org-health.js';
import { sweepRetention } from './sweep-retention.js';
import { sweepSends } from './sweep-sends.js';

/**
 * `deps.db` is the worker role's: a job for one organization binds it (withOrg) and row-level
 * security shows it that organization only. The sweeps also get `deps.systemDb`, the one role that
 * may cross organizations. `runnerId`: the worker runner the send jobs claim for (src/dispatch/liveness.ts).
 */
export function buildTaskList(deps: SystemDeps, runnerId: string | null = null): TaskList {
  return {
    fanout_event: fanoutEvent(deps),
    deliver_webhook: deliverWebhook(deps),
    purge_idempotency_keys: purgeIdempotencyKeys(deps),
    sweep_deals: sweepDeals(deps),
    generate_drafts: generateDraftsTask(deps),
    generate_list_chunk: generateListChunk(deps),
    send_step: sendStepTask(deps, runnerId),
    sweep_sends: sweepSends(deps),
    sweep_leads: sweepLeads(deps),
    classify_reply: classifyReplyTask(deps),
    sweep_action_items: sweepActionItems(deps),
    run_rules: runRulesTask(deps),
    sweep_org_health: sweepOrgHealth(deps),
    sweep_retention: sweepRetention(deps),
    fold_funnel_days: foldFunnelDays(deps),
  };
}

// Sweeps: idempotency keys older than 48 hours (kept at least 24) are purged hourly; the deal
// sweep (overdue next steps, slipped deals) runs every 15 minutes; steps whose send was never
// recorded are marked possibly sent every minute. The inbound lead sweep (qualification, conversion
// of qualified leads at least 15 minutes old) runs every 5 minutes; action items (expiry, snoozes
// that are up, out-of-office returns) are swept every minute. Organization health is recomputed
// for every organization every 5 minutes. Data that ages out (src/platform/retention.ts) is swept
// hourly: partitions made ahead, old months dropped, shorter retentions' rows deleted. The funnel's
// day deltas are folded every minute.
export const CRONTAB = `
15 * * * * purge_idempotency_keys ?max=1
*/15 * * * * sweep_deals ?max=1
* * * * * sweep_sends ?max=1
*/5 * * * * sweep_leads ?max=1
* * * * * sweep_action_items ?max=1
*/5 * * * * sweep_org_health ?max=1
35 * * * * sweep_retention ?max=1
* * * * * fold_funnel_days ?max=1
`;
