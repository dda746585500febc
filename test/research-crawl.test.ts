// The crawler, the extractors and the assessment on their own, against the loopback site server:
// deadlines, concurrency, Crawl-delay, redirects, encodings, feeds and sitemaps.
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assessContact, functionOf, seniorityOf } from '../src/research/assess.js';
import { type CrawlSettings, crawlSite } from '../src/research/crawl.js';
import { buildDossier } from '../src/research/dossier.js';
import { extractFeed, extractPage, extractSitemap } from '../src/research/extract.js';
import { uid } from './crm-support.js';
import { companySite, type Route, type SiteServer, startSiteServer } from './support/site-server.js';

let site: SiteServer;
beforeAll(async () => {
  site = await startSiteServer();
});
afterAll(async () => {
  await site?.close();
});

const settings = (over: Partial<CrawlSettings> = {}): CrawlSettings => ({
  siteUrlTemplate: site.template,
  userAgent: 'OutboundResearchBot/1.0 (+test)',
  allowPrivate: true,
  allowedTargets: new Set(),
  requestTimeoutMs: 2000,
  maxPageBytes: 512 * 1024,
  budgetMs: 20_000,
  ...over,
});

function mkSite(overrides: Record<string, Route | undefined> = {}, base: 'acme' | 'none' = 'acme'): string {
  const domain = `${uid('site')}.example`;
  const routes: Record<string, Route> = base === 'acme' ? { ...companySite(domain, site.origin) } : {};
  for (const [p, r] of Object.entries(overrides)) {
    if (r === undefined) delete routes[p];
    else routes[p] = r;
  }
  site.site(domain, routes);
  return domain;
}
const html = (body: string, head = '') => `<!doctype html><html><head><meta charset="utf-8">${head}</head><body>${body}</body></html>`;

describe('crawlSite', () => {
  it('fetches a few pages at a time, never more than four at once', async () => {
    const domain = mkSite();
    const slow = companySite(domain, site.origin);
    site.site(domain, Object.fromEntries(Object.entries(slow).map(([p, r]) => [p, { ...r, delayMs: 80 }])));
    const c = await crawlSite(domain, settings());
    expect(c.pages).toHaveLength(8);
    expect(site.maxInFlight(domain)).toBeGreaterThan(1);
    expect(site.maxInFlight(domain)).toBeLessThanOrEqual(4);
  });

  it('stops at the run deadline: what is still out is cut off and recorded', async () => {
    const domain = mkSite({
      '/about': { hang: true },
      '/careers': { hang: true },
      '/': { ...companySite('x', site.origin)['/'], delayMs: 0 },
    });
    site.site(domain, { ...companySite(domain, site.origin), '/about': { hang: true }, '/careers': { hang: true } });
    const c = await crawlSite(domain, settings({ requestTimeoutMs: 10_000, budgetMs: 1200 }));
    expect(c.durationMs).toBeLessThan(5000);
    const reasons = Object.fromEntries(c.skipped.map((s) => [s.url.split(`/sites/${domain}`)[1], s.reason]));
    expect(reasons['/about']).toMatch(/^no complete answer within/);
    expect(reasons['/careers']).toMatch(/^no complete answer within/);
    expect(c.pages.map((p) => p.kind)).toEqual(expect.arrayContaining(['home', 'product']));
  });

  it('never connects to a site whose name resolves to a private address (guard on)', async () => {
    const domain = mkSite();
    const c = await crawlSite(
      domain,
      settings({
        siteUrlTemplate: `http://{domain}:${site.port}/sites/{domain}`,
        allowPrivate: false,
        allowedTargets: new Set([`127.0.0.1:${site.port}`]),
        lookup: async () => [{ address: '10.0.0.5', family: 4 }],
      }),
    );
    expect(site.paths(domain)).toEqual([]);
    expect(c.robots).toEqual({
      state: 'unreachable',
      detail: `robots.txt could not be read (refused: ${domain} resolves to 10.0.0.5, which is a private address): no page is fetched (RFC 9309)`,
    });
    expect(c.pages).toEqual([]);
  });

  it('honours Crawl-delay by spacing its requests', async () => {
    const domain = mkSite({ '/robots.txt': { headers: { 'content-type': 'text/plain' }, body: 'User-agent: *\nCrawl-delay: 0.3\n' } });
    await crawlSite(domain, settings());
    const times = site
      .requests(domain)
      .filter((r) => r.path !== '/robots.txt')
      .map((r) => r.at);
    // Measured where the requests arrive: one request delayed in transit shortens the gap after it
    // (on a loaded machine by tens of milliseconds), so each gap is held to half the delay and the
    // whole span, which jitter cannot shorten by more than one delay's share, to the full spacing.
    expect(times.length).toBeGreaterThan(2);
    for (let i = 1; i < times.length; i += 1) expect(times[i] - times[i - 1]).toBeGreaterThanOrEqual(150);
    expect(times[times.length - 1] - times[0]).toBeGreaterThanOrEqual((times.length - 1) * 300 - 100);
  });

  it('follows at most five redirects, reads gzip and declared charsets, and refuses what leaves the site', async () => {
    const hops: Record<string, Route> = {};
    for (let i = 0; i < 7; i += 1) hops[`/r${i}`] = { status: 302, headers: { location: `/sites/DOMAIN/r${i + 1}` } };
    const domain = `${uid('site')}.example`;
    const routes = companySite(domain, site.origin);
    for (const [p, r] of Object.entries(hops)) routes[p] = { ...r, headers: { location: r.headers!.location.replace('DOMAIN', domain) } };
    routes['/about'] = { status: 301, headers: { location: `/sites/${domain}/r0` } };
    routes['/products'] = {
      headers: { 'content-type': 'text/html; charset=iso-8859-1', 'content-encoding': 'gzip' },
      body: zlib.gzipSync(
        Buffer.from(
          html('<main><h1>Roadrunner launch vehicle for Zürich</h1><p>Built in Zürich since 2015 by our team of 30 engineers.</p></main>'),
          'latin1',
        ),
      ),
    };
    routes['/customers'] = { status: 302, headers: { location: `${site.origin}/sites/elsewhere.example/customers` } };
    site.site(domain, routes);
    const c = await crawlSite(domain, settings());
    const reasons = Object.fromEntries(c.skipped.map((s) => [s.url.split(`/sites/${domain}`)[1], s.reason]));
    expect(reasons['/about']).toBe('more than 5 redirects');
    expect(reasons['/customers']).toBe(`redirected off the site to ${site.origin}/sites/elsewhere.example/customers`);
    const product = c.pages.find((p) => p.kind === 'product')!;
    expect(product.page.blocks).toContain('Built in Zürich since 2015 by our team of 30 engineers.');
  });

  it('finds pages and news through the sitemap when the home page links to neither them nor a feed', async () => {
    const domain = `${uid('site')}.example`;
    const base = `${site.origin}/sites/${domain}`;
    const recent = new Date(Date.now() - 10 * 86_400_000).toISOString();
    const old = new Date(Date.now() - 400 * 86_400_000).toISOString();
    site.site(domain, {
      '/robots.txt': { headers: { 'content-type': 'text/plain' }, body: `Sitemap: ${base}/sitemap-index.xml\n` },
      '/': { body: html('<main><h1>Beta Corp</h1><p>Beta Corp makes ledgers for small shops across Portugal and Spain.</p></main>') },
      '/sitemap-index.xml': {
        headers: { 'content-type': 'application/xml' },
        body: `<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap><loc>${base}/sitemap-pages.xml</loc></sitemap></sitemapindex>`,
      },
      '/sitemap-pages.xml': {
        headers: { 'content-type': 'text/xml' },
        body: `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
          <url><loc>${base}/about-us</loc></url><url><loc>${base}/jobs</loc></url>
          <url><loc>${base}/news/ledger-2</loc><lastmod>${recent}</lastmod></url>
          <url><loc>${base}/news/founding</loc><lastmod>${old}</lastmod></url></urlset>`,
      },
      '/about-us': { body: html('<main><p>Beta Corp was founded in 2019 in Porto by two accountants.</p></main>') },
      '/jobs': { body: html('<main><h2>Senior Backend Developer</h2></main>') },
      '/news/ledger-2': {
        body: html(
          '<article><h1>Beta launches Ledger 2</h1><p>Ledger 2 is now available to every shop in Spain.</p></article>',
          `<meta property="article:published_time" content="${recent}">`,
        ),
      },
    });
    const c = await crawlSite(domain, settings());
    expect(c.pages.map((p) => p.kind)).toEqual(['home', 'about', 'careers', 'article']);
    expect(site.paths(domain)).not.toContain('/news/founding');
    const d = buildDossier('r', { name: 'Beta Corp', domain }, c);
    expect(d.recentNews).toEqual([
      expect.objectContaining({
        kind: 'launch',
        title: 'Beta launches Ledger 2',
        source: expect.objectContaining({ snippet: 'Ledger 2 is now available to every shop in Spain.' }),
      }),
    ]);
    expect(d.facts).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ kind: 'founded', text: 'Beta Corp was founded in 2019 in Porto by two accountants.' }),
      ]),
    );
    expect(d.painPoints).toEqual([expect.objectContaining({ kind: 'hiring', text: 'Hiring: Senior Backend Developer' })]);
    expect(d.coverage).toMatchObject({ hasMinimumCoverage: true });
  });
});

describe('extractors', () => {
  it('read Atom and RSS 1.0 feeds, with dates and text of escaped HTML', () => {
    const atom = extractFeed(
      Buffer.from(`<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>x</title>
      <entry><title>Gamma raises seed round</title><link rel="alternate" href="/p/seed"/><link rel="self" href="/self"/>
        <published>2026-10-01T10:00:00Z</published><summary type="html">&lt;b&gt;Gamma&lt;/b&gt; raised $3M.</summary></entry></feed>`),
      'https://gamma.example/blog/',
    );
    expect(atom).toEqual([
      {
        title: 'Gamma raises seed round',
        url: 'https://gamma.example/p/seed',
        publishedAt: '2026-10-01T10:00:00.000Z',
        summary: 'Gamma raised $3M.',
      },
    ]);
    const rdf = extractFeed(
      Buffer.from(`<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">
      <item rdf:about="https://d.example/n/1"><title>Delta opens Berlin office</title><link>https://d.example/n/1</link><dc:date>2026-09-30</dc:date></item></rdf:RDF>`),
      'https://d.example/',
    );
    expect(rdf).toEqual([
      { title: 'Delta opens Berlin office', url: 'https://d.example/n/1', publishedAt: '2026-09-30T00:00:00.000Z', summary: null },
    ]);
    expect(extractFeed(Buffer.from('not xml at all <<<'), 'https://x.example/')).toEqual([]);
  });

  it('read sitemaps and sitemap indexes', () => {
    const m = extractSitemap(
      Buffer.from('<urlset><url><loc>/a</loc><lastmod>2026-01-02</lastmod></url><url><loc>javascript:x</loc></url></urlset>'),
      'https://s.example/',
    );
    expect(m).toEqual({ pages: [{ url: 'https://s.example/a', lastmod: '2026-01-02T00:00:00.000Z' }], sitemaps: [] });
  });

  it('keep text per block, drop chrome, scripts and contact details, and read JSON-LD in its variants', () => {
    const page = extractPage(
      Buffer.from(
        html(
          `
      <nav><a href="/a">A</a></nav><main><h1>Epsilon</h1><p>Epsilon ships <em>fast</em>
      payroll.</p><p>Write to jane@epsilon.example for a demo.</p><p>Call +44 20 7946 0958 today.</p><div>Cell one</div><div>Cell two</div>
      <script>var secret = "x";</script></main><footer>Footer text</footer>`,
          `<script type="application/ld+json">[{"@type":["Corporation"],"name":"Epsilon Ltd","numberOfEmployees":"51-200","address":"1 Main St, Leeds","foundingDate":"2011"}]</script>`,
        ),
      ),
      null,
      'https://e.example/',
    );
    expect(page.blocks).toEqual(['Epsilon', 'Epsilon ships fast payroll.', 'Cell one', 'Cell two']);
    expect(page.organization).toEqual({
      name: 'Epsilon Ltd',
      description: null,
      foundingDate: '2011',
      numberOfEmployees: '51-200',
      location: '1 Main St, Leeds',
      industry: null,
    });
  });
});

describe('assessContact', () => {
  it('reads seniority and function from titles', () => {
    const cases: Array<[string | null, string, string | null]> = [
      ['Chief Financial Officer', 'executive', 'finance'],
      ['Co-founder & CEO', 'executive', 'general_management'],
      ['SVP Sales', 'vp', 'sales'],
      ['Head of Data', 'director', 'data'],
      ['Engineering Manager', 'manager', 'engineering'],
      ['Senior Product Designer', 'senior', 'product'],
      ['Marketing Intern', 'entry', 'marketing'],
      ['Recruiter', 'individual_contributor', 'people'],
      [null, 'unknown', null],
      ['   ', 'unknown', null],
    ];
    for (const [title, seniority, fn] of cases) {
      expect(seniorityOf(title), String(title)).toBe(seniority);
      expect(functionOf(title), String(title)).toBe(fn);
    }
  });

  it('is deterministic and scores only what the dossier supports', async () => {
    const domain = mkSite();
    const c = await crawlSite(domain, settings());
    const now = new Date();
    const d = buildDossier('r', { name: 'Acme', domain }, c, now);
    const contact = { id: 'con_1', name: 'X', title: 'Propulsion Engineering Lead', fitScore: null, urgencyScore: null };
    const a1 = assessContact(contact, { id: 'cmp_1', name: 'Acme', researchUpdatedAt: now.toISOString() }, d, now);
    const a2 = assessContact(contact, { id: 'cmp_1', name: 'Acme', researchUpdatedAt: now.toISOString() }, d, now);
    expect(a2).toEqual(a1);
    expect(a1.contactAssessment).toMatchObject({ seniority: 'manager', function: 'engineering', decisionMaker: false });
    const empty = buildDossier('r', { name: 'Acme', domain }, { ...c, pages: [], feed: null }, now);
    const bare = assessContact(contact, { id: 'cmp_1', name: 'Acme', researchUpdatedAt: now.toISOString() }, empty, now);
    expect(bare.signalReasons).toEqual([]);
    expect(bare.contactAssessment).toMatchObject({ suggestedUrgencyScore: 10 });
  });
});
