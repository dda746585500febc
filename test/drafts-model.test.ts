// Drafts written by a language model: a fake OpenAI-compatible server on loopback plays a model
// that cites its sources, one that invents a fact (and one that fixes it when told), one that
// times out and one that answers malformed JSON. The recipient's name in the prompt picks the act.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventsOf, uid } from './crm-support.js';
import { contact, type DraftingOrg, draftingOrg, draftsOf, STEP_ONE, sequence, settle, template } from './drafting-support.js';
import { expectCitedSentencesSupported } from './support/citations.js';
import {
  behaviours,
  draftingEnv,
  type FakeAnswer,
  type FakeModel,
  type FakeModelCall,
  promptOf,
  startFakeModel,
} from './support/fake-llm.js';
import { startService, type TestService } from './support/harness.js';
import { companySite, type SiteServer, startSiteServer } from './support/site-server.js';

let svc: TestService;
let site: SiteServer;
let model: FakeModel;

const INVENTED = 'Congrats on your 500 new customers in Berlin last week.';
const OFFERED = 'Sign by Friday and we take 40% off your first year.';

/** The recipient's name picks the model's behaviour (test/support/fake-llm.ts keeps one per failure). */
function act(call: FakeModelCall): FakeAnswer {
  const name = promptOf(call).recipient.name ?? '';
  if (name.startsWith('Hanging')) return behaviours.hangs();
  if (name.startsWith('Garbled')) return behaviours.malformed();
  if (name.startsWith('Inventing')) return behaviours.inventsFacts(INVENTED, { stubborn: true })(call);
  if (name.startsWith('Learning')) return behaviours.inventsFacts(INVENTED, { stubborn: false })(call);
  if (name.startsWith('Offering')) return behaviours.inventsFacts(OFFERED, { stubborn: true })(call);
  if (name.startsWith('Relenting')) return behaviours.inventsFacts(OFFERED, { stubborn: false })(call);
  return behaviours.cites(call);
}

beforeAll(async () => {
  site = await startSiteServer();
  model = await startFakeModel();
  model.answer(act);
  // The model's time limit: a loaded machine's loopback answer stays well within it (an answer past
  // it is retried, and the counted calls and attempts would be off); the hanging model waits it out.
  svc = await startService(draftingEnv(model, site.template));
  await svc.startWorker();
});
afterAll(async () => {
  await svc?.close();
  await model?.close();
  await site?.close();
});

async function draftFor(s: DraftingOrg, name: string) {
  const domain = `${uid('acme')}.example`;
  site.site(domain, companySite(domain, site.origin));
  const c = await contact(s.api, { name, title: 'VP of Engineering', company: { domain, name: 'Acme Rockets' } });
  await s.api.POST('/contacts/{id}/research', { params: { path: { id: c.id } } });
  await sequence(s.api, c.id, await template(svc, s.org.id, [STEP_ONE]));
  await settle(svc);
  const [d] = await draftsOf(s.api, c.id);
  return { c, d, full: (await s.api.GET('/drafts/{id}', { params: { path: { id: d.id }, query: { include: 'evidence' } } })).data! };
}

describe('drafts written by a model', () => {
  it("keeps the model's cited sentence with its source, names the model as provider, and meters tokens and cost", async () => {
    const s = await draftingOrg(svc);
    const { full } = await draftFor(s, 'Citing Cora');
    expect(full.provider).toBe('gpt-4o-mini');
    expect(full.body).toContain('Hi Citing,');
    expect(full.citations).toHaveLength(1);
    expect(full.citations![0]).toMatchObject({ resolved: true, sourceUrl: expect.stringContaining('/sites/') });
    expect(full.body).toContain(full.citations![0].text);
    expectCitedSentencesSupported(full);
    expect(full.guardrailReport).toMatchObject({ clean: true, attempts: 1, flags: [] });
    const usage = (await s.api.GET('/usage', {})).data!;
    expect(usage.llm.tokensUsed).toBe(1200);
    expect(usage.llm.costCents).toBe(0); // 1,000 input and 200 output tokens of gpt-4o-mini: 0.027 cents, rounded
  });

  it('flags a fact the sources do not support after the bounded rewrites, emits grounding.would_fire, and approval needs acknowledgeFlags', async () => {
    const s = await draftingOrg(svc);
    const before = model.calls.length;
    const { d, full } = await draftFor(s, 'Inventing Ian');
    expect(model.calls.length - before).toBe(3); // the first answer and two rewrites
    expect(full.flagged).toBe(true);
    expect(full.guardrailReport!.flags).toEqual([
      { kind: 'unsupported-claim', sentence: INVENTED, claims: expect.arrayContaining(['500', 'Berlin', 'last week']) },
    ]);
    expect(full.guardrailReport!.advisories).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^unsupported-claim: "Congrats/),
        'unsupported-claim: still present after 2 rewrite(s) by the model',
      ]),
    );
    expect(full.guardrailReport).toMatchObject({ clean: false, attempts: 3 });
    const g = await eventsOf(svc, s.org.id, 'grounding.would_fire');
    expect(g).toHaveLength(1);
    expect(g[0]).toMatchObject({ resource_type: 'Draft', resource_id: d.id, data: { draftId: d.id, flags: [{ sentence: INVENTED }] } });
    expect((await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } })).response.status).toBe(400);
    expect(
      (await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } }, body: { acknowledgeFlags: true } })).response.status,
    ).toBe(200);
  });

  it('names the kind of flag a rewrite left or removed: an offer is still present, or removed, as an offer', async () => {
    const s = await draftingOrg(svc);
    const { full } = await draftFor(s, 'Offering Olga');
    expect(full.guardrailReport!.flags).toEqual([{ kind: 'offer', sentence: OFFERED, claims: expect.any(Array) }]);
    expect(full.guardrailReport!.advisories).toContain('offer: still present after 2 rewrite(s) by the model');
    expect(full.guardrailReport!.advisories.filter((a) => a.includes('still present'))).toEqual([
      'offer: still present after 2 rewrite(s) by the model',
    ]);
    const relented = (await draftFor(s, 'Relenting Rita')).full;
    expect(relented).toMatchObject({
      flagged: false,
      guardrailReport: { flags: [], repaired: ['offer: removed by the model in 1 rewrite(s)'] },
    });
  });

  it('sends the problems back to the model, which removes the unsupported claim', async () => {
    const s = await draftingOrg(svc);
    const before = model.calls.length;
    const { full } = await draftFor(s, 'Learning Lou');
    expect(model.calls.length - before).toBe(2);
    const told = model.calls[model.calls.length - 1].body.messages[1].content as string;
    expect(told).toContain('"Congrats on your 500 new customers in Berlin last week." states');
    expect(full).toMatchObject({
      flagged: false,
      guardrailReport: { flags: [], repaired: ['unsupported-claim: removed by the model in 1 rewrite(s)'] },
    });
    expect(full.body).not.toContain('Berlin');
    expect(await eventsOf(svc, s.org.id, 'grounding.would_fire')).toEqual([]);
  });

  it('falls back to the template when the model times out or answers malformed JSON, and says so', async () => {
    const s = await draftingOrg(svc);
    const hang = await draftFor(s, 'Hanging Hal');
    expect(hang.full.provider).toBe('fallback');
    expect(hang.full.guardrailReport!.advisories[0]).toBe(
      'model-unavailable: gpt-4o-mini failed (timeout) after 2 attempt(s); the fallback template was used',
    );
    expect(hang.full.citations).toHaveLength(1); // the fallback's own cited sentence
    const garbled = await draftFor(s, 'Garbled Gus');
    expect(garbled.full.provider).toBe('fallback');
    expect(garbled.full.guardrailReport!.advisories[0]).toBe(
      'model-unavailable: gpt-4o-mini failed (malformed) after 2 attempt(s); the fallback template was used',
    );
    expect(garbled.full.status).toBe('DRAFT_GENERATED');
  });
});

describe('regenerating a draft with the model', () => {
  it("passes the reviewer's instructions to the model with the drafting rules, and writes its answer as a REGENERATED version", async () => {
    const s = await draftingOrg(svc);
    const { d } = await draftFor(s, 'Citing Cleo');
    const before = model.calls.length;
    const r = await s.api.POST('/drafts/{id}/regenerate', {
      params: { path: { id: d.id } },
      body: { instructions: 'Shorter, and mention the Chicago office.' },
    });
    expect(r.response.status).toBe(200);
    expect(r.data).toMatchObject({ status: 'REGENERATED', version: 2 });
    const calls = model.calls.slice(before);
    expect(calls).toHaveLength(1);
    expect(promptOf(calls[0]).reviewerInstructions).toBe('Shorter, and mention the Chicago office.');
    expect(String(calls[0].body.messages[0].content)).toContain('reviewerInstructions');
    const full = (await s.api.GET('/drafts/{id}', { params: { path: { id: r.data!.id }, query: { include: 'evidence' } } })).data!;
    expect(full.provider).toBe('gpt-4o-mini');
    expectCitedSentencesSupported(full);
    // Without instructions the prompt has none.
    const plain = await s.api.POST('/drafts/{id}/regenerate', { params: { path: { id: r.data!.id } } });
    expect(plain.data).toMatchObject({ status: 'REGENERATED', version: 3 });
    expect(promptOf(model.calls.at(-1)!).reviewerInstructions).toBeUndefined();
  });
});
