// One research crawl of a company's site, as a polite crawler makes it: robots.txt first, then the
// home page, then a handful of same-site pages that matter for sales (about, product, customers,
// careers, news) found among the home page's links (or the sitemap), the feed the site links to
// (or the sitemap's dated news pages), and the newest news articles. A few requests at a time,
// spaced by the site's Crawl-delay, all within one deadline. Nothing here throws for a site that
// misbehaves: what could not be fetched is recorded with its reason.
import pLimit from 'p-limit';
import type { Lookup } from '../net/address.js';
import { type Article, type ExtractedPage, extractFeed, extractPage, extractSitemap } from './extract.js';
import { closeAgents, type Fetched, type FetchPolicy, guardedGet, runAgents } from './fetch.js';
import { type RobotsRules, readRobots, rootRelative } from './robots.js';

export type PageKind = 'home' | 'about' | 'product' | 'customers' | 'careers' | 'news' | 'article';

export interface CrawledPage {
  url: string;
  kind: PageKind;
  fetchedAt: Date;
  page: ExtractedPage;
}

export interface CrawlResult {
  root: string;
  robots: { state: RobotsRules['state']; detail: string };
  /** Fetched pages, home first, then in the order of PAGE_KINDS. */
  pages: CrawledPage[];
  feed: { url: string; fetchedAt: Date; items: Article[] } | null;
  /** Why the home page could not be used, or null when it was. */
  homeError: string | null;
  skipped: Array<{ url: string; reason: string }>;
  requests: number;
  durationMs: number;
}

export interface CrawlSettings {
  siteUrlTemplate: string;
  userAgent: string;
  allowPrivate: boolean;
  allowedTargets: ReadonlySet<string>;
  requestTimeoutMs: number;
  maxPageBytes: number;
  /** How long the whole crawl may take. */
  budgetMs: number;
  lookup?: Lookup;
}

/** Pages per kind searched for, in the order their facts are worth most for a sales email. */
const PAGE_KINDS: Array<[Exclude<PageKind, 'home' | 'article'>, RegExp]> = [
  ['about', /^(about|about-?us|company|who-?we-?are|our-?story|mission|story)$/],
  ['product', /^(products?|platform|solutions?|features|services|pricing|how-?it-?works)$/],
  ['customers', /^(customers?|case-?stud(y|ies)|clients|testimonials|success-?stories|stories)$/],
  ['careers', /^(careers?|jobs|join-?us|join-?the-?team|hiring|work-?with-?us|open-?(roles|positions))$/],
  ['news', /^(blog|news|press|newsroom|media|updates|announcements|press-?releases|insights)$/],
];
/** Newest news articles fetched as pages of their own (their text is then quotable). */
const MAX_ARTICLE_PAGES = 2;
const CONCURRENCY = 4;
const MAX_REDIRECTS = 5;
export const NEWS_WINDOW_DAYS = 183;

const HTML = (mime: string) => mime === 'text/html' || mime === 'application/xhtml+xml';
const XML = (mime: string) => /^(application|text)\/([\w.+-]+\+)?xml$/.test(mime);
const ACCEPT_HTML = 'text/html, application/xhtml+xml;q=0.9';
const ACCEPT_XML = 'application/rss+xml, application/atom+xml, application/xml;q=0.9, text/xml;q=0.8';

/** The root of a company's site for a normalized domain. */
export const siteRoot = (template: string, domain: string): URL => new URL(template.replaceAll('{domain}', domain));

export async function crawlSite(domain: string, s: CrawlSettings): Promise<CrawlResult> {
  const started = Date.now();
  const root = siteRoot(s.siteUrlTemplate, domain);
  const rootPath = root.pathname.replace(/\/+$/, '');
  const home = `${root.origin}${rootPath}/`;
  const agents = runAgents(CONCURRENCY);
  const policy: FetchPolicy = {
    userAgent: s.userAgent,
    allowPrivate: s.allowPrivate,
    guard: { exempt: s.allowedTargets, lookup: s.lookup },
    timeoutMs: s.requestTimeoutMs,
    maxBytes: s.maxPageBytes,
    maxRedirects: MAX_REDIRECTS,
    deadline: started + s.budgetMs,
    agents,
  };
  const skipped: CrawlResult['skipped'] = [];
  let requests = 0;
  // The site is the root's origin and path; a home page that redirects to another host of the
  // same domain (www.) makes that host part of the site too.
  const origins = new Set([root.origin]);
  const sameSite = (url: string) => {
    try {
      const u = new URL(url);
      return origins.has(u.origin) && (rootPath === '' || u.pathname === rootPath || u.pathname.startsWith(`${rootPath}/`));
    } catch {
      return false;
    }
  };

  const robotsByOrigin = new Map<string, Promise<RobotsRules>>();
  const robotsFor = (url: string) => {
    const origin = new URL(url).origin;
    let r = robotsByOrigin.get(origin);
    if (!r) {
      requests += 1;
      r = readRobots(origin, rootPath, policy);
      robotsByOrigin.set(origin, r);
    }
    return r;
  };
  // One queue for every request of the run: bounded concurrency, spaced by Crawl-delay.
  const limit = pLimit(CONCURRENCY);
  let nextSlot = 0;
  const fetchAllowed = async (url: string, accept: string, acceptType: (m: string) => boolean): Promise<Fetched | null> => {
    const robots = await robotsFor(url);
    if (!robots.allows(url)) {
      skipped.push({ url, reason: robots.state === 'unreachable' ? robots.detail : 'disallowed by robots.txt' });
      return null;
    }
    return limit(async () => {
      if (robots.crawlDelayMs !== null) {
        const wait = nextSlot - Date.now();
        nextSlot = Math.max(Date.now(), nextSlot) + robots.crawlDelayMs;
        if (wait > 0) {
          if (Date.now() + wait >= policy.deadline) {
            skipped.push({ url, reason: 'not fetched: Crawl-delay leaves no time within the run' });
            return null;
          }
          await new Promise((r) => setTimeout(r, wait));
        }
      }
      requests += 1;
      // Redirects stay on the site; the home page may also move to another host of the domain (www.).
      const followRedirect = (to: string) => sameSite(to) || (url === home && sameDomainHost(new URL(to), domain));
      const r = await guardedGet(url, policy, { accept, acceptType, followRedirect });
      if (!r.ok) skipped.push({ url, reason: r.detail });
      return r.ok ? r : null;
    });
  };
  const fetchPage = async (url: string, kind: PageKind): Promise<CrawledPage | null> => {
    const r = await fetchAllowed(url, ACCEPT_HTML, HTML);
    if (!r) return null;
    if (kind === 'home') origins.add(new URL(r.finalUrl).origin);
    try {
      return { url: r.finalUrl, kind, fetchedAt: r.fetchedAt, page: extractPage(r.body, r.charset, r.finalUrl) };
    } catch (e) {
      skipped.push({ url, reason: `unreadable HTML: ${(e as Error).message}` });
      return null;
    }
  };
  const fetchXml = async <T>(url: string, read: (r: Fetched) => T): Promise<{ r: Fetched; value: T } | null> => {
    const r = await fetchAllowed(url, ACCEPT_XML, XML);
    if (!r) return null;
    try {
      return { r, value: read(r) };
    } catch (e) {
      skipped.push({ url, reason: `unreadable XML: ${(e as Error).message}` });
      return null;
    }
  };

  try {
    const homePage = await fetchPage(home, 'home');
    const robots = await robotsFor(home);
    const pages: CrawledPage[] = homePage ? [homePage] : [];
    const links = (homePage?.page.links ?? []).filter((l) => sameSite(l.url));

    // Candidates from the home page's links; the sitemap fills kinds the home page does not link to.
    const chosen = new Map<PageKind, string>();
    const pick = (cands: Array<{ url: string; text: string }>) => {
      for (const [kind, re] of PAGE_KINDS) {
        if (chosen.has(kind)) continue;
        const hit = cands
          .filter((c) => c.url !== home && !c.url.startsWith(`${home}#`))
          .map((c) => ({ c, segs: rootRelative(new URL(c.url), rootPath).split('?')[0].split('/').filter(Boolean) }))
          // A section's own page: /about or /company/about, but the news index only (/blog, not /blog/post).
          .filter(
            ({ c, segs }) =>
              (segs.length > 0 && segs.length <= (kind === 'news' ? 1 : 2) && re.test(segs[0].toLowerCase())) ||
              re.test(c.text.toLowerCase().replace(/\s+/g, '-')),
          )
          .sort((a, b) => a.segs.length - b.segs.length)[0];
        if (hit) chosen.set(kind, hit.c.url);
      }
    };
    pick(links);
    let sitemapPages: Array<{ url: string; lastmod: string | null }> = [];
    const feedUrl = homePage?.page.feeds.find(sameSite) ?? null;
    if (chosen.size < 3 || !feedUrl) {
      const candidates = [...robots.sitemaps.filter(sameSite), `${root.origin}${rootPath}/sitemap.xml`];
      const map = await fetchXml(candidates[0], (r) => extractSitemap(r.body, r.finalUrl));
      let entries = map?.value.pages ?? [];
      const child = map?.value.sitemaps.find(sameSite);
      if (entries.length === 0 && child) entries = (await fetchXml(child, (r) => extractSitemap(r.body, r.finalUrl)))?.value.pages ?? [];
      sitemapPages = entries.filter((e) => sameSite(e.url));
      pick(sitemapPages.map((e) => ({ url: e.url, text: '' })));
    }

    const [kindPages, feed] = await Promise.all([
      Promise.all([...chosen].map(([kind, url]) => fetchPage(url, kind))),
      feedUrl ? fetchXml(feedUrl, (r) => extractFeed(r.body, r.finalUrl)) : Promise.resolve(null),
    ]);
    for (const p of kindPages) if (p) pages.push(p);

    // News without a feed: the dated entries of the news index, else the sitemap's news pages.
    const newsIndex = pages.find((p) => p.kind === 'news');
    const recentCut = Date.now() - NEWS_WINDOW_DAYS * 86_400_000;
    const sitemapNews: Article[] = feed
      ? []
      : sitemapPages
          .filter(
            (e) =>
              e.lastmod !== null &&
              Date.parse(e.lastmod) >= recentCut &&
              /\/(blog|news|press)/i.test(new URL(e.url).pathname) &&
              !pages.some((p) => p.url === e.url),
          )
          .map((e) => ({ title: '', url: e.url, publishedAt: e.lastmod, summary: null }));
    const dated = [...(feed?.value ?? []), ...(newsIndex?.page.articles ?? []), ...sitemapNews]
      .filter(
        (a) => a.publishedAt !== null && Date.parse(a.publishedAt) >= recentCut && sameSite(a.url) && !pages.some((p) => p.url === a.url),
      )
      .sort((a, b) => Date.parse(b.publishedAt!) - Date.parse(a.publishedAt!));
    const articleUrls = [...new Set(dated.map((a) => a.url))].slice(0, MAX_ARTICLE_PAGES);
    for (const p of await Promise.all(articleUrls.map((u) => fetchPage(u, 'article')))) if (p) pages.push(p);

    return {
      root: `${root.origin}${rootPath}`,
      robots: { state: robots.state, detail: robots.detail },
      pages,
      feed: feed ? { url: feed.r.finalUrl, fetchedAt: feed.r.fetchedAt, items: feed.value } : null,
      homeError: homePage ? null : (skipped.find((x) => x.url === home)?.reason ?? 'not fetched'),
      skipped,
      requests,
      durationMs: Date.now() - started,
    };
  } finally {
    closeAgents(agents);
  }
}

/** Whether a host is the domain itself or a subdomain of it (www.acme.com for acme.com). */
function sameDomainHost(u: URL, domain: string): boolean {
  const h = u.hostname.toLowerCase();
  return h === domain || h.endsWith(`.${domain}`);
}
