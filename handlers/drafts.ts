// Drafts: reading (live versions by default, the evidence on request), approval and rejection,
// one at a time or in batches, and a reviewer's new versions (edit, regenerate). No email is ever
// sent here (sending is POST /drafts/{id}/send and the dispatcher). The reads are in
// src/drafting/draft-reads.ts, the review in src/drafting/review.ts, batches in
// src/drafting/batch-decisions.ts, new versions in src/drafting/revise.ts, sending in
// src/sequences/send-now.ts.
import { approveDrafts, rejectDrafts, sendDrafts } from '../src/drafting/batch-decisions.js';
import { getDraft as readDraft, listDrafts as readDrafts } from '../src/drafting/draft-reads.js';
import { approveDraft as approve, rejectDraft as reject } from '../src/drafting/review.js';
import { editDraft, regenerateDraft as regenerate } from '../src/drafting/revise.js';
import type { Handler, Handlers, LongHandler } from '../src/http/handler.js';
import { sendDraftNow } from '../src/sequences/send-now.js';

const listDrafts: Handler<'listDrafts'> = async ({ trx, auth, query }) => {
  return { status: 200, body: await readDrafts(trx, auth.organizationId, query) };
};

const getDraft: Handler<'getDraft'> = async ({ trx, auth, params, query }) => {
  const include = new Set((query.include ?? '').split(',').map((s) => s.trim().toLowerCase()));
  return { status: 200, body: await readDraft(trx, auth.organizationId, params.id, { evidence: include.has('evidence') }) };
};

const approveDraft: Handler<'approveDraft'> = async ({ trx, auth, params, body, config }) => {
  const approval = {
    keyId: auth.keyId,
    userId: auth.userId,
    acknowledgeFlags: body?.acknowledgeFlags === true,
    erasureHashSecret: config.erasureHashSecret,
  };
  return { status: 200, body: await approve(trx, auth.organizationId, params.id, approval) };
};

const rejectDraft: Handler<'rejectDraft'> = async ({ trx, auth, params, body }) => {
  return { status: 200, body: await reject(trx, auth.organizationId, params.id, body?.reason ?? null) };
};

/**
 * Queues every approved, unsent step of the draft's sequence (src/sequences/send-now.ts). 404 while
 * the organization's send flag is off, 403 on a plan without outbound, 400 for a draft that is
 * not APPROVED or not part of a sequence; a skip is a 200 with a stable reason.
 */
const sendDraft: Handler<'sendDraft'> = async ({ trx, auth, params, config }) => {
  return { status: 200, body: await sendDraftNow(trx, auth.organizationId, auth.org, params.id, config.erasureHashSecret) };
};

const updateDraft: LongHandler<'updateDraft'> = async ({ db, config, services, log, auth, params, body }) => ({
  status: 200,
  body: await editDraft({ db, config, services, log }, auth.organizationId, params.id, body),
});

const regenerateDraft: LongHandler<'regenerateDraft'> = async ({ db, config, services, log, auth, params, body }) => ({
  status: 200,
  body: await regenerate({ db, config, services, log }, auth.organizationId, params.id, body?.instructions),
});

const batchApproveDrafts: Handler<'batchApproveDrafts'> = async ({ trx, auth, body, config, requestId }) => {
  const approval = { keyId: auth.keyId, userId: auth.userId, erasureHashSecret: config.erasureHashSecret };
  const problems = { baseUrl: config.publicBaseUrl, requestId };
  return { status: 200, body: await approveDrafts(trx, auth.organizationId, body.items, approval, problems) };
};

const batchRejectDrafts: Handler<'batchRejectDrafts'> = async ({ trx, auth, body, config, requestId }) => {
  return {
    status: 200,
    body: await rejectDrafts(trx, auth.organizationId, body.items, { baseUrl: config.publicBaseUrl, requestId }),
  };
};

const batchSendDrafts: Handler<'batchSendDrafts'> = async ({ trx, auth, body, config, requestId }) => {
  const problems = { baseUrl: config.publicBaseUrl, requestId };
  return {
    status: 200,
    body: await sendDrafts(trx, auth.organizationId, auth.org, body.items, config.erasureHashSecret, problems),
  };
};

export const draftHandlers = {
  listDrafts,
  getDraft,
  approveDraft,
  rejectDraft,
  sendDraft,
  updateDraft,
  regenerateDraft,
  batchApproveDrafts,
  batchRejectDrafts,
  batchSendDrafts,
} satisfies Partial<Handlers>;
