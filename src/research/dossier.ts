// A company dossier from one crawl: the ordered source list (a draft citation's sourceIndex is a
// 1-based index into it), facts, recent news and pain points, each citing its source with a
// snippet copied verbatim from that source. Nothing here invents a fact: every entry is a sentence,
// heading, description or structured-data value of a fetched page or feed item. A snippet is the
// text that states its fact (a news item's headline or lead sentence), never text the site repeats
// on its pages (src/research/boilerplate.ts): that describes the company, so it is cited only from
// the home page and only for what the company states about itself.

import { sentences } from '../platform/text.js';
import { type Boilerplate, documentKey, normalise, siteBoilerplate } from './boilerplate.js';
import { type CrawledPage, type CrawlResult, NEWS_WINDOW_DAYS } from './crawl.js';
import { type Article, hasContactDetails } from './extract.js';
import { withoutSuspicious } from './suspicious.js';

export type Source = {
  url: string;
  title: string;
  domain: string;
  /**
   * Text that is on the source and only there: an article's or feed item's news snippet, else the
   * page's own description, first substantial paragraph or first block (text the site repeats on
   * its pages only when the page has nothing else).
   */
  snippet: string;
  fetchedAt: string;
  kind: string;
  /** For a feed item: the feed it was read from (the snippet is the item's text there). */
  feedUrl?: string;
};

/** A source as a fact carries it: the fact's own supporting text as the snippet. */
export type FactSource = Pick<Source, 'url' | 'title' | 'domain' | 'snippet' | 'fetchedAt'>;

export type Fact = {
  kind: string;
  text: string;
  /** 1-based index into researchSources. */
  sourceIndex: number;
  source: FactSource;
  publishedAt?: string | null;
};

export type NewsItem = Fact & { title: string; url: string; publishedAt: string };

export type Coverage = {
  pagesFetched: number;
  feedItems: number;
  requests: number;
  durationMs: number;
  robots: CrawlResult['robots']['state'];
  hasMinimumCoverage: boolean;
  lowConfidence: boolean;
  /** Why confidence is low, and what could not be fetched. */
  notes: string[];
  skipped: Array<{ url: string; reason: string }>;
};

export type Dossier = {
  version: 1;
  runId: string;
  root: string;
  summary: string | null;
  facts: Fact[];
  researchSources: Source[];
  recentNews: NewsItem[];
  painPoints: Fact[];
  coverage: Coverage;
};

const SNIPPET_MAX = 300;
const MAX_SOURCES = 24;
const MAX_NEWS = 10;
const MAX_PER_KIND = 4;
const MIN_FACTS_FOR_CONFIDENCE = 3;

/** The first SNIPPET_MAX characters of a text, cut at a word boundary (still a verbatim prefix). */
export function clip(text: string): string {
  if (text.length <= SNIPPET_MAX) return text;
  const cut = text.slice(0, SNIPPET_MAX);
  const space = cut.lastIndexOf(' ');
  return space > SNIPPET_MAX / 2 ? cut.slice(0, space) : cut;
}

// What a headline says happened (an event is only taken from a dated news item, so a rocket
// company's "we launch satellites" is not read as a product launch).
const EVENTS: Array<[string, RegExp]> = [
  [
    'funding',
    /\b(raise[sd]?|raising|closes?|closed|secures?|secured)\b.{0,80}\b(funding|round|series [a-h]|seed|investment|million|billion)\b|\bseries [a-h]\b|\bfunding round\b/i,
  ],
  [
    'launch',
    /\b(launch(es|ed|ing)?|introduc(es|ed|ing)|unveil(s|ed|ing)?|now available|general availability|announc(es|ed|ing) (the |a |an |our )?new)\b/i,
  ],
  [
    'leadership',
    /\b(appoint(s|ed|ment)?|joins? as|named|names)\b.{0,60}\b(chief|ceo|cto|cfo|coo|cmo|cro|cio|vp|vice president|head of|president)\b|\bnew (ceo|cto|cfo|coo|cmo|cro)\b/i,
  ],
  [
    'expansion',
    /\b(expand(s|ed|ing)?|expansion|opens? (a |an |its |our )?(new )?(office|hub|headquarters|location)|enter(s|ed|ing) (the )?[\w\s-]{0,30} market)\b/i,
  ],
  ['partnership', /\b(partner(s|ed|ing)? with|partnership)\b/i],
];
// What a sentence of the company's own pages states about it.
const STATEMENTS: Array<[string, RegExp]> = [
  ['customers', /\b\d[\d,.]*\s*(k|\+)?\s*(customers|clients|companies|teams|businesses|brands|users)\b|\b(trusted|used|loved) by\b/i],
  ['employees', /\b\d[\d,]*\+?\s+(employees|people|team members|staff|engineers|colleagues)\b/i],
  ['founded', /\b(founded|established|started)\b.{0,40}\b(19[5-9]\d|20[0-4]\d)\b|\bsince (19[5-9]\d|20[0-4]\d)\b/i],
  ['headquarters', /\b(headquartered|based|hq) in\b/i],
];
const CHALLENGE =
  /\b(struggl\w*|challeng\w*|pain points?|bottlenecks?|manual(ly)?|time-consuming|costly|inefficien\w*|legacy|fragmented|complexity|hard to|difficult to|slow(ed|er|s|ing)? (us )?down|churn|technical debt|outages?|backlogs?|scaling)\b/i;
const FIRST_PERSON = /\b(we|our|us)\b/i;
const HIRING_LINE = /\b(we('| a)re hiring|join our team|open (roles|positions)|now hiring)\b/i;
const ROLE =
  /\b(engineer|developer|designer|manager|director|head of|lead|vp|vice president|analyst|scientist|specialist|representative|executive|architect|consultant|coordinator|administrator|recruiter|marketer|writer|officer|intern|associate|sdr|bdr|strategist|partner manager|success)\b/i;

const classify = (classes: Array<[string, RegExp]>, text: string): string | null => classes.find(([, re]) => re.test(text))?.[0] ?? null;
const words = (s: string) => s.split(/\s+/).length;

/** The names and numbers of a headline: its words that carry a digit or open with a capital. */
const namesAndNumbers = (headline: string): string[] =>
  [...headline.matchAll(/[\p{Lu}\p{N}$€£][\p{L}\p{M}\p{N}$€£%.,'’-]*/gu)]
    .map((m) => normalise(m[0].replace(/['’]s$/u, '')))
    .filter((t) => t.length > 0);

/**
 * Whether a passage states a headline's news: it names at least one of the headline's names and
 * numbers, and each of them is in it or in the source's title (so a reader of the snippet and
 * title finds everything the headline says).
 */
function statesHeadline(passage: string, headline: string, title: string): boolean {
  const tokens = namesAndNumbers(headline);
  const p = normalise(passage);
  const t = normalise(title);
  return tokens.some((x) => p.includes(x)) && tokens.every((x) => p.includes(x) || t.includes(x));
}

/** A news item's snippet: the first candidate that is the item's own text and states the headline, else the headline itself. */
function newsSnippet(candidates: Array<string | null | undefined>, headline: string, title: string, boilerplate: Boilerplate): string {
  for (const c of candidates) {
    if (!c || boilerplate(c) || sentences(c).some(boilerplate)) continue;
    const clipped = clip(c);
    if (statesHeadline(clipped, headline, title)) return clipped;
  }
  return headline;
}

const hostOf = (url: string) => {
  try {
    return new URL(url).hostname;
  } catch {
    return '';
  }
};

export interface CompanyRef {
  name: string | null;
  domain: string;
}

export function buildDossier(runId: string, company: CompanyRef, fetched: CrawlResult, now = new Date()): Dossier {
  // Instruction-like passages (text aimed at an AI model) are never facts, snippets or titles.
  const { crawl, leftOut } = withoutSuspicious(fetched);
  const sources: Source[] = [];
  const indexOf = new Map<string, number>();
  const addSource = (s: Source): number => {
    const known = indexOf.get(s.url);
    if (known !== undefined) return known;
    if (sources.length >= MAX_SOURCES) return -1;
    sources.push({ ...s, snippet: clip(s.snippet) });
    indexOf.set(s.url, sources.length);
    return sources.length;
  };
  const facts: Fact[] = [];
  const painPoints: Fact[] = [];
  const seenText = new Set<string>();
  const perKind = new Map<string, number>();
  const push = (into: Fact[], kind: string, text: string, snippet: string, at: number, extra: Partial<Fact> = {}) => {
    if (at < 1 || !text || !snippet || hasContactDetails(snippet)) return;
    const key = `${into === painPoints ? 'p' : 'f'}:${text.toLowerCase()}`;
    if (seenText.has(key) || (perKind.get(`${key[0]}${kind}`) ?? 0) >= MAX_PER_KIND) return;
    seenText.add(key);
    perKind.set(`${key[0]}${kind}`, (perKind.get(`${key[0]}${kind}`) ?? 0) + 1);
    const s = sources[at - 1];
    into.push({
      kind,
      text: clip(text),
      sourceIndex: at,
      source: { url: s.url, title: s.title, domain: s.domain, snippet: clip(snippet), fetchedAt: s.fetchedAt },
      ...extra,
    });
  };

  const boilerplate = siteBoilerplate(crawl);
  // The headlines the feed and the news index give each news URL.
  const listedTitles = new Map<string, Set<string>>();
  for (const a of [...(crawl.feed?.items ?? []), ...crawl.pages.flatMap((p) => p.page.articles)]) {
    const k = documentKey(a.url);
    listedTitles.set(k, (listedTitles.get(k) ?? new Set()).add(normalise(a.title)));
  }
  // An article's headline: the heading its listings give it, else its first heading (or title)
  // that is not the site's (a sidebar's heading may come first); null when it has none of its own.
  const headlineOf = (p: CrawledPage): string | null => {
    const listed = listedTitles.get(documentKey(p.url));
    return (
      p.page.headings.find((h) => listed?.has(normalise(h))) ??
      p.page.headings.find((h) => !boilerplate(h)) ??
      (p.page.title && !boilerplate(p.page.title) ? p.page.title : null)
    );
  };
  // An article's news snippet: its lead sentence (the first of the first substantial block of its
  // own after the headline) when that states the headline, else the headline.
  const articleNews = new Map<CrawledPage, { headline: string; snippet: string; title: string }>();
  for (const p of crawl.pages) {
    if (p.kind !== 'article') continue;
    const headline = headlineOf(p);
    if (!headline) continue;
    const title = p.page.title && !boilerplate(p.page.title) ? p.page.title : headline;
    const after = p.page.blocks.slice(p.page.blocks.indexOf(headline) + 1);
    const lead = after.find((b) => b !== headline && b.length >= 40 && !boilerplate(b));
    const leadSentence = lead ? sentences(lead).find((x) => !boilerplate(x)) : undefined;
    articleNews.set(p, { headline, title, snippet: newsSnippet([leadSentence], headline, title, boilerplate) });
  }

  // Pages first, in crawl order (home, about, product, customers, careers, news, articles).
  const pageIndex = new Map<CrawledPage, number>();
  for (const p of crawl.pages) {
    const { page } = p;
    const own = (t: string | null | undefined): t is string => !!t && !boilerplate(t);
    const firstParagraph = page.blocks.find((b) => b.length >= 60 && words(b) >= 8 && own(b));
    const article = articleNews.get(p);
    const snippet =
      article?.snippet ??
      [page.description, firstParagraph, page.blocks.find(own), page.title].find(own) ??
      page.description ??
      page.blocks[0] ??
      page.title;
    if (!snippet) continue; // a page with no text says nothing to cite
    // A title every page shares names the site, not the page: the page's own heading does.
    const title =
      p.kind === 'home'
        ? (page.title ?? page.headings[0] ?? p.url)
        : (article?.title ?? [page.title, ...page.headings].find(own) ?? page.title ?? page.headings[0] ?? p.url);
    pageIndex.set(p, addSource({ url: p.url, title, domain: hostOf(p.url), snippet, fetchedAt: p.fetchedAt.toISOString(), kind: p.kind }));
  }

  for (const [p, at] of pageIndex) {
    const { page } = p;
    const org = page.organization;
    const isHome = p.kind === 'home';
    if (isHome || p.kind === 'about') {
      if (org?.description) push(facts, 'description', org.description, org.description, at);
      if (page.description && (isHome || !boilerplate(page.description)))
        push(facts, 'description', page.description, page.description, at);
      if (org?.foundingDate) push(facts, 'founded', `Founded in ${org.foundingDate}`, org.foundingDate, at);
      if (org?.location) push(facts, 'headquarters', `Located in ${org.location}`, org.location, at);
      if (org?.numberOfEmployees) push(facts, 'employees', `About ${org.numberOfEmployees} employees`, org.numberOfEmployees, at);
      if (org?.industry) push(facts, 'industry', `Industry: ${org.industry}`, org.industry, at);
    }
    for (const block of page.blocks) {
      const repeated = boilerplate(block);
      for (const sentence of sentences(block)) {
        if (sentence.length < 20 || sentence.length > 400) continue;
        // What the site repeats on its pages is the company speaking of itself: a statement about
        // the company, cited from the home page, and nothing else (no page's challenge or role).
        const shared = repeated || boilerplate(sentence);
        if (shared && !isHome) continue;
        const kind = p.kind === 'news' || p.kind === 'article' ? null : classify(STATEMENTS, sentence);
        if (kind) push(facts, kind, sentence, sentence, at);
        if (shared) continue;
        if (CHALLENGE.test(sentence) && FIRST_PERSON.test(sentence)) push(painPoints, 'challenge', sentence, sentence, at);
        if (p.kind === 'careers' && HIRING_LINE.test(sentence)) push(painPoints, 'hiring', sentence, sentence, at);
      }
    }
    if (p.kind === 'product') {
      const headings = page.headings.filter((h) => !boilerplate(h)).slice(0, 6);
      for (const h of headings) if (words(h) >= 3 && words(h) <= 16) push(facts, 'product', h, h, at);
    }
    if (p.kind === 'careers') {
      // Open roles: short headings or list items naming a role.
      const roles = [...page.headings, ...page.blocks].filter(
        (t) => ROLE.test(t) && words(t) <= 8 && t.length <= 80 && !/[.!?]$/.test(t) && !boilerplate(t),
      );
      for (const role of roles) push(painPoints, 'hiring', `Hiring: ${role}`, role, at);
    }
  }

  // News: dated items of the last months, from the feed, the news index, the sitemap and the
  // article pages themselves, newest first; each is a source of its own.
  const cut = now.getTime() - NEWS_WINDOW_DAYS * 86_400_000;
  const news: NewsItem[] = [];
  const newsSeen = new Set<string>();
  const addNews = (a: Article, at: number, snippet: string) => {
    if (at < 1 || newsSeen.has(a.url) || !a.publishedAt || Date.parse(a.publishedAt) < cut || !a.title) return;
    if (boilerplate(a.title)) return; // a title many items share ("Weekly update") names no news
    newsSeen.add(a.url);
    const s = sources[at - 1];
    // What happened is read from the item's own words: a summary sentence the site repeats
    // elsewhere (its description in a feed) says nothing about this item.
    const own = sentences(a.summary ?? '').filter((x) => !boilerplate(x));
    news.push({
      kind: classify(EVENTS, `${a.title} ${own.join(' ')}`) ?? 'news',
      text: a.title,
      title: a.title,
      url: a.url,
      publishedAt: a.publishedAt,
      sourceIndex: at,
      source: { url: s.url, title: s.title, domain: s.domain, snippet: clip(snippet), fetchedAt: s.fetchedAt },
    });
  };
  for (const [p, at] of pageIndex) {
    const article = articleNews.get(p);
    if (!article || !p.page.publishedAt) continue;
    addNews({ title: article.headline, url: p.url, publishedAt: p.page.publishedAt, summary: article.snippet }, at, article.snippet);
  }
  const listed: Array<{ a: Article; via: string | null; fetchedAt: Date }> = [
    ...(crawl.feed?.items ?? []).map((a) => ({ a, via: crawl.feed!.url, fetchedAt: crawl.feed!.fetchedAt })),
    ...crawl.pages
      .filter((p) => p.kind === 'news')
      .flatMap((p) => p.page.articles.map((a) => ({ a, via: null as string | null, fetchedAt: p.fetchedAt }))),
  ];
  const newsIndexAt = crawl.pages.find((p) => p.kind === 'news');
  for (const { a, via, fetchedAt } of listed.sort((x, y) => Date.parse(y.a.publishedAt ?? '') - Date.parse(x.a.publishedAt ?? '') || 0)) {
    if (newsSeen.has(a.url) || !a.publishedAt || Date.parse(a.publishedAt) < cut || !a.title || boilerplate(a.title)) continue;
    // A feed item is a source of its own (its snippet is its text in the feed when that states
    // the headline, else the headline); an entry of the news index page cites that page, where its
    // title is shown.
    const snippet = via ? newsSnippet([a.summary, ...sentences(a.summary ?? '')], a.title, a.title, boilerplate) : a.title;
    const at = via
      ? addSource({
          url: a.url,
          title: a.title,
          domain: hostOf(a.url),
          snippet,
          fetchedAt: fetchedAt.toISOString(),
          kind: 'feed-item',
          feedUrl: via,
        })
      : (pageIndex.get(newsIndexAt!) ?? -1);
    addNews(a, at, snippet);
  }
  news.sort((x, y) => Date.parse(y.publishedAt) - Date.parse(x.publishedAt));
  const recentNews = news.slice(0, MAX_NEWS);
  for (const n of recentNews)
    if (n.kind !== 'news') push(facts, n.kind, n.text, n.source.snippet, n.sourceIndex, { publishedAt: n.publishedAt });

  // Coverage: the home page plus two more pages, or the home page and one dated news item.
  const home = crawl.pages.some((p) => p.kind === 'home');
  const others = crawl.pages.length - (home ? 1 : 0);
  const hasMinimumCoverage = home && (others >= 2 || recentNews.length >= 1);
  const notes: string[] = [];
  if (crawl.robots.state !== 'parsed') notes.push(crawl.robots.detail);
  if (crawl.homeError !== null) notes.push(`the home page could not be used: ${crawl.homeError}`);
  if (!hasMinimumCoverage) notes.push('below minimum coverage: the home page plus two more pages, or plus one dated news item, are needed');
  if (leftOut > 0) notes.push(`${leftOut} passage(s) left out as instruction-like text (words aimed at an AI model, not at a reader)`);
  if (facts.length < MIN_FACTS_FOR_CONFIDENCE) notes.push(`only ${facts.length} fact(s) could be read from the site`);
  const lowConfidence = !hasMinimumCoverage || facts.length < MIN_FACTS_FOR_CONFIDENCE;

  const description = facts.find((f) => f.kind === 'description');
  const name = company.name ?? crawl.pages.find((p) => p.kind === 'home')?.page.organization?.name ?? company.domain;
  const summary = description ? `${name}: ${description.text}` : null;

  return {
    version: 1,
    runId,
    root: crawl.root,
    summary,
    facts,
    researchSources: sources,
    recentNews,
    painPoints,
    coverage: {
      pagesFetched: crawl.pages.length,
      feedItems: crawl.feed?.items.length ?? 0,
      requests: crawl.requests,
      durationMs: crawl.durationMs,
      robots: crawl.robots.state,
      hasMinimumCoverage,
      lowConfidence,
      notes,
      skipped: crawl.skipped,
    },
  };
}
