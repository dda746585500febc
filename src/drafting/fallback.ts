// The `fallback` provider: no language model. The template step with its merge fields filled, plus
// one personal sentence built from a research fact and citing it: step 1 uses the best fact, step 2
// the next, and so on, so each email of a sequence brings its own reason to write. The sentence is
// written for the kind of fact (a headline, an open role, a line of the site, a structured value),
// so it reads as a whole, punctuated sentence whatever the fact's own wording, and it repeats the
// fact's words, so its claims are the source's. Deterministic: the same inputs give the same draft.

import { functionOf } from '../research/assess.js';
import type { Fact } from '../research/dossier.js';
import { type DraftContext, judgedAgainst, type StoredCitation, type WrittenDraft } from './context.js';
import { checkDraft } from './guardrails.js';
import { fillMergeFields, SUBJECT_FALLBACKS } from './merge.js';

/** Dated events a headline announces (src/research/dossier.ts EVENTS); `news` is a dated headline of no such kind. */
const EVENTS = new Set(['funding', 'launch', 'expansion', 'leadership', 'partnership']);
const GREETING_LINE = /^\s*(hi|hello|hey|dear|good (morning|afternoon|evening))\b[^.!?\n]{0,40}[,!]?\s*$/i;
/** Longer than this, a quoted fact is a paragraph, not a line of an email (and may have been cut). */
const QUOTE_MAX = 200;
const ROLE_PREFIX = 'Hiring: ';

const dated = (f: Fact) => typeof f.publishedAt === 'string' && !Number.isNaN(Date.parse(f.publishedAt));
const newestFirst = (a: Fact, b: Fact) => Date.parse(String(b.publishedAt)) - Date.parse(String(a.publishedAt));
const isRole = (f: Fact) => f.kind === 'hiring' && f.text.startsWith(ROLE_PREFIX);
const roleOf = (f: Fact) => f.text.slice(ROLE_PREFIX.length).trim();
/** Facts the research states as a structured value, with a fixed wording (src/research/dossier.ts). */
const STRUCTURED: Array<[string, RegExp]> = [
  ['founded', /^Founded in (.+)$/],
  ['headquarters', /^Located in (.+)$/],
  ['employees', /^About (.+) employees$/],
  ['industry', /^Industry: (.+)$/],
];
const structured = (f: Fact): string | null => {
  const re = STRUCTURED.find(([kind]) => kind === f.kind)?.[1];
  return re?.exec(f.text.trim())?.[1]?.trim() || null;
};
/** Whether a fact makes a line: a structured value, an open role, or text short enough to quote. */
const usable = (f: Fact) => structured(f) !== null || isRole(f) || collapse(f.text).length <= QUOTE_MAX;

/**
 * Facts worth a sentence, best first: dated events newest first, open roles (the contact's
 * function first), challenges the company states, other dated headlines, product headings,
 * hiring lines, customers, the company's description, then the rest in the research's order;
 * one fact of each kind (an open role being a kind) before a second of any.
 */
export function rankFacts(facts: Fact[], contactFunction: string | null): Fact[] {
  const ok = facts.filter(usable);
  const of = (kind: string) => ok.filter((f) => f.kind === kind);
  const events = ok.filter((f) => EVENTS.has(f.kind) && dated(f)).sort(newestFirst);
  const roles = ok.filter(isRole);
  const inFunction = roles.filter((f) => contactFunction !== null && functionOf(roleOf(f)) === contactFunction);
  const headlines = of('news').filter(dated).sort(newestFirst);
  const ranked = [
    ...events,
    ...inFunction,
    ...roles.filter((f) => !inFunction.includes(f)),
    ...of('challenge'),
    ...headlines,
    ...of('product'),
    ...of('hiring').filter((f) => !isRole(f)),
    ...of('customers'),
    ...of('description'),
  ];
  const all = [...ranked, ...ok.filter((f) => !ranked.includes(f))].filter((f, i, list) => list.indexOf(f) === i);
  // One fact of each kind before a second of any, so the steps of a sequence do not all say the same kind of thing.
  const seen = new Map<string, number>();
  return all
    .map((f, i) => {
      const kind = isRole(f) ? 'role' : f.kind;
      const round = seen.get(kind) ?? 0;
      seen.set(kind, round + 1);
      return { f, round, i };
    })
    .sort((a, b) => a.round - b.round || a.i - b.i)
    .map((x) => x.f);
}

/** Text as one line of an email: whitespace collapsed. */
function collapse(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/** Straight double quotes inside a quotation as curly ones, so the quotation's own quotes stay paired. */
const innerQuotes = (t: string) => t.replace(/"([^"]*)"/g, '“$1”').replaceAll('"', '”');

/**
 * A fact's words in quotes, as the end of a sentence: with their own final punctuation inside, else
 * a period after the closing quote (the quotation stays verbatim: "Series B" never becomes "B.").
 */
function quoted(text: string): string {
  const t = innerQuotes(collapse(text)).replace(/[\s,;:–—-]+$/, '');
  return /[.!?…]['’”)\]]*$/.test(t) ? `"${t}"` : `"${t}".`;
}

/** A fact's words as a title inside a sentence: quoted, without final punctuation. */
function titled(text: string): string {
  return `"${innerQuotes(collapse(text)).replace(/[\s.!?,;:…–—-]+$/, '')}"`;
}

/**
 * The personal sentence for a fact, as step `step` of a sequence says it ("I also saw…" after the
 * first step's). Always one whole sentence ending in punctuation, whatever the fact's own wording;
 * it names the prospect "you", never by a name its source may not show.
 */
export function sentenceFor(fact: Fact, step = 1): string {
  const I = step > 1 ? 'I also' : 'I';
  const value = structured(fact);
  if (value !== null) {
    if (fact.kind === 'founded') return `${I} read that your company was founded in ${value}.`;
    if (fact.kind === 'headquarters') return `${I} read that your team is based in ${value}.`;
    if (fact.kind === 'employees') return `${I} read that your company has about ${value} employees.`;
    return `${I} noticed that your company works in ${value}.`;
  }
  if (isRole(fact)) return `${I} noticed you are hiring for the ${roleOf(fact).replace(/[\s.,;:]+$/, '')} role.`;
  const q = quoted(fact.text);
  switch (fact.kind) {
    case 'funding':
      return `${I} saw the news of your funding: ${q}`;
    case 'launch':
      return `${I} saw your launch announcement: ${q}`;
    case 'leadership':
      return `${I} saw your leadership announcement: ${q}`;
    case 'expansion':
      return `${I} saw the news of your expansion: ${q}`;
    case 'partnership':
      return `${I} saw your partnership announcement: ${q}`;
    case 'news':
      return `${I} read your announcement: ${q}`;
    case 'hiring':
      return `${I} read this on your careers page: ${q}`;
    case 'product':
      return `${I} read about ${titled(fact.text)} on your product page.`;
    case 'description':
      return `${I} read how you describe your company: ${q}`;
    default:
      // A challenge, customers, a statement of the site: its own words, quoted.
      return `${I} noticed this line on your site: ${q}`;
  }
}

/** The body with a sentence added after the greeting line, or after the body's first sentence. */
export function insertAfterOpening(body: string, sentence: string): string {
  const lines = body.split('\n');
  const first = lines.findIndex((l) => l.trim() !== '');
  if (first < 0) return sentence;
  if (GREETING_LINE.test(lines[first])) {
    return [...lines.slice(0, first + 1), '', sentence, ...(lines[first + 1]?.trim() === '' ? [] : ['']), ...lines.slice(first + 1)].join(
      '\n',
    );
  }
  const line = lines[first];
  const end = /[.!?](\s|$)/.exec(line);
  const at = end ? end.index + 1 : line.length;
  lines[first] = `${line.slice(0, at)} ${sentence}${line.slice(at)}`;
  return lines.join('\n');
}

export function writeFallback(ctx: DraftContext): WrittenDraft {
  const subject = fillMergeFields(ctx.step.subject, ctx.merge, SUBJECT_FALLBACKS);
  const body = fillMergeFields(ctx.step.body, ctx.merge);
  const repaired = [...subject.repaired, ...body.repaired];
  const advisories = [...subject.unknown, ...body.unknown].map((f) => `unknown-merge-field: ${f} names no field and was removed`);
  let text = body.text;
  const citations: StoredCitation[] = [];
  const fact = ctx.research ? rankFacts(ctx.research.facts, ctx.contactFunction)[ctx.step.step - 1] : undefined;
  if (fact) {
    const sentence = sentenceFor(fact, ctx.step.step);
    text = insertAfterOpening(text, sentence);
    citations.push({ text: sentence, sourceIndex: fact.sourceIndex, snippet: fact.source.snippet });
  }
  const checked = checkDraft({
    step: ctx.step.step,
    subject: subject.text,
    body: text,
    templateSubject: subject.text,
    templateBody: body.text,
    citations,
    ...judgedAgainst(ctx),
  });
  return {
    subject: checked.subject,
    body: checked.body,
    citations,
    provider: 'fallback',
    attempts: 1,
    repaired: [...repaired, ...checked.repaired],
    advisories: [...advisories, ...checked.advisories],
    flags: checked.flags,
    tokens: 0,
    costMillicents: 0,
  };
}
