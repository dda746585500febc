// robots.txt per RFC 9309, parsed by robots-parser, read once per site per research run. The site
// root (RESEARCH_SITE_URL_TEMPLATE) is treated as the site: the file is read at <root>/robots.txt
// and its paths are matched against a page's path below the root, so a test or staging site
// served under a path prefix behaves as the same site would at its own domain.
import { createRequire } from 'node:module';
import { type FetchPolicy, guardedGet } from './fetch.js';

interface Robot {
  isAllowed(url: string, ua?: string): boolean | undefined;
  getCrawlDelay(ua?: string): number | undefined;
  getSitemaps(): string[];
}
// A CommonJS module whose typings describe its export as a default export, which it is not.
const robotsParser = createRequire(import.meta.url)('robots-parser') as (url: string, contents: string) => Robot;

/** The product token site owners name in robots.txt to address this crawler. */
export const ROBOTS_TOKEN = 'OutboundResearchBot';
/** RFC 9309 asks crawlers to parse at least 500 KiB. */
const ROBOTS_MAX_BYTES = 512 * 1024;
/** A Crawl-delay longer than this is honoured as this (the run has a deadline anyway). */
const MAX_CRAWL_DELAY_MS = 10_000;
// Rules are evaluated on a root-relative path put on a fixed origin.
const VIRTUAL_ORIGIN = 'http://site.invalid';

export interface RobotsRules {
  /**
   * parsed: a 2xx answer was parsed; absent: 4xx (or too many redirects), everything allowed;
   * unreachable: 5xx, network failure, timeout or a refused address, nothing allowed.
   */
  state: 'parsed' | 'absent' | 'unreachable';
  url: string;
  detail: string;
  allows(url: string): boolean;
  sitemaps: string[];
  crawlDelayMs: number | null;
}

/** A URL's path (and query) relative to the site root path, always starting with `/`. */
export function rootRelative(u: URL, rootPath: string): string {
  const path =
    rootPath && (u.pathname === rootPath || u.pathname.startsWith(`${rootPath}/`)) ? u.pathname.slice(rootPath.length) : u.pathname;
  return `${path || '/'}${u.search}`;
}

export async function readRobots(origin: string, rootPath: string, policy: FetchPolicy): Promise<RobotsRules> {
  const url = `${origin}${rootPath}/robots.txt`;
  const r = await guardedGet(url, policy, { accept: 'text/plain, */*;q=0.5', truncate: true, maxBytes: ROBOTS_MAX_BYTES });
  const everything = (state: 'absent' | 'unreachable', detail: string): RobotsRules => ({
    state,
    url,
    detail,
    allows: () => state === 'absent',
    sitemaps: [],
    crawlDelayMs: null,
  });
  if (!r.ok) {
    if (r.reason === 'http-status' && r.status !== null && r.status >= 400 && r.status < 500) {
      return everything('absent', `robots.txt answered HTTP ${r.status}: every page may be fetched (RFC 9309)`);
    }
    if (r.reason === 'too-many-redirects') return everything('absent', `robots.txt redirected too often: treated as absent (RFC 9309)`);
    return everything('unreachable', `robots.txt could not be read (${r.detail}): no page is fetched (RFC 9309)`);
  }
  const robots = robotsParser(`${VIRTUAL_ORIGIN}/robots.txt`, r.body.toString('utf8'));
  const delay = robots.getCrawlDelay(ROBOTS_TOKEN);
  return {
    state: 'parsed',
    url,
    detail: 'robots.txt read',
    allows(pageUrl: string) {
      let u: URL;
      try {
        u = new URL(pageUrl);
      } catch {
        return false;
      }
      return robots.isAllowed(`${VIRTUAL_ORIGIN}${rootRelative(u, rootPath)}`, ROBOTS_TOKEN) !== false;
    },
    sitemaps: robots.getSitemaps().flatMap((s) => {
      try {
        return [new URL(s, url).toString()];
      } catch {
        return [];
      }
    }),
    crawlDelayMs: typeof delay === 'number' && delay > 0 ? Math.min(delay * 1000, MAX_CRAWL_DELAY_MS) : null,
  };
}

/** The page the crawler's User-Agent points site owners at (served at /research-bot). */
export function botPage(): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${ROBOTS_TOKEN}</title></head>
<body><h1>${ROBOTS_TOKEN}</h1>
<p>${ROBOTS_TOKEN} is the research crawler of a self-hosted outbound sales service. When a user of this
service asks for research on a company, it reads that company's own public website once: robots.txt,
the home page, a handful of pages such as about, products, customers, careers and news, and the feed
the site links to. It does not follow links off the site, submit forms, run scripts or log in.</p>
<h2>How it behaves</h2>
<ul><li>It reads robots.txt first and honours the rules for the product token <code>${ROBOTS_TOKEN}</code>
(or <code>*</code>), including <code>Crawl-delay</code>. A robots.txt answering 5xx, or one that cannot be reached, stops it fetching anything.</li>
<li>It makes at most a dozen requests per research run, a few at a time, each with a timeout and a size limit.</li>
<li>It never connects to private or internal network addresses.</li></ul>
<h2>How to stop it</h2>
<pre>User-agent: ${ROBOTS_TOKEN}
Disallow: /</pre>
</body></html>
`;
}
