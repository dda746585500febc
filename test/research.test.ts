// Research against a company website on loopback, with the SSRF guard ON: the only private target
// the service may reach is the site server's exact address and port (RESEARCH_ALLOWED_TARGETS).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as cheerio from 'cheerio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventsOf, system, uid, uniqueEmail } from './crm-support.js';
import { unsupportedTokens } from './support/citations.js';
import { ALL_SCOPES, raw, setClock, startService, type TestService } from './support/harness.js';
import { companySite, type Route, type SiteServer, startSiteServer, THEME_TEXT } from './support/site-server.js';
import { ADDRESS_CASES } from './support/ssrf-addresses.js';

let site: SiteServer;
let other: http.Server;
let otherConnections = 0;
let svc: TestService;

beforeAll(async () => {
  site = await startSiteServer();
  // A second loopback server: a redirect to it must be refused before any connection is made.
  other = http.createServer((_, res) => res.end('internal'));
  other.on('connection', () => {
    otherConnections += 1;
  });
  await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
  svc = await startService({
    RESEARCH_SITE_URL_TEMPLATE: site.template,
    RESEARCH_ALLOW_PRIVATE_TARGETS: 'false',
    RESEARCH_ALLOWED_TARGETS: `127.0.0.1:${site.port}`,
    RESEARCH_REQUEST_TIMEOUT_MS: '1500',
    RESEARCH_MAX_PAGE_BYTES: String(256 * 1024),
  });
});
afterAll(async () => {
  await svc?.close();
  await site?.close();
  other?.closeAllConnections();
  await new Promise((r) => other?.close(r));
});

const otherPort = () => (other.address() as AddressInfo).port;

/** A fresh organization, key and client. */
async function setup(scopes: readonly string[] = ALL_SCOPES) {
  const { org, key, api } = await svc.orgWithKey(scopes);
  return { org, key, api };
}

/** A company site on the site server (the realistic one, with overrides) and its company in the organization. */
async function companyWithSite(
  s: Awaited<ReturnType<typeof setup>>,
  overrides: Record<string, Route | undefined> = {},
  theme: 'plain' | 'shared' = 'plain',
) {
  const domain = `${uid('acme')}.example`;
  const routes: Record<string, Route> = { ...companySite(domain, site.origin, { theme }) };
  for (const [path, route] of Object.entries(overrides)) {
    if (route === undefined) delete routes[path];
    else routes[path] = route;
  }
  site.site(domain, routes);
  const r = await s.api.POST('/companies', { body: { domain, name: 'Acme Rockets' } });
  expect(r.response.status).toBe(201);
  return { domain, routes, company: r.data! };
}

type Answer = Array<{ address: string; family: 4 | 6 }>;

/** Points names at chosen addresses through the injectable lookup of Services (until deleted). */
function injectLookup(answers: Map<string, Answer>) {
  svc.rt.services.lookup = async (host) => {
    const a = answers.get(host);
    if (!a) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    return a;
  };
}

/**
 * Researches a new company whose home page moves to its www host on `port` (a redirect the
 * crawler follows), which DNS answers with `answer`.
 */
async function researchMovedTo(s: Awaited<ReturnType<typeof setup>>, answers: Map<string, Answer>, answer: Answer, port: number) {
  const c = await companyWithSite(s, {});
  const own = companySite(c.domain, site.origin);
  const routes = {
    ...own,
    '/': {
      status: 301,
      headers: { location: `http://www.${c.domain}:${port}/sites/${c.domain}/` },
      hosts: { [`www.${c.domain}`]: own['/'] },
    },
  };
  site.site(c.domain, routes);
  answers.set(`www.${c.domain}`, answer);
  const r = await research(s, c.company.id);
  expect(r.response.status).toBe(200);
  return { ...c, r: r.data! };
}

const research = (s: Awaited<ReturnType<typeof setup>>, id: string) => s.api.POST('/companies/{id}/research', { params: { path: { id } } });
const researchContact = (s: Awaited<ReturnType<typeof setup>>, id: string) =>
  s.api.POST('/contacts/{id}/research', { params: { path: { id } } });
const runs = (orgId: string) =>
  system(svc, (trx) => trx.selectFrom('research_runs').selectAll().where('organization_id', '=', orgId).execute());

const collapse = (t: string) => t.replace(/\s+/g, ' ').trim();
/** Every text a snippet may be taken from on a document: its visible text and its attribute and script text. */
function textsOf(body: string, xml: boolean): string {
  const $ = cheerio.load(body, xml ? { xml: true } : undefined);
  const visible = collapse($.root().text());
  const attrs = $('[content]')
    .map((_, el) => $(el).attr('content'))
    .get()
    .join('\n');
  const scripts = $('script')
    .map((_, el) => $(el).text())
    .get()
    .join('\n');
  // Feed descriptions may hold escaped HTML: their text counts too.
  const inner = xml
    ? $('description, summary')
        .map((_, el) => collapse(cheerio.load($(el).text()).root().text()))
        .get()
        .join('\n')
    : '';
  return [visible, attrs, scripts, inner].join('\n');
}

type Sourced = { sourceIndex: number; source: { url: string; snippet: string } };

/** Checks that every entry's snippet is on the document of its source, and that its index names that source. */
function expectVerbatim(entries: Sourced[], sources: Array<Record<string, unknown>>, routes: Record<string, Route>, domain: string) {
  expect(entries.length).toBeGreaterThan(0);
  const prefix = `${site.origin}/sites/${domain}`;
  for (const e of entries) {
    const s = sources[e.sourceIndex - 1];
    expect(s, `sourceIndex ${e.sourceIndex}`).toBeDefined();
    expect(e.source.url).toBe(s.url);
    const doc = s.kind === 'feed-item' ? routes['/feed.xml'] : routes[String(s.url).slice(prefix.length) || '/'];
    expect(doc, String(s.url)).toBeDefined();
    expect(textsOf(String(doc.body), s.kind === 'feed-item'), `${e.source.snippet} on ${String(s.url)}`).toContain(e.source.snippet);
  }
}

describe('POST /companies/{id}/research', () => {
  it('reads a realistic site as a polite crawler and answers a dossier whose every fact cites a snippet that is on its source', async () => {
    const s = await setup();
    const { domain, routes, company } = await companyWithSite(s);
    const r = await research(s, company.id);
    expect(r.response.status).toBe(200);
    const d = r.data!;
    expect(d).toMatchObject({ companyId: company.id, status: 'completed', jobId: expect.stringMatching(/^rrn_/) });

    // What was fetched, in what order, and what was not.
    const paths = site.paths(domain);
    expect(paths[0]).toBe('/robots.txt');
    expect(paths[1]).toBe('/');
    expect(new Set(paths)).toEqual(
      new Set([
        '/robots.txt',
        '/',
        '/about',
        '/products',
        '/customers',
        '/careers',
        '/blog',
        '/feed.xml',
        '/blog/series-b',
        '/blog/new-cto',
      ]),
    );
    expect(paths.length).toBe(new Set(paths).size); // nothing twice
    expect(paths).not.toContain('/private/investors');
    for (const req of site.requests(domain)) expect(req.userAgent).toBe(`OutboundResearchBot/1.0 (+${svc.baseUrl}/research-bot)`);
    const bot = await raw(svc.baseUrl, 'GET', '/research-bot');
    expect(bot.status).toBe(200);
    expect(bot.text).toContain('User-agent: OutboundResearchBot');

    // Sources: home first, then the sales pages, articles and feed items.
    const sources = d.researchSources;
    expect(sources[0]).toMatchObject({
      url: `${site.origin}/sites/${domain}/`,
      kind: 'home',
      domain: '127.0.0.1',
      title: expect.stringContaining('Acme Rockets'),
    });
    expect(sources.map((x) => x.kind)).toEqual(
      expect.arrayContaining(['home', 'about', 'product', 'customers', 'careers', 'news', 'article', 'feed-item']),
    );
    for (const src of sources) expect(Date.parse(String(src.fetchedAt))).not.toBeNaN();

    // Facts, news and pain points each cite a snippet really on that source.
    const facts = d.facts as unknown as Array<Sourced & { kind: string; text: string }>;
    const news = d.recentNews as unknown as Array<Sourced & { kind: string; title: string; publishedAt: string; url: string }>;
    const pains = d.painPoints as unknown as Array<Sourced & { kind: string; text: string }>;
    expectVerbatim(facts, sources, routes, domain);
    expectVerbatim(news, sources, routes, domain);
    expectVerbatim(pains, sources, routes, domain);
    expect(facts).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          kind: 'description',
          text: 'Acme Rockets builds reusable launch vehicles for small satellite operators.',
        }),
        expect.objectContaining({ kind: 'founded', text: 'Founded in 2015', source: expect.objectContaining({ snippet: '2015' }) }),
        expect.objectContaining({ kind: 'employees', text: 'Today 120 employees design, build and fly our Roadrunner rocket.' }),
        expect.objectContaining({
          kind: 'customers',
          text: 'Trusted by 40 satellite operators, from university cubesat teams to national agencies.',
        }),
        expect.objectContaining({ kind: 'funding', text: 'Acme raises $40M Series B' }),
      ]),
    );
    // Recent news: the last six months, newest first; the 900-day-old post is not news.
    expect(news.map((n) => n.title)).toEqual([
      'Acme raises $40M Series B',
      'Acme names Ada Lovelace as Chief Technology Officer',
      'Introducing Roadrunner 2',
      'Acme opens a new office in Lisbon',
    ]);
    expect(news.map((n) => n.kind)).toEqual(['funding', 'leadership', 'launch', 'expansion']);
    expect(pains).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          kind: 'challenge',
          text: 'As we grow, scheduling integration across three sites has become our biggest bottleneck.',
        }),
        expect.objectContaining({ kind: 'hiring', text: 'Hiring: Senior Propulsion Engineer' }),
        expect.objectContaining({ kind: 'hiring', text: 'Hiring: Account Executive, Government' }),
      ]),
    );
    expect(d.summary).toBe('Acme Rockets: Acme Rockets builds reusable launch vehicles for small satellite operators.');
    expect(d.coverage).toMatchObject({
      pagesFetched: 8,
      feedItems: 5,
      requests: 10,
      robots: 'parsed',
      hasMinimumCoverage: true,
      lowConfidence: false,
      notes: [],
      skipped: [],
    });
    // The footer's address and phone number are on every page, and in no dossier.
    expect(JSON.stringify(d)).not.toMatch(/sales@acme-rockets|555-0100/);

    // Stored: the company shows it, GET research answers it, one event says so.
    const c = await s.api.GET('/companies/{id}', { params: { path: { id: company.id } } });
    expect(c.data).toMatchObject({ researchUpdatedAt: d.updatedAt, sourcesCount: sources.length });
    const g = await s.api.GET('/companies/{id}/research', { params: { path: { id: company.id } } });
    expect(g.data).toEqual({
      companyId: company.id,
      summary: d.summary,
      facts: d.facts,
      researchSources: sources,
      recentNews: d.recentNews,
      painPoints: d.painPoints,
      coverage: d.coverage,
      updatedAt: d.updatedAt,
      ttlDays: 30,
      isFresh: true,
    });
    const events = await eventsOf(svc, s.org.id, 'company.research_completed');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      resource_type: 'Company',
      resource_id: company.id,
      data: { companyId: company.id, hasMinimumCoverage: true, lowConfidence: false },
    });
    expect(Object.keys(events[0].data).sort()).toEqual(['companyId', 'hasMinimumCoverage', 'lowConfidence']);

    // A second POST always runs anew.
    const again = await research(s, company.id);
    expect(again.data!.jobId).not.toBe(d.jobId);
    expect(Date.parse(again.data!.updatedAt)).toBeGreaterThan(Date.parse(d.updatedAt));
    expect(site.paths(domain).filter((p) => p === '/')).toHaveLength(2);
    expect(await eventsOf(svc, s.org.id, 'company.research_completed')).toHaveLength(2);
  });

  it('never takes text the site repeats on its pages as a snippet: a news snippet is its headline or lead sentence, not the shared description, tagline, sidebar or footer', async () => {
    const s = await setup();
    const { domain, routes, company } = await companyWithSite(s, {}, 'shared');
    const r = await research(s, company.id);
    expect(r.response.status).toBe(200);
    const d = r.data!;
    const sources = d.researchSources as Array<{ url: string; title: string; snippet: string; kind: string }>;
    const news = d.recentNews as unknown as Array<Sourced & { kind: string; title: string; source: { title: string } }>;
    const facts = d.facts as unknown as Array<Sourced & { kind: string; text: string; publishedAt?: string | null }>;
    const pains = d.painPoints as unknown as Array<Sourced & { kind: string; text: string }>;
    expectVerbatim([...facts, ...news, ...pains], sources, routes, domain);

    // Each news item cites the text of its own page or feed item that states it.
    const lead: Record<string, string> = {
      'Acme raises $40M Series B': 'Acme raises $40M Series B led by Orbital Ventures to build a second launch site.',
      'Acme names Ada Lovelace as Chief Technology Officer': 'Ada Lovelace joins Acme as Chief Technology Officer from Analytical Engines.',
      'Introducing Roadrunner 2': 'Roadrunner 2 launches with a bigger fairing and a 48-hour turnaround.',
      'Acme opens a new office in Lisbon': 'Acme opens a new office in Lisbon to serve European operators.',
    };
    expect(news.map((n) => n.title)).toEqual(Object.keys(lead));
    // What happened is read from each item's own words (the Lisbon item's "launch company" is the site's).
    expect(news.map((n) => n.kind)).toEqual(['funding', 'leadership', 'launch', 'expansion']);
    for (const n of news) expect([n.title, lead[n.title]]).toContain(n.source.snippet);
    // The two articles read as pages: their lead sentences; the feed gives Lisbon the site's
    // description, so its headline is what states it.
    expect(news.slice(0, 2).map((n) => n.source.snippet)).toEqual([lead[news[0].title], lead[news[1].title]]);
    expect(news[3].source.snippet).toBe('Acme opens a new office in Lisbon');
    const newsFacts = facts.filter((f) => typeof f.publishedAt === 'string');
    expect(newsFacts.length).toBeGreaterThanOrEqual(4);
    for (const f of newsFacts) expect([f.text, lead[f.text]]).toContain(f.source.snippet);
    for (const n of news) expect(unsupportedTokens(n.title, n.source.snippet, n.source.title), n.title).toEqual([]);

    // An article's source is titled by its headline, not the posts' shared <title>.
    const articles = sources.filter((x) => x.kind === 'article');
    expect(articles.map((a) => a.title).sort()).toEqual([
      'Acme names Ada Lovelace as Chief Technology Officer',
      'Acme raises $40M Series B',
    ]);

    // The shared text is no snippet of any page but the home page (whose company description it is).
    const shared = Object.values(THEME_TEXT).map((t) => t.toLowerCase());
    const isShared = (snippet: string) => shared.some((t) => snippet.toLowerCase().includes(t));
    for (const [i, src] of sources.entries()) if (i > 0) expect(isShared(src.snippet), `${src.url}: ${src.snippet}`).toBe(false);
    for (const e of [...facts, ...news, ...pains])
      if (e.sourceIndex !== 1) expect(isShared(e.source.snippet), `${e.source.url}: ${e.source.snippet}`).toBe(false);
    for (const e of pains) expect(isShared(e.source.snippet), e.source.snippet).toBe(false);
  });

  it('honours robots.txt: the group for its token, a 4xx allowing everything, a 5xx allowing nothing', async () => {
    const s = await setup();
    // Everyone else is kept out; this crawler only from /careers.
    const own = await companyWithSite(s, {
      '/robots.txt': {
        headers: { 'content-type': 'text/plain' },
        body: 'User-agent: *\nDisallow: /\n\nUser-agent: OutboundResearchBot\nDisallow: /careers\n',
      },
    });
    const r1 = await research(s, own.company.id);
    expect(r1.response.status).toBe(200);
    expect(site.paths(own.domain)).not.toContain('/careers');
    expect(site.paths(own.domain)).toContain('/about');
    expect(r1.data!.coverage.skipped).toEqual([{ url: `${site.origin}/sites/${own.domain}/careers`, reason: 'disallowed by robots.txt' }]);
    expect(r1.data!.painPoints.filter((p) => p.kind === 'hiring')).toEqual([]);

    const absent = await companyWithSite(s, { '/robots.txt': { status: 404, body: 'no' } });
    const r2 = await research(s, absent.company.id);
    expect(r2.data!.coverage).toMatchObject({ robots: 'absent', hasMinimumCoverage: true });
    expect(site.paths(absent.domain)).toContain('/careers');

    const broken = await companyWithSite(s, { '/robots.txt': { status: 503, body: 'down' } });
    const r3 = await research(s, broken.company.id);
    expect(r3.response.status).toBe(200);
    expect(site.paths(broken.domain)).toEqual(['/robots.txt']);
    expect(r3.data!.coverage).toMatchObject({ robots: 'unreachable', pagesFetched: 0, hasMinimumCoverage: false, lowConfidence: true });
    expect(r3.data!.coverage.notes.join(' ')).toMatch(/robots\.txt could not be read \(HTTP 503\)/);
    expect(r3.data!.researchSources).toEqual([]);
    const ev = (await eventsOf(svc, s.org.id, 'company.research_completed')).find((e) => e.resource_id === broken.company.id);
    expect(ev?.data).toEqual({ companyId: broken.company.id, hasMinimumCoverage: false, lowConfidence: true });
  });

  it('skips what misbehaves (redirects off the site, to a private or a metadata address; a page over the size cap; a page that never answers; another content type; a broken feed) and completes with the rest', async () => {
    const s = await setup();
    const connectionsBefore = otherConnections;
    const { domain, company } = await companyWithSite(s, {
      '/about': { status: 302, headers: { location: `http://127.0.0.1:${otherPort()}/admin` } },
      '/customers': { status: 301, headers: { location: 'http://169.254.169.254/latest/meta-data/' } },
      '/products': { body: `<html><body><p>${'Rockets. '.repeat(40_000)}</p></body></html>` },
      '/careers': { hang: true },
      '/blog': { headers: { 'content-type': 'image/png' }, body: Buffer.from([0x89, 0x50, 0x4e, 0x47]) },
      '/feed.xml': { headers: { 'content-type': 'application/rss+xml' }, body: '<rss><channel><item><title>Broken</ti' },
    });
    const r = await research(s, company.id);
    expect(r.response.status).toBe(200);
    expect(otherConnections).toBe(connectionsBefore); // never connected to
    const reasons = Object.fromEntries(
      r.data!.coverage.skipped.map((x) => [x.url.slice(`${site.origin}/sites/${domain}`.length), x.reason]),
    );
    expect(reasons['/about']).toBe(`redirected off the site to http://127.0.0.1:${otherPort()}/admin`);
    expect(reasons['/customers']).toBe('redirected off the site to http://169.254.169.254/latest/meta-data/');
    expect(reasons['/products']).toMatch(/larger than 262144 bytes|more than 262144/);
    expect(reasons['/careers']).toMatch(/^no complete answer within 1500 ms$/);
    expect(reasons['/blog']).toMatch(/content type "image\/png"/);
    // The broken feed yields no items; the home page's own facts remain.
    expect(r.data!.coverage.feedItems).toBe(0);
    expect(r.data!.researchSources.map((x) => x.kind)).toEqual(['home']);
    expect(r.data!.facts.length).toBeGreaterThan(3);
    expect(r.data!.coverage).toMatchObject({ pagesFetched: 1, hasMinimumCoverage: false, lowConfidence: true });
  });

  it('connects only to vetted addresses: a host of the domain that DNS points at a private or metadata address is refused, every address is checked, and the exemption is one exact address and port (injected resolver)', async () => {
    const s = await setup();
    const answers = new Map<string, Answer>();
    injectLookup(answers);
    const moving = (answer: Answer, port: number) => researchMovedTo(s, answers, answer, port);
    try {
      const connectionsBefore = otherConnections;
      const privateHost = await moving([{ address: '10.1.2.3', family: 4 }], site.port);
      expect(privateHost.r.coverage.notes).toContain(
        `the home page could not be used: refused: www.${privateHost.domain} resolves to 10.1.2.3, which is a private address`,
      );
      const metadata = await moving([{ address: '169.254.169.254', family: 4 }], 80);
      expect(metadata.r.coverage.notes.join()).toContain('169.254.169.254, which is a link-local (cloud metadata) address');
      const mixed = await moving(
        [
          { address: '93.184.215.14', family: 4 },
          { address: 'fd00::7', family: 6 },
        ],
        site.port,
      );
      expect(mixed.r.coverage.notes.join()).toContain(`www.${mixed.domain} resolves to fd00::7, which is a unique-local address`);
      const otherPortHost = await moving([{ address: '127.0.0.1', family: 4 }], otherPort());
      expect(otherPortHost.r.coverage.notes.join()).toContain(
        `www.${otherPortHost.domain} resolves to 127.0.0.1, which is a loopback address`,
      );
      expect(otherConnections).toBe(connectionsBefore);
      // The exempt address and port, reached through a name: allowed, and the site is read from there.
      const exempt = await moving([{ address: '127.0.0.1', family: 4 }], site.port);
      expect(exempt.r.coverage, JSON.stringify(exempt.r.coverage)).toMatchObject({ hasMinimumCoverage: true });
      expect(exempt.r.researchSources[0].url).toBe(`http://www.${exempt.domain}:${site.port}/sites/${exempt.domain}/`);
    } finally {
      delete svc.rt.services.lookup;
    }
  });

  it('never connects to a site whose host resolves to any refused address of the shared table: IPv4, IPv6, and IPv6 embedding IPv4 (injected resolver)', async () => {
    const s = await setup();
    const answers = new Map<string, Answer>();
    injectLookup(answers);
    try {
      const connectionsBefore = otherConnections;
      for (const c of ADDRESS_CASES.filter((x) => x.reason !== null)) {
        // A key per address: two requests each would pass the per-key rate limit over the table.
        const fresh = { ...s, api: svc.api(await s.org.key(ALL_SCOPES)) };
        const family = c.address.includes(':') ? 6 : 4;
        const moved = await researchMovedTo(fresh, answers, [{ address: c.address, family }], otherPort());
        expect(moved.r.coverage.notes, c.form).toContain(
          `the home page could not be used: refused: www.${moved.domain} resolves to ${c.address}, which is a ${c.reason} address`,
        );
        expect(moved.r.researchSources, c.form).toEqual([]);
      }
      expect(otherConnections).toBe(connectionsBefore);
    } finally {
      delete svc.rt.services.lookup;
    }
  });

  it('completes with low confidence, saying why, when the home page fails or the HTML is broken', async () => {
    const s = await setup();
    const down = await companyWithSite(s, { '/': { status: 500, body: 'oops' } });
    const r = await research(s, down.company.id);
    expect(r.response.status).toBe(200);
    expect(r.data!.coverage).toMatchObject({ lowConfidence: true, hasMinimumCoverage: false });
    expect(r.data!.coverage.notes).toEqual(expect.arrayContaining([expect.stringMatching(/^the home page could not be used: HTTP 500$/)]));

    const garbled = await companyWithSite(s, {
      '/': {
        body: Buffer.concat([
          Buffer.from(
            '<html><head><script type="application/ld+json">{"@type": "Organization", broken</script><title>Acme</title></head><body><main><div><p>Acme Rockets was founded in 2015 in Austin. <b>Unclosed',
          ),
          Buffer.from([0xff, 0xfe, 0xc3]),
          Buffer.from('<table><tr><td>Cell</div></main>'),
        ]),
      },
    });
    const g = await research(s, garbled.company.id);
    expect(g.response.status).toBe(200);
    expect(g.data!.facts).toEqual(
      expect.arrayContaining([expect.objectContaining({ kind: 'founded', text: 'Acme Rockets was founded in 2015 in Austin.' })]),
    );
  });

  it('answers 404 for unknown and foreign companies, 403 without deals.write, and fetches nothing then', async () => {
    const s = await setup();
    const { domain, company } = await companyWithSite(s);
    const foreign = await setup();
    expect((await research(foreign, company.id)).response.status).toBe(404);
    expect((await research(s, 'cmp_000000000000000000000000')).response.status).toBe(404);
    const reader = svc.api(await s.org.key(ALL_SCOPES.filter((x) => x !== 'deals.write')));
    expect((await reader.POST('/companies/{id}/research', { params: { path: { id: company.id } } })).response.status).toBe(403);
    expect(
      (
        await raw(svc.baseUrl, 'POST', `/api/v1/companies/${company.id}/research`, {
          key: s.key,
          body: '{"x":1}',
          headers: { 'content-type': 'application/json' },
        })
      ).status,
    ).toBe(400);
    expect(site.paths(domain)).toEqual([]);
    expect(await runs(s.org.id)).toEqual([]);
  });
});

describe('the research budget', () => {
  it('counts runs that fetch per period; past it both POSTs answer 429 with Retry-After, fetch nothing and store nothing', async () => {
    const clock = setClock(svc, '2031-03-12T12:00:00Z');
    const s = await setup();
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { researchBudget: 1 } });
    const a = await companyWithSite(s);
    const b = await companyWithSite(s);
    expect((await research(s, a.company.id)).response.status).toBe(200);

    const refused = await research(s, b.company.id);
    expect(refused.response.status).toBe(429);
    expect(refused.error).toMatchObject({
      type: `${svc.baseUrl}/problems/research-budget-exhausted`,
      status: 429,
      researchBudget: 1,
      used: 1,
    });
    const now = clock.now();
    const periodEnd = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
    const retryAfter = Number(refused.response.headers.get('retry-after'));
    expect(Math.abs(retryAfter - (periodEnd - clock.now().getTime()) / 1000)).toBeLessThan(5);
    expect(refused.response.headers.get('x-ratelimit-limit')).not.toBeNull();
    expect(site.paths(b.domain)).toEqual([]);
    expect((await s.api.GET('/companies/{id}', { params: { path: { id: b.company.id } } })).data!.researchUpdatedAt).toBeNull();
    expect((await eventsOf(svc, s.org.id, 'company.research_completed')).map((e) => e.resource_id)).toEqual([a.company.id]);

    // A contact of the researched company reuses its fresh dossier: no run, no budget.
    const ca = await s.api.POST('/contacts', { body: { email: uniqueEmail(), company: { domain: a.domain } } });
    expect((await researchContact(s, ca.data!.id)).response.status).toBe(200);
    // A contact of the other company needs a run: 429, and nothing stored on the contact.
    const cb = await s.api.POST('/contacts', { body: { email: uniqueEmail(), company: { domain: b.domain } } });
    const refusedContact = await researchContact(s, cb.data!.id);
    expect(refusedContact.response.status).toBe(429);
    expect(refusedContact.error?.type).toBe(`${svc.baseUrl}/problems/research-budget-exhausted`);
    expect((await s.api.GET('/contacts/{id}/research', { params: { path: { id: cb.data!.id } } })).response.status).toBe(404);
    expect(await runs(s.org.id)).toHaveLength(1);

    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { researchBudget: 2 } });
    expect((await research(s, b.company.id)).response.status).toBe(200);
  });

  it('lets only one of two concurrent runs take the last unit of budget', async () => {
    const s = await setup();
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { researchBudget: 1 } });
    const a = await companyWithSite(s);
    const b = await companyWithSite(s);
    const rs = await Promise.all([research(s, a.company.id), research(s, b.company.id)]);
    expect(rs.map((r) => r.response.status).sort()).toEqual([200, 429]);
    expect(await runs(s.org.id)).toHaveLength(1);
  });
});

describe('concurrent research of one company', () => {
  it('runs once: the others wait and answer its result; one event, one unit of budget', async () => {
    const s = await setup();
    const { domain, company } = await companyWithSite(s);
    const home = companySite(domain, site.origin)['/'];
    site.site(domain, { ...companySite(domain, site.origin), '/': { ...home, delayMs: 600 } });
    const contact = await s.api.POST('/contacts', { body: { email: uniqueEmail(), title: 'CTO', company: { domain } } });
    const [r1, r2, r3, rc] = await Promise.all([
      research(s, company.id),
      research(s, company.id),
      research(s, company.id),
      researchContact(s, contact.data!.id),
    ]);
    for (const r of [r1, r2, r3, rc]) expect(r.response.status).toBe(200);
    expect(new Set([r1.data!.jobId, r2.data!.jobId, r3.data!.jobId])).toHaveProperty('size', 1);
    expect(r2.data).toEqual(r1.data);
    const paths = site.paths(domain);
    expect(paths.length).toBe(new Set(paths).size);
    expect(await runs(s.org.id)).toHaveLength(1);
    expect(await eventsOf(svc, s.org.id, 'company.research_completed')).toHaveLength(1);
  });
});

describe('POST /contacts/{id}/research', () => {
  it('assesses the person from their title and the dossier; every signal names a stored fact with its source', async () => {
    const s = await setup();
    const { domain, company } = await companyWithSite(s);
    const c = await s.api.POST('/contacts', {
      body: { email: uniqueEmail(), name: 'Grace Hopper', title: 'VP of Engineering', fitScore: 12, company: { domain } },
    });
    const contact = c.data!;
    const r = await researchContact(s, contact.id);
    expect(r.response.status).toBe(200);
    expect(r.data).toMatchObject({ contactId: contact.id, status: 'completed', jobId: expect.stringMatching(/^rsc_/) });
    const a = r.data!.contactAssessment as Record<string, unknown>;
    expect(a).toMatchObject({
      seniority: 'vp',
      function: 'engineering',
      decisionMaker: true,
      title: 'VP of Engineering',
      company: { id: company.id, lowConfidence: false },
    });
    expect(r.data!.signalReasons[0]).toMatch(/^Recent funding: "Acme raises \$40M Series B" \(source \d+, \d{4}-\d{2}-\d{2}\)$/);
    expect(r.data!.signalReasons).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^Hiring in engineering function: "Senior Propulsion Engineer" \(source \d+\)$/),
        expect.stringMatching(/^Leadership change: "Acme names Ada Lovelace as Chief Technology Officer"/),
      ]),
    );

    const stored = await s.api.GET('/contacts/{id}/research', { params: { path: { id: contact.id } } });
    expect(stored.data).toMatchObject({
      contactId: contact.id,
      companyId: company.id,
      contactAssessment: a,
      signalReasons: r.data!.signalReasons,
      ttlDays: 30,
      isFresh: true,
    });
    const dossier = (await s.api.GET('/companies/{id}/research', { params: { path: { id: company.id } } })).data!;
    expect(stored.data!.sources).toEqual(dossier.researchSources);
    const facts = stored.data!.facts as Array<{ text: string; sourceIndex: number; source: { url: string } }>;
    for (const reason of r.data!.signalReasons) {
      const [, text, index] = /"(.+)" \(source (\d+)/.exec(reason)!;
      const fact = facts.find((f) => (f.text === text || f.text === `Hiring: ${text}`) && f.sourceIndex === Number(index));
      expect(fact, reason).toBeDefined();
      expect(fact!.source.url).toBe(stored.data!.sources[Number(index) - 1].url);
    }
    const detail = await s.api.GET('/contacts/{id}', { params: { path: { id: contact.id }, query: { include: 'research' } } });
    expect(detail.data!.research).toEqual({
      facts: stored.data!.facts,
      sources: stored.data!.sources,
      updatedAt: stored.data!.updatedAt,
      ttlDays: 30,
      isFresh: true,
    });
    // The contact's own scores are the user's.
    expect(detail.data).toMatchObject({ fitScore: 12, urgencyScore: null });

    const events = await eventsOf(svc, s.org.id, 'research.completed');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      resource_type: 'Contact',
      resource_id: contact.id,
      data: { contactId: contact.id, companyId: company.id, hasMinimumCoverage: true, lowConfidence: false, companyResearchReused: false },
    });
    expect(await eventsOf(svc, s.org.id, 'company.research_completed')).toHaveLength(1);

    // A colleague at the same company reuses the fresh dossier: nothing fetched, no budget used.
    const fetched = site.paths(domain).length;
    const colleague = await s.api.POST('/contacts', { body: { email: uniqueEmail(), title: 'Junior Accountant', company: { domain } } });
    const r2 = await researchContact(s, colleague.data!.id);
    expect(r2.data!.contactAssessment).toMatchObject({ seniority: 'entry', function: 'finance', decisionMaker: false });
    expect(site.paths(domain)).toHaveLength(fetched);
    expect(await runs(s.org.id)).toHaveLength(1);
    expect((await eventsOf(svc, s.org.id, 'research.completed'))[1].data).toMatchObject({ companyResearchReused: true });
  });

  it('answers 400 without a linked company, 404 for unknown, foreign and deleted contacts, and fetches nothing then', async () => {
    const s = await setup();
    const bare = await s.api.POST('/contacts', { body: { email: uniqueEmail() } });
    const noCompany = await researchContact(s, bare.data!.id);
    expect(noCompany.response.status).toBe(400);
    expect(noCompany.error?.type).toBe(`${svc.baseUrl}/problems/validation-failed`);
    expect((await researchContact(s, 'con_000000000000000000000000')).response.status).toBe(404);
    const { domain } = await companyWithSite(s);
    const linked = await s.api.POST('/contacts', { body: { email: uniqueEmail(), company: { domain } } });
    expect((await researchContact(await setup(), linked.data!.id)).response.status).toBe(404);
    await s.api.DELETE('/contacts/{id}', { params: { path: { id: linked.data!.id } } });
    expect((await researchContact(s, linked.data!.id)).response.status).toBe(404);
    expect(site.paths(domain)).toEqual([]);
  });
});

describe('research freshness', () => {
  it('follows the organization TTL: an operator change emits org.research_ttl_updated and a stale dossier is fetched anew', async () => {
    const s = await setup();
    const { domain, company } = await companyWithSite(s);
    const contact = await s.api.POST('/contacts', { body: { email: uniqueEmail(), company: { domain } } });
    await researchContact(s, contact.data!.id);
    const fetched = site.paths(domain).length;
    await researchContact(s, contact.data!.id);
    expect(site.paths(domain)).toHaveLength(fetched); // fresh: reused

    const patched = await svc.admin.PATCH('/organizations/{orgId}', {
      params: { path: { orgId: s.org.id } },
      body: { researchTtlDays: 0 },
    });
    expect(patched.data).toMatchObject({ researchTtlDays: 0, researchBudget: 100 });
    const ev = await eventsOf(svc, s.org.id, 'org.research_ttl_updated');
    expect(ev).toHaveLength(1);
    expect(ev[0]).toMatchObject({
      resource_type: 'Organization',
      resource_id: s.org.id,
      data: { organizationId: s.org.id, previousTtlDays: 30, ttlDays: 0 },
    });
    expect((await s.api.GET('/companies/{id}/research', { params: { path: { id: company.id } } })).data).toMatchObject({
      ttlDays: 0,
      isFresh: false,
    });
    expect((await s.api.GET('/contacts/{id}/research', { params: { path: { id: contact.data!.id } } })).data).toMatchObject({
      ttlDays: 0,
      isFresh: false,
    });

    await researchContact(s, contact.data!.id);
    expect(site.paths(domain).length).toBeGreaterThan(fetched); // stale: fetched anew
    await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { researchTtlDays: 0 } });
    expect(await eventsOf(svc, s.org.id, 'org.research_ttl_updated')).toHaveLength(1); // unchanged: no event
    const bad = await svc.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { researchTtlDays: -1 } });
    expect(bad.response.status).toBe(400);
  });
});

describe('research and erasure', () => {
  it("erase removes the contact's research and their name from every dossier of the organization", async () => {
    const s = await setup();
    const owner = svc.api(await s.org.key(ALL_SCOPES, { userId: s.org.ownerId }));
    const { domain, company } = await companyWithSite(s);
    const ada = await s.api.POST('/contacts', { body: { email: uniqueEmail(), name: 'Ada Lovelace', title: 'CTO', company: { domain } } });
    const colleague = await s.api.POST('/contacts', { body: { email: uniqueEmail(), name: 'Grace Hopper', company: { domain } } });
    await researchContact(s, ada.data!.id);
    await researchContact(s, colleague.data!.id);
    const before = JSON.stringify((await s.api.GET('/companies/{id}/research', { params: { path: { id: company.id } } })).data);
    expect(before).toContain('Ada Lovelace');

    const erased = await owner.POST('/contacts/{id}/erase', {
      params: { path: { id: ada.data!.id } },
      body: { requesterRef: 'DSR-1', reason: 'request' },
    });
    expect(erased.response.status).toBe(200);
    const row = await system(svc, (trx) =>
      trx.selectFrom('contacts').select(['research', 'research_updated_at']).where('id', '=', ada.data!.id).executeTakeFirstOrThrow(),
    );
    expect(row).toEqual({ research: null, research_updated_at: null });
    const after = JSON.stringify((await s.api.GET('/companies/{id}/research', { params: { path: { id: company.id } } })).data);
    expect(after).not.toMatch(/ada lovelace/i);
    expect(after).toContain('Acme names [erased] as Chief Technology Officer');
    const colleagueResearch = JSON.stringify(
      (await s.api.GET('/contacts/{id}/research', { params: { path: { id: colleague.data!.id } } })).data,
    );
    expect(colleagueResearch).not.toMatch(/ada lovelace/i);
  });
});

describe('row-level security', () => {
  it('is enabled and forced on every table that holds organization rows', async () => {
    const r = await svc.pool.query<{ relname: string; relrowsecurity: boolean; relforcerowsecurity: boolean; policies: number }>(`
      SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, (SELECT count(*)::int FROM pg_policies p WHERE p.tablename = c.relname AND p.policyname = 'tenant_isolation') AS policies
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'public' AND c.relkind = 'r'
        AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'organization_id' AND NOT a.attisdropped)`);
    expect(r.rows.map((x) => x.relname)).toContain('research_runs');
    for (const t of r.rows) expect(t, t.relname).toMatchObject({ relrowsecurity: true, relforcerowsecurity: true, policies: 1 });
  });
});
