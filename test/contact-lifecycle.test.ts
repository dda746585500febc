// The contact lifecycle rows of the event catalogue: the operator's restore of a soft-deleted
// contact (contact.restored) and contact.stage_changed on every change of qualificationStatus
// (PATCH, lead conversion, a reply that qualifies), plus the operator's list context update
// (list.context_updated). Each case asserts the events emitted and those NOT emitted.

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventsOf, mkContact, mkList, system, uniqueEmail } from './crm-support.js';
import { mkLead } from './lead-support.js';
import { ALL_SCOPES, startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

const setup = async () => {
  const org = await svc.newOrg();
  const key = await org.key(ALL_SCOPES, { userId: org.ownerId });
  return { org, api: svc.api(key) };
};
const restore = (orgId: string, contactId: string) =>
  svc.admin.POST('/organizations/{orgId}/contacts/{contactId}/restore', { params: { path: { orgId, contactId } } });
const backdateDelete = (orgId: string, id: string, days: number) =>
  system(svc, (trx) =>
    sql`UPDATE contacts SET deleted_at = now() - make_interval(days => ${days}) WHERE organization_id = ${orgId} AND id = ${id}`.execute(
      trx,
    ),
  );
const slugOf = (error: unknown) =>
  String((error as { type?: string }).type)
    .split('/')
    .pop();

describe('POST /admin/api/organizations/{orgId}/contacts/{contactId}/restore', () => {
  it('restores a soft-deleted contact within its window: live again, on its list, contact.restored once', async () => {
    const { org, api } = await setup();
    const list = await mkList(api);
    const c = await mkContact(api, { listId: list.id });
    const del = await api.DELETE('/contacts/{id}', { params: { path: { id: c.id } } });
    expect((await api.GET('/contacts/{id}', { params: { path: { id: c.id } } })).response.status).toBe(404);

    const r = await restore(org.id, c.id);
    expect(r.response.status).toBe(200);
    expect(r.data).toMatchObject({ restored: true, contact: { id: c.id, email: c.email, list: { id: list.id, name: list.name } } });
    const got = await api.GET('/contacts/{id}', { params: { path: { id: c.id } } });
    expect(got.response.status).toBe(200);
    expect((await api.GET('/contacts', { params: { query: { listId: list.id } } })).data?.data.map((x) => x.id)).toEqual([c.id]);
    const events = await eventsOf(svc, org.id, 'contact.restored');
    expect(events.map((e) => ({ data: e.data, resource: [e.resource_type, e.resource_id] }))).toEqual([
      { data: { contactId: c.id, deletedAt: del.data!.deletedAt }, resource: ['Contact', c.id] },
    ]);

    // A second restore of a live contact is a safe no-op: 200, restored false, no event.
    const again = await restore(org.id, c.id);
    expect(again.response.status).toBe(200);
    expect(again.data?.restored).toBe(false);
    expect(await eventsOf(svc, org.id, 'contact.restored')).toHaveLength(1);
    // Deleting it again works as a first delete (a new contact.deleted).
    await api.DELETE('/contacts/{id}', { params: { path: { id: c.id } } });
    expect(await eventsOf(svc, org.id, 'contact.deleted')).toHaveLength(2);
  });

  it('refuses past the 30-day window (409 undo-window-expired), an erased contact (409 contact-erased), unknown and foreign ids (404); nothing changes', async () => {
    const { org, api } = await setup();
    const old = await mkContact(api);
    await api.DELETE('/contacts/{id}', { params: { path: { id: old.id } } });
    await backdateDelete(org.id, old.id, 31);
    const late = await restore(org.id, old.id);
    expect(late.response.status).toBe(409);
    expect(slugOf(late.error)).toBe('undo-window-expired');
    // Just inside the window still restores.
    await backdateDelete(org.id, old.id, 29);
    expect((await restore(org.id, old.id)).data?.restored).toBe(true);

    const gone = await mkContact(api);
    await api.DELETE('/contacts/{id}', { params: { path: { id: gone.id } } });
    const erase = await api.POST('/contacts/{id}/erase', {
      params: { path: { id: gone.id } },
      body: { requesterRef: 'ticket-1', reason: 'gdpr' },
    });
    expect(erase.response.status).toBe(200);
    const erased = await restore(org.id, gone.id);
    expect(erased.response.status).toBe(409);
    expect(slugOf(erased.error)).toBe('contact-erased');

    const other = await setup();
    const foreign = await mkContact(other.api);
    await other.api.DELETE('/contacts/{id}', { params: { path: { id: foreign.id } } });
    expect((await restore(org.id, foreign.id)).response.status).toBe(404);
    expect((await restore(org.id, 'con_unknown')).response.status).toBe(404);
    expect((await restore('org_unknown', foreign.id)).response.status).toBe(404);
    expect((await other.api.GET('/contacts/{id}', { params: { path: { id: foreign.id } } })).response.status).toBe(404);

    const restored = (await eventsOf(svc, org.id, 'contact.restored')).map((e) => e.resource_id);
    expect(restored).toEqual([old.id]);
    expect(await eventsOf(svc, other.org.id, 'contact.restored')).toEqual([]);
  });

  it('refuses a restore that would make a second live record of the person (409 contact-restore-conflict naming it)', async () => {
    const { org, api } = await setup();
    const list = await mkList(api);
    const email = uniqueEmail();
    const first = await mkContact(api, { email, listId: list.id });
    await api.DELETE('/contacts/{id}', { params: { path: { id: first.id } } });
    // Filed again after the delete (same list: a new record).
    const second = await mkContact(api, { email: email.toUpperCase(), listId: list.id });
    expect(second.id).not.toBe(first.id);
    const r = await restore(org.id, first.id);
    expect(r.response.status).toBe(409);
    expect(r.error).toMatchObject({ conflictingContactId: second.id });
    expect(slugOf(r.error)).toBe('contact-restore-conflict');
    expect(await eventsOf(svc, org.id, 'contact.restored')).toEqual([]);
    // Once the newer record is deleted, the older one can come back.
    await api.DELETE('/contacts/{id}', { params: { path: { id: second.id } } });
    expect((await restore(org.id, first.id)).data?.restored).toBe(true);
  });
});

describe('contact.stage_changed', () => {
  it('PATCH emits {contactId, from, to, source: api} on a change, nothing when the status is unchanged or absent', async () => {
    const { org, api } = await setup();
    const c = await mkContact(api);
    const patch = (body: object) => api.PATCH('/contacts/{id}', { params: { path: { id: c.id } }, body: body as never });
    expect((await patch({ qualificationStatus: 'CONTACTED' })).data?.updated).toBe(true);
    expect((await patch({ qualificationStatus: 'CONTACTED', name: 'Renamed' })).data?.updated).toBe(true);
    expect((await patch({ title: 'CTO' })).data?.updated).toBe(true);
    expect((await patch({ qualificationStatus: 'CONTACTED' })).data?.updated).toBe(false);
    expect((await patch({ qualificationStatus: 'QUALIFIED' })).data?.updated).toBe(true);
    // A refused PATCH changes nothing and emits nothing.
    expect((await patch({ qualificationStatus: 'WON' })).response.status).toBe(400);
    const events = await eventsOf(svc, org.id, 'contact.stage_changed');
    expect(events.map((e) => e.data)).toEqual([
      { contactId: c.id, from: 'NEW', to: 'CONTACTED', source: 'api' },
      { contactId: c.id, from: 'CONTACTED', to: 'QUALIFIED', source: 'api' },
    ]);
    expect(events.every((e) => e.resource_type === 'Contact' && e.resource_id === c.id)).toBe(true);
  });

  it('lead conversion makes the contact QUALIFIED (source lead_conversion); a CUSTOMER stays one, with no event', async () => {
    const { org, api } = await setup();
    const leadId = await mkLead(svc, org.id);
    const conv = await api.POST('/leads/{id}/convert', { params: { path: { id: leadId } }, body: { createDeal: false } });
    expect(conv.response.status).toBe(200);
    const contactId = conv.data!.contactId;
    expect((await api.GET('/contacts/{id}', { params: { path: { id: contactId } } })).data?.qualificationStatus).toBe('QUALIFIED');
    expect((await eventsOf(svc, org.id, 'contact.stage_changed')).map((e) => e.data)).toEqual([
      { contactId, from: 'NEW', to: 'QUALIFIED', source: 'lead_conversion', leadId },
    ]);

    // An existing customer converting again keeps CUSTOMER.
    const email = uniqueEmail();
    const customer = await mkContact(api, { email });
    await api.PATCH('/contacts/{id}', { params: { path: { id: customer.id } }, body: { qualificationStatus: 'CUSTOMER' } });
    const before = (await eventsOf(svc, org.id, 'contact.stage_changed')).length;
    const lead2 = await mkLead(svc, org.id, { email });
    const conv2 = await api.POST('/leads/{id}/convert', { params: { path: { id: lead2 } }, body: { createDeal: false } });
    expect(conv2.data?.contactId).toBe(customer.id);
    expect((await api.GET('/contacts/{id}', { params: { path: { id: customer.id } } })).data?.qualificationStatus).toBe('CUSTOMER');
    expect(await eventsOf(svc, org.id, 'contact.stage_changed')).toHaveLength(before);
  });

  it('an interested reply qualifies the contact (source reply); an unclassifiable one changes nothing', async () => {
    const { org, api } = await setup();
    const c = await mkContact(api);
    const ingest = (text: string) =>
      svc.admin.POST('/organizations/{orgId}/inbound-messages', {
        params: { path: { orgId: org.id } },
        body: { fromEmail: c.email, subject: 'Re: our idea', body: text },
      });
    const neutral = await ingest('Received, thanks.');
    expect(neutral.response.status).toBe(201);
    expect(await eventsOf(svc, org.id, 'contact.stage_changed')).toEqual([]);
    const hot = await ingest('This sounds interesting. Please tell me more about pricing for a team of 40.');
    expect(hot.response.status).toBe(201);
    expect((await eventsOf(svc, org.id, 'lead.interested')).length).toBe(1);
    expect((await eventsOf(svc, org.id, 'contact.stage_changed')).map((e) => e.data)).toEqual([
      { contactId: c.id, from: 'NEW', to: 'QUALIFIED', source: 'reply', messageId: hot.data!.id, intent: 'interested' },
    ]);
    // A second interested reply: already QUALIFIED, no second event.
    await ingest('Interested! Tell me more please.');
    expect(await eventsOf(svc, org.id, 'contact.stage_changed')).toHaveLength(1);
  });
});

describe('PATCH /admin/api/organizations/{orgId}/lists/{listId} (context)', () => {
  it('updates description, connectionPoint and goal with POST /lists limits, emitting list.context_updated with the changed fields only', async () => {
    const { org, api } = await setup();
    const list = await mkList(api);
    const patch = (body: object) =>
      svc.admin.PATCH('/organizations/{orgId}/lists/{listId}', {
        params: { path: { orgId: org.id, listId: list.id } },
        body: body as never,
      });
    const r = await patch({ connectionPoint: 'We met at SaaStr', goal: 'Book a demo' });
    expect(r.response.status).toBe(200);
    expect(r.data).toMatchObject({ id: list.id, connectionPoint: 'We met at SaaStr', goal: 'Book a demo', description: null });
    // Same values: nothing changes, no event; then one field changed and one cleared.
    expect((await patch({ connectionPoint: 'We met at SaaStr', goal: 'Book a demo' })).response.status).toBe(200);
    expect((await patch({ goal: null, description: 'd'.repeat(400), connectionPoint: 'We met at SaaStr' })).data).toMatchObject({
      goal: null,
      description: 'd'.repeat(400),
      connectionPoint: 'We met at SaaStr',
    });
    // Archiving alone emits no context event.
    expect((await patch({ archived: true })).data?.archivedAt).not.toBeNull();
    for (const body of [
      { description: 'd'.repeat(401) },
      { connectionPoint: 'c'.repeat(251) },
      { goal: 'g'.repeat(151) },
      { goal: 5 },
      {},
    ]) {
      expect((await patch(body)).response.status, JSON.stringify(body)).toBe(400);
    }
    const events = await eventsOf(svc, org.id, 'list.context_updated');
    expect(events.map((e) => e.data)).toEqual([
      {
        listId: list.id,
        changedFields: ['connectionPoint', 'goal'],
        previous: { connectionPoint: null, goal: null },
        current: { connectionPoint: 'We met at SaaStr', goal: 'Book a demo' },
      },
      {
        listId: list.id,
        changedFields: ['description', 'goal'],
        previous: { description: null, goal: 'Book a demo' },
        current: { description: 'd'.repeat(400), goal: null },
      },
    ]);
    expect(events.every((e) => e.resource_type === 'ContactList' && e.resource_id === list.id)).toBe(true);
    const got = await api.GET('/lists/{id}', { params: { path: { id: list.id } } });
    expect(got.data).toMatchObject({ goal: null, description: 'd'.repeat(400), connectionPoint: 'We met at SaaStr' });
  });

  it('a deleted, unknown or foreign list is 404 and emits nothing', async () => {
    const { org, api } = await setup();
    const other = await setup();
    const foreign = await mkList(other.api);
    const gone = await mkList(api);
    await api.DELETE('/lists/{id}', { params: { path: { id: gone.id } } });
    for (const listId of [foreign.id, gone.id, 'lst_unknown']) {
      const r = await svc.admin.PATCH('/organizations/{orgId}/lists/{listId}', {
        params: { path: { orgId: org.id, listId } },
        body: { goal: 'x' },
      });
      expect(r.response.status).toBe(404);
    }
    expect(await eventsOf(svc, org.id, 'list.context_updated')).toEqual([]);
    expect(await eventsOf(svc, other.org.id, 'list.context_updated')).toEqual([]);
  });
});
