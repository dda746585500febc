// POST /deals/{id}/activities: a note, call or meeting logged on a deal, against its live primary
// contact.
import type { Tx } from '../../db/database.js';
import { invalid, ProblemError } from '../http/problems.js';
import { isoNN, newId } from '../platform/ids.js';
import { requireDeal } from './read.js';

/** An occurredAt this far ahead of the server clock is refused as "in the future" (clock skew). */
const FUTURE_TOLERANCE_MS = 60_000;

export interface NewDealActivity {
  kind: 'note' | 'call' | 'meeting';
  summary: string;
  occurredAt?: string;
  /** Who logged it (a user or a key). */
  by: string;
}

export async function logDealActivity(trx: Tx, org: string, dealId: string, a: NewDealActivity) {
  const deal = await requireDeal(trx, org, dealId);
  const summary = a.summary.trim();
  if (summary.length === 0) throw invalid('summary must contain a non-whitespace character.', 'body.summary');
  const now = Date.now();
  const occurredAt = a.occurredAt === undefined ? new Date(now) : new Date(a.occurredAt);
  if (Number.isNaN(occurredAt.getTime())) throw invalid('occurredAt is not a valid date-time.', 'body.occurredAt');
  if (occurredAt.getTime() > now + FUTURE_TOLERANCE_MS) throw invalid('occurredAt may not be in the future.', 'body.occurredAt');
  const contactId = deal.live_contact_id;
  if (contactId === null) {
    throw new ProblemError(
      'deal-without-primary-contact',
      'This deal has no live primary contact to log the activity against; set primaryContactId with PATCH /deals/{id}.',
    );
  }
  const row = await trx
    .insertInto('deal_activities')
    .values({
      organization_id: org,
      id: newId('dact'),
      deal_id: deal.id,
      contact_id: contactId,
      kind: a.kind,
      summary,
      occurred_at: occurredAt,
      created_by: a.by,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return {
    id: row.id,
    dealId: row.deal_id,
    kind: row.kind as 'note' | 'call' | 'meeting',
    summary: row.summary,
    occurredAt: isoNN(row.occurred_at),
  };
}
