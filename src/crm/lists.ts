// Contact lists: the public ContactList shape and the list operations. Archiving (operator API)
// and soft-deleting are different things: an archived list is still readable by id; a deleted one
// is 404, keeps its contacts, and emits no event.
import { type Selectable, sql, type UpdateObject } from 'kysely';
import type { Database, Tx } from '../../db/database.js';
import type { ContactLists } from '../../db/schema.js';
import { organizationOwnerId } from '../account/people.js';
import { outboundEntitled } from '../account/plans.js';
import { startListGeneration } from '../drafting/list-generation.js';
import type { AdminHandler, AuthInfo, Handler } from '../http/handler.js';
import { keyset, page } from '../http/paging.js';
import { invalid, notFound, ProblemError } from '../http/problems.js';
import { audit, emit } from '../platform/events.js';
import { iso, isoNN, newId } from '../platform/ids.js';
import { IN_FLIGHT_SEQUENCE_STATUSES, pauseSequences } from '../sequences/lifecycle.js';
import { isLiveContact } from './live-contacts.js';

export type ListRow = Selectable<ContactLists>;

/** The public ContactList shape; `userId` falls back to the organization owner for unattributed keys. */
export function toContactList(r: ListRow, ownerId: string) {
  return {
    id: r.id,
    organizationId: r.organization_id,
    userId: r.user_id ?? ownerId,
    name: r.name,
    sourceType: r.source_type,
    description: r.description,
    connectionPoint: r.connection_point,
    goal: r.goal,
    archivedAt: iso(r.archived_at),
    createdAt: isoNN(r.created_at),
    updatedAt: isoNN(r.updated_at),
  };
}

/** Maps rows, looking the owner up only when some row has no user of its own. */
async function toContactLists(trx: Tx, organizationId: string, rows: ListRow[]) {
  const owner = rows.some((r) => r.user_id === null) ? await organizationOwnerId(trx, organizationId) : '';
  return rows.map((r) => toContactList(r, owner));
}

/** A list of the organization that is not soft-deleted (archived lists count), or undefined. */
export async function activeList(trx: Tx, organizationId: string, id: string) {
  return trx
    .selectFrom('contact_lists')
    .select(['id', 'name'])
    .where('organization_id', '=', organizationId)
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
}

type NewList = Parameters<Handler<'createList'>>[0]['body'];

/** Creates a list (POST /lists); owned by the key's user, else the organization owner. */
export async function createContactList(trx: Tx, organizationId: string, userId: string | null, body: NewList) {
  const org = organizationId;
  if (body.useCaseTemplateId !== undefined && body.useCaseTemplateId !== null) {
    const id = body.useCaseTemplateId;
    const own = await trx
      .selectFrom('sequence_templates')
      .select('id')
      .where('organization_id', '=', org)
      .where('id', '=', id)
      .executeTakeFirst();
    const pub = own
      ? own
      : await trx.selectFrom('public_templates').select('id').where('id', '=', id).where('active', '=', true).executeTakeFirst();
    if (!pub) throw invalid('useCaseTemplateId names no template available to this organization.', 'body.useCaseTemplateId');
  }
  if (body.productId !== undefined && body.productId !== null) {
    const p = await trx
      .selectFrom('products')
      .select('id')
      .where('organization_id', '=', org)
      .where('id', '=', body.productId)
      .executeTakeFirst();
    if (!p) throw invalid('productId names no product of this organization.', 'body.productId');
  }
  const row = await trx
    .insertInto('contact_lists')
    .values({
      organization_id: org,
      id: newId('lst'),
      user_id: userId ?? (await organizationOwnerId(trx, org)),
      name: body.name,
      source_type: body.sourceType ?? 'OTHER',
      description: body.description ?? null,
      connection_point: body.connectionPoint ?? null,
      goal: body.goal ?? null,
      use_case_template_id: body.useCaseTemplateId ?? null,
      product_id: body.productId ?? null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return toContactList(row, row.user_id ?? '');
}

type ListQuery = Parameters<Handler<'listLists'>>[0]['query'];

/** A page of GET /lists: live lists by creation; archived ones only with includeArchived=1. */
export async function listContactLists(trx: Tx, organizationId: string, query: ListQuery) {
  const org = organizationId;
  const limit = query.limit ?? 50;
  let q = trx.selectFrom('contact_lists').selectAll().where('organization_id', '=', org).where('deleted_at', 'is', null);
  if (query.includeArchived !== '1') q = q.where('archived_at', 'is', null);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  const result = page(
    rows,
    limit,
    (r) => ({ at: r.created_at, id: r.id }),
    (r) => r,
  );
  return { data: await toContactLists(trx, org, result.data), nextCursor: result.nextCursor };
}

/** A list that is not soft-deleted, in the ContactList shape, or 404. */
export async function contactList(trx: Tx, organizationId: string, id: string) {
  const row = await trx
    .selectFrom('contact_lists')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  if (!row) throw notFound('list');
  return (await toContactLists(trx, organizationId, [row]))[0];
}

/**
 * Soft-deletes the list and its memberships. Sequences in flight for contacts whose own list it is
 * block the deletion (409) unless force=true, which pauses them first; contacts merely attached
 * from another list keep theirs. Contacts always survive. Audited, no event.
 */
export async function softDeleteList(trx: Tx, auth: Pick<AuthInfo, 'organizationId' | 'keyId' | 'userId'>, id: string, force: boolean) {
  const org = auth.organizationId;
  const list = await trx
    .selectFrom('contact_lists')
    .select(['id', 'deleted_at'])
    .where('organization_id', '=', org)
    .where('id', '=', id)
    .forUpdate()
    .executeTakeFirst();
  if (!list) throw notFound('list');
  if (list.deleted_at !== null) {
    return {
      id: list.id,
      deleted: true,
      deletedAt: isoNN(list.deleted_at),
      alreadyDeleted: true,
      membershipsRemoved: 0,
      sequencesPaused: 0,
    };
  }
  const ownContacts = trx.selectFrom('contacts').select('id').where('organization_id', '=', org).where('list_id', '=', list.id);
  const inFlight = await trx
    .selectFrom('contact_sequences')
    .select('id')
    .where('organization_id', '=', org)
    .where('contact_id', 'in', ownContacts)
    .where('status', 'in', IN_FLIGHT_SEQUENCE_STATUSES)
    .limit(1)
    .executeTakeFirst();
  if (inFlight && !force) {
    throw new ProblemError(
      'list-has-in-flight-sequences',
      'Contacts of this list have ACTIVE, QUEUED, DRAFTED or APPROVED sequences; delete with force=true to pause them first.',
    );
  }
  const sequencesPaused = inFlight ? await pauseSequences(trx, org, ownContacts, 'list_deleted') : 0;

  const deleted = await trx
    .updateTable('contact_lists')
    .set({ deleted_at: sql<Date>`now_ms()`, updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', org)
    .where('id', '=', list.id)
    .returning('deleted_at')
    .executeTakeFirstOrThrow();
  const attached = await trx
    .updateTable('list_memberships')
    .set({ deleted_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', org)
    .where('list_id', '=', list.id)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  // Every contact that was on the list counts: its own live contacts and the attached ones.
  const own = await trx
    .selectFrom('contacts')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('organization_id', '=', org)
    .where('list_id', '=', list.id)
    .where(isLiveContact())
    .executeTakeFirstOrThrow();
  const membershipsRemoved = Number(own.n) + Number(attached.numUpdatedRows);

  await audit(trx, org, {
    action: 'list.deleted',
    resource: { type: 'ContactList', id: list.id },
    keyId: auth.keyId,
    userId: auth.userId,
    details: { force, membershipsRemoved, sequencesPaused },
  });
  return {
    id: list.id,
    deleted: true,
    deletedAt: isoNN(deleted.deleted_at!),
    alreadyDeleted: false,
    membershipsRemoved,
    sequencesPaused,
  };
}

/**
 * Starts draft generation for the list's own contacts (src/drafting/list-generation.ts), or
 * answers the run in flight. Refusals first: 404 unknown list, 403 plan not entitled to
 * outbound, 400 no template or no contacts of its own.
 */
export async function startDraftGeneration(
  trx: Tx,
  organizationId: string,
  plan: string,
  id: string,
  opts: Parameters<typeof startListGeneration>[3],
) {
  const org = organizationId;
  const list = await trx
    .selectFrom('contact_lists')
    .select(['id', 'use_case_template_id', 'product_id'])
    .where('organization_id', '=', org)
    .where('id', '=', id)
    .where('deleted_at', 'is', null)
    .forUpdate()
    .executeTakeFirst();
  if (!list) throw notFound('list');
  if (!outboundEntitled(plan)) {
    throw new ProblemError('not-entitled', `The ${plan} plan does not include outbound (draft generation).`);
  }
  return startListGeneration(trx, org, list, opts);
}

/** The list context fields of PATCH .../lists/{listId}, by column. */
const LIST_CONTEXT = { description: 'description', connectionPoint: 'connection_point', goal: 'goal' } as const;

type OperatorListChange = Parameters<AdminHandler<'adminUpdateList'>>[0]['body'];

/**
 * The operator's change of a list (archive, test-flag, and the list context drafts are written
 * from); a context change emits list.context_updated. 404 for a deleted or unknown list.
 */
export async function updateListByOperator(trx: Tx, organizationId: string, listId: string, body: OperatorListChange) {
  const set: UpdateObject<Database, 'contact_lists'> = {};
  if (body.archived !== undefined) set.archived_at = body.archived ? sql<Date>`coalesce(archived_at, now_ms())` : null;
  if (body.isTest !== undefined) set.is_test = body.isTest;
  const sent = Object.entries(LIST_CONTEXT).filter(([field]) => body[field as keyof typeof LIST_CONTEXT] !== undefined);
  if (sent.length > 0) {
    const before = await trx
      .selectFrom('contact_lists')
      .select(['description', 'connection_point', 'goal'])
      .where('organization_id', '=', organizationId)
      .where('id', '=', listId)
      .where('deleted_at', 'is', null)
      .forUpdate()
      .executeTakeFirst();
    if (!before) throw notFound('list');
    const previous: Record<string, string | null> = {};
    const current: Record<string, string | null> = {};
    for (const [field, column] of sent) {
      const value = body[field as keyof typeof LIST_CONTEXT] ?? null;
      if (value === before[column]) continue;
      set[column] = value;
      previous[field] = before[column];
      current[field] = value;
    }
    const changedFields = Object.keys(current);
    if (changedFields.length > 0) {
      await emit(trx, organizationId, {
        type: 'list.context_updated',
        resource: { type: 'ContactList', id: listId },
        data: { listId, changedFields, previous, current },
      });
    }
  }
  const r = await trx
    .updateTable('contact_lists')
    .set({ ...set, updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', organizationId)
    .where('id', '=', listId)
    .where('deleted_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
  if (!r) throw notFound('list');
  return toContactList(r, await organizationOwnerId(trx, organizationId));
}
