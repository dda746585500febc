// The guardrails' flags through the service: a model that adds an offer the template does not make
// (citing a source for it) gets a draft flagged `offer` that approval must acknowledge; a model that
// adds the sender's own words (a greeting in Portuguese, a meeting proposal with a duration and a
// day) gets a clean draft. The recipient's name in the prompt picks the act.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventsOf, system, uid } from './crm-support.js';
import { contact, draftingOrg, draftsOf, STEP_ONE, sequence, settle, template } from './drafting-support.js';
import { draftingEnv, type FakeAnswer, type FakeModel, startFakeModel } from './support/fake-llm.js';
import { startService, type TestService } from './support/harness.js';
import { companySite, type SiteServer, startSiteServer } from './support/site-server.js';

let svc: TestService;
let site: SiteServer;
let model: FakeModel;

const OFFER = 'We offer a 90% discount for your team.';
const OWN = 'Worth a 20-minute call on Thursday?';

interface Prompt {
  template: { subject: string; body: string };
  recipient: { name: string };
  sources: Array<{ sourceIndex: number }>;
}

function act(call: { body: { messages: Array<{ content: string }> } }): FakeAnswer {
  const p = JSON.parse(call.body.messages[1].content.split('\n\n')[0]) as Prompt;
  const { subject, body } = p.template;
  if (p.recipient.name.startsWith('Offering')) {
    // Cites a real source for the offer: a citation never makes an offer the sender's.
    return {
      content: JSON.stringify({
        subject,
        body: `${body}\n\n${OFFER}`,
        citations: [{ sentence: OFFER, sourceIndex: p.sources[0].sourceIndex }],
      }),
    };
  }
  // Olá Inês: the model greets in Portuguese and proposes a time of its own.
  const own = body.replace(/^Hi [^,\n]+,/, 'Olá Inês,');
  return { content: JSON.stringify({ subject, body: `${own}\n\n${OWN}`, citations: [] }) };
}

beforeAll(async () => {
  site = await startSiteServer();
  model = await startFakeModel();
  model.answer(act);
  svc = await startService(draftingEnv(model, site.template));
  await svc.startWorker();
});
afterAll(async () => {
  await svc?.close();
  await model?.close();
  await site?.close();
});

async function draftFor(name: string) {
  const s = await draftingOrg(svc);
  const domain = `${uid('acme')}.example`;
  site.site(domain, companySite(domain, site.origin));
  const c = await contact(s.api, { name, title: 'VP of Engineering', company: { domain, name: 'Acme Rockets' } });
  await s.api.POST('/contacts/{id}/research', { params: { path: { id: c.id } } });
  await sequence(s.api, c.id, await template(svc, s.org.id, [STEP_ONE]));
  await settle(svc);
  const [d] = await draftsOf(s.api, c.id);
  const full = (await s.api.GET('/drafts/{id}', { params: { path: { id: d.id }, query: { include: 'evidence' } } })).data!;
  return { s, d, full };
}

describe('guardrail flags through the service', () => {
  it('flags an offer the template does not make, even when cited, and approval needs acknowledgeFlags', async () => {
    const { s, d, full } = await draftFor('Offering Olga');
    expect(full.body).toContain(OFFER);
    expect(full.flagged).toBe(true);
    expect(full.guardrailReport!.flags).toEqual([{ kind: 'offer', sentence: OFFER, claims: expect.arrayContaining(['90% discount']) }]);
    expect(full.guardrailReport!.advisories).toEqual(expect.arrayContaining([expect.stringMatching(/^offer: "We offer a 90% discount/)]));
    // The model was told to remove the offer, twice.
    const told = model.calls.at(-1)!.body.messages[1].content as string;
    expect(told).toContain(`The sentence "${OFFER}" makes an offer`);
    expect(await eventsOf(svc, s.org.id, 'grounding.would_fire')).toHaveLength(1);
    const refused = await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
    expect(refused.response.status).toBe(400);
    expect(refused.error!.detail).toContain(`offer "${OFFER}"`);
    const ok = await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } }, body: { acknowledgeFlags: true } });
    expect(ok.response.status).toBe(200);
    const approval = await system(svc, (trx) =>
      trx.selectFrom('drafts').select('approval').where('id', '=', d.id).executeTakeFirstOrThrow(),
    );
    expect(approval.approval).toMatchObject({ acknowledgedFlags: [{ kind: 'offer', sentence: OFFER }] });
  });

  it('does not flag the sender\'s own words: "Olá Inês" and "Worth a 20-minute call on Thursday?"', async () => {
    const { full } = await draftFor('Owning Inês');
    expect(full.body).toMatch(/^Olá Inês,/);
    expect(full.body).toContain(OWN);
    expect(full).toMatchObject({ flagged: false, guardrailReport: { clean: true, flags: [], attempts: 1 } });
  });
});
