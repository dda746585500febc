// GET /messages and the operator row that ingests an inbound message: the row with and without
// `raw`, with `inReplyTo`, its refusals and its idempotency; the list's filters, keyset paging,
// previews (quotes left out, about 200 characters cut at a word), and the dispatcher's OUTBOUND rows.

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventsOf, system, uid, uniqueEmail } from './crm-support.js';
import { contact, type DraftingOrg, draftingOrg, draftsOf, sequence, settle, template } from './drafting-support.js';
import { raw, startService, type TestService } from './support/harness.js';
import { messagesWithRaw } from './support/inbound-mail.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService({ MAIL_FROM: 'Acme Sales <sales@acme-sender.test>' });
  await svc.startWorker();
});
afterAll(async () => {
  await svc?.close();
});

type Body = { fromEmail?: string; subject?: string; body?: string; inReplyTo?: string; raw?: string; channel?: string };
const ingest = (orgId: string, body: Body) =>
  svc.admin.POST('/organizations/{orgId}/inbound-messages', { params: { path: { orgId } }, body: body as never });
const list = (s: DraftingOrg, query: Record<string, string | number> = {}) => s.api.GET('/messages', { params: { query: query as never } });
const row = (id: string) => system(svc, (trx) => messagesWithRaw(trx).where('m.id', '=', id).executeTakeFirstOrThrow());

/** A contact whose one-step sequence was sent (capture transport): its OUTBOUND message exists. */
async function sentTo(s: DraftingOrg, email = uniqueEmail('sent')) {
  const c = await contact(s.api, { email, name: 'Dana Whitfield' });
  await sequence(
    s.api,
    c.id,
    await template(svc, s.org.id, [
      { dayOffset: 0, subject: 'A quick idea', body: 'Hi Dana,\n\nWe help revenue teams book meetings.\n\nBest,\nSam' },
    ]),
  );
  await settle(svc);
  const [d] = await draftsOf(s.api, c.id);
  await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
  await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { flags: { v1_2_api_send: true } } });
  expect((await s.api.POST('/drafts/{id}/send', { params: { path: { id: d.id } } })).data?.queued).toBe(true);
  await settle(svc);
  const record = await system(svc, (trx) =>
    trx
      .selectFrom('send_records')
      .selectAll()
      .where('organization_id', '=', s.org.id)
      .where('contact_id', '=', c.id)
      .executeTakeFirstOrThrow(),
  );
  return { c, draft: d, record };
}

describe('POST /admin/api/organizations/{orgId}/inbound-messages', () => {
  it('composes a real message from the fields, matches the contact by sender, stores it and classifies it', async () => {
    const s = await draftingOrg(svc);
    const c = await contact(s.api, { email: uniqueEmail('dana') });
    const r = await ingest(s.org.id, {
      fromEmail: c.email.toUpperCase(),
      subject: 'Re: a quick idea',
      body: 'Thanks, this sounds interesting. Tell me more about pricing.',
    });
    expect(r.response.status).toBe(201);
    const m = await row(r.data!.id);
    expect(m).toMatchObject({
      direction: 'INBOUND',
      channel: 'email',
      contact_id: c.id,
      thread_method: 'sender',
      from_email: c.email.toLowerCase(),
      subject: 'Re: a quick idea',
    });
    // Real MIME was composed and kept: headers, a Message-ID, the text part.
    const mime = m.raw_mime!.toString('utf8');
    expect(mime).toMatch(/^Message-ID: <[^>]+>/im);
    expect(mime).toMatch(/^Subject: Re: a quick idea/im);
    expect(m.message_id).toMatch(/^<.+>$/);
    await settle(svc);
    expect(await row(m.id)).toMatchObject({ status: 'classified', intent: 'interested' });
    expect((await eventsOf(svc, s.org.id, 'reply.received')).map((e) => e.data.messageId)).toEqual([m.id]);
    expect((await eventsOf(svc, s.org.id, 'reply.classified')).map((e) => e.data)).toEqual([
      expect.objectContaining({ messageId: m.id, intent: 'interested', contactId: c.id }),
    ]);
  });

  it('stores a sender that matches no contact with contactId null; a channel is kept', async () => {
    const s = await draftingOrg(svc);
    const r = await ingest(s.org.id, { fromEmail: uniqueEmail('stranger'), body: 'Who is this?', channel: 'linkedin' });
    expect(r.response.status).toBe(201);
    expect(await row(r.data!.id)).toMatchObject({ contact_id: null, thread_method: 'none', channel: 'linkedin' });
  });

  it("threads by inReplyTo to the message we sent, and by a raw message's headers; the same raw message twice answers 200 with the first id", async () => {
    const s = await draftingOrg(svc);
    const { c, draft, record } = await sentTo(s);
    const composed = await ingest(s.org.id, {
      fromEmail: uniqueEmail('colleague'),
      subject: 'Re: A quick idea',
      body: 'Not interested, thanks.',
      inReplyTo: record.message_id!.slice(1, -1),
    });
    expect(composed.response.status).toBe(201);
    const m = await row(composed.data!.id);
    // A colleague answered: the thread names the record and its contact.
    expect(m).toMatchObject({
      thread_method: 'header',
      send_record_id: record.id,
      sequence_id: record.sequence_id,
      contact_id: c.id,
      in_reply_to: record.message_id,
    });
    const mime =
      `From: Dana <${c.email}>\r\nTo: sales@acme-sender.test\r\nSubject: Re: A quick idea\r\nMessage-ID: <${uid('raw')}@client.example>\r\n` +
      `References: <unknown@elsewhere.example> ${record.message_id}\r\n\r\nCan we schedule a call next week?\r\n`;
    const first = await ingest(s.org.id, { raw: mime });
    expect(first.response.status).toBe(201);
    expect(await row(first.data!.id)).toMatchObject({ thread_method: 'header', send_record_id: record.id, contact_id: c.id });
    const again = await ingest(s.org.id, { raw: mime });
    expect(again.response.status).toBe(200);
    expect(again.data!.id).toBe(first.data!.id);
    await settle(svc);
    expect(await eventsOf(svc, s.org.id, 'reply.received')).toHaveLength(2);
    expect(await eventsOf(svc, s.org.id, 'reply.classified')).toHaveLength(2);
    // A human reply marks the answered draft replied.
    const [d] = await draftsOf(s.api, c.id);
    expect(d.id).toBe(draft.id);
    expect(d.repliedAt).not.toBeNull();
  });

  it("never threads outside its organization: another organization's Message-ID is an unknown one", async () => {
    const a = await draftingOrg(svc);
    const { record } = await sentTo(a);
    const b = await draftingOrg(svc);
    const r = await ingest(b.org.id, { fromEmail: uniqueEmail('x'), body: 'Hello there', inReplyTo: record.message_id! });
    expect(await row(r.data!.id)).toMatchObject({
      organization_id: b.org.id,
      thread_method: 'none',
      send_record_id: null,
      contact_id: null,
    });
  });

  it('refuses raw together with the fields of a composed message, a body without fromEmail, an unknown organization', async () => {
    const s = await draftingOrg(svc);
    const mixed = await ingest(s.org.id, { raw: 'Subject: x\r\n\r\nhi', fromEmail: 'a@b.example' });
    expect(mixed.response.status).toBe(400);
    expect((await ingest(s.org.id, { body: 'no sender' })).response.status).toBe(400);
    expect((await ingest(s.org.id, { fromEmail: 'a@b.example', body: 'x', inReplyTo: 'not a message id' })).response.status).toBe(400);
    expect((await ingest('org_000000000000000000000000', { fromEmail: 'a@b.example', body: 'x' })).response.status).toBe(404);
    const count = await system(svc, (trx) =>
      trx
        .selectFrom('messages')
        .select(sql<number>`count(*)::int`.as('n'))
        .where('organization_id', '=', s.org.id)
        .executeTakeFirstOrThrow(),
    );
    expect(count.n).toBe(0);
  });

  it('stores whatever a malformed raw message holds, never a 500', async () => {
    const s = await draftingOrg(svc);
    for (const text of [
      'not a mail at all',
      'Content-Type: multipart/mixed; boundary="x"\r\n\r\n--x\r\nbroken',
      'From: <<<@@@>>>\r\nSubject: \u0000nul\r\n\r\nbody \u0000 with nul',
    ]) {
      const r = await raw(svc.baseUrl, 'POST', `/admin/api/organizations/${s.org.id}/inbound-messages`, {
        headers: { authorization: `Bearer ${svc.config.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ raw: text }),
      });
      expect([201, 400]).toContain(r.status);
    }
    await settle(svc);
  });
});

describe('GET /messages', () => {
  it("lists replies and the dispatcher's OUTBOUND messages newest first, with every Message field", async () => {
    const s = await draftingOrg(svc);
    const { c, record } = await sentTo(s);
    const r = await ingest(s.org.id, {
      fromEmail: c.email,
      subject: 'Re: A quick idea',
      body: 'Sounds interesting, tell me more.',
      inReplyTo: record.message_id!,
    });
    await settle(svc);
    const page = (await list(s)).data!;
    expect(page.nextCursor).toBeNull();
    expect(page.data).toEqual([
      {
        id: r.data!.id,
        contactId: c.id,
        direction: 'INBOUND',
        channel: 'email',
        intent: 'interested',
        intentConfidence: expect.any(Number),
        intentReason: expect.any(String),
        sequenceId: record.sequence_id,
        // Filed by the operator: trusted.
        authenticated: true,
        bodyPreview: 'Sounds interesting, tell me more.',
        createdAt: expect.any(String),
        subject: 'Re: A quick idea',
        from: c.email,
        receivedAt: expect.any(String),
        text: 'Sounds interesting, tell me more.',
      },
      {
        id: expect.stringMatching(/^msg_/),
        contactId: c.id,
        direction: 'OUTBOUND',
        channel: 'email',
        intent: null,
        intentConfidence: null,
        intentReason: null,
        sequenceId: record.sequence_id,
        authenticated: true,
        bodyPreview: 'Hi Dana, We help revenue teams book meetings. Best, Sam',
        createdAt: expect.any(String),
        subject: 'A quick idea',
        from: 'sales@acme-sender.test',
        receivedAt: null,
        text: 'Hi Dana,\n\nWe help revenue teams book meetings.\n\nBest,\nSam',
      },
    ]);
    // An inbound message was received when it was stored.
    expect(page.data[0].receivedAt).toBe(page.data[0].createdAt);
    const out = await system(svc, (trx) =>
      trx
        .selectFrom('messages')
        .selectAll()
        .where('organization_id', '=', s.org.id)
        .where('direction', '=', 'OUTBOUND')
        .executeTakeFirstOrThrow(),
    );
    expect(out).toMatchObject({
      send_record_id: record.id,
      message_id: record.message_id,
      to_email: c.email.toLowerCase(),
      status: 'sent',
    });
  });

  it('filters by contactId, direction and intent, and pages with a cursor', async () => {
    const s = await draftingOrg(svc);
    const a = await contact(s.api, { email: uniqueEmail('a') });
    const b = await contact(s.api, { email: uniqueEmail('b') });
    const ids: string[] = [];
    for (const [who, text] of [
      [a, 'Please unsubscribe me.'],
      [b, 'Tell me more, sounds interesting.'],
      [a, 'Could we schedule a call on Friday?'],
      [b, 'Thanks!'],
    ] as const) {
      ids.push((await ingest(s.org.id, { fromEmail: who.email, body: text })).data!.id);
    }
    await settle(svc);
    const byContact = (await list(s, { contactId: a.id })).data!.data;
    expect(byContact.map((m) => m.id)).toEqual([ids[2], ids[0]]);
    expect((await list(s, { intent: 'meeting_request' })).data!.data.map((m) => m.id)).toEqual([ids[2]]);
    expect((await list(s, { direction: 'OUTBOUND' })).data!.data).toEqual([]);
    expect((await list(s, { direction: 'INBOUND', contactId: b.id, intent: 'interested' })).data!.data.map((m) => m.id)).toEqual([ids[1]]);
    expect((await list(s, { contactId: 'con_unknown' })).data!.data).toEqual([]);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const p: { data: { id: string }[]; nextCursor: string | null } = (await list(s, { limit: 3, ...(cursor ? { cursor } : {}) })).data!;
      seen.push(...p.data.map((m) => m.id));
      cursor = p.nextCursor;
    } while (cursor);
    expect(seen).toEqual([...ids].reverse());
    expect((await list(s, { direction: 'SIDEWAYS' })).response.status).toBe(400);
    expect((await list(s, { cursor: 'garbage' })).response.status).toBe(400);
    expect((await list(s, { limit: 500 })).response.status).toBe(400);
    // Another organization sees none of them.
    const other = await draftingOrg(svc);
    expect((await list(other)).data!.data).toEqual([]);
  });

  it('previews about 200 characters of the text without its quotes, cut at a word; the whole text when only quotes and signature remain', async () => {
    const s = await draftingOrg(svc);
    const c = await contact(s.api, { email: uniqueEmail('long') });
    const long = `${'We looked at the proposal with the whole team and have several questions about pricing. '.repeat(15)}`.trim();
    const r1 = await ingest(s.org.id, {
      fromEmail: c.email,
      body: `${long}\n\nOn Tue, Mar 3, 2026 at 10:00 AM Sam <sam@acme.test> wrote:\n> Hi Dana,\n> QUOTED original text`,
    });
    const r2 = await ingest(s.org.id, {
      fromEmail: c.email,
      body: 'Short answer.\n\nOn Tue, Mar 3, 2026 at 10:00 AM Sam <sam@acme.test> wrote:\n> QUOTED original text',
    });
    const r3 = await ingest(s.org.id, { fromEmail: c.email, body: '--\nDana Whitfield\nHead of Operations' });
    const items = new Map((await list(s)).data!.data.map((m) => [m.id, m.bodyPreview]));
    const p1 = items.get(r1.data!.id)!;
    expect(p1.length).toBeGreaterThanOrEqual(150);
    expect(p1.length).toBeLessThanOrEqual(201);
    expect(p1.startsWith('We looked at the proposal')).toBe(true);
    expect(p1.endsWith('…')).toBe(true);
    expect(long.startsWith(p1.slice(0, -1))).toBe(true);
    expect(long[p1.length - 1]).toBe(' '); // cut at a word
    expect(items.get(r2.data!.id)).toBe('Short answer.');
    expect(items.get(r3.data!.id)).toBe('-- Dana Whitfield Head of Operations');
  });

  it('reads a reply: subject, sender, received time, intent and the text without its quoted history; GET /messages/{id} adds the text as received', async () => {
    const s = await draftingOrg(svc);
    const c = await contact(s.api, { email: uniqueEmail('reader') });
    const quoted =
      'Could we schedule a call on Friday?\n\nOn Tue, Mar 3, 2026 at 10:00 AM Sam <sam@acme.test> wrote:\n> Hi Dana,\n> Would a short call next week be useful?';
    const r = await ingest(s.org.id, { fromEmail: c.email, subject: 'Re: A quick idea', body: quoted });
    await settle(svc);
    const [listed] = (await list(s)).data!.data;
    expect(listed).toMatchObject({
      id: r.data!.id,
      subject: 'Re: A quick idea',
      from: c.email,
      receivedAt: expect.any(String),
      intent: 'meeting_request',
      text: 'Could we schedule a call on Friday?',
    });
    const one = await s.api.GET('/messages/{id}', { params: { path: { id: r.data!.id } } });
    expect(one.response.status).toBe(200);
    // Composed by the operator row: no recipient; the body as MIME carried it (ending in a line break).
    expect(one.data).toEqual({ ...listed, body: `${quoted}\n`, to: null });
    // Unknown, and another organization's: 404.
    const unknown = await s.api.GET('/messages/{id}', { params: { path: { id: 'msg_000000000000000000000000' } } });
    expect(unknown.response.status).toBe(404);
    expect(unknown.error?.type).toMatch(/not-found$/);
    const other = await draftingOrg(svc);
    expect((await other.api.GET('/messages/{id}', { params: { path: { id: r.data!.id } } })).response.status).toBe(404);
  });

  it('needs drafts.read', async () => {
    const s = await draftingOrg(svc);
    const k = await s.org.key(['contacts.read']);
    const r = await svc.api(k).GET('/messages');
    expect(r.response.status).toBe(403);
    expect(r.error?.detail).toMatch(/drafts\.read/);
  });
});
