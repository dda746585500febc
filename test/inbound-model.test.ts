// Ingestion with a language model configured: a reply the rules are unsure of is stored `received`
// and classified later by the classification job (the model may be slow, and storage never waits
// on it); the job applies the model's intent and its effects once, however often it runs. Without
// a model (test/inbound.test.ts) the rules classify a message in its storing transaction.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyReply } from '../src/inbound/classify-reply.js';
import { eventsOf, system, uniqueEmail } from './crm-support.js';
import { contact, draftingOrg, settle } from './drafting-support.js';
import { type FakeModel, startFakeModel } from './support/fake-llm.js';
import { startService, type TestService } from './support/harness.js';

let svc: TestService;
let model: FakeModel;

beforeAll(async () => {
  model = await startFakeModel();
  svc = await startService({ LLM_BASE_URL: model.baseUrl, LLM_MODEL: 'gpt-4o-mini', LLM_TIMEOUT_MS: '2000', LLM_MAX_RETRIES: '0' });
  await svc.startWorker();
});
afterAll(async () => {
  await svc?.close();
  await model?.close();
});

const row = (id: string) => system(svc, (trx) => trx.selectFrom('messages').selectAll().where('id', '=', id).executeTakeFirstOrThrow());

describe('replies with a model configured', () => {
  it('stores first, then the job classifies with the model and applies the effects once', async () => {
    model.answer(() => ({
      content: JSON.stringify({ intent: 'meeting_request', confidence: 0.92, reason: 'proposes to talk', returnDate: null }),
    }));
    const s = await draftingOrg(svc);
    const c = await contact(s.api, { email: uniqueEmail('dana') });
    // Wording no phrase rule is sure of.
    const r = await svc.admin.POST('/organizations/{orgId}/inbound-messages', {
      params: { path: { orgId: s.org.id } },
      body: { fromEmail: c.email, subject: 'Re: a quick idea', body: 'Let me loop in Priya from our ops team and come back to you.' },
    });
    expect(r.response.status).toBe(201);
    const id = r.data!.id;
    expect(['received', 'classified']).toContain((await row(id)).status); // the worker may already be at it
    await settle(svc);
    expect(await row(id)).toMatchObject({ status: 'classified', intent: 'meeting_request', intent_source: 'model', contact_id: c.id });
    expect(model.calls.length).toBeGreaterThanOrEqual(1);
    const before = (await eventsOf(svc, s.org.id)).map((e) => e.type).sort();
    expect(before.filter((t) => t === 'meeting.booked')).toHaveLength(1);
    expect(before.filter((t) => t === 'reply.classified')).toHaveLength(1);
    await classifyReply(svc.rt, s.org.id, id);
    expect((await eventsOf(svc, s.org.id)).map((e) => e.type).sort()).toEqual(before);
  });

  it("a model that fails leaves the rules' answer, and the message is classified all the same", async () => {
    model.answer(() => ({ status: 500, json: { error: { message: 'boom' } } }));
    const s = await draftingOrg(svc);
    const c = await contact(s.api, { email: uniqueEmail('dana') });
    const r = await svc.admin.POST('/organizations/{orgId}/inbound-messages', {
      params: { path: { orgId: s.org.id } },
      body: { fromEmail: c.email, body: 'Let me loop in Priya from our ops team and come back to you.' },
    });
    await settle(svc);
    expect(await row(r.data!.id)).toMatchObject({ status: 'classified', intent_source: expect.stringMatching(/^(rules|default)$/) });
  });
});
