// A company dossier from one crawl: the ordered source list (a draft citation's sourceIndex is a
// 1-based index into it), facts, recent news and pain points, each citing its source with a
// snippet copied verbatim from that source. Nothing here invents a fact: every entry is a sentence,
// heading, description or structured-data value of a fetched page or feed item.

import { sentences } from '../platform/text.js';
import { type CrawledPage, type CrawlResult, NEWS_WINDOW_DAYS } from './crawl.js';
import { type Article, hasContactDetails } from './extract.js';
import { withoutSuspicious } from './suspicious.js';

export type Source = {
  url: string;
  title: string;
  domain: string;
  /** Text that is on the source (its description, or its first substantial paragraph). */
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

  // Pages first, in crawl order (home, about, product, customers, careers, news, articles).
  const pageIndex = new Map<CrawledPage, number>();
  for (const p of crawl.pages) {
    const firstParagraph = p.page.blocks.find((b) => b.length >= 60 && words(b) >= 8);
    const snippet = p.page.description ?? firstParagraph ?? p.page.blocks[0] ?? p.page.title;
    if (!snippet) continue; // a page with no text says nothing to cite
    pageIndex.set(
      p,
      addSource({
        url: p.url,
        title: p.page.title ?? p.page.headings[0] ?? p.url,
        domain: hostOf(p.url),
        snippet,
        fetchedAt: p.fetchedAt.toISOString(),
        kind: p.kind,
      }),
    );
  }

  for (const [p, at] of pageIndex) {
    const { page } = p;
    const org = page.organization;
    if (p.kind === 'home' || p.kind === 'about') {
      if (org?.description) push(facts, 'description', org.description, org.description, at);
      if (page.description) push(facts, 'description', page.description, page.description, at);
      if (org?.foundingDate) push(facts, 'founded', `Founded in ${org.foundingDate}`, org.foundingDate, at);
      if (org?.location) push(facts, 'headquarters', `Located in ${org.location}`, org.location, at);
      if (org?.numberOfEmployees) push(facts, 'employees', `About ${org.numberOfEmployees} employees`, org.numberOfEmployees, at);
      if (org?.industry) push(facts, 'industry', `Industry: ${org.industry}`, org.industry, at);
    }
    for (const block of page.blocks) {
      for (const sentence of sentences(block)) {
        if (sentence.length < 20 || sentence.length > 400) continue;
        const kind = p.kind === 'news' || p.kind === 'article' ? null : classify(STATEMENTS, sentence);
        if (kind) push(facts, kind, sentence, sentence, at);
        if (CHALLENGE.test(sentence) && FIRST_PERSON.test(sentence)) push(painPoints, 'challenge', sentence, sentence, at);
        if (p.kind === 'careers' && HIRING_LINE.test(sentence)) push(painPoints, 'hiring', sentence, sentence, at);
      }
    }
    if (p.kind === 'product') {
      for (const h of page.headings.slice(0, 6)) if (words(h) >= 3 && words(h) <= 16) push(facts, 'product', h, h, at);
    }
    if (p.kind === 'careers') {
      // Open roles: short headings or list items naming a role.
      const roles = [...page.headings, ...page.blocks].filter((t) => ROLE.test(t) && words(t) <= 8 && t.length <= 80 && !/[.!?]$/.test(t));
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
    newsSeen.add(a.url);
    const s = sources[at - 1];
    news.push({
      kind: classify(EVENTS, `${a.title} ${a.summary ?? ''}`) ?? 'news',
      text: a.title,
      title: a.title,
      url: a.url,
      publishedAt: a.publishedAt,
      sourceIndex: at,
      source: { url: s.url, title: s.title, domain: s.domain, snippet: clip(snippet), fetchedAt: s.fetchedAt },
    });
  };
  for (const [p, at] of pageIndex) {
    if (p.kind !== 'article' || !p.page.publishedAt) continue;
    const title = p.page.headings[0] ?? p.page.title ?? '';
    const lead = p.page.blocks.find((b) => b !== title && b.length >= 40);
    const snippet = p.page.description ?? (lead ? sentences(lead)[0] : title);
    addNews({ title, url: p.url, publishedAt: p.page.publishedAt, summary: snippet }, at, snippet);
  }
  const listed: Array<{ a: Article; via: string | null; fetchedAt: Date }> = [
    ...(crawl.feed?.items ?? []).map((a) => ({ a, via: crawl.feed!.url, fetchedAt: crawl.feed!.fetchedAt })),
    ...crawl.pages
      .filter((p) => p.kind === 'news')
      .flatMap((p) => p.page.articles.map((a) => ({ a, via: null as string | null, fetchedAt: p.fetchedAt }))),
  ];
  const newsIndexAt = crawl.pages.find((p) => p.kind === 'news');
  for (const { a, via, fetchedAt } of listed.sort((x, y) => Date.parse(y.a.publishedAt ?? '') - Date.parse(x.a.publishedAt ?? '') || 0)) {
    if (newsSeen.has(a.url) || !a.publishedAt || Date.parse(a.publishedAt) < cut || !a.title) continue;
    // A feed item is a source of its own (its snippet is its text in the feed); an entry of the
    // news index page cites that page, where its title and summary are shown.
    const at = via
      ? addSource({
          url: a.url,
          title: a.title,
          domain: hostOf(a.url),
          snippet: a.summary ?? a.title,
          fetchedAt: fetchedAt.toISOString(),
          kind: 'feed-item',
          feedUrl: via,
        })
      : (pageIndex.get(newsIndexAt!) ?? -1);
    addNews(a, at, a.summary && via ? a.summary : a.title);
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
