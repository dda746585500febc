// A company website server on loopback for research tests and the research bench. Sites live under
// /sites/<domain>/ (RESEARCH_SITE_URL_TEMPLATE=http://127.0.0.1:<port>/sites/{domain}); each is a
// realistic small company site (home with JSON-LD and OpenGraph, about, products, customers,
// careers, blog with dated posts, an RSS feed, robots.txt disallowing /private) whose paths a test
// can replace with misbehaviour: a redirect anywhere, a page over any size, a page that never
// answers, a 5xx, another content type. Every request is logged with its user agent.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Route {
  status?: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Never answer (the socket stays open until the client gives up). */
  hang?: boolean;
  /** Answer after this many ms. */
  delayMs?: number;
  /** Another answer for requests whose Host header names this host (without port). */
  hosts?: Record<string, Route>;
}

export interface SiteRequest {
  domain: string;
  path: string;
  userAgent: string;
  at: number;
}

export interface SiteServer {
  port: number;
  origin: string;
  template: string;
  /** Adds (or replaces) a site; returns its domain. */
  site(domain: string, routes: Record<string, Route>): string;
  requests(domain?: string): SiteRequest[];
  /** Paths requested of a site, in order. */
  paths(domain: string): string[];
  /** The most requests of a site that were open at once. */
  maxInFlight(domain: string): number;
  close(): Promise<void>;
}

export async function startSiteServer(opts: { latencyMs?: number } = {}): Promise<SiteServer> {
  const sites = new Map<string, Record<string, Route>>();
  const log: SiteRequest[] = [];
  const hanging = new Set<http.ServerResponse>();
  const inFlight = new Map<string, number>();
  const maxInFlight = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const m = /^\/sites\/([^/]+)(\/[^?]*)?(\?.*)?$/.exec(req.url ?? '');
    const domain = m?.[1] ?? '';
    inFlight.set(domain, (inFlight.get(domain) ?? 0) + 1);
    maxInFlight.set(domain, Math.max(maxInFlight.get(domain) ?? 0, inFlight.get(domain)!));
    res.on('close', () => inFlight.set(domain, inFlight.get(domain)! - 1));
    const path = m?.[2] ?? '/';
    log.push({ domain, path: `${path}${m?.[3] ?? ''}`, userAgent: req.headers['user-agent'] ?? '', at: Date.now() });
    const byPath = sites.get(domain)?.[path];
    const route = byPath?.hosts?.[(req.headers.host ?? '').replace(/:\d+$/, '')] ?? byPath;
    const answer = () => {
      if (!route) {
        res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not found</h1>');
        return;
      }
      if (route.hang) {
        hanging.add(res);
        res.on('close', () => hanging.delete(res));
        return;
      }
      res.writeHead(route.status ?? 200, { 'content-type': 'text/html; charset=utf-8', ...(route.headers ?? {}) });
      res.end(route.body ?? '');
    };
    const delay = (route?.delayMs ?? 0) + (opts.latencyMs ?? 0);
    if (delay > 0) setTimeout(answer, delay);
    else answer();
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const origin = `http://127.0.0.1:${port}`;
  return {
    port,
    origin,
    template: `${origin}/sites/{domain}`,
    site(domain, routes) {
      sites.set(domain, routes);
      return domain;
    },
    requests: (domain) => log.filter((r) => domain === undefined || r.domain === domain),
    paths: (domain) => log.filter((r) => r.domain === domain).map((r) => r.path),
    maxInFlight: (domain) => maxInFlight.get(domain) ?? 0,
    close: () =>
      new Promise<void>((r) => {
        for (const res of hanging) res.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const day = 86_400_000;
const isoDaysAgo = (n: number) => new Date(Date.now() - n * day).toISOString();
const rfc822DaysAgo = (n: number) => new Date(Date.now() - n * day).toUTCString();

/** Filler markup a real marketing page carries (navigation, inline styles and scripts, footer). */
function chrome(base: string, padBytes: number): { nav: string; footer: string; head: string } {
  const nav = `<header class="site-header"><nav><a href="${base}/">Home</a> <a href="${base}/about">About us</a> <a href="${base}/products">Products</a>
    <a href="${base}/customers">Customers</a> <a href="${base}/careers">Careers</a> <a href="${base}/blog">Blog</a>
    <a href="${base}/private/investors">Investors</a> <a href="https://twitter.example/acme">Twitter</a></nav></header>`;
  const footer = `<footer><p>Contact sales: sales@acme-rockets.example or +1 (512) 555-0100.</p><p>&copy; 2026 Acme Rockets Inc.</p></footer>`;
  const filler =
    padBytes > 0
      ? `<style>${'.c{margin:0 auto;padding:1rem;color:#123456}'.repeat(Math.ceil(padBytes / 2 / 44))}</style>` +
        `<script>window.__data=${JSON.stringify('x'.repeat(Math.floor(padBytes / 2)))};</script>`
      : '';
  return { nav, footer, head: filler };
}

/**
 * What a site built on one theme repeats on every page, in the page text itself (no <main>, so the
 * whole body is read): one meta description, a tagline under the logo, a sidebar widget before the
 * content, a footer of plain paragraphs; its posts also share one generic <title>. None of it is
 * news, and none of it may be the snippet of a page-specific fact.
 */
export const THEME_TEXT = {
  description: 'Acme Rockets: the reusable launch company for small satellite operators.',
  tagline: 'Orbit for everyone, every week.',
  widgetHeading: 'Fly with Acme',
  widget: 'Acme Rockets has flown more than 40 customers to orbit since 2015.',
  footer: 'Acme Rockets, reusable rockets made in Austin, Texas.',
  postTitle: 'Acme Rockets blog',
} as const;

type Theme = 'plain' | 'shared';

const themedPage = (
  title: string,
  description: string | null,
  base: string,
  padBytes: number,
  main: string,
  extraHead = '',
  theme: Theme = 'plain',
) => {
  const c = chrome(base, padBytes);
  if (theme === 'shared') {
    const t = THEME_TEXT;
    return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title>
<meta name="description" content="${t.description}"><meta property="og:description" content="${t.description}">${extraHead}${c.head}</head>
<body>${c.nav}<div class="brand"><a href="${base}/">Acme Rockets</a><p class="tagline">${t.tagline}</p></div>
<div class="sidebar"><div class="widget"><h3>${t.widgetHeading}</h3><p>${t.widget}</p></div></div>
<div class="content">${main}</div><div class="site-footer"><p>${t.footer}</p></div>${c.footer}</body></html>`;
  }
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title>
${description ? `<meta name="description" content="${description}">` : ''}${extraHead}${c.head}</head>
<body>${c.nav}<main>${main}</main>${c.footer}</body></html>`;
};

/**
 * The routes of a realistic small company site for `domain` (paths relative to the site root).
 * `padBytes` makes each HTML page about that much larger, as real pages are; `theme: 'shared'`
 * builds it on one theme whose text every page repeats (THEME_TEXT), gives the feed's Lisbon item
 * the site's description instead of its own, and quotes an article where listings do (its
 * headline as a link on the home page, its lead as the blog index's excerpt), which is no repetition.
 */
export function companySite(domain: string, origin: string, opts: { padBytes?: number; theme?: Theme } = {}): Record<string, Route> {
  const base = `${origin}/sites/${domain}`;
  const pad = opts.padBytes ?? 0;
  const theme = opts.theme ?? 'plain';
  const shared = theme === 'shared';
  const page = (title: string, description: string | null, b: string, p: number, main: string, extraHead = '') =>
    themedPage(title, description, b, p, main, extraHead, theme);
  const jsonLd = JSON.stringify({
    '@context': 'https://schema.org',
    '@graph': [
      {
        '@type': 'Organization',
        name: 'Acme Rockets',
        url: `${base}/`,
        foundingDate: '2015',
        description: 'Acme Rockets builds reusable launch vehicles for small satellite operators.',
        numberOfEmployees: { '@type': 'QuantitativeValue', value: 120 },
        address: { '@type': 'PostalAddress', addressLocality: 'Austin', addressRegion: 'TX', addressCountry: 'US' },
      },
      { '@type': 'WebSite', name: 'Acme Rockets', url: `${base}/` },
    ],
  });
  const home = page(
    'Acme Rockets | Reusable rockets for small satellites',
    'Acme Rockets launches small satellites to orbit on reusable rockets, every week.',
    base,
    pad,
    `
    <section class="hero"><h1>Orbit, every week</h1>
      <p>Acme Rockets launches small satellites on reusable rockets from Texas. More than 40 customers have flown with us since our first launch.</p></section>
    <section><h2>Why teams choose Acme</h2><ul><li>Weekly launch windows</li><li>Rideshare pricing from $1M</li><li>Mission support from integration to orbit</li></ul></section>
    <section><h2>Latest news</h2><p>${
      shared
        ? `<a href="${base}/blog/series-b">Acme raises $40M Series B</a>`
        : 'Acme raises $40M Series B to build its second launch site.'
    }</p></section>`,
    `<meta property="og:title" content="Acme Rockets"><meta property="og:site_name" content="Acme Rockets">
   <meta property="og:description" content="Reusable rockets for small satellite operators.">
   <link rel="alternate" type="application/rss+xml" title="Acme news" href="${base}/feed.xml">
   <script type="application/ld+json">${jsonLd}</script>`,
  );
  const about = page(
    'About Acme Rockets',
    'The story of Acme Rockets.',
    base,
    pad,
    `
    <h1>About us</h1>
    <p>Acme Rockets was founded in 2015 by two propulsion engineers. We are headquartered in Austin, Texas.</p>
    <p>Today 120 employees design, build and fly our Roadrunner rocket.</p>
    <p>As we grow, scheduling integration across three sites has become our biggest bottleneck.</p>
    <h2>Leadership</h2><p>Wile E. Coyote, Chief Executive Officer</p>`,
  );
  const products = page(
    'Roadrunner launch vehicle',
    'Roadrunner puts 500 kg into low Earth orbit.',
    base,
    pad,
    `
    <h1>Roadrunner launch vehicle</h1><p>Roadrunner puts 500 kg into low Earth orbit and lands for reuse.</p>
    <h2>Dedicated launches for constellation operators</h2><p>Book a whole rocket for your orbital plane.</p>
    <h2>Rideshare missions every week</h2><p>Share a ride with up to twelve other satellites.</p>`,
  );
  const customers = page(
    'Customers',
    null,
    base,
    pad,
    `
    <h1>Customers</h1><p>Trusted by 40 satellite operators, from university cubesat teams to national agencies.</p>`,
  );
  const careers = page(
    'Careers at Acme',
    'Join the team.',
    base,
    pad,
    `
    <h1>Careers</h1><p>We're hiring across engineering and operations as we prepare our second launch site.</p>
    <h2>Open roles</h2><ul><li>Senior Propulsion Engineer</li><li>Launch Operations Manager</li><li>Account Executive, Government</li></ul>`,
  );
  const SERIES_B_LEAD = 'Acme raises $40M Series B led by Orbital Ventures to build a second launch site.';
  // A themed post is a plain <div> under the generic title, as many blog themes write it.
  const post = (title: string, daysAgo: number, text: string) =>
    page(
      shared ? THEME_TEXT.postTitle : title,
      text,
      base,
      pad,
      shared
        ? `
    <div class="post"><h1>${title}</h1><p class="meta">Posted ${daysAgo} days ago</p><p>${text}</p></div>`
        : `
    <article><h1>${title}</h1><time datetime="${isoDaysAgo(daysAgo)}">${daysAgo} days ago</time><p>${text}</p></article>`,
      `<meta property="article:published_time" content="${isoDaysAgo(daysAgo)}">`,
    );
  const blog = page(
    'Acme blog',
    'News from Acme Rockets.',
    base,
    pad,
    `
    <h1>Blog</h1>
    <article><h2><a href="${base}/blog/series-b">Acme raises $40M Series B</a></h2><time datetime="${isoDaysAgo(12)}"></time><p>${
      shared ? SERIES_B_LEAD : 'Funding for a second launch site.'
    }</p></article>
    <article><h2><a href="${base}/blog/roadrunner-2">Introducing Roadrunner 2</a></h2><time datetime="${isoDaysAgo(40)}"></time><p>A bigger fairing and faster turnaround.</p></article>
    <article><h2><a href="${base}/blog/first-launch">Our first launch</a></h2><time datetime="${isoDaysAgo(900)}"></time><p>Where it all began.</p></article>`,
  );
  const feed = `<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>Acme news</title><link>${base}/</link>
    <item><title>Acme raises $40M Series B</title><link>${base}/blog/series-b</link><pubDate>${rfc822DaysAgo(12)}</pubDate>
      <description>Acme raises $40M Series B led by Orbital Ventures to build a second launch site.</description></item>
    <item><title>Introducing Roadrunner 2</title><link>${base}/blog/roadrunner-2</link><pubDate>${rfc822DaysAgo(40)}</pubDate>
      <description>&lt;p&gt;Roadrunner 2 launches with a bigger fairing and a 48-hour turnaround.&lt;/p&gt;</description></item>
    <item><title>Acme names Ada Lovelace as Chief Technology Officer</title><link>${base}/blog/new-cto</link><pubDate>${rfc822DaysAgo(20)}</pubDate>
      <description>Ada Lovelace joins Acme as Chief Technology Officer from Analytical Engines.</description></item>
    <item><title>Acme opens a new office in Lisbon</title><link>${base}/blog/lisbon</link><pubDate>${rfc822DaysAgo(70)}</pubDate>
      <description>${shared ? THEME_TEXT.description : 'Acme opens a new office in Lisbon to serve European operators.'}</description></item>
    <item><title>Our first launch</title><link>${base}/blog/first-launch</link><pubDate>${rfc822DaysAgo(900)}</pubDate>
      <description>Where it all began.</description></item>
  </channel></rss>`;
  return {
    '/robots.txt': {
      headers: { 'content-type': 'text/plain' },
      body: `User-agent: *\nDisallow: /private\n\nSitemap: ${base}/sitemap.xml\n`,
    },
    '/': { body: home },
    '/about': { body: about },
    '/products': { body: products },
    '/customers': { body: customers },
    '/careers': { body: careers },
    '/blog': { body: blog },
    '/blog/series-b': {
      body: post('Acme raises $40M Series B', 12, SERIES_B_LEAD),
    },
    '/blog/roadrunner-2': {
      body: post('Introducing Roadrunner 2', 40, 'Roadrunner 2 launches with a bigger fairing and a 48-hour turnaround.'),
    },
    '/blog/new-cto': {
      body: post(
        'Acme names Ada Lovelace as Chief Technology Officer',
        20,
        'Ada Lovelace joins Acme as Chief Technology Officer from Analytical Engines.',
      ),
    },
    '/blog/lisbon': {
      body: post('Acme opens a new office in Lisbon', 70, 'Acme opens a new office in Lisbon to serve European operators.'),
    },
    '/private/investors': { body: page('Investors', null, base, pad, '<h1>Investor relations</h1><p>Confidential.</p>') },
    '/feed.xml': { headers: { 'content-type': 'application/rss+xml; charset=utf-8' }, body: feed },
  };
}
