// Drafts with the fallback provider (no model configured): generation from the template, the
// contact and its research, provenance, guardrails, versions, approval and rejection, usage.

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventsOf, system, uid } from './crm-support.js';
import {
  contact,
  type DraftingOrg,
  draftingOrg,
  draftsOf,
  getSequence,
  STEP_ONE,
  STEP_TWO,
  sequence,
  settle,
  template,
} from './drafting-support.js';
import { expectCitedSentencesSupported } from './support/citations.js';
import { raw, setClock, startService, type TestService } from './support/harness.js';
import { companySite, type SiteServer, startSiteServer, THEME_TEXT } from './support/site-server.js';

let svc: TestService;
let site: SiteServer;
beforeAll(async () => {
  site = await startSiteServer();
  svc = await startService({ RESEARCH_SITE_URL_TEMPLATE: site.template, RESEARCH_ALLOW_PRIVATE_TARGETS: 'true' });
  await svc.startWorker();
});
afterAll(async () => {
  await svc?.close();
  await site?.close();
});

/** A contact at a company whose site has been researched (so drafts have facts to cite). */
async function researchedContact(s: DraftingOrg, body: Record<string, unknown> = {}, theme: 'plain' | 'shared' = 'plain') {
  const domain = `${uid('acme')}.example`;
  site.site(domain, companySite(domain, site.origin, { theme }));
  const c = await contact(s.api, {
    name: 'Dana Whitfield',
    title: 'VP of Engineering',
    company: { domain, name: 'Acme Rockets' },
    ...body,
  });
  const r = await s.api.POST('/contacts/{id}/research', { params: { path: { id: c.id } } });
  expect(r.response.status).toBe(200);
  return c;
}

async function generated(
  s: DraftingOrg,
  steps = [STEP_ONE, STEP_TWO],
  contactBody: Record<string, unknown> = {},
  theme: 'plain' | 'shared' = 'plain',
) {
  const c = await researchedContact(s, contactBody, theme);
  const tpl = await template(svc, s.org.id, steps);
  const seq = await sequence(s.api, c.id, tpl);
  await settle(svc);
  return { c, tpl, seq, drafts: await draftsOf(s.api, c.id) };
}

const evidence = async (s: DraftingOrg, id: string) =>
  (await s.api.GET('/drafts/{id}', { params: { path: { id }, query: { include: 'evidence' } } })).data!;

describe('generation with the fallback provider', () => {
  it('fills merge fields, adds one cited sentence per step from the research, and reports the evidence', async () => {
    const s = await draftingOrg(svc);
    const { c, drafts } = await generated(s);
    const [d1, d2] = drafts;
    expect(d1.subject).toBe('A quick idea for Acme Rockets');
    const full = await evidence(s, d1.id);
    expect(full.body).toBe(
      'Hi Dana,\n\nI saw the news of your funding: "Acme raises $40M Series B".\n\nWe help revenue teams book more qualified meetings without extra headcount.\n\nWould a short call next week be useful?\n\nBest,\nSam',
    );
    expect(full).toMatchObject({
      provider: 'fallback',
      unresolvedCitationCount: 0,
      guardrailReport: { clean: true, attempts: 1, repaired: [], advisories: [], flags: [] },
    });
    const research = (await s.api.GET('/contacts/{id}/research', { params: { path: { id: c.id } } })).data!;
    expect(full.citations).toHaveLength(1);
    const cit = full.citations![0];
    expect(cit).toMatchObject({ text: 'I saw the news of your funding: "Acme raises $40M Series B".', resolved: true });
    const src = research.sources[cit.sourceIndex - 1] as { url: string; title: string; domain: string };
    expect(cit).toMatchObject({ sourceUrl: src.url, sourceTitle: src.title, sourceDomain: src.domain });
    expect(cit.sourceSnippet).toContain('Acme raises $40M Series B');
    expectCitedSentencesSupported(full);
    // Step 2 brings the next fact.
    const e2 = await evidence(s, d2.id);
    expect(e2.body).toBe(
      'Hello again Dana, checking whether my last note was useful. I also saw your leadership announcement: "Acme names Ada Lovelace as Chief Technology Officer". Worth a call?',
    );
    expect(d1.bodyPreview).toBe(full.body.length <= 200 ? full.body : expect.stringMatching(/…$/));
    // Without the include the four keys are absent.
    const plain = (await s.api.GET('/drafts/{id}', { params: { path: { id: d1.id } } })).data!;
    for (const k of ['citations', 'unresolvedCitationCount', 'guardrailReport', 'provider']) expect(plain).not.toHaveProperty(k);
  });

  it('cites the headline or lead sentence of each news item, never the description, tagline or footer a site repeats on every page', async () => {
    const s = await draftingOrg(svc);
    const steps = [1, 2, 3, 4].map((n) => ({ ...STEP_TWO, dayOffset: 3 * n }));
    const { drafts } = await generated(s, steps, {}, 'shared');
    const cited = [];
    for (const d of drafts) {
      const e = await evidence(s, d.id);
      expectCitedSentencesSupported(e);
      cited.push(...e.citations!.map((c) => c.sourceSnippet));
    }
    const shared = Object.values(THEME_TEXT);
    expect(cited).toHaveLength(4);
    for (const snippet of cited) for (const t of shared) expect(snippet).not.toContain(t);
    expect(cited).toEqual([
      'Acme raises $40M Series B led by Orbital Ventures to build a second launch site.',
      'Ada Lovelace joins Acme as Chief Technology Officer from Analytical Engines.',
      expect.stringMatching(/^(Introducing Roadrunner 2|Roadrunner 2 launches with a bigger fairing and a 48-hour turnaround\.)$/),
      'Acme opens a new office in Lisbon',
    ]);
  });

  it('is deterministic: the same inputs give the same draft', async () => {
    const s = await draftingOrg(svc);
    const a = await generated(s, [STEP_ONE]);
    const b = await generated(s, [STEP_ONE]);
    const [ea, eb] = [await evidence(s, a.drafts[0].id), await evidence(s, b.drafts[0].id)];
    expect(eb.body).toBe(ea.body);
    expect(eb.subject).toBe(ea.subject);
    expect(eb.citations!.map((x) => x.text)).toEqual(ea.citations!.map((x) => x.text));
  });

  it('writes the template alone, with no citations, for a contact without research; a contact whose company has a dossier gets research derived from it', async () => {
    const s = await draftingOrg(svc);
    const tpl = await template(svc, s.org.id, [STEP_ONE]);
    const bare = await contact(s.api, { name: undefined });
    await sequence(s.api, bare.id, tpl);
    await settle(svc);
    const [d] = await draftsOf(s.api, bare.id);
    const e = await evidence(s, d.id);
    expect(e.body.startsWith('Hi there,\n\nWe help revenue teams')).toBe(true);
    expect(e.citations).toEqual([]);
    expect(e.guardrailReport?.repaired).toEqual([
      'unfilled-merge-field: {{company}} had no value; "your team" was used',
      'unfilled-merge-field: {{firstName}} had no value; greeted with "there"',
    ]);

    // A colleague of a researched contact: the company dossier is reused for them, no fetch.
    const first = await researchedContact(s);
    const domain = first.company!.domain!;
    const fetched = site.paths(domain).length;
    const colleague = await contact(s.api, { name: 'Lee Park', title: 'Engineering Manager', company: { domain } });
    await sequence(s.api, colleague.id, tpl);
    await settle(svc);
    expect(site.paths(domain)).toHaveLength(fetched);
    const [cd] = await draftsOf(s.api, colleague.id);
    expect((await evidence(s, cd.id)).citations).toHaveLength(1);
    expect((await s.api.GET('/contacts/{id}/research', { params: { path: { id: colleague.id } } })).response.status).toBe(200);
    const rc = (await eventsOf(svc, s.org.id, 'research.completed')).filter((e) => e.resource_id === colleague.id);
    expect(rc.map((e) => e.data.companyResearchReused)).toEqual([true]);
  });

  it("turns citations unresolved (null source fields) when the contact's research is re-run", async () => {
    const s = await draftingOrg(svc);
    const { c, drafts } = await generated(s, [STEP_ONE]);
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { researchTtlDays: 0 } });
    await s.api.POST('/contacts/{id}/research', { params: { path: { id: c.id } } });
    const e = await evidence(s, drafts[0].id);
    expect(e.unresolvedCitationCount).toBe(1);
    expect(e.citations![0]).toMatchObject({
      resolved: false,
      sourceUrl: null,
      sourceTitle: null,
      sourceDomain: null,
      sourceSnippet: null,
      text: 'I saw the news of your funding: "Acme raises $40M Series B".',
    });
  });

  it('does not write drafts for a suppressed or do-not-contact contact: draft.failed says why and the sequence stays NEW', async () => {
    const s = await draftingOrg(svc);
    const tpl = await template(svc, s.org.id, [STEP_ONE]);
    const c = await contact(s.api);
    await s.api.POST('/suppression', { body: { email: c.email, reason: 'asked' } });
    const seq = await sequence(s.api, c.id, tpl);
    const d = await contact(s.api);
    await system(svc, (trx) =>
      trx
        .updateTable('contacts')
        .set({ tags: ['VIP', 'Do-Not-Contact'] })
        .where('id', '=', d.id)
        .execute(),
    );
    const seq2 = await sequence(s.api, d.id, tpl);
    await settle(svc);
    expect(await draftsOf(s.api, c.id)).toEqual([]);
    expect((await getSequence(s.api, seq.id)).status).toBe('NEW');
    expect((await getSequence(s.api, seq2.id)).status).toBe('NEW');
    const failed = await eventsOf(svc, s.org.id, 'draft.failed');
    expect(failed.map((e) => [e.data.sequenceId, e.data.reason])).toEqual(
      expect.arrayContaining([
        [seq.id, 'contact_suppressed'],
        [seq2.id, 'contact_do_not_contact'],
      ]),
    );
  });
});

describe('the built-in sequence without a model', () => {
  it("writes a list without a template the built-in sequence: whole sentences, one cited line a step, signed from the sequence's pinned mailbox and the list owner", async () => {
    const s = await draftingOrg(svc);
    const { name: company } = await system(svc, (trx) =>
      trx.selectFrom('organizations').select('name').where('id', '=', s.org.id).executeTakeFirstOrThrow(),
    );
    // The list belongs to Dana, who has a mailbox in her name; Sam's mailbox is the other one.
    const dana = await svc.admin.POST('/organizations/{orgId}/users', {
      params: { path: { orgId: s.org.id } },
      body: { name: 'Dana Reyes', email: `${uid('dana')}@sender.example`, role: 'MANAGER', title: 'Account Executive' },
    });
    const mailbox = async (name: string, email: string) =>
      (await svc.admin.POST('/organizations/{orgId}/mailboxes', { params: { path: { orgId: s.org.id } }, body: { email, name } })).data!;
    const boxes = [await mailbox('Dana Reyes', dana.data!.email), await mailbox('Sam Lee', `${uid('sam')}@sender.example`)];
    expect(boxes.map((b) => b.status)).toEqual(['verified', 'verified']);
    const api = svc.api(await s.org.key(undefined, { userId: dana.data!.id }));
    const list = (await api.POST('/lists', { body: { name: uid('Rockets '), connectionPoint: 'We met at the Austin Space Summit' } }))
      .data!;
    const people = [
      await researchedContact({ ...s, api }, { listId: list.id }),
      await researchedContact({ ...s, api }, { listId: list.id, name: 'Lee Park', title: 'Head of Operations' }),
    ];
    expect((await api.POST('/lists/{id}/generate', { params: { path: { id: list.id } } })).data).toMatchObject({ generationQueued: true });
    await settle(svc);

    const pinned = new Set<string>();
    for (const c of people) {
      const seq = (await api.GET('/sequences', { params: { query: { contactId: c.id } } })).data!.data[0];
      expect(seq).toMatchObject({ templateId: 'builtin-sequence', status: 'DRAFTED' });
      pinned.add(seq.mailboxId!);
      const box = boxes.find((b) => b.id === seq.mailboxId)!;
      const first = box.name!.split(' ')[0];
      const drafts = await draftsOf(api, c.id);
      expect(drafts.map((d) => d.step)).toEqual([1, 2, 3]);
      const lines = new Set<string>();
      for (const d of drafts) {
        const e = await evidence({ ...s, api }, d.id);
        expect(e).toMatchObject({ provider: 'fallback', flagged: false, guardrailReport: { flags: [] } });
        const paragraphs = e.body.split('\n\n');
        expect(paragraphs[0]).toBe(`Hi ${c.name.split(' ')[0]},`);
        // One cited line, right after the greeting, each step its own.
        expect(e.citations).toHaveLength(1);
        expect(paragraphs[1]).toBe(e.citations![0].text);
        expect(e.citations![0]).toMatchObject({ resolved: true });
        lines.add(paragraphs[1]);
        for (const p of paragraphs.slice(1, -1)) expect(p, p).toMatch(/^["“]?[A-Z][^\n]*[.!?]["”]?$/);
        // The signature is the pinned mailbox's person; the title only under the list owner's own name.
        const signature = paragraphs.at(-1)!.split('\n');
        if (d.step === 1) {
          expect(e.body).toContain(`I'm ${first} from ${company}.`);
          expect(signature).toEqual(
            box.name === 'Dana Reyes'
              ? ['Best regards,', 'Dana Reyes', 'Account Executive', company]
              : ['Best regards,', 'Sam Lee', company],
          );
        } else {
          expect(signature).toEqual([d.step === 2 ? 'Best,' : 'All the best,', first, company]);
        }
      }
      expect(lines.size).toBe(3);
    }
    // Rotation at drafting: the two sequences went to the two mailboxes.
    expect(pinned).toEqual(new Set(boxes.map((b) => b.id)));
  });
});

describe('the monthly draft allowance', () => {
  it('fails generation past the plan limit with draft.failed (quota_exceeded), warns once at 80%, and GET /usage reports it', async () => {
    const clock = setClock(svc, '2031-01-31T12:00:00Z');
    const s = await draftingOrg(svc, 'free'); // 50 drafts a month
    const tpl = await template(svc, s.org.id, [STEP_ONE, STEP_TWO]);
    const period = `${clock.today().slice(0, 8)}01`;
    await system(svc, (trx) =>
      sql`INSERT INTO usage_counters (organization_id, period_start, drafts_created, drafts_regenerated) VALUES (${s.org.id}, ${period}, 38, 1)`.execute(
        trx,
      ),
    );
    const c = await contact(s.api);
    const seq = await sequence(s.api, c.id, tpl); // 39 + 2 = 41 >= 40: the warning
    await settle(svc);
    expect((await getSequence(s.api, seq.id)).status).toBe('DRAFTED');
    let warn = await eventsOf(svc, s.org.id, 'quota.warning');
    expect(warn).toHaveLength(1);
    expect(warn[0].data).toMatchObject({ quota: 'drafts_per_month', limit: 50, used: 41, remaining: 9 });
    await system(svc, (trx) => sql`UPDATE usage_counters SET drafts_created = 47 WHERE organization_id = ${s.org.id}`.execute(trx));
    const c2 = await contact(s.api);
    const seq2 = await sequence(s.api, c2.id, await template(svc, s.org.id, [STEP_ONE, STEP_TWO, { ...STEP_TWO, dayOffset: 7 }]));
    await settle(svc);
    const drafts = await draftsOf(s.api, c2.id);
    expect(drafts.map((d) => d.step)).toEqual([1, 2]); // 47 + 1 regenerated + 2 = 50
    expect((await getSequence(s.api, seq2.id)).status).toBe('NEW');
    const failed = (await eventsOf(svc, s.org.id, 'draft.failed')).filter((e) => e.data.sequenceId === seq2.id);
    expect(failed.map((e) => [e.data.step, e.data.reason])).toEqual([[3, 'quota_exceeded']]);
    warn = await eventsOf(svc, s.org.id, 'quota.warning');
    expect(warn).toHaveLength(1);
    const u = await s.api.GET('/usage', {});
    expect(u.data).toMatchObject({
      plan: { id: 'free', draftsPerMonth: 50 },
      drafts: { created: 49, regenerated: 1, limit: 50, remaining: 0 },
      sends: { attempted: 0 },
      llm: { tokensUsed: 0, costCents: 0 },
    });
  });
});

describe('approve and reject', () => {
  it('approves (lowercase answer, uppercase on GET), repeats answer 200 without a second event, and the sequence becomes APPROVED with its last step', async () => {
    const s = await draftingOrg(svc);
    const {
      c,
      seq,
      drafts: [d1, d2],
    } = await generated(s);
    const a1 = await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d1.id } } });
    expect(a1.data).toEqual({ draftId: d1.id, status: 'approved', allApproved: false, contactId: c.id });
    expect((await s.api.GET('/drafts/{id}', { params: { path: { id: d1.id } } })).data!.status).toBe('APPROVED');
    expect((await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d1.id } } })).data).toMatchObject({
      status: 'approved',
      allApproved: false,
    });
    expect((await getSequence(s.api, seq.id)).status).toBe('DRAFTED');
    const a2 = await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d2.id } }, body: { acknowledgeFlags: true } });
    expect(a2.data).toMatchObject({ allApproved: true });
    expect((await getSequence(s.api, seq.id)).status).toBe('APPROVED');
    const ev = await eventsOf(svc, s.org.id, 'draft.approved');
    expect(ev.map((e) => [e.resource_type, e.data.draftId, e.data.contactId])).toEqual([
      ['Draft', d1.id, c.id],
      ['Draft', d2.id, c.id],
    ]);
    const approval = await system(svc, (trx) =>
      trx.selectFrom('drafts').select('approval').where('id', '=', d1.id).executeTakeFirstOrThrow(),
    );
    expect(approval.approval).toMatchObject({
      acknowledgedFlags: [],
      evidence: { citations: [expect.objectContaining({ sourceIndex: expect.any(Number) })] },
    });
    // No email is sent by approval.
    expect(
      await system(svc, (trx) => trx.selectFrom('send_records').select('id').where('organization_id', '=', s.org.id).execute()),
    ).toEqual([]);
  });

  it('refuses with 400: a rejected or superseded draft, a suppressed (any entry), deleted or do-not-contact contact; rejection of an approved draft', async () => {
    const s = await draftingOrg(svc);
    const {
      drafts: [d1, d2],
    } = await generated(s);
    expect((await s.api.POST('/drafts/{id}/reject', { params: { path: { id: d1.id } } })).data).toMatchObject({
      draftId: d1.id,
      status: 'rejected',
    });
    expect((await s.api.GET('/drafts/{id}', { params: { path: { id: d1.id } } })).data!.status).toBe('REJECTED');
    for (const verb of ['approve', 'reject'] as const) {
      const r = await s.api.POST(`/drafts/{id}/${verb}`, { params: { path: { id: d1.id } } });
      expect(r.response.status, verb).toBe(400);
    }
    await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d2.id } } });
    expect((await s.api.POST('/drafts/{id}/reject', { params: { path: { id: d2.id } } })).response.status).toBe(400);

    const refusedFor = async (prepare: (c: { id: string; email: string }) => Promise<void>) => {
      const g = await generated(s, [STEP_ONE]);
      await prepare(g.c);
      const r = await s.api.POST('/drafts/{id}/approve', { params: { path: { id: g.drafts[0].id } } });
      expect(r.response.status).toBe(400);
      expect((await s.api.GET('/drafts/{id}', { params: { path: { id: g.drafts[0].id } } })).data!.status).toBe('DRAFT_GENERATED');
      return r.error!.detail;
    };
    expect(
      await refusedFor(async (c) => {
        await s.api.POST('/suppression', { body: { email: c.email, reason: 'asked' } });
      }),
    ).toMatch(/suppressed \(MANUAL_BLOCK\)/);
    expect(
      await refusedFor(async (c) => {
        await system(svc, (trx) =>
          trx
            .insertInto('suppression_entries')
            .values({ organization_id: s.org.id, id: uid('sup_'), email: c.email.toLowerCase(), reason: 'HARD_BOUNCE' })
            .execute(),
        );
      }),
    ).toMatch(/HARD_BOUNCE/);
    expect(
      await refusedFor(async (c) => {
        await svc.admin.POST('/organizations/{orgId}/suppression-domains', {
          params: { path: { orgId: s.org.id } },
          body: { domain: c.email.split('@')[1] },
        });
      }),
    ).toMatch(/suppressed/);
    expect(
      await refusedFor(async (c) => {
        await s.api.DELETE('/contacts/{id}', { params: { path: { id: c.id } } });
      }),
    ).toMatch(/deleted or erased/);
    expect(
      await refusedFor(async (c) => {
        await system(svc, (trx) =>
          trx
            .updateTable('contacts')
            .set({ tags: ['do-not-contact'] })
            .where('id', '=', c.id)
            .execute(),
        );
      }),
    ).toMatch(/do-not-contact/);
  });

  it('needs acknowledgeFlags for a flagged draft (400 naming the flags), then keeps the acknowledged flags with the approval', async () => {
    const s = await draftingOrg(svc);
    const {
      drafts: [d],
    } = await generated(s, [STEP_ONE]);
    const flags = [{ sentence: 'Congrats on your 500 new customers in Berlin.', claims: ['500', 'Berlin'] }];
    await system(svc, (trx) =>
      trx
        .updateTable('drafts')
        .set({
          flagged: true,
          guardrail: JSON.stringify({ clean: false, attempts: 3, repaired: [], advisories: ['unsupported-claim: ...'], flags }),
        })
        .where('id', '=', d.id)
        .execute(),
    );
    const refused = await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
    expect(refused.response.status).toBe(400);
    expect(refused.error!.detail).toContain('unsupported-claim "Congrats on your 500 new customers in Berlin." (500, Berlin)');
    // A flag stored before flags had kinds reads as an unsupported claim.
    expect((refused.error as unknown as { flags: unknown }).flags).toEqual(flags.map((f) => ({ kind: 'unsupported-claim', ...f })));
    expect(
      (await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } }, body: { acknowledgeFlags: false } })).response.status,
    ).toBe(400);
    const ok = await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } }, body: { acknowledgeFlags: true } });
    expect(ok.response.status).toBe(200);
    const approval = await system(svc, (trx) =>
      trx.selectFrom('drafts').select('approval').where('id', '=', d.id).executeTakeFirstOrThrow(),
    );
    expect(approval.approval).toMatchObject({ acknowledgedFlags: flags });
  });

  it('answers 404 for unknown and foreign drafts, 403 without drafts.write, 400 for unknown body fields', async () => {
    const s = await draftingOrg(svc);
    const {
      drafts: [d],
    } = await generated(s, [STEP_ONE]);
    const other = await draftingOrg(svc);
    for (const path of ['/api/v1/drafts/drf_000000000000000000000000', `/api/v1/drafts/${d.id}`]) {
      expect((await raw(svc.baseUrl, 'GET', path, { key: other.key })).status).toBe(404);
      expect((await raw(svc.baseUrl, 'POST', `${path}/approve`, { key: other.key })).status).toBe(404);
      expect((await raw(svc.baseUrl, 'POST', `${path}/reject`, { key: other.key })).status).toBe(404);
    }
    const reader = svc.api(await s.org.key(['drafts.read']));
    expect((await reader.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } })).response.status).toBe(403);
    expect(
      (
        await raw(svc.baseUrl, 'POST', `/api/v1/drafts/${d.id}/approve`, {
          key: s.key,
          body: '{"acknowledge":true}',
          headers: { 'content-type': 'application/json' },
        })
      ).status,
    ).toBe(400);
    expect((await s.api.GET('/drafts/{id}', { params: { path: { id: d.id } } })).data!.status).toBe('DRAFT_GENERATED');
  });
});

describe('GET /drafts', () => {
  it('lists live versions newest first, filters by status and contact, pages by cursor, and shows superseded versions on request', async () => {
    const s = await draftingOrg(svc);
    const a = await generated(s);
    const b = await generated(s, [STEP_ONE]);
    const all = (await s.api.GET('/drafts', {})).data!.data;
    expect(all.map((d) => d.id)).toEqual(
      [...b.drafts, ...a.drafts]
        .sort((x, y) => Date.parse(y.createdAt) - Date.parse(x.createdAt) || (y.id > x.id ? 1 : -1))
        .map((d) => d.id),
    );
    for (const d of all) {
      const one = (await s.api.GET('/drafts/{id}', { params: { path: { id: d.id } } })).data!;
      const { body, ...rest } = one;
      expect({ ...rest, bodyPreview: d.bodyPreview }).toEqual(d);
      expect(body.startsWith(d.bodyPreview.replace(/…$/, ''))).toBe(true);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const p = await s.api.GET('/drafts', { params: { query: { limit: 2, ...(cursor ? { cursor } : {}) } } });
      seen.push(...p.data!.data.map((d) => d.id));
      if (!p.data!.nextCursor) break;
      cursor = p.data!.nextCursor;
    }
    expect(seen).toEqual(all.map((d) => d.id));
    await s.api.POST('/drafts/{id}/approve', { params: { path: { id: a.drafts[0].id } } });
    expect((await s.api.GET('/drafts', { params: { query: { status: 'APPROVED' } } })).data!.data.map((d) => d.id)).toEqual([
      a.drafts[0].id,
    ]);
    expect((await s.api.GET('/drafts', { params: { query: { contactId: b.c.id } } })).data!.data.map((d) => d.id)).toEqual([
      b.drafts[0].id,
    ]);
    expect((await raw(svc.baseUrl, 'GET', '/api/v1/drafts?status=approved', { key: s.key })).status).toBe(400);
    expect((await raw(svc.baseUrl, 'GET', '/api/v1/drafts?cursor=abc', { key: s.key })).status).toBe(400);
  });
});

describe('erasure', () => {
  it("redacts a contact's drafts in place: text, evidence, guardrail report and the approval record", async () => {
    const s = await draftingOrg(svc);
    const {
      c,
      drafts: [d],
    } = await generated(s, [STEP_ONE]);
    await s.api.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } });
    const r = await s.api.POST('/contacts/{id}/erase', {
      params: { path: { id: c.id } },
      body: { requesterRef: 'DSR-9', reason: 'request' },
    });
    expect(r.response.status).toBe(200);
    const row = await system(svc, (trx) =>
      trx
        .selectFrom('drafts')
        .select(['subject', 'body', 'evidence', 'guardrail', 'approval', 'status'])
        .where('id', '=', d.id)
        .executeTakeFirstOrThrow(),
    );
    expect(row).toEqual({ subject: '', body: '', evidence: null, guardrail: null, approval: null, status: 'APPROVED' });
    const e = (await s.api.GET('/drafts/{id}', { params: { path: { id: d.id }, query: { include: 'evidence' } } })).data!;
    expect(e).toMatchObject({ body: '', citations: [], unresolvedCitationCount: 0, guardrailReport: null, contactName: '' });
  });
});
