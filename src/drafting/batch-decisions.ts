// Deciding drafts in bulk (POST /drafts/batch/approve, /reject, /send): each item by the single
// operation's own function (approval and rejection in review.ts, sending in
// src/sequences/send-now.ts), independently (src/http/batch.ts). A batch send while the
// organization's send flag is off is refused as a whole, with the single send's 404.
import type { Tx } from '../../db/database.js';
import { eachIndependently } from '../http/batch.js';
import { type SendingOrganization, sendDraftNow, unknownOrSendingOff } from '../sequences/send-now.js';
import { type Approval, approveDraft, rejectDraft } from './review.js';

/** Where an item's problem says it happened: the single operation's path, and the request. */
export interface BatchProblems {
  baseUrl: string;
  requestId: string;
}
const problemsFor = (p: BatchProblems, verb: string) => ({
  baseUrl: p.baseUrl,
  instanceOf: (item: { id: string }) => `/api/v1/drafts/${encodeURIComponent(item.id)}/${verb}#${p.requestId}`,
});

export function approveDrafts(
  trx: Tx,
  org: string,
  items: ReadonlyArray<{ id: string; acknowledgeFlags?: boolean }>,
  approval: Omit<Approval, 'acknowledgeFlags'>,
  p: BatchProblems,
) {
  return eachIndependently(trx, items, problemsFor(p, 'approve'), (item) =>
    approveDraft(trx, org, item.id, { ...approval, acknowledgeFlags: item.acknowledgeFlags === true }),
  );
}

export function rejectDrafts(trx: Tx, org: string, items: ReadonlyArray<{ id: string; reason?: string }>, p: BatchProblems) {
  return eachIndependently(trx, items, problemsFor(p, 'reject'), (item) => rejectDraft(trx, org, item.id, item.reason ?? null));
}

export function sendDrafts(
  trx: Tx,
  org: string,
  organization: SendingOrganization,
  items: ReadonlyArray<{ id: string }>,
  erasureHashSecret: string | null,
  p: BatchProblems,
) {
  if (!organization.flags.v1_2_api_send) throw unknownOrSendingOff();
  return eachIndependently(trx, items, problemsFor(p, 'send'), (item) => sendDraftNow(trx, org, organization, item.id, erasureHashSecret));
}
