// The review desk (/desk) in a real browser: Debian's Chromium, headless, driven by playwright-core
// as the reference pages are (test/docs-pages.test.ts). A rep signs in with a key, filters the queue
// by list and flag, opens, edits, approves a flagged draft with its acknowledgement, batch-approves
// and batch-sends; each step is checked through the API. Every run also checks that the console
// shows no error, that no request left the loopback host, that drafts, sources and replies built
// from hostile text run no script, and that axe-core finds no serious or critical violation.
// Screenshots go to test-output/.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DESK_ASSET_BASE } from '../src/http/desk.js';
import { system, uid, uniqueEmail } from './crm-support.js';
import { contact, type DraftingOrg, draftingOrg, draftsOf, STEP_ONE, sequence, settle, template } from './drafting-support.js';
import { raw, startService, type TestService } from './support/harness.js';
import { freightSite } from './support/hostile-sites.js';
import { companySite, type SiteServer, startSiteServer } from './support/site-server.js';

const CHROMIUM = '/usr/bin/chromium';
const OUT = path.resolve('test-output');
const AXE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
let svc: TestService;
let site: SiteServer;
let browser: Browser;

beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`Chromium is not installed at ${CHROMIUM}: apt-get install -y chromium (.ci/run does it)`);
  fs.mkdirSync(OUT, { recursive: true });
  site = await startSiteServer();
  [svc, browser] = await Promise.all([
    startService({ RESEARCH_SITE_URL_TEMPLATE: site.template, RESEARCH_ALLOW_PRIVATE_TARGETS: 'true', RATE_LIMIT_PER_MINUTE: '1000' }),
    chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] }),
  ]);
  await svc.startWorker();
});
afterAll(async () => {
  await browser?.close();
  await svc?.close();
  await site?.close();
});

/** Text that would run script if it were ever parsed as markup or followed as a link. */
const HOSTILE = [
  '<script>window.__pwned = "script"</script>',
  '<img src=x onerror="window.__pwned = \'img\'">',
  '<a href="javascript:window.__pwned=\'link\'">click</a>',
  '<svg onload="alert(1)"></svg>',
].join(' ');

async function researchedContact(s: DraftingOrg, extra: Record<string, unknown> = {}, hostile = false) {
  const domain = `${uid('acme')}.example`;
  // A hostile site: markup, an event handler and a javascript: link in its title and home page.
  site.site(
    domain,
    hostile
      ? freightSite(domain, site.origin, {
          title: `Brightline Freight <script>window.__pwned='site'</script>`,
          home: `<p>Read our <a href="javascript:window.__pwned='home'">cold-chain report</a> <img src=x onerror="window.__pwned='img'"> &lt;script&gt;window.__pwned='text'&lt;/script&gt;</p>`,
        })
      : companySite(domain, site.origin),
  );
  const c = await contact(s.api, { title: 'VP of Engineering', company: { domain, name: 'Acme Rockets' }, ...extra });
  expect((await s.api.POST('/contacts/{id}/research', { params: { path: { id: c.id } } })).response.status).toBe(200);
  return c;
}

const draft = async (s: DraftingOrg, id: string) => (await s.api.GET('/drafts/{id}', { params: { path: { id } } })).data!;
const liveOf = async (s: DraftingOrg, contactId: string) => (await draftsOf(s.api, contactId)).at(-1)!;

interface Watch {
  page: Page;
  consoleErrors: string[];
  pageErrors: string[];
  offHost: string[];
  dialogs: string[];
  apiCalls: string[];
  close: () => Promise<void>;
}

/** A tab on the desk that records console errors, dialogs, API calls and any request off the loopback host (refused). */
async function openDesk(): Promise<Watch> {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  // Generous: the suite runs three files at once on two cores, each page a Chromium of its own.
  context.setDefaultTimeout(90_000);
  const w = {
    consoleErrors: [] as string[],
    pageErrors: [] as string[],
    offHost: [] as string[],
    dialogs: [] as string[],
    apiCalls: [] as string[],
  };
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.protocol === 'data:' || url.host === new URL(svc.baseUrl).host) {
      if (url.pathname.startsWith('/api/v1/')) w.apiCalls.push(`${route.request().method()} ${url.pathname}`);
      return route.continue();
    }
    w.offHost.push(url.href);
    return route.abort();
  });
  const page = await context.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error') w.consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => w.pageErrors.push(e.message));
  page.on('dialog', (d) => {
    w.dialogs.push(d.message());
    void d.dismiss();
  });
  return { page, ...w, close: () => context.close() };
}

async function signIn(page: Page, key: string) {
  const res = await page.goto(`${svc.baseUrl}/desk`, { waitUntil: 'load' });
  expect(res?.status()).toBe(200);
  await page.fill('#api-key', key);
  await page.click('#signin-form button[type="submit"]');
  await page.locator('#scopes').waitFor();
}

async function expectNoSeriousA11y(page: Page) {
  // Evaluated through the debugging protocol, which the page's CSP does not govern (the page itself could not load it).
  await page.evaluate(AXE);
  const violations = await page.evaluate(async () => {
    const r = await (window as unknown as { axe: { run: (c: unknown, o: unknown) => Promise<{ violations: any[] }> } }).axe.run(document, {
      resultTypes: ['violations'],
    });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length }));
  });
  expect(violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')).toEqual([]);
}

const rows = (page: Page) => page.locator('#drafts-body tr');

describe('the review desk in Chromium', { timeout: 240_000 }, () => {
  it('drives a whole review: filter, open with sources, edit, approve a flagged draft with acknowledgement, batch approve and send; state checked through the API', async () => {
    const s = await draftingOrg(svc);
    const listId = (
      await s.api.POST('/lists', { body: { name: uid('Expo '), useCaseTemplateId: await template(svc, s.org.id, [STEP_ONE]) } as never })
    ).data!.id;
    const people = [];
    for (const name of ['Dana Whitfield', 'Lee Ortega', 'Sam Okafor']) people.push(await researchedContact(s, { name, listId }));
    expect((await s.api.POST('/lists/{id}/generate', { params: { path: { id: listId } } })).response.status).toBe(200);
    await settle(svc);
    const [d0, d1, d2] = await Promise.all(people.map((p) => liveOf(s, p.id)));
    await system(svc, (trx) =>
      trx
        .updateTable('drafts')
        .set({
          flagged: true,
          guardrail: JSON.stringify({
            clean: false,
            attempts: 1,
            repaired: [],
            advisories: ['offer: Half price this week.'],
            flags: [{ kind: 'offer', sentence: 'Half price this week.', claims: ['half price'] }],
          }),
        })
        .where('id', '=', d2.id)
        .execute(),
    );

    const w = await openDesk();
    const { page } = w;
    try {
      await signIn(page, s.key);
      expect(await page.textContent('#scopes')).toContain('drafts.write');

      // The list's run as it was while running (answered once by the test), then as it is: the
      // desk shows the progress, polls until the run is over, and reads the queue again once.
      let runReads = 0;
      await page.route('**/generation-runs?*', async (route) => {
        runReads += 1;
        const res = await route.fetch();
        const body = await res.json();
        if (runReads === 1) Object.assign(body.data[0], { state: 'running', chunksDone: 0, draftsGenerated: 1, finishedAt: null });
        return route.fulfill({ response: res, json: body });
      });
      await page.selectOption('#f-list', listId);
      await page.click('#filters button[type="submit"]');
      await page.locator('#run-state', { hasText: 'running · 1 of 3 drafts written' }).waitFor();
      expect(await page.locator('#run progress').getAttribute('value')).toBe('0');
      await page.locator('#run-state', { hasText: 'completed · 3 of 3 drafts written' }).waitFor({ timeout: 10_000 });
      expect(runReads).toBe(2);
      await expect.poll(() => rows(page).count()).toBe(3);

      // Filter: the list, flagged only.
      await page.selectOption('#f-flagged', 'true');
      await page.click('#filters button[type="submit"]');
      await page.locator('#run-state', { hasText: 'completed' }).waitFor();
      await expect.poll(() => rows(page).count()).toBe(1);
      expect(await rows(page).first().getAttribute('data-id')).toBe(d2.id);
      // Paged: with pages of 2 (the test shortens the desk's page), "Load more" follows nextCursor.
      const cursors: string[] = [];
      await page.route('**/api/v1/drafts?*', (route) => {
        const url = new URL(route.request().url());
        url.searchParams.set('limit', '2');
        cursors.push(url.searchParams.get('cursor') ?? '');
        return route.continue({ url: url.href });
      });
      await page.selectOption('#f-flagged', '');
      await page.click('#filters button[type="submit"]');
      await expect.poll(() => rows(page).count()).toBe(2);
      await page.click('#more');
      await expect.poll(() => rows(page).count()).toBe(3);
      expect(await page.locator('#more').isHidden()).toBe(true);
      expect(cursors).toHaveLength(2);
      expect(cursors[0]).toBe('');
      expect(cursors[1]).not.toBe('');
      await page.unroute('**/api/v1/drafts?*');

      // Open a draft: cited sentences link to their sources, shown beside them with safe links.
      await page.locator(`#drafts-body tr[data-id="${d0.id}"] .open-draft`).click();
      await page.locator('#draft-subject', { hasText: d0.subject }).waitFor();
      expect(await page.locator('#draft-body mark.cited').count()).toBeGreaterThan(0);
      const sourceLinks = page.locator('.sources a[href^="http"]');
      expect(await sourceLinks.count()).toBeGreaterThan(0);
      expect(await sourceLinks.first().getAttribute('rel')).toBe('noopener noreferrer');
      expect(await sourceLinks.first().getAttribute('target')).toBe('_blank');
      await page.screenshot({ path: path.join(OUT, 'desk.png') });

      // Edit in place: an EDITED version, the guardrails run again.
      await page.click('#act-edit');
      const body = await page.inputValue('#edit-body');
      await page.fill('#edit-body', `${body}\n\nWould Tuesday or Wednesday suit you for a short call?`);
      await page.click('#edit-save');
      await page.locator('#draft-status', { hasText: 'Edited' }).waitFor();
      const edited = await liveOf(s, d0.contactId);
      expect(edited).toMatchObject({ status: 'EDITED', version: 2, flagged: false });
      expect((await draft(s, edited.id)).body).toContain('Would Tuesday or Wednesday suit you');

      // The flagged draft, reached with the keyboard (j/k), approved with its acknowledgement (a).
      const order = await rows(page).evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-id')));
      const target = order.indexOf(d2.id);
      const from = order.indexOf(edited.id);
      await page.locator('#draft-h').click();
      for (let i = from; i !== target; i += target > from ? 1 : -1) await page.keyboard.press(target > from ? 'j' : 'k');
      await page.locator('#draft-view .meta strong', { hasText: 'Sam Okafor' }).waitFor();
      await page.locator('#draft-view .badge.flagged').first().waitFor();
      await page.locator('.flags li', { hasText: 'Half price this week.' }).waitFor();
      expect(await page.textContent('.flags')).toContain('An offer, price, discount');
      await page.keyboard.press('a');
      await page.locator('#ack-flags').waitFor();
      await page.screenshot({ path: path.join(OUT, 'desk-flagged.png') });
      await page.click('#approve-ack');
      expect(await page.textContent('#status')).toContain('Tick the acknowledgement');
      expect((await draft(s, d2.id)).status).toBe('DRAFT_GENERATED');
      await page.check('#ack-flags');
      await page.click('#approve-ack');
      await page.locator('#draft-status', { hasText: 'Approved' }).waitFor();
      expect((await draft(s, d2.id)).status).toBe('APPROVED');

      // Batch: the other two approved in one action, then all three sent.
      await page.locator(`#drafts-body tr[data-id="${edited.id}"] .pick`).check();
      await page.locator(`#drafts-body tr[data-id="${d1.id}"] .pick`).check();
      await page.click('#batch-approve');
      await page.locator('#batch-results', { hasText: '2 succeeded, 0 failed' }).waitFor();
      expect(await page.locator('#batch-items li.ok').count()).toBe(2);
      for (const id of [edited.id, d1.id]) expect((await draft(s, id)).status).toBe('APPROVED');
      await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { flags: { v1_2_api_send: true } } });
      await page.locator('#select-all').check();
      await page.click('#batch-send');
      await page.locator('#batch-results', { hasText: 'Batch send: 3 succeeded, 0 failed' }).waitFor();
      await page.screenshot({ path: path.join(OUT, 'desk-batch.png') });
      const queued = (await svc.admin.GET('/send-queue', { params: { query: { organizationId: s.org.id } } })).data!.data;
      const sentOrQueued = await Promise.all(
        people.map(async (p) => (await s.api.GET('/sequences', { params: { query: { contactId: p.id } } })).data!.data[0]),
      );
      expect(sentOrQueued.every((q) => q.status !== 'DRAFTED')).toBe(true);
      expect(queued.length + sentOrQueued.filter((q) => q.status === 'COMPLETED').length).toBeGreaterThan(0);

      await expectNoSeriousA11y(page);
      expect(w.consoleErrors).toEqual([]);
      expect(w.pageErrors).toEqual([]);
      expect(w.offHost).toEqual([]);
      expect(w.dialogs).toEqual([]);
      // Polite: the whole review took few requests (no polling once the run was complete, no storms).
      expect(w.apiCalls.length).toBeLessThan(60);
    } finally {
      await w.close();
    }
  });

  it('shows a draft, its sources and a reply built from hostile text as text: no script runs, no javascript: link; the reply shows its intent, the sequence its hold; r rejects with a reason', async () => {
    const s = await draftingOrg(svc);
    const c = await researchedContact(s, { name: 'Eve <img src=x onerror="window.__pwned=\'name\'">', email: uniqueEmail('eve') }, true);
    const seq = await sequence(s.api, c.id, await template(svc, s.org.id, [STEP_ONE]));
    await settle(svc);
    const d = await liveOf(s, c.id);
    const patched = await s.api.PATCH('/drafts/{id}', {
      params: { path: { id: d.id } },
      body: { subject: `Hello <script>window.__pwned="subject"</script>`, body: `${(await draft(s, d.id)).body}\n\n${HOSTILE}` } as never,
    });
    expect(patched.response.status).toBe(200);
    const id = patched.data!.id;
    // The sources a hostile site could plant: markup in the title and snippet, a javascript: URL.
    await system(svc, async (trx) => {
      const row = await trx.selectFrom('drafts').select('evidence').where('id', '=', id).executeTakeFirstOrThrow();
      const ev = row.evidence as { citations: Array<Record<string, unknown>> };
      expect(ev.citations.length).toBeGreaterThan(0);
      // After the original text, so the harness's check that citations are supported still holds.
      const c0 = ev.citations[0];
      ev.citations[0] = {
        ...c0,
        sourceTitle: `${c0.sourceTitle ?? ''} ${HOSTILE}`,
        sourceSnippet: `${c0.sourceSnippet ?? ''} ${HOSTILE}`,
        sourceUrl: "javascript:window.__pwned='source'",
      };
      await trx
        .updateTable('drafts')
        .set({ evidence: JSON.stringify(ev) })
        .where('id', '=', id)
        .execute();
    });
    const reply = await svc.admin.POST('/organizations/{orgId}/inbound-messages', {
      params: { path: { orgId: s.org.id } },
      body: {
        fromEmail: c.email,
        subject: `Re: <img src=x onerror="window.__pwned='reply'">`,
        body: `Sounds interesting, tell me more. ${HOSTILE}`,
      } as never,
    });
    expect(reply.response.status).toBe(201);
    await settle(svc);
    const messages = (await s.api.GET('/messages', { params: { query: { contactId: c.id } } })).data!.data;
    const inbound = messages.find((m) => m.direction === 'INBOUND')!;
    expect(inbound.intent).not.toBeNull();
    const sequenceNow = (await s.api.GET('/sequences/{id}', { params: { path: { id: seq.id } } })).data!;

    const w = await openDesk();
    const { page } = w;
    try {
      await signIn(page, s.key);
      await page.fill('#f-sequence', seq.id);
      await page.click('#filters button[type="submit"]');
      await expect.poll(() => rows(page).count()).toBe(1);
      await page.locator('#draft-h').click();
      await page.keyboard.press('j');
      await page.locator('#messages li').first().waitFor();
      await page.screenshot({ path: path.join(OUT, 'desk-hostile.png') });

      // Every hostile text is on the page as text.
      expect(await page.textContent('#draft-subject')).toContain('<script>window.__pwned="subject"</script>');
      expect(await page.textContent('#draft-body')).toContain('<img src=x onerror=');
      expect(await page.textContent('.sources')).toContain('<svg onload="alert(1)">');
      expect(await page.textContent('#messages')).toContain('<script>window.__pwned = "script"</script>');
      expect(await page.textContent('#messages')).toContain(inbound.intent === 'interested' ? 'Interested' : '');
      expect(await page.textContent('#sequence-state')).toContain(sequenceNow.status);
      const items = (await s.api.GET('/action-items', { params: { query: { status: 'pending', limit: 100 } as never } })).data!.data;
      const open = items.filter((i) => i.entityId === c.id);
      expect(await page.locator('#action-items li').count()).toBe(open.length);
      for (const i of open) expect(await page.textContent('#action-items')).toContain(i.title);
      // No element came from that text, and the javascript: URL is not a link.
      for (const sel of [
        '#draft-view script',
        '#draft-view img',
        '#draft-view svg',
        '#replies-view script',
        '#replies-view img',
        '#replies-view svg',
        '#drafts-body img',
      ])
        expect(await page.locator(sel).count(), sel).toBe(0);
      expect(await page.locator('a[href^="javascript:"]').count()).toBe(0);
      expect(await page.textContent('.sources .not-linked')).toContain("javascript:window.__pwned='source'");
      // Clicking what looks like links does nothing either.
      await page.locator('.sources .not-linked').first().click();

      // r: reject with a reason.
      await page.locator('#draft-h').click();
      await page.keyboard.press('r');
      await page.locator('#reject-reason').waitFor();
      expect(await page.evaluate(() => document.activeElement?.id)).toBe('reject-reason');
      await page.keyboard.type('Hostile content.');
      await page.keyboard.press('Enter');
      await page.locator('#draft-status', { hasText: 'Rejected' }).waitFor();
      expect(await draft(s, id)).toMatchObject({ status: 'REJECTED', rejectionReason: 'Hostile content.' });

      expect(await page.evaluate(() => (window as unknown as { __pwned?: string }).__pwned)).toBeUndefined();
      await expectNoSeriousA11y(page);
      expect(w.dialogs).toEqual([]);
      expect(w.consoleErrors).toEqual([]);
      expect(w.pageErrors).toEqual([]);
      expect(w.offHost).toEqual([]);
    } finally {
      await w.close();
    }
  });

  it('waits out a 429 for its Retry-After and tries once more; a key that is refused is not kept', async () => {
    const s = await draftingOrg(svc);
    const w = await openDesk();
    const { page } = w;
    const seen: number[] = [];
    try {
      await page.route('**/api/v1/me', async (route) => {
        seen.push(Date.now());
        if (seen.length === 1)
          return route.fulfill({
            status: 429,
            headers: { 'Retry-After': '1', 'Content-Type': 'application/problem+json' },
            body: JSON.stringify({ title: 'Too many requests', status: 429 }),
          });
        return route.continue();
      });
      await signIn(page, s.key);
      expect(seen).toHaveLength(2);
      expect(seen[1] - seen[0]).toBeGreaterThanOrEqual(950);
      expect(await page.evaluate(() => sessionStorage.length)).toBe(1);
      expect(await page.evaluate(() => localStorage.length)).toBe(0);
      // The key is never in the page's markup.
      expect(await page.content()).not.toContain(s.key);

      await page.click('#sign-out');
      await page.locator('#api-key').waitFor();
      await page.fill('#api-key', 'obk_live_00000000000000000000000000000000');
      await page.click('#signin-form button[type="submit"]');
      await page.locator('#signin-error', { hasText: 'not accepted' }).waitFor();
      expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
      expect(w.offHost).toEqual([]);
      expect(w.pageErrors).toEqual([]);
    } finally {
      await w.close();
    }
  });
});

describe('/desk over HTTP', () => {
  it('serves the page with a same-origin CSP and no inline script, its files cacheable for good, and 404 for anything else', async () => {
    const r = await raw(svc.baseUrl, 'GET', '/desk');
    expect(r.status).toBe(200);
    const csp = r.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toMatch(/https?:/);
    expect(r.headers.get('x-frame-options')).toBe('DENY');
    expect(r.headers.get('referrer-policy')).toBe('no-referrer');
    expect(r.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    // Signing in is possible only once the script handles the form (natively it would put the key in the address).
    expect(r.text).toMatch(/<button type="submit" id="signin-submit" disabled>/);
    expect(r.text).not.toMatch(/(src|href)="(https?:)?\/\//);
    expect(r.text).toContain(`${DESK_ASSET_BASE}/main.js`);
    const js = await fetch(`${svc.baseUrl}${DESK_ASSET_BASE}/main.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(js.headers.get('cache-control')).toContain('immutable');
    expect(await js.text()).toBe(fs.readFileSync('src/http/desk/main.js', 'utf8'));
    for (const p of [`${DESK_ASSET_BASE}/index.html`, '/desk/assets/000000000000/main.js', `${DESK_ASSET_BASE}/..%2Fdesk.ts`]) {
      const x = await raw(svc.baseUrl, 'GET', p);
      expect(x.status, p).toBe(404);
    }
    // No page script uses innerHTML, outerHTML, insertAdjacentHTML, document.write or eval.
    for (const f of fs.readdirSync('src/http/desk').filter((n) => n.endsWith('.js')))
      expect(fs.readFileSync(path.join('src/http/desk', f), 'utf8'), f).not.toMatch(
        /innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/,
      );
  });
});
