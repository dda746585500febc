// POST /actions: the seven actions on a contact. Each checks its own scope (from the operation's
// `x-action-scopes`), then finds the contact, then either has nothing to do (noop), degrades to an
// advisory action item (advisory-locked by the operator, not in the plan, out of drafts), or runs,
// committing its state and events in one transaction (src/work/action-run.ts,
// src/work/contact-actions.ts). draft_reply may wait on the language model, which is asked between
// two short transactions (src/work/draft-reply-action.ts).
import { withOrg } from '../../db/database.js';
import type { AuthInfo } from '../http/handler.js';
import { ProblemError } from '../http/problems.js';
import type { Deps } from '../platform/services.js';
import { ACTION_SCOPES } from '../platform/spec.js';
import { type Action, type ActionBody, lockContact, type Outcome } from './action-run.js';
import { RUNNERS } from './contact-actions.js';
import { draftReply } from './draft-reply-action.js';

/** Runs the action the body names, as the key `auth` describes. */
export async function runAction(deps: Deps, auth: AuthInfo, body: ActionBody): Promise<Outcome> {
  // The body passed validation already; the action's own scope comes next, then the contact.
  const scope = ACTION_SCOPES[body.action];
  if (scope === undefined || !auth.scopes.includes(scope)) {
    throw new ProblemError(
      'insufficient-scope',
      `The action ${body.action} requires the scope ${scope}, which the API key lacks (missing: ${scope}).`,
    );
  }
  const org = auth.organizationId;
  return body.action === 'draft_reply'
    ? draftReply(deps, auth, body)
    : withOrg(deps.db, org, async (trx) =>
        RUNNERS[body.action as Exclude<Action, 'draft_reply'>]({
          trx,
          org,
          auth,
          body,
          config: deps.config,
          clock: deps.services.clock,
          contact: await lockContact(trx, org, body.contactId),
        }),
      );
}
