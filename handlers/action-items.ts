// The action-item work queue: the filtered keyset list, one item, and the verbs (complete, reopen,
// dismiss, snooze) with their ownership rule (src/work/action-item-reads.ts,
// src/work/action-item-verbs.ts). Items are opened by signals through src/work/action-items.ts
// (openActionItem); the sweeps are src/work/action-item-sweep.ts.
import type { Handler, Handlers } from '../src/http/handler.js';
import { actionItemsPage, readActionItem } from '../src/work/action-item-reads.js';
import { applyVerb } from '../src/work/action-item-verbs.js';

const listActionItems: Handler<'listActionItems'> = async ({ trx, auth, query }) => ({
  status: 200,
  body: await actionItemsPage(trx, auth.organizationId, query),
});

const getActionItem: Handler<'getActionItem'> = async ({ trx, auth, params }) => ({
  status: 200,
  body: await readActionItem(trx, auth.organizationId, params.id),
});

const applyActionItemVerb: Handler<'applyActionItemVerb'> = async ({ trx, auth, params, body, services }) => ({
  status: 200,
  body: await applyVerb(trx, auth.organizationId, auth, params.id, params.verb, body, services.clock),
});

export const actionItemHandlers = { listActionItems, getActionItem, applyActionItemVerb } satisfies Partial<Handlers>;
