// The task list and crontab of the worker; one file per task.
import type { TaskList } from 'graphile-worker';
import type { TaskDeps } from './context.js';
import { fanoutEvent } from './fanout_event.js';
import { deliverWebhook } from './deliver_webhook.js';
import { purgeIdempotencyKeys } from './purge_idempotency_keys.js';
import { sweepDeals } from './sweep_deals.js';
import { generateDraftsTask } from './generate_drafts.js';
import { generateListChunk } from './generate_list_chunk.js';
import { sendStepTask } from './send_step.js';
import { sweepSends } from './sweep_sends.js';
import { sweepLeads } from './sweep_leads.js';
import { classifyReplyTask } from './classify_reply.js';
import { sweepActionItems } from './sweep_action_items.js';
import { sweepOrgHealth } from './sweep_org_health.js';

export function buildTaskList(deps: TaskDeps): TaskList {
  return {
    fanout_event: fanoutEvent(deps),
    deliver_webhook: deliverWebhook(deps),
    purge_idempotency_keys: purgeIdempotencyKeys(deps),
    sweep_deals: sweepDeals(deps),
    generate_drafts: generateDraftsTask(deps),
    generate_list_chunk: generateListChunk(deps),
    send_step: sendStepTask(deps),
    sweep_sends: sweepSends(deps),
    sweep_leads: sweepLeads(deps),
    classify_reply: classifyReplyTask(deps),
    sweep_action_items: sweepActionItems(deps),
    sweep_org_health: sweepOrgHealth(deps),
  };
}

// Sweeps: idempotency keys older than 48 hours (kept at least 24) are purged hourly; the deal
// sweep (overdue next steps, slipped deals) runs every 15 minutes; steps whose send was never
// recorded are marked possibly sent every minute. The inbound lead sweep (qualification, conversion
// of qualified leads at least 15 minutes old) runs every 5 minutes; action items (expiry, snoozes
// that are up, out-of-office returns) are swept every minute. Organization health is recomputed
// for every organization every 5 minutes.
export const CRONTAB = `
15 * * * * purge_idempotency_keys ?max=1
*/15 * * * * sweep_deals ?max=1
* * * * * sweep_sends ?max=1
*/5 * * * * sweep_leads ?max=1
* * * * * sweep_action_items ?max=1
*/5 * * * * sweep_org_health ?max=1
`;
