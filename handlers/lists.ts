// Contact lists. Archiving (operator API) and soft-deleting are different things: an archived
// list is still readable by id; a deleted one is 404, keeps its contacts, and emits no event.
import { sql } from 'kysely';
import type { Tx } from '../db/database.js';
import { organizationOwnerId } from '../src/account/people.js';
import { outboundEntitled } from '../src/account/plans.js';
import { type ListRow, toContactList } from '../src/crm/lists.js';
import { startListGeneration } from '../src/drafting/list-generation.js';
import type { Handler } from '../src/http/handler.js';
import { keyset, page } from '../src/http/paging.js';
import { invalid, notFound, ProblemError } from '../src/http/problems.js';
import { audit } from '../src/platform/events.js';
import { isoNN, newId } from '../src/platform/ids.js';
import { IN_FLIGHT_SEQUENCE_STATUSES, pauseSequences } from '../src/sequences/lifecycle.js';

/** Maps rows, looking the owner up only when some row has no user of its own. */
async function toContactLists(trx: Tx, organizationId: string, rows: ListRow[]) {
  const owner = rows.some((r) => r.user_id === null) ? await organizationOwnerId(trx, organizationId) : '';
  return rows.map((r) => toContactList(r, owner));
}

const createList: Handler<'createList'> = async ({ trx, auth, body }) => {
  const org = auth.organizationId;
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
      user_id: auth.userId ?? (await organizationOwnerId(trx, org)),
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
  return { status: 201, body: toContactList(row, row.user_id ?? '') };
};

const listLists: Handler<'listLists'> = async ({ trx, auth, query }) => {
  const org = auth.organizationId;
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
  return { status: 200, body: { data: await toContactLists(trx, org, result.data), nextCursor: result.nextCursor } };
};

const getList: Handler<'getList'> = async ({ trx, auth, params }) => {
  const row = await trx
    .selectFrom('contact_lists')
    .selectAll()
    .where('organization_id', '=', auth.organizationId)
    .where('id', '=', params.id)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  if (!row) throw notFound('list');
  return { status: 200, body: (await toContactLists(trx, auth.organizationId, [row]))[0] };
};

/**
 * Soft-deletes the list and its memberships. Sequences in flight for contacts whose own list it is
 * block the deletion (409) unless force=true, which pauses them first; contacts merely attached
 * from another list keep theirs. Contacts always survive. Audited, no event.
 */
const deleteList: Handler<'deleteList'> = async ({ trx, auth, params, query }) => {
  const org = auth.organizationId;
  const list = await trx
    .selectFrom('contact_lists')
    .select(['id', 'deleted_at'])
    .where('organization_id', '=', org)
    .where('id', '=', params.id)
    .forUpdate()
    .executeTakeFirst();
  if (!list) throw notFound('list');
  if (list.deleted_at !== null) {
    return {
      status: 200,
      body: {
        id: list.id,
        deleted: true,
        deletedAt: isoNN(list.deleted_at),
        alreadyDeleted: true,
        membershipsRemoved: 0,
        sequencesPaused: 0,
      },
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
  if (inFlight && query.force !== 'true') {
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
    .where('deleted_at', 'is', null)
    .where('erased_at', 'is', null)
    .executeTakeFirstOrThrow();
  const membershipsRemoved = Number(own.n) + Number(attached.numUpdatedRows);

  await audit(trx, org, {
    action: 'list.deleted',
    resource: { type: 'ContactList', id: list.id },
    keyId: auth.keyId,
    userId: auth.userId,
    details: { force: query.force === 'true', membershipsRemoved, sequencesPaused },
  });
  return {
    status: 200,
    body: { id: list.id, deleted: true, deletedAt: isoNN(deleted.deleted_at!), alreadyDeleted: false, membershipsRemoved, sequencesPaused },
  };
};

/**
 * Starts draft generation for the list's own contacts (src/drafting/list-generation.ts), or
 * answers the run in flight. Refusals first: 404 unknown list, 403 plan not entitled to
 * outbound, 400 no template or no contacts of its own.
 */
const generateListDrafts: Handler<'generateListDrafts'> = async ({ trx, auth, params }) => {
  const org = auth.organizationId;
  const list = await trx
    .selectFrom('contact_lists')
    .select(['id', 'use_case_template_id', 'product_id'])
    .where('organization_id', '=', org)
    .where('id', '=', params.id)
    .where('deleted_at', 'is', null)
    .forUpdate()
    .executeTakeFirst();
  if (!list) throw notFound('list');
  if (!outboundEntitled(auth.org.plan)) {
    throw new ProblemError('not-entitled', `The ${auth.org.plan} plan does not include outbound (draft generation).`);
  }
  return { status: 200, body: await startListGeneration(trx, org, list) };
};

export const listHandlers = { createList, listLists, getList, deleteList, generateListDrafts };
