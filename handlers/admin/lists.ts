// Operator row of a list: archive, test-flag, and the list context drafts are written from.
import { sql } from 'kysely';
import { withSystem } from '../../db/database.js';
import { requireOrg } from '../../src/account/organizations.js';
import { organizationOwnerId } from '../../src/account/people.js';
import { toContactList } from '../../src/crm/lists.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { notFound } from '../../src/http/problems.js';
import { emit } from '../../src/platform/events.js';

/** The list context fields of PATCH .../lists/{listId}, by column. */
const LIST_CONTEXT = { description: 'description', connectionPoint: 'connection_point', goal: 'goal' } as const;

const adminUpdateList: AdminHandler<'adminUpdateList'> = async ({ db, params, body }) =>
  withSystem(db, async (trx) => {
    await requireOrg(trx, params.orgId);
    const set: Record<string, unknown> = {};
    if (body.archived !== undefined) set.archived_at = body.archived ? sql`coalesce(archived_at, now_ms())` : null;
    if (body.isTest !== undefined) set.is_test = body.isTest;
    const sent = Object.entries(LIST_CONTEXT).filter(([field]) => body[field as keyof typeof LIST_CONTEXT] !== undefined);
    if (sent.length > 0) {
      const before = await trx
        .selectFrom('contact_lists')
        .select(['description', 'connection_point', 'goal'])
        .where('organization_id', '=', params.orgId)
        .where('id', '=', params.listId)
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
        await emit(trx, params.orgId, {
          type: 'list.context_updated',
          resource: { type: 'ContactList', id: params.listId },
          data: { listId: params.listId, changedFields, previous, current },
        });
      }
    }
    const r = await trx
      .updateTable('contact_lists')
      .set({ ...set, updated_at: sql`now_ms()` } as never)
      .where('organization_id', '=', params.orgId)
      .where('id', '=', params.listId)
      .where('deleted_at', 'is', null)
      .returningAll()
      .executeTakeFirst();
    if (!r) throw notFound('list');
    return { status: 200 as const, body: toContactList(r, await organizationOwnerId(trx, params.orgId)) };
  });

export const adminListHandlers: AdminHandlers = { adminUpdateList };
