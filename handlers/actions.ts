// POST /actions: the seven actions on a contact (src/work/actions.ts). The operation is
// `x-long-running`: a reply draft may wait on the language model, so the handler gets no request
// transaction and the action opens its own short ones.
import type { Handlers, LongHandler } from '../src/http/handler.js';
import { runAction } from '../src/work/actions.js';

const dispatchAction: LongHandler<'dispatchAction'> = async ({ auth, body, db, config, services, log }) => {
  const out = await runAction({ db, config, services, log }, auth, body);
  return { status: 200, body: { action: body.action, contactId: body.contactId, ...out } };
};

export const actionHandlers = { dispatchAction } satisfies Partial<Handlers>;
