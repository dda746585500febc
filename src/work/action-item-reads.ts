// Reading the action-item work queue: the ActionItem shape (with its straight-to-JSON twin for
// list pages), the filtered keyset list, and one item.
import { epochMs, type Tx } from '../../db/database.js';
import type { operations } from '../http/handler.js';
import { jsonPage, keyset } from '../http/paging.js';
import { notFound } from '../http/problems.js';
import { msIso, msJson } from '../platform/ids.js';
import type { ActionItemPriority } from './action-items.js';

type Status = 'pending' | 'completed' | 'dismissed' | 'expired';
type ActionItem = operations['getActionItem']['responses'][200]['content']['application/json'];
export type ActionItemFilter = NonNullable<operations['listActionItems']['parameters']['query']>;

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

/** A page of GET /action-items, newest first, written as JSON. */
export async function actionItemsPage(trx: Tx, organizationId: string, query: ActionItemFilter) {
  const limit = query.limit ?? 50;
  // One index walk: by owner, status or priority when filtered (each has its index), else the page index.
  let q = itemSelect(trx).where('a.organization_id', '=', organizationId);
  if (query.salesPersonId !== undefined) q = q.where('a.sales_person_id', '=', query.salesPersonId);
  if (query.status !== undefined) q = q.where('a.status', '=', query.status);
  if (query.priority !== undefined) q = q.where('a.priority', '=', query.priority);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'a.created_at', idCol: 'a.id' }).execute();
  return jsonPage<ItemRow, ActionItem>(rows, limit, (r) => ({ at: r.created_ms, id: r.id }), itemJson);
}

const itemById = (trx: Tx, organizationId: string, id: string) =>
  itemSelect(trx).where('a.organization_id', '=', organizationId).where('a.id', '=', id).executeTakeFirst();

/** The item as ActionItem; 404 when the organization has none of that id. */
export async function readActionItem(trx: Tx, organizationId: string, id: string) {
  const row = await itemById(trx, organizationId, id);
  if (!row) throw notFound('action item');
  return toActionItem(row);
}
