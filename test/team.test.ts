// The team lifecycle of the operator API: adding a member (team.member_added), inviting
// (rep.invited) and activating (rep.activated + team.member_added), removing (team.member_removed:
// keys revoked, pending action items handed to the owner), the owner who cannot be removed, the
// team list, and removed people who get no new work.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assigneeFor, handoffReceiverId } from '../src/account/people.js';
import { eventsOf, mkContact, system, uid } from './crm-support.js';
import { raw, startService, type TestOrg, type TestService } from './support/harness.js';
import { waitFor } from './support/wait.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

type Role = 'REP' | 'MANAGER' | 'ADMIN' | 'OWNER';
const TEAM_TYPES = ['team.member_added', 'team.member_removed', 'rep.invited', 'rep.activated'];
const teamEvents = async (orgId: string) => (await eventsOf(svc, orgId)).filter((e) => TEAM_TYPES.includes(e.type));

const addUser = (orgId: string, body: { name?: string; email?: string; role?: Role; invite?: boolean; title?: string | null } = {}) =>
  svc.admin.POST('/organizations/{orgId}/users', {
    params: { path: { orgId } },
    body: { name: 'Ada Lovelace', email: `${uid('ada')}@acme.example`, role: 'REP', ...body },
  });
const activate = (orgId: string, userId: string) =>
  svc.admin.POST('/organizations/{orgId}/users/{userId}/activate', { params: { path: { orgId, userId } } });
const remove = (orgId: string, userId: string) =>
  svc.admin.DELETE('/organizations/{orgId}/users/{userId}', { params: { path: { orgId, userId } } });
const listUsers = (orgId: string, query: { status?: 'invited' | 'active' | 'removed'; limit?: number; cursor?: string } = {}) =>
  svc.admin.GET('/organizations/{orgId}/users', { params: { path: { orgId }, query } });
const mintKey = (orgId: string, userId: string) =>
  svc.admin.POST('/organizations/{orgId}/api-keys', { params: { path: { orgId } }, body: { scopes: ['*'], userId } });
const newItem = (orgId: string, salesPersonId: string) =>
  svc.admin.POST('/organizations/{orgId}/action-items', {
    params: { path: { orgId } },
    body: { actionType: 'follow_up', title: uid('Call '), salesPersonId, priority: 'high' },
  });
const itemOwner = async (orgId: string, id: string) =>
  system(svc, (trx) =>
    trx
      .selectFrom('action_items')
      .select(['sales_person_id', 'status'])
      .where('organization_id', '=', orgId)
      .where('id', '=', id)
      .executeTakeFirstOrThrow(),
  );

describe('adding and inviting people', () => {
  it('adds an active member and emits team.member_added (and no rep.invited)', async () => {
    const org = await svc.newOrg();
    const email = `${uid('grace')}@acme.example`;
    const r = await addUser(org.id, { name: 'Grace Hopper', email, role: 'MANAGER' });
    expect(r.response.status).toBe(201);
    expect(r.data).toMatchObject({
      organizationId: org.id,
      name: 'Grace Hopper',
      email,
      role: 'MANAGER',
      status: 'active',
      invitedAt: null,
      removedAt: null,
    });
    expect(Date.parse(r.data!.activatedAt!)).not.toBeNaN();
    const ev = await teamEvents(org.id);
    expect(ev.map((e) => e.type)).toEqual(['team.member_added']);
    expect(ev[0]).toMatchObject({
      resource_type: 'User',
      resource_id: r.data!.id,
      data: { userId: r.data!.id, name: 'Grace Hopper', email, role: 'MANAGER', status: 'active', invited: false },
    });
  });

  it('invites (rep.invited only); the invited person gets no key; activation emits rep.activated then team.member_added, once', async () => {
    const org = await svc.newOrg();
    const inv = await addUser(org.id, { name: 'Linus', role: 'REP', invite: true });
    expect(inv.response.status).toBe(201);
    expect(inv.data).toMatchObject({ status: 'invited', activatedAt: null, removedAt: null });
    expect(Date.parse(inv.data!.invitedAt!)).not.toBeNaN();
    const id = inv.data!.id;
    expect((await teamEvents(org.id)).map((e) => [e.type, e.data])).toEqual([
      ['rep.invited', { userId: id, name: 'Linus', email: inv.data!.email, role: 'REP' }],
    ]);
    // Not a member yet: no key, no work.
    const key = await mintKey(org.id, id);
    expect(key.response.status).toBe(400);
    expect((await newItem(org.id, id)).response.status).toBe(400);
    expect((await listUsers(org.id, { status: 'invited' })).data!.data.map((u) => u.id)).toEqual([id]);

    const a = await activate(org.id, id);
    expect(a.response.status).toBe(200);
    expect(a.data).toMatchObject({ id, status: 'active', invitedAt: inv.data!.invitedAt });
    expect(Date.parse(a.data!.activatedAt!)).not.toBeNaN();
    const ev = await teamEvents(org.id);
    expect(ev.map((e) => e.type)).toEqual(['rep.invited', 'rep.activated', 'team.member_added']);
    expect(ev[1].data).toMatchObject({ userId: id, role: 'REP', invitedAt: inv.data!.invitedAt });
    expect(ev[2].data).toMatchObject({ userId: id, status: 'active', invited: true });
    // Activating again changes nothing and emits nothing.
    const again = await activate(org.id, id);
    expect(again.response.status).toBe(200);
    expect(again.data!.activatedAt).toBe(a.data!.activatedAt);
    expect(await teamEvents(org.id)).toHaveLength(3);
    expect((await mintKey(org.id, id)).response.status).toBe(201);
  });

  it('refuses a second person with the same email (case-insensitive) with 400 and no event', async () => {
    const org = await svc.newOrg();
    const email = `${uid('dup')}@acme.example`;
    expect((await addUser(org.id, { email })).response.status).toBe(201);
    const dup = await addUser(org.id, { email: email.toUpperCase(), invite: true });
    expect(dup.response.status).toBe(400);
    expect(dup.error).toMatchObject({ type: expect.stringMatching(/validation-failed$/) });
    expect((await teamEvents(org.id)).map((e) => e.type)).toEqual(['team.member_added']);
  });

  it('answers 404 for an unknown organization, and for a person of another organization', async () => {
    const a = await svc.newOrg();
    const b = await svc.newOrg();
    const bob = (await addUser(b.id)).data!;
    expect((await addUser('org_nope')).response.status).toBe(404);
    for (const r of [await activate(a.id, bob.id), await remove(a.id, bob.id), await activate(a.id, 'usr_nope')]) {
      expect(r.response.status).toBe(404);
    }
    expect((await listUsers('org_nope')).response.status).toBe(404);
    expect(
      (await system(svc, (trx) => trx.selectFrom('users').select('status').where('id', '=', bob.id).executeTakeFirstOrThrow())).status,
    ).toBe('active');
    expect(await teamEvents(a.id)).toEqual([]);
  });
});

describe("a person's name and title (their signature)", () => {
  it('keeps the title given at creation, changes name and title with PATCH (null clears it), and lists them; 404 and 400 otherwise', async () => {
    const org = await svc.newOrg();
    const email = `${uid('dana')}@acme.example`;
    const created = await addUser(org.id, { name: 'Dana Reyes', email, title: 'Account Executive' });
    expect(created.data).toMatchObject({ name: 'Dana Reyes', title: 'Account Executive' });
    const untitled = await addUser(org.id, { name: 'Lee Park' });
    expect(untitled.data!.title).toBeNull();
    const patch = (userId: string, body: Record<string, unknown>) =>
      svc.admin.PATCH('/organizations/{orgId}/users/{userId}', { params: { path: { orgId: org.id, userId } }, body: body as never });
    const changed = await patch(created.data!.id, { name: 'Dana Reyes-Ortiz', title: 'Head of Partnerships' });
    expect(changed.response.status).toBe(200);
    expect(changed.data).toMatchObject({
      id: created.data!.id,
      name: 'Dana Reyes-Ortiz',
      email,
      title: 'Head of Partnerships',
      status: 'active',
    });
    expect((await patch(untitled.data!.id, { title: 'Solutions Engineer' })).data).toMatchObject({
      name: 'Lee Park',
      title: 'Solutions Engineer',
    });
    const listed = (await listUsers(org.id)).data!.data;
    expect(listed.find((u) => u.id === created.data!.id)).toMatchObject({ name: 'Dana Reyes-Ortiz', title: 'Head of Partnerships' });
    expect(listed.find((u) => u.id === untitled.data!.id)).toMatchObject({ title: 'Solutions Engineer' });
    expect((await patch(created.data!.id, { title: null })).data).toMatchObject({ name: 'Dana Reyes-Ortiz', title: null });
    // The owner created with the organization has none until given one.
    expect(listed.find((u) => u.id === org.ownerId)).toMatchObject({ title: null });
    expect((await patch(org.ownerId, { name: 'Grace Hopper', title: 'Founder' })).data).toMatchObject({ role: 'OWNER', title: 'Founder' });
    expect((await patch(uid('usr_'), { title: 'x' })).response.status).toBe(404);
    for (const body of [{}, { title: '' }, { name: '' }, { role: 'OWNER' }, { title: 't'.repeat(201) }])
      expect((await patch(created.data!.id, body)).response.status, JSON.stringify(body)).toBe(400);
    expect((await teamEvents(org.id)).map((e) => e.type)).toEqual(['team.member_added', 'team.member_added']);
  });
});

describe('GET /admin/api/organizations/{orgId}/users', () => {
  it('lists the team newest first with status, pages with a cursor, filters by status', async () => {
    const org = await svc.newOrg();
    const u1 = (await addUser(org.id)).data!;
    const u2 = (await addUser(org.id, { invite: true })).data!;
    const u3 = (await addUser(org.id)).data!;
    await remove(org.id, u3.id);
    const all = await listUsers(org.id);
    expect(all.response.status).toBe(200);
    expect(all.data!.data.map((u) => [u.id, u.status])).toEqual([
      [u3.id, 'removed'],
      [u2.id, 'invited'],
      [u1.id, 'active'],
      [org.ownerId, 'active'],
    ]);
    expect(all.data!.nextCursor).toBeNull();
    const p1 = await listUsers(org.id, { limit: 3 });
    expect(p1.data!.data).toHaveLength(3);
    const p2 = await listUsers(org.id, { limit: 3, cursor: p1.data!.nextCursor! });
    expect(p2.data!.data.map((u) => u.id)).toEqual([org.ownerId]);
    expect(p2.data!.nextCursor).toBeNull();
    expect((await listUsers(org.id, { status: 'removed' })).data!.data.map((u) => u.id)).toEqual([u3.id]);
    expect((await listUsers(org.id, { status: 'active' })).data!.data.map((u) => u.id)).toEqual([u1.id, org.ownerId]);
    const bad = await raw(svc.baseUrl, 'GET', `/admin/api/organizations/${org.id}/users?status=gone`, {
      headers: { authorization: `Bearer ${svc.config.adminToken}` },
    });
    expect(bad.status).toBe(400);
    const badCursor = await listUsers(org.id, { cursor: 'forged.cursor' });
    expect(badCursor.response.status).toBe(400);
  });
});

describe('removing a member', () => {
  async function setUp(role: Role = 'REP') {
    const org = await svc.newOrg();
    const rep = (await addUser(org.id, { role })).data!;
    const key1 = await org.key(['contacts.read', 'contacts.write', 'actions.read'], { userId: rep.id });
    const key2 = await org.key(['contacts.read'], { userId: rep.id });
    const other = await org.key(['contacts.read']);
    const open1 = (await newItem(org.id, rep.id)).data!.id;
    const open2 = (await newItem(org.id, rep.id)).data!.id;
    const done = (await newItem(org.id, rep.id)).data!.id;
    await system(svc, (trx) => trx.updateTable('action_items').set({ status: 'completed' }).where('id', '=', done).execute());
    return { org, rep, key1, key2, other, open1, open2, done };
  }

  it('revokes their keys (401 from then on), hands pending items to the owner and emits team.member_removed', async () => {
    const s = await setUp();
    expect((await svc.api(s.key1).GET('/me')).response.status).toBe(200);
    const r = await remove(s.org.id, s.rep.id);
    expect(r.response.status).toBe(200);
    expect(r.data).toMatchObject({ id: s.rep.id, status: 'removed' });
    expect(Date.parse(r.data!.removedAt!)).not.toBeNaN();
    for (const key of [s.key1, s.key2]) expect((await raw(svc.baseUrl, 'GET', '/api/v1/me', { key })).status).toBe(401);
    // A key not attributed to them keeps working.
    expect((await svc.api(s.other).GET('/contacts')).response.status).toBe(200);
    expect(await itemOwner(s.org.id, s.open1)).toEqual({ sales_person_id: s.org.ownerId, status: 'pending' });
    expect(await itemOwner(s.org.id, s.open2)).toEqual({ sales_person_id: s.org.ownerId, status: 'pending' });
    expect(await itemOwner(s.org.id, s.done)).toEqual({ sales_person_id: s.rep.id, status: 'completed' });
    const ev = (await teamEvents(s.org.id)).filter((e) => e.type === 'team.member_removed');
    expect(ev).toHaveLength(1);
    expect(ev[0]).toMatchObject({
      resource_type: 'User',
      resource_id: s.rep.id,
      data: {
        userId: s.rep.id,
        role: 'REP',
        previousStatus: 'active',
        revokedKeyCount: 2,
        reassignedActionItemCount: 2,
        reassignedTo: s.org.ownerId,
      },
    });
    // The row stays (nothing points to a missing person); removing again answers 200 and emits nothing.
    const again = await remove(s.org.id, s.rep.id);
    expect(again.response.status).toBe(200);
    expect(again.data!.removedAt).toBe(r.data!.removedAt);
    expect((await teamEvents(s.org.id)).filter((e) => e.type === 'team.member_removed')).toHaveLength(1);
  });

  it('a removed person gets no key, no item, no ownership, and cannot be activated (409 user-removed); their email may be added again', async () => {
    const s = await setUp();
    await remove(s.org.id, s.rep.id);
    expect((await mintKey(s.org.id, s.rep.id)).response.status).toBe(400);
    expect((await newItem(s.org.id, s.rep.id)).response.status).toBe(400);
    const deal = await svc
      .api(await s.org.key(['deals.write']))
      .POST('/deals', { body: { name: 'Renewal', ownerSalesPersonId: s.rep.id } as never });
    expect(deal.response.status).toBe(400);
    expect(JSON.stringify(deal.error)).toContain('ownerSalesPersonId');
    const a = await activate(s.org.id, s.rep.id);
    expect(a.response.status).toBe(409);
    expect(a.error).toMatchObject({ type: expect.stringMatching(/user-removed$/) });
    expect((await teamEvents(s.org.id)).map((e) => e.type)).toEqual(['team.member_added', 'team.member_removed']);
    const back = await addUser(s.org.id, { email: s.rep.email });
    expect(back.response.status).toBe(201);
    expect(back.data!.id).not.toBe(s.rep.id);
  });

  it('removing an invited person cancels the invitation with team.member_removed (previousStatus invited)', async () => {
    const org = await svc.newOrg();
    const inv = (await addUser(org.id, { invite: true })).data!;
    expect((await remove(org.id, inv.id)).data).toMatchObject({ status: 'removed', activatedAt: null });
    const ev = await teamEvents(org.id);
    expect(ev.map((e) => e.type)).toEqual(['rep.invited', 'team.member_removed']);
    expect(ev[1].data).toMatchObject({ previousStatus: 'invited', revokedKeyCount: 0, reassignedActionItemCount: 0 });
  });

  it('the owner cannot be removed: 409 owner-not-removable, nothing changes, no event', async () => {
    const org = await svc.newOrg();
    const ownerKey = await org.key(['contacts.read'], { userId: org.ownerId });
    const item = (await newItem(org.id, org.ownerId)).data!.id;
    // A second OWNER may be removed; the organization's owner (the longest-standing) may not.
    const second = (await addUser(org.id, { role: 'OWNER' })).data!;
    const r = await remove(org.id, org.ownerId);
    expect(r.response.status).toBe(409);
    expect(r.error).toMatchObject({ type: expect.stringMatching(/owner-not-removable$/), status: 409 });
    expect((await svc.api(ownerKey).GET('/contacts')).response.status).toBe(200);
    expect(await itemOwner(org.id, item)).toEqual({ sales_person_id: org.ownerId, status: 'pending' });
    expect((await teamEvents(org.id)).map((e) => e.type)).toEqual(['team.member_added']);
    expect((await remove(org.id, second.id)).response.status).toBe(200);
  });

  it('work that arises later goes to the owner: a contact of a removed person, a handoff that would have gone to a removed manager', async () => {
    const org = await svc.newOrg();
    const rep = (await addUser(org.id)).data!;
    const manager = (await addUser(org.id, { role: 'MANAGER' })).data!;
    const api = svc.api(await org.key(['contacts.read', 'contacts.write', 'lists.write', 'lists.read'], { userId: rep.id }));
    const c = await mkContact(api);
    expect(await system(svc, (trx) => assigneeFor(trx, org.id, c.id))).toBe(rep.id);
    expect(await system(svc, (trx) => handoffReceiverId(trx, org.id))).toBe(manager.id);
    await remove(org.id, rep.id);
    await remove(org.id, manager.id);
    // The contact keeps its owner (the person's row stays); its new work goes to the owner.
    expect(
      (await system(svc, (trx) => trx.selectFrom('contacts').select('owner_user_id').where('id', '=', c.id).executeTakeFirstOrThrow()))
        .owner_user_id,
    ).toBe(rep.id);
    expect(await system(svc, (trx) => assigneeFor(trx, org.id, c.id))).toBe(org.ownerId);
    expect(await system(svc, (trx) => handoffReceiverId(trx, org.id))).toBe(org.ownerId);
    // End to end: an interested reply from that contact opens its item for the owner.
    const m = await svc.admin.POST('/organizations/{orgId}/inbound-messages', {
      params: { path: { orgId: org.id } },
      body: { fromEmail: c.email, subject: 'Re: hello', body: 'Thanks, this sounds interesting. Tell me more about pricing.' },
    });
    expect(m.response.status).toBe(201);
    const items = await waitForItems(org, c.id);
    expect(items.map((i) => i.sales_person_id)).toEqual([org.ownerId]);
  });
});

describe('the organization owner', () => {
  it('is the one person everywhere an owner stands in, however many other OWNER-role people there are', async () => {
    const org = await svc.newOrg();
    // Other OWNER-role people: active, invited, and removed. None of them is the organization's owner.
    await addUser(org.id, { role: 'OWNER' });
    await addUser(org.id, { role: 'OWNER', invite: true });
    const leaving = (await addUser(org.id, { role: 'OWNER' })).data!;
    await remove(org.id, leaving.id);
    const api = svc.api(await org.key(['contacts.write', 'lists.read', 'lists.write', 'deals.write']));
    // A list made by an unattributed key, the CRM import list its first contact opens, a deal it
    // creates, and the operator's view of the organization.
    const list = (await api.POST('/lists', { body: { name: uid('List ') } })).data!;
    await mkContact(api);
    const crmImport = (await api.GET('/lists')).data!.data.find((l) => l.name === 'CRM import')!;
    const deal = (await api.POST('/deals', { body: { name: uid('Deal ') } })).data!;
    const organization = (
      await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: org.id } }, body: { plan: 'starter' } })
    ).data!;
    expect([list.userId, crmImport.userId, deal.ownerSalesPersonId, organization.owner.id]).toEqual(Array(4).fill(org.ownerId));
  });
});

async function waitForItems(org: TestOrg, contactId: string) {
  return waitFor(
    async () => {
      const rows = await system(svc, (trx) =>
        trx
          .selectFrom('action_items')
          .select(['sales_person_id', 'action_type'])
          .where('organization_id', '=', org.id)
          .where('entity_id', '=', contactId)
          .execute(),
      );
      return rows.length ? rows : null;
    },
    10_000,
    'an action item to be opened',
    100,
  );
}
