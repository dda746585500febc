// The text a site repeats on its pages: a meta description every page shares, a tagline under the
// logo, a sidebar or a footer kept in the page text, a generic <title>. Such text says something
// about the site, never about one page, so it is no snippet for a page's fact (a news item's
// evidence would be the company tagline). A passage is boilerplate when two or more documents of
// the crawl carry it, compared normalised (Unicode NFKC, case, whitespace, surrounding quotes and
// closing punctuation). A listing that quotes another document counts as that document: an entry
// of the news index, a feed item and a link whose text is a news page's headline are that page's
// text, so an article's headline and lead stay its own although the blog index and feed repeat them.
import { sentences } from '../platform/text.js';
import type { CrawlResult } from './crawl.js';

/** A text as compared across pages. */
export const normalise = (s: string): string =>
  s
    .normalize('NFKC')
    .toLowerCase()
    .replace(/\s+/g, ' ')
    .replace(/^[\s"'“”‘’«»]+|[\s"'“”‘’«».!?…:;,]+$/gu, '');

/** One document per URL (its fragment and a trailing slash ignored). */
export function documentKey(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname.replace(/\/+$/, '')}${u.search}`;
  } catch {
    return url;
  }
}

/** Whether a text is repeated across the crawl's documents (false for an empty one). */
export type Boilerplate = (text: string | null | undefined) => boolean;

export function siteBoilerplate(crawl: Pick<CrawlResult, 'pages' | 'feed'>): Boilerplate {
  const seenOn = new Map<string, Set<string>>();
  const add = (text: string | null | undefined, doc: string) => {
    if (!text) return;
    const n = normalise(text);
    if (!n) return;
    const docs = seenOn.get(n) ?? new Set<string>();
    seenOn.set(n, docs.add(doc));
  };
  const withSentences = (text: string | null | undefined): string[] => (text ? [text, ...sentences(text)] : []);

  const items = crawl.feed?.items ?? [];
  const news = new Set([
    ...items.map((a) => documentKey(a.url)),
    ...crawl.pages.flatMap((p) => p.page.articles.map((a) => documentKey(a.url))),
    ...crawl.pages.filter((p) => p.kind === 'article').map((p) => documentKey(p.url)),
  ]);
  for (const a of items) for (const t of [a.title, ...withSentences(a.summary)]) add(t, documentKey(a.url));
  for (const p of crawl.pages) {
    const own = documentKey(p.url);
    // What this page quotes of a news page: its listing's entries and its links to news pages.
    const quoted = new Map<string, string>();
    for (const a of p.page.articles) for (const t of [a.title, ...withSentences(a.summary)]) quoted.set(normalise(t), documentKey(a.url));
    for (const l of p.page.links) if (l.text && news.has(documentKey(l.url))) quoted.set(normalise(l.text), documentKey(l.url));
    const passages = [
      p.page.title,
      ...withSentences(p.page.description),
      ...p.page.headings,
      ...p.page.blocks.flatMap((b) => withSentences(b)),
    ];
    for (const t of passages) if (t) add(t, quoted.get(normalise(t)) ?? own);
  }
  return (text) => {
    if (!text) return false;
    return (seenOn.get(normalise(text))?.size ?? 0) >= 2;
  };
}
