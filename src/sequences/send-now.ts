// Sending a sequence now (POST /drafts/{id}/send): every approved, unsent step of the draft's
// sequence joins the send queue (src/dispatch/queue.ts), where the dispatcher takes it. A contact
// who can no longer be emailed, an open deal, or a sequence with nothing left to send is a skip
// with a stable reason, not an error.

import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { outboundEntitled } from '../account/plans.js';
import { contactBlock } from '../compliance/contact-block.js';
import { queueSteps } from '../dispatch/queue.js';
import { draftForUpdate } from '../drafting/review.js';
import { invalid, ProblemError } from '../http/problems.js';

type SkipReason =
  | 'contact_removed'
  | 'suppressed'
  | 'do_not_contact'
  | 'already_in_pipeline'
  | 'all_steps_sent'
  | 'sequence_not_active'
  | 'already_queued';

/** The organization as its API key read it: its plan and whether its send flag is on. */
export interface SendingOrganization {
  plan: string;
  flags: { v1_2_api_send: boolean };
}

/**
 * Queues every approved, unsent step of the draft's sequence. 404 while the organization's send
 * flag is off, 403 on a plan without outbound, 400 for a draft that is not APPROVED or not part
 * of a sequence; a skip answers queued false with its reason.
 */
/**
 * The one 404 of sending, whether the draft is unknown or the organization's send flag is off (the
 * operation does not exist for it then): the detail names both, so a 404 about a draft approved a
 * moment ago points at the flag.
 */
export const unknownOrSendingOff = () =>
  new ProblemError(
    'not-found',
    'No draft with that id, or API sending is not enabled for the organization (its v1_2_api_send flag is off; an operator turns it on).',
  );

export async function sendDraftNow(trx: Tx, org: string, organization: SendingOrganization, id: string, erasureHashSecret: string | null) {
  if (!organization.flags.v1_2_api_send) throw unknownOrSendingOff();
  const d = await draftForUpdate(trx, org, id).catch((e: unknown) => {
    throw e instanceof ProblemError && e.slug === 'not-found' ? unknownOrSendingOff() : e;
  });
  if (!outboundEntitled(organization.plan))
    throw new ProblemError('not-entitled', `The ${organization.plan} plan does not include outbound (sending).`);
  if (d.status !== 'APPROVED' || d.superseded_at !== null)
    throw invalid(`Only the live APPROVED version of a step can be sent; this draft is ${d.superseded_at ? 'superseded' : d.status}.`);
  if (d.sequence_id === null) throw invalid('The draft is not part of a sequence; only sequence steps are sent.');
  const skipped = (reason: SkipReason) => ({ draftId: d.id, queued: false, queuedJobCount: 0, skippedReason: reason });
  const block = await contactBlock(trx, org, d.contact_id, erasureHashSecret);
  if (block) return skipped(block.reason);
  const openDeal = await sql<{ id: string }>`
    SELECT d.id FROM deals d LEFT JOIN deal_stages s ON s.organization_id = d.organization_id AND s.id = d.stage_id
    WHERE d.organization_id = ${org} AND d.primary_contact_id = ${d.contact_id} AND d.actual_close_date IS NULL AND s.is_terminal IS NOT TRUE
    LIMIT 1`.execute(trx);
  if (openDeal.rows.length > 0) return skipped('already_in_pipeline');
  const seq = await trx
    .selectFrom('contact_sequences')
    .select(['status', 'steps'])
    .where('organization_id', '=', org)
    .where('id', '=', d.sequence_id)
    .forUpdate()
    .executeTakeFirstOrThrow();
  const sent = await trx
    .selectFrom('drafts')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('organization_id', '=', org)
    .where('sequence_id', '=', d.sequence_id)
    .where('superseded_at', 'is', null)
    .where('sent_at', 'is not', null)
    .executeTakeFirstOrThrow();
  if (Number(sent.n) >= seq.steps.length) return skipped('all_steps_sent');
  if (!['DRAFTED', 'APPROVED', 'QUEUED', 'ACTIVE'].includes(seq.status)) return skipped('sequence_not_active');
  const queued = await queueSteps(trx, org, d.sequence_id);
  if (queued === 0) return skipped('already_queued');
  return { draftId: d.id, queued: true, queuedJobCount: queued, skippedReason: null };
}
