// Who in an organization owns what: its OWNER (the fallback owner of anything unattributed) and
// the sales person a contact's work goes to. Only active people get work: an invited person has
// not accepted yet, a removed one has left (their rows stay, so past ownership still names them).
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';

/**
 * The organization's owner: its longest-standing active OWNER (the one created with the
 * organization, who cannot be removed), the fallback owner of anything unattributed. The one
 * lookup of it; every organization has one from creation, so none is a broken invariant.
 */
export async function organizationOwner(
  trx: Tx,
  organizationId: string,
): Promise<{ id: string; name: string; email: string; role: string }> {
  const o = await trx
    .selectFrom('users')
    .select(['id', 'name', 'email', 'role'])
    .where('organization_id', '=', organizationId)
    .where('role', '=', 'OWNER')
    .where('status', '=', 'active')
    .orderBy('created_at')
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
  if (!o) throw new Error(`organization ${organizationId} has no active OWNER`);
  return o;
}

/** The id of the organization's owner (organizationOwner). */
export async function organizationOwnerId(trx: Tx, organizationId: string): Promise<string> {
  return (await organizationOwner(trx, organizationId)).id;
}

/** The sales person who works a contact: its owner when that is still an active person of the organization, else the OWNER. */
export async function assigneeFor(trx: Tx, organizationId: string, contactId: string | null): Promise<string> {
  if (contactId !== null) {
    const c = await trx
      .selectFrom('contacts')
      .innerJoin('users', (j) =>
        j.onRef('users.organization_id', '=', 'contacts.organization_id').onRef('users.id', '=', 'contacts.owner_user_id'),
      )
      .select('users.id')
      .where('users.status', '=', 'active')
      .where('contacts.organization_id', '=', organizationId)
      .where('contacts.id', '=', contactId)
      .executeTakeFirst();
    if (c) return c.id;
  }
  return organizationOwnerId(trx, organizationId);
}

/** Who receives a handoff to an account executive: the longest-standing active MANAGER, else ADMIN, else the OWNER. */
export async function handoffReceiverId(trx: Tx, organizationId: string): Promise<string> {
  const r = await trx
    .selectFrom('users')
    .select('id')
    .where('organization_id', '=', organizationId)
    .where('role', 'in', ['MANAGER', 'ADMIN', 'OWNER'])
    .where('status', '=', 'active')
    .orderBy(sql`CASE role WHEN 'MANAGER' THEN 0 WHEN 'ADMIN' THEN 1 ELSE 2 END`)
    .orderBy('created_at')
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
  return r?.id ?? organizationOwnerId(trx, organizationId);
}
