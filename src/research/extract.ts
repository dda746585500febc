// What research reads out of a fetched document, with a real parser (cheerio over htmlparser2, in
// HTML mode for pages and XML mode for feeds and sitemaps); no regular expression ever runs over
// markup. htmlparser2 rather than cheerio's default parse5: it reads a 60 KB page in a twentieth
// of the time (0.35 ms against 7 ms here), which is what lets twenty research runs share the
// machine, and it is as forgiving of broken markup. The page's encoding is found the way a browser
// finds it (BOM, the HTTP charset, <meta charset>) by encoding-sniffer.
// Text is kept as the page shows it (block by block, whitespace collapsed), so every snippet taken
// from it is text that really is on the page; text the page hides from its readers is not read
// at all (hidden.ts: the usual carrier of words meant for a model). Sentences naming an email address or an
// international phone number are dropped here, so no dossier ever stores them.
import * as cheerio from 'cheerio';
import { decodeBuffer } from 'encoding-sniffer';
import { collapse } from '../platform/text.js';
import { removeHidden } from './hidden.js';

type CheerioAPI = ReturnType<typeof cheerio.load>;
/** The part of a parsed node (domhandler) the text walker reads. */
interface DomNode {
  type: string;
  name?: string;
  data?: string;
  children?: DomNode[];
  attribs?: Record<string, string>;
}

export interface Article {
  title: string;
  url: string;
  /** ISO date-time, or null when the item carries no readable date. */
  publishedAt: string | null;
  summary: string | null;
}

export interface Organization {
  name: string | null;
  description: string | null;
  foundingDate: string | null;
  numberOfEmployees: string | null;
  /** The most precise part of the address given (locality, else region, else country). */
  location: string | null;
  industry: string | null;
}

export interface ExtractedPage {
  title: string | null;
  /** The meta description, else the OpenGraph description (verbatim attribute text). */
  description: string | null;
  siteName: string | null;
  organization: Organization | null;
  /** When the page itself (an article) was published. */
  publishedAt: string | null;
  headings: string[];
  /** The main text, one entry per block (paragraph, list item, heading, cell). */
  blocks: string[];
  links: Array<{ url: string; text: string }>;
  /** RSS/Atom feeds the page links to. */
  feeds: string[];
  /** Dated entries of a blog or news index page. */
  articles: Article[];
}

const MAX_LINKS = 400;
const MAX_BLOCKS = 600;
const MAX_ARTICLES = 50;
const MAX_SITEMAP_ENTRIES = 5000;

const DROPPED =
  'script, style, noscript, template, svg, canvas, iframe, object, form, button, select, textarea, nav, footer, aside, dialog';
const BLOCK = new Set([
  'address',
  'article',
  'blockquote',
  'br',
  'dd',
  'details',
  'div',
  'dl',
  'dt',
  'figcaption',
  'figure',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'header',
  'hr',
  'li',
  'main',
  'ol',
  'p',
  'pre',
  'section',
  'summary',
  'table',
  'td',
  'th',
  'tr',
  'ul',
]);

const HTML_MODE = { xml: { xmlMode: false, decodeEntities: true } };

const EMAIL = /[^\s@<>()]+@[^\s@<>()]+\.[a-z]{2,}/i;
const PHONE = /(\+\d{1,3}[\s.-]?\(?\d{1,4}\)?[\s.-]?\d{2,4}[\s.-]?\d{2,6})|\b(phone|tel|fax|call us)\b\s*:?\s*\+?\(?\d/i;
/** Whether a text names a person's contact details (kept out of every dossier). */
export const hasContactDetails = (s: string): boolean => EMAIL.test(s) || PHONE.test(s);

/** An ISO date-time from a date text (ISO 8601, RFC 822 of RSS), or null when unreadable or implausible. */
export function parseDate(raw: string | null | undefined): string | null {
  if (!raw) return null;
  const t = Date.parse(raw.trim());
  if (Number.isNaN(t)) return null;
  const year = new Date(t).getUTCFullYear();
  if (year < 1990 || t > Date.now() + 2 * 86_400_000) return null;
  return new Date(t).toISOString();
}

const absolute = (href: string | undefined, base: string): string | null => {
  if (!href) return null;
  try {
    const u = new URL(href.trim(), base);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
    u.hash = '';
    return u.toString();
  } catch {
    return null;
  }
};

/** Text blocks of a subtree: a new block starts at every block-level element. */
function blocksOf(roots: DomNode[]): string[] {
  const out: string[] = [];
  let buf = '';
  const flush = () => {
    const t = collapse(buf);
    if (t.length >= 2 && !hasContactDetails(t)) out.push(t);
    buf = '';
  };
  const walk = (n: DomNode) => {
    if (out.length >= MAX_BLOCKS) return;
    if (n.type === 'text') {
      buf += n.data ?? '';
      return;
    }
    if (n.type !== 'tag' && n.type !== 'root') return;
    const block = n.name !== undefined && BLOCK.has(n.name);
    if (block) flush();
    for (const c of n.children ?? []) walk(c);
    if (block) flush();
  };
  roots.forEach(walk);
  flush();
  return out;
}

function str(v: unknown): string | null {
  if (typeof v === 'string' && v.trim()) return collapse(v);
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  return null;
}

/** JSON-LD nodes of the page (top-level, arrays and @graph flattened). */
function jsonLdNodes($: CheerioAPI): Record<string, unknown>[] {
  const nodes: Record<string, unknown>[] = [];
  const visit = (v: unknown, depth: number) => {
    if (depth > 4 || v === null || typeof v !== 'object') return;
    if (Array.isArray(v)) {
      for (const x of v) visit(x, depth + 1);
      return;
    }
    const o = v as Record<string, unknown>;
    nodes.push(o);
    if (Array.isArray(o['@graph'])) visit(o['@graph'], depth + 1);
  };
  $('script[type="application/ld+json"]').each((_, el) => {
    try {
      visit(JSON.parse($(el).text()), 0);
    } catch {
      /* a broken block is skipped */
    }
  });
  return nodes;
}

const typesOf = (o: Record<string, unknown>): string[] =>
  (Array.isArray(o['@type']) ? o['@type'] : [o['@type']]).filter((t): t is string => typeof t === 'string');

function organizationOf(nodes: Record<string, unknown>[]): Organization | null {
  const org = nodes.find((o) => typesOf(o).some((t) => /(Organization|Corporation|Business|Company)$/.test(t)));
  if (!org) return null;
  const employees = org.numberOfEmployees;
  const address = org.address;
  let location: string | null = null;
  if (typeof address === 'string') location = str(address);
  else if (address && typeof address === 'object' && !Array.isArray(address)) {
    const a = address as Record<string, unknown>;
    const country =
      a.addressCountry && typeof a.addressCountry === 'object' ? (a.addressCountry as Record<string, unknown>).name : a.addressCountry;
    // One value as the page gives it (the most precise), so the fact's snippet is verbatim.
    location = str(a.addressLocality) ?? str(a.addressRegion) ?? str(country);
  }
  return {
    name: str(org.name) ?? str(org.legalName),
    description: str(org.description),
    foundingDate: str(org.foundingDate),
    numberOfEmployees:
      employees && typeof employees === 'object'
        ? (str((employees as Record<string, unknown>).value) ?? str((employees as Record<string, unknown>).maxValue))
        : str(employees),
    location,
    industry: str(org.industry),
  };
}

/** A page's own publication date: article meta, JSON-LD of an article, or a <time> in its article. */
function publishedOf($: CheerioAPI, nodes: Record<string, unknown>[]): string | null {
  const meta = $('meta[property="article:published_time"], meta[name="article:published_time"], meta[itemprop="datePublished"]').attr(
    'content',
  );
  const article = nodes.find((o) => typesOf(o).some((t) => /(Article|BlogPosting|NewsArticle|PressRelease)$/.test(t)));
  const time = $('article time[datetime]').first().attr('datetime');
  return parseDate(meta) ?? parseDate(str(article?.datePublished)) ?? ($('article').length === 1 ? parseDate(time) : null);
}

/** Dated entries of an index page: each <article> with a link and a date. */
function articlesOf($: CheerioAPI, base: string): Article[] {
  const out: Article[] = [];
  $('article').each((_, el) => {
    if (out.length >= MAX_ARTICLES) return;
    const a = $(el);
    const link = a.find('h1 a[href], h2 a[href], h3 a[href], h4 a[href]').first();
    const anchor = link.length ? link : a.find('a[href]').first();
    const url = absolute(anchor.attr('href'), base);
    const heading = collapse(a.find('h1, h2, h3, h4').first().text()) || collapse(anchor.text());
    if (!url || !heading) return;
    const time = a.find('time').first();
    const summary = collapse(a.find('p').first().text());
    out.push({
      title: heading,
      url,
      publishedAt: parseDate(time.attr('datetime')) ?? parseDate(time.text()),
      summary: summary && !hasContactDetails(summary) ? summary : null,
    });
  });
  return out;
}

/** Everything research reads out of an HTML page. `charset` is the one the HTTP answer declared. */
export function extractPage(body: Buffer, charset: string | null, baseUrl: string): ExtractedPage {
  const $ = cheerio.load(decodeBuffer(body, { transportLayerEncodingLabel: charset ?? undefined }), HTML_MODE);
  const nodes = jsonLdNodes($);
  const meta = (sel: string) => {
    const v = $(sel).attr('content');
    return v && collapse(v) ? collapse(v) : null;
  };
  // Links first: a menu hidden until a script opens it still shows where the pages are.
  const links: ExtractedPage['links'] = [];
  const seen = new Set<string>();
  $('a[href]').each((_, el) => {
    if (links.length >= MAX_LINKS) return;
    const url = absolute($(el).attr('href'), baseUrl);
    if (!url || seen.has(url)) return;
    seen.add(url);
    links.push({ url, text: collapse($(el).text()) || collapse($(el).attr('title') ?? '') });
  });
  const feeds = $('link[rel~="alternate"]')
    .filter((_, el) => /^application\/(rss|atom)\+xml$/i.test($(el).attr('type') ?? ''))
    .map((_, el) => absolute($(el).attr('href'), baseUrl))
    .get()
    .filter((u): u is string => u !== null);
  removeHidden($);
  const articles = articlesOf($, baseUrl);
  const publishedAt = publishedOf($, nodes);
  const headings = $('h1, h2, h3')
    .map((_, el) => collapse($(el).text()))
    .get()
    .filter((h) => h.length > 1 && !hasContactDetails(h))
    .slice(0, 60);
  const title = collapse($('title').first().text()) || meta('meta[property="og:title"]');
  const description = meta('meta[name="description"]') ?? meta('meta[property="og:description"]');

  // The main text: the page's <main> (or its one article), else the body, without site chrome.
  $(DROPPED).remove();
  $('header')
    .filter((_, el) => $(el).find('nav, a').length > 3)
    .remove();
  const main = $('main, [role="main"]').first();
  const container = main.length ? main : $('article').length === 1 ? $('article') : $('body');
  return {
    title: title || null,
    description: description && !hasContactDetails(description) ? description : null,
    siteName: meta('meta[property="og:site_name"]'),
    organization: organizationOf(nodes),
    publishedAt,
    headings,
    blocks: blocksOf(container.toArray()),
    links,
    feeds,
    articles,
  };
}

const childText = (el: ReturnType<CheerioAPI>, ...names: string[]): string | null => {
  for (const name of names) {
    const c = el
      .children()
      .filter((_, x) => x.name?.toLowerCase() === name)
      .first();
    const t = collapse(c.text());
    if (t) return t;
  }
  return null;
};

/** Plain text of a feed field that may hold escaped HTML (what it hides, and its scripts, left out). */
const feedText = (s: string | null): string | null => {
  if (!s) return null;
  let t = s;
  if (s.includes('<')) {
    const $ = cheerio.load(s, HTML_MODE);
    removeHidden($);
    $(DROPPED).remove();
    t = collapse($.root().text());
  }
  return t && !hasContactDetails(t) ? t : null;
};

/** The items of an RSS 2.0, RSS 1.0 (RDF) or Atom feed. */
export function extractFeed(body: Buffer, baseUrl: string): Article[] {
  const $ = cheerio.load(body.toString('utf8'), { xml: true });
  const out: Article[] = [];
  $('item, entry').each((_, node) => {
    if (out.length >= MAX_ARTICLES) return;
    const el = $(node);
    const title = childText(el, 'title');
    const links = el.children().filter((_, x) => x.name?.toLowerCase() === 'link');
    const alternate = links
      .filter((_, x) => {
        const rel = x.attribs?.rel;
        return !rel || rel === 'alternate';
      })
      .first();
    const href = alternate.attr('href') ?? collapse(alternate.text()) ?? node.attribs?.['rdf:about'];
    const url = absolute(href || node.attribs?.['rdf:about'], baseUrl);
    if (!title || !url) return;
    out.push({
      title,
      url,
      publishedAt: parseDate(childText(el, 'pubdate', 'published', 'dc:date', 'updated')),
      summary: feedText(childText(el, 'description', 'summary', 'content')),
    });
  });
  return out;
}

/** The page URLs (with last modification) of a sitemap, and the child sitemaps of a sitemap index. */
export function extractSitemap(
  body: Buffer,
  baseUrl: string,
): { pages: Array<{ url: string; lastmod: string | null }>; sitemaps: string[] } {
  const $ = cheerio.load(body.toString('utf8'), { xml: true });
  const pages: Array<{ url: string; lastmod: string | null }> = [];
  $('url').each((_, node) => {
    if (pages.length >= MAX_SITEMAP_ENTRIES) return;
    const el = $(node);
    const url = absolute(childText(el, 'loc') ?? undefined, baseUrl);
    if (url) pages.push({ url, lastmod: parseDate(childText(el, 'lastmod')) });
  });
  const sitemaps = $('sitemap')
    .map((_, node) => absolute(childText($(node), 'loc') ?? undefined, baseUrl))
    .get()
    .filter((u): u is string => u !== null);
  return { pages, sitemaps };
}
