// What every action of POST /actions (src/work/actions.ts) runs in: the contact, locked; the three
// outcomes (executed, advisory, noop); and degrading to an advisory action item when the operator
// advisory-locked the action or the plan does not include it.

import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { assigneeFor } from '../account/people.js';
import { outboundEntitled } from '../account/plans.js';
import { isLiveContact } from '../crm/live-contacts.js';
import type { AuthInfo, operations } from '../http/handler.js';
import { notFound } from '../http/problems.js';
import type { Clock } from '../platform/clock.js';
import type { Config } from '../platform/config.js';
import { openActionItem } from './action-items.js';

type DispatchBody = operations['dispatchAction']['requestBody']['content']['application/json'];
/**
 * The body of POST /actions read flat: the contract is a union told apart by `action` (only
 * snooze_contact carries `days`, only tag_contact `tag`), which the validator has enforced.
 */
export type ActionBody = DispatchBody & { days?: number; tag?: string };
export type Action = ActionBody['action'];
export interface Outcome {
  outcome: 'executed' | 'advisory' | 'noop';
  detail: string;
  actionItemId: string | null;
  result: Record<string, unknown>;
}

/** Actions that write drafts: a plan without outbound does not include them. */
const OUTBOUND_ACTIONS: readonly Action[] = ['resume_sequence', 'draft_reply'];
/** An advisory item is a suggestion for a person; left undone it expires. */
const ADVISORY_TTL_DAYS = 14;

export const executed = (detail: string, result: Record<string, unknown> = {}): Outcome => ({
  outcome: 'executed',
  detail,
  actionItemId: null,
  result,
});
export const noop = (detail: string): Outcome => ({ outcome: 'noop', detail, actionItemId: null, result: {} });

/** The contact, live and of the organization, locked so actions on one contact apply one after the other; else 404. */
export async function lockContact(trx: Tx, org: string, id: string) {
  const c = await trx
    .selectFrom('contacts')
    .select(['id', 'name', 'email', 'email_normalized', 'title', 'tags', 'company_id', 'research'])
    .where('organization_id', '=', org)
    .where('id', '=', id)
    .where(isLiveContact())
    .forUpdate()
    .executeTakeFirst();
  if (!c) throw notFound('contact');
  return c;
}
export type Contact = Awaited<ReturnType<typeof lockContact>>;
export const labelOf = (c: Contact) => c.name || c.email;

export interface Run {
  trx: Tx;
  org: string;
  auth: AuthInfo;
  body: ActionBody;
  contact: Contact;
  config: Config;
  /** The clock an advisory item's expiry is set by (the expiry sweep compares with it). */
  clock: Clock;
}

/** Why the action only advises for this organization, or null when it may run. */
export async function degradedBecause(trx: Tx, org: string, action: Action): Promise<string | null> {
  const o = await trx.selectFrom('organizations').select(['plan', 'advisory_actions']).where('id', '=', org).executeTakeFirstOrThrow();
  if (o.advisory_actions.includes(action)) return `${action} is advisory-locked for this organization by the operator`;
  if (OUTBOUND_ACTIONS.includes(action) && !outboundEntitled(o.plan))
    return `the ${o.plan} plan does not include outbound (draft generation)`;
  return null;
}

const TITLES: Record<Action, (label: string, b: ActionBody) => string> = {
  pause_sequence: (l) => `Pause the sequence of ${l}`,
  resume_sequence: (l) => `Resume the sequence of ${l}`,
  snooze_contact: (l, b) => `Snooze ${l} for ${b.days} day(s)`,
  tag_contact: (l, b) => `Tag ${l} with "${b.tag}"`,
  add_to_suppression: (l) => `Add ${l} to the suppression list`,
  handoff_to_ae: (l) => `Hand ${l} off to an account executive`,
  draft_reply: (l) => `Reply to the latest message of ${l}`,
};

/**
 * The advisory item a degraded action opens for the contact's owner instead of running; the same
 * request while that item is still pending answers it again (the contact's lock serializes them).
 */
export async function advise(r: Run, why: string): Promise<Outcome> {
  const { trx, org, body, contact } = r;
  const params = { ...(body.days !== undefined ? { days: body.days } : {}), ...(body.tag !== undefined ? { tag: body.tag } : {}) };
  const open = await trx
    .selectFrom('action_items')
    .select('id')
    .where('organization_id', '=', org)
    .where('entity_type', '=', 'Contact')
    .where('entity_id', '=', contact.id)
    .where('action_type', '=', body.action)
    .where('status', '=', 'pending')
    .where('ai_generated', '=', true)
    .where(sql<boolean>`coalesce(details->'params', '{}'::jsonb) = ${JSON.stringify(params)}::jsonb`)
    .executeTakeFirst();
  if (open)
    return {
      outcome: 'advisory',
      detail: `Not run: ${why}. The advisory action item ${open.id} for it is still open.`,
      actionItemId: open.id,
      result: {},
    };
  const id = (await openActionItem(trx, org, {
    actionType: body.action,
    title: TITLES[body.action](labelOf(contact), body),
    description: `Advisory: ${why}, so this was not done automatically; do it by hand if it is right.${body.reason ? ` Reason given: ${body.reason}` : ''}`,
    priority: 'medium',
    salesPersonId: await assigneeFor(trx, org, contact.id),
    aiGenerated: true,
    entityType: 'Contact',
    entityId: contact.id,
    expiresAt: new Date(r.clock.now().getTime() + ADVISORY_TTL_DAYS * 86_400_000),
    details: {
      action: body.action,
      params,
      reason: body.reason ?? null,
      degradedBecause: why,
      requestedByKeyId: r.auth.keyId,
      requestedByUserId: r.auth.userId,
    },
  }))!;
  return { outcome: 'advisory', detail: `Not run: ${why}. An advisory action item was opened instead.`, actionItemId: id, result: {} };
}

/** Runs `act` unless the action degrades for the organization. */
export async function unlessDegraded(r: Run, act: () => Promise<Outcome>): Promise<Outcome> {
  const why = await degradedBecause(r.trx, r.org, r.body.action);
  return why === null ? act() : advise(r, why);
}
