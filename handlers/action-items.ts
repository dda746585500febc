// The action-item work queue: the filtered keyset list, one item, and the verbs (complete, reopen,
// dismiss, snooze) with their ownership rule. Items are opened by signals through
// src/work/action-items.ts (openActionItem); the sweeps are src/work/action-item-sweep.ts.
import { sql } from 'kysely';
import { epochMs, type Tx } from '../db/database.js';
import type { Handler } from '../src/http/handler.js';
import { jsonPage, keyset } from '../src/http/paging.js';
import { invalid, notFound, ProblemError } from '../src/http/problems.js';
import { emit } from '../src/platform/events.js';
import { msIso, msJson } from '../src/platform/ids.js';
import type { ActionItemPriority } from '../src/work/action-items.js';

type Status = 'pending' | 'completed' | 'dismissed' | 'expired';
type Verb = 'complete' | 'reopen' | 'dismiss' | 'snooze';

/** Roles that may act on anyone's item; anyone else only on their own. */
const MANAGER_ROLES = ['MANAGER', 'ADMIN', 'OWNER'];
/** The body fields each verb uses; any other is refused. */
const FIELDS: Record<Verb, readonly string[]> = { complete: [], reopen: [], dismiss: ['reason'], snooze: ['reason', 'until', 'days'] };
const isVerb = (v: string): v is Verb => Object.hasOwn(FIELDS, v);
const DEFAULT_SNOOZE_DAYS = 1;

function itemSelect(trx: Tx) {
  return trx
    .selectFrom('action_items as a')
    .select([
      'a.id',
      'a.action_type',
      'a.title',
      'a.description',
      'a.priority',
      'a.status',
      'a.entity_type',
      'a.entity_id',
      'a.sales_person_id',
      'a.ai_generated',
      'a.expected_impact_cents',
      'a.dismiss_reason',
      'a.snooze_reason',
      epochMs('a.created_at').as('created_ms'),
      epochMs('a.expires_at').as('expires_ms'),
      epochMs('a.completed_at').as('completed_ms'),
      epochMs('a.dismissed_at').as('dismissed_ms'),
      epochMs('a.snoozed_until_at').as('snoozed_until_ms'),
      epochMs('a.snoozed_at').as('snoozed_ms'),
    ]);
}
type ItemRow = Awaited<ReturnType<ReturnType<typeof itemSelect>['executeTakeFirstOrThrow']>>;

/** The ActionItem shape: the one mapping of an item. */
export function toActionItem(r: ItemRow) {
  return {
    id: r.id,
    actionType: r.action_type,
    title: r.title,
    description: r.description,
    priority: r.priority as ActionItemPriority,
    status: r.status as Status,
    entityType: r.entity_type,
    entityId: r.entity_id,
    salesPersonId: r.sales_person_id,
    aiGenerated: r.ai_generated,
    expectedImpactCents: r.expected_impact_cents,
    createdAt: msIso(r.created_ms)!,
    expiresAt: msIso(r.expires_ms),
    completedAt: msIso(r.completed_ms),
    dismissedAt: msIso(r.dismissed_ms),
    snoozedUntilAt: msIso(r.snoozed_until_ms),
    snoozedAt: msIso(r.snoozed_ms),
    dismissReason: r.dismiss_reason,
    snoozeReason: r.snooze_reason,
  };
}

/** Items of GET /action-items written straight to JSON (see jsonPage): key for key what toActionItem gives. */
function itemJson(r: ItemRow): string {
  const j = JSON.stringify;
  return (
    `{"id":${j(r.id)},"actionType":${j(r.action_type)},"title":${j(r.title)},"description":${j(r.description)},"priority":${j(r.priority)},` +
    `"status":${j(r.status)},"entityType":${j(r.entity_type)},"entityId":${j(r.entity_id)},"salesPersonId":${j(r.sales_person_id)},` +
    `"aiGenerated":${r.ai_generated},"expectedImpactCents":${j(r.expected_impact_cents)},"createdAt":${msJson(r.created_ms)},` +
    `"expiresAt":${msJson(r.expires_ms)},"completedAt":${msJson(r.completed_ms)},"dismissedAt":${msJson(r.dismissed_ms)},` +
    `"snoozedUntilAt":${msJson(r.snoozed_until_ms)},"snoozedAt":${msJson(r.snoozed_ms)},"dismissReason":${j(r.dismiss_reason)},"snoozeReason":${j(r.snooze_reason)}}`
  );
}

const listActionItems: Handler<'listActionItems'> = async ({ trx, auth, query }) => {
  const limit = query.limit ?? 50;
  // One index walk: by owner, status or priority when filtered (each has its index), else the page index.
  let q = itemSelect(trx).where('a.organization_id', '=', auth.organizationId);
  if (query.salesPersonId !== undefined) q = q.where('a.sales_person_id', '=', query.salesPersonId);
  if (query.status !== undefined) q = q.where('a.status', '=', query.status);
  if (query.priority !== undefined) q = q.where('a.priority', '=', query.priority);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'a.created_at', idCol: 'a.id' }).execute();
  return { status: 200, body: jsonPage(rows, limit, (r) => ({ at: r.created_ms, id: r.id }), itemJson) };
};

const itemById = (trx: Tx, organizationId: string, id: string) =>
  itemSelect(trx).where('a.organization_id', '=', organizationId).where('a.id', '=', id).executeTakeFirst();

const getActionItem: Handler<'getActionItem'> = async ({ trx, auth, params }) => {
  const row = await itemById(trx, auth.organizationId, params.id);
  if (!row) throw notFound('action item');
  return { status: 200, body: toActionItem(row) };
};

/** Only the fields of the state a verb puts the item in stay set (see the operation's table). */
function changesFor(verb: Verb, body: { reason?: string; until?: string; days?: number }) {
  const cleared = {
    completed_at: null,
    dismissed_at: null,
    dismiss_reason: null,
    snoozed_until_at: null,
    snoozed_at: null,
    snooze_reason: null,
  };
  const now = sql<Date>`now_ms()`;
  switch (verb) {
    case 'complete':
      return { ...cleared, status: 'completed', completed_at: now };
    case 'dismiss':
      return { ...cleared, status: 'dismissed', dismissed_at: now, dismiss_reason: body.reason ?? null };
    case 'reopen':
      return { ...cleared, status: 'pending' };
    case 'snooze':
      return {
        ...cleared,
        status: 'pending',
        snoozed_at: now,
        snooze_reason: body.reason ?? null,
        snoozed_until_at:
          body.until !== undefined
            ? sql<Date>`${body.until}::timestamptz`
            : sql<Date>`now_ms() + ${body.days ?? DEFAULT_SNOOZE_DAYS} * interval '1 day'`,
      };
  }
}

const applyActionItemVerb: Handler<'applyActionItemVerb'> = async ({ trx, auth, params, body }) => {
  const verb = params.verb;
  if (!isVerb(verb)) throw invalid(`Unknown verb "${verb}": use complete, reopen, dismiss or snooze.`, 'path.verb');
  const b = body ?? {};
  for (const field of Object.keys(b)) {
    if (!FIELDS[verb].includes(field)) {
      throw invalid(
        `${field} does not apply to ${verb}${FIELDS[verb].length ? ` (it takes ${FIELDS[verb].join(', ')})` : ' (it takes no fields)'}.`,
        `body.${field}`,
      );
    }
  }
  if (b.until !== undefined && !(Date.parse(b.until) > Date.now())) throw invalid('until must be in the future.', 'body.until');

  const org = auth.organizationId;
  // Locked, so concurrent verbs on one item apply one after the other (one action.resolved at most).
  const item = await trx
    .selectFrom('action_items')
    .select(['id', 'status', 'action_type', 'entity_type', 'entity_id', 'sales_person_id'])
    .where('organization_id', '=', org)
    .where('id', '=', params.id)
    .forUpdate()
    .executeTakeFirst();
  if (!item) throw notFound('action item');
  const own = auth.userId !== null && item.sales_person_id === auth.userId;
  const manager = auth.userId !== null && MANAGER_ROLES.includes(auth.userRole ?? '');
  if (!own && !manager) {
    throw new ProblemError(
      'role-required',
      auth.userId === null
        ? "This API key is attributed to no sales person, so it owns no action item; use a key attributed to the item's owner or to a MANAGER, ADMIN or OWNER."
        : 'The action item belongs to another sales person; only its owner or a MANAGER, ADMIN or OWNER may act on it.',
    );
  }

  const repeat = (verb === 'complete' && item.status === 'completed') || (verb === 'dismiss' && item.status === 'dismissed');
  if (!repeat) {
    await trx
      .updateTable('action_items')
      .set({ ...changesFor(verb, b), updated_at: sql<Date>`now_ms()` } as never)
      .where('organization_id', '=', org)
      .where('id', '=', item.id)
      .execute();
    if (verb === 'complete' || verb === 'dismiss') {
      await emit(trx, org, {
        type: 'action.resolved',
        resource: { type: 'ActionItem', id: item.id },
        data: {
          actionItemId: item.id,
          actionType: item.action_type,
          status: verb === 'complete' ? 'completed' : 'dismissed',
          entityType: item.entity_type,
          entityId: item.entity_id,
          salesPersonId: item.sales_person_id,
          resolvedByUserId: auth.userId,
        },
      });
    }
  }
  const row = (await itemById(trx, org, item.id))!;
  return { status: 200, body: { actionId: item.id, status: verb, item: toActionItem(row) } };
};

export const actionItemHandlers = { listActionItems, getActionItem, applyActionItemVerb };
