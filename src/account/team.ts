// The team lifecycle: a sales person is added as an active member (team.member_added) or invited
// (rep.invited, then rep.activated and team.member_added when they accept), and removed
// (team.member_removed): their keys are revoked and their pending action items go to the
// organization's owner, in one transaction. The row of a removed person stays, so what they owned
// still names a person; src/account/people.ts gives them no new work.
import type { Selectable } from 'kysely';
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { Users } from '../../db/schema.js';
import type { adminOperations } from '../http/handler.js';
import { keyset, page } from '../http/paging.js';
import { invalid, notFound, ProblemError } from '../http/problems.js';
import { emit, emitMany } from '../platform/events.js';
import { iso, isoNN, newId } from '../platform/ids.js';
import { requireOrg } from './organizations.js';
import { organizationOwnerId } from './people.js';

type Role = 'REP' | 'MANAGER' | 'ADMIN' | 'OWNER';
type Status = 'invited' | 'active' | 'removed';
type UserRow = Selectable<Users>;
type NewMember = adminOperations['adminCreateUser']['requestBody']['content']['application/json'];
type MemberChanges = adminOperations['adminUpdateUser']['requestBody']['content']['application/json'];
export type TeamFilter = NonNullable<adminOperations['adminListUsers']['parameters']['query']>;

export const toAdminUser = (u: UserRow) => ({
  id: u.id,
  organizationId: u.organization_id,
  name: u.name,
  email: u.email,
  title: u.title,
  role: u.role as Role,
  status: u.status as Status,
  invitedAt: iso(u.invited_at),
  activatedAt: iso(u.activated_at),
  removedAt: iso(u.removed_at),
  createdAt: isoNN(u.created_at),
});

/** The person, locked for the change; 404 when the organization has no such person. */
async function lockedUser(trx: Tx, orgId: string, userId: string): Promise<UserRow> {
  await requireOrg(trx, orgId);
  const u = await trx
    .selectFrom('users')
    .selectAll()
    .where('organization_id', '=', orgId)
    .where('id', '=', userId)
    .forUpdate()
    .executeTakeFirst();
  if (!u) throw notFound('sales person');
  return u;
}

const memberAdded = (u: UserRow, invited: boolean) => ({
  type: 'team.member_added',
  resource: { type: 'User', id: u.id },
  data: { userId: u.id, name: u.name, email: u.email, role: u.role, status: 'active', invited },
});

/** Adds a person, active or (invite) invited; 400 when a person not removed has the address. */
export async function addTeamMember(trx: Tx, orgId: string, body: NewMember) {
  // One person per address among those not removed: concurrent adds of one address queue here.
  const email = body.email.trim();
  await sql`SELECT pg_advisory_xact_lock(hashtextextended('user-email:' || ${orgId} || ':' || lower(${email}), 0))`.execute(trx);
  const dup = await trx
    .selectFrom('users')
    .select('id')
    .where('organization_id', '=', orgId)
    .where('status', '<>', 'removed')
    .where(sql<boolean>`lower(email) = lower(${email})`)
    .executeTakeFirst();
  if (dup) throw invalid(`The organization already has a sales person with the email ${email} (${dup.id}).`, 'body.email');
  const invite = body.invite === true;
  const u = await trx
    .insertInto('users')
    .values({
      organization_id: orgId,
      id: newId('usr'),
      name: body.name,
      email,
      title: body.title ?? null,
      role: body.role,
      status: invite ? 'invited' : 'active',
      invited_at: invite ? sql<Date>`now_ms()` : null,
      activated_at: invite ? null : sql<Date>`now_ms()`,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await emit(
    trx,
    orgId,
    invite
      ? { type: 'rep.invited', resource: { type: 'User', id: u.id }, data: { userId: u.id, name: u.name, email: u.email, role: u.role } }
      : memberAdded(u, false),
  );
  return toAdminUser(u);
}

export async function listTeam(trx: Tx, orgId: string, filter: TeamFilter) {
  const limit = filter.limit ?? 50;
  let q = trx.selectFrom('users').selectAll().where('organization_id', '=', orgId);
  if (filter.status !== undefined) q = q.where('status', '=', filter.status);
  const rows = await keyset(q, { cursor: filter.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return page(rows, limit, (r) => ({ at: r.created_at, id: r.id }), toAdminUser);
}

/** An invited person accepts (an active one is answered unchanged); 409 user-removed for a removed one. */
export async function activateTeamMember(trx: Tx, orgId: string, userId: string) {
  const u = await lockedUser(trx, orgId, userId);
  if (u.status === 'removed') {
    throw new ProblemError('user-removed', `${u.id} was removed from the team; add the person again to bring them back.`);
  }
  if (u.status === 'active') return toAdminUser(u);
  const a = await trx
    .updateTable('users')
    .set({ status: 'active', activated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', orgId)
    .where('id', '=', u.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  await emitMany(trx, orgId, [
    {
      type: 'rep.activated',
      resource: { type: 'User', id: a.id },
      data: { userId: a.id, name: a.name, email: a.email, role: a.role, invitedAt: iso(a.invited_at) },
    },
    memberAdded(a, true),
  ]);
  return toAdminUser(a);
}

/** Changes a person's name or title (what their signature shows); 404 when there is no such person. */
export async function updateTeamMember(trx: Tx, orgId: string, userId: string, body: MemberChanges) {
  await lockedUser(trx, orgId, userId);
  const u = await trx
    .updateTable('users')
    .set({ ...(body.name !== undefined ? { name: body.name } : {}), ...(body.title !== undefined ? { title: body.title } : {}) })
    .where('organization_id', '=', orgId)
    .where('id', '=', userId)
    .returningAll()
    .executeTakeFirstOrThrow();
  return toAdminUser(u);
}

/**
 * Removes a person (a removed one is answered unchanged; the owner cannot be removed): their keys
 * are revoked and their pending action items go to the owner.
 */
export async function removeTeamMember(trx: Tx, orgId: string, userId: string) {
  const u = await lockedUser(trx, orgId, userId);
  if (u.status === 'removed') return toAdminUser(u);
  const ownerId = await organizationOwnerId(trx, orgId);
  if (u.id === ownerId) {
    throw new ProblemError(
      'owner-not-removable',
      `${u.id} is the organization's owner, who holds everything unattributed; the owner cannot be removed.`,
    );
  }
  const removed = await trx
    .updateTable('users')
    .set({ status: 'removed', removed_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', orgId)
    .where('id', '=', u.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const keys = await trx
    .updateTable('api_keys')
    .set({ revoked_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', orgId)
    .where('user_id', '=', u.id)
    .where('revoked_at', 'is', null)
    .returning('id')
    .execute();
  // Open work goes to the owner; closed items keep the person who closed them.
  const items = await trx
    .updateTable('action_items')
    .set({ sales_person_id: ownerId, updated_at: sql<Date>`now_ms()` })
    .where('organization_id', '=', orgId)
    .where('sales_person_id', '=', u.id)
    .where('status', '=', 'pending')
    .returning('id')
    .execute();
  await emit(trx, orgId, {
    type: 'team.member_removed',
    resource: { type: 'User', id: u.id },
    data: {
      userId: u.id,
      role: u.role,
      previousStatus: u.status,
      revokedKeyCount: keys.length,
      reassignedActionItemCount: items.length,
      reassignedTo: ownerId,
    },
  });
  return toAdminUser(removed);
}
