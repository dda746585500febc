// Operator rows about contacts: restoring a soft-deleted contact within its undo window.
import { sql } from 'kysely';
import { withSystem } from '../../db/database.js';
import { requireOrg } from '../../src/account/organizations.js';
import type { AdminHandler } from '../../src/http/handler.js';
import { notFound, ProblemError } from '../../src/http/problems.js';
import { emit } from '../../src/platform/events.js';
import { isoNN } from '../../src/platform/ids.js';
import { contactById, lockAddress, UNDO_WINDOW_MS } from '../contacts.js';

const adminRestoreContact: AdminHandler<'adminRestoreContact'> = async ({ db, params }) =>
  withSystem(db, async (trx) => {
    const org = params.orgId;
    await requireOrg(trx, org);
    const find = () =>
      trx
        .selectFrom('contacts')
        .select(['id', 'email_normalized', 'deleted_at', 'erased_at'])
        .where('organization_id', '=', org)
        .where('id', '=', params.contactId)
        .executeTakeFirst();
    const seen = await find();
    if (!seen) throw notFound('contact');
    // The address lock orders this against POST /contacts filing the same person again, and against erasure.
    await lockAddress(trx, org, seen.email_normalized);
    const c = (await find())!;
    if (c.erased_at !== null)
      throw new ProblemError('contact-erased', 'The contact was erased; erasure is irreversible, so it cannot be restored.');
    if (c.deleted_at === null) return { status: 200 as const, body: { restored: false, contact: await contactById(trx, org, c.id) } };
    const now = (await sql<{ now: Date }>`select now_ms() as now`.execute(trx)).rows[0].now;
    const until = new Date(c.deleted_at.getTime() + UNDO_WINDOW_MS);
    if (now.getTime() >= until.getTime()) {
      throw new ProblemError(
        'undo-window-expired',
        `The contact was deleted at ${isoNN(c.deleted_at)}; its undo window ended at ${isoNN(until)}.`,
        { undoAvailableUntil: isoNN(until) },
      );
    }
    // One live record per person: a record filed after the delete (any list) would be a second one.
    const live = await trx
      .selectFrom('contacts')
      .select('id')
      .where('organization_id', '=', org)
      .where('email_normalized', '=', c.email_normalized)
      .where('id', '<>', c.id)
      .where('deleted_at', 'is', null)
      .where('erased_at', 'is', null)
      .orderBy('created_at')
      .limit(1)
      .executeTakeFirst();
    if (live) {
      throw new ProblemError(
        'contact-restore-conflict',
        `The same person has a live contact again (${live.id}), filed after this one was deleted; delete it first to restore this one.`,
        { conflictingContactId: live.id },
      );
    }
    await trx
      .updateTable('contacts')
      .set({ deleted_at: null, updated_at: sql<Date>`now_ms()` })
      .where('organization_id', '=', org)
      .where('id', '=', c.id)
      .execute();
    await emit(trx, org, {
      type: 'contact.restored',
      resource: { type: 'Contact', id: c.id },
      data: { contactId: c.id, deletedAt: isoNN(c.deleted_at) },
    });
    return { status: 200 as const, body: { restored: true, contact: await contactById(trx, org, c.id) } };
  });

export const adminContactHandlers = { adminRestoreContact };
