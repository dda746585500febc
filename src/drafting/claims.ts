// Factual claims about the prospect in a sentence of a draft, and whether a cited snippet supports
// them. A claim is a number (amounts, counts, years, percentages), a name (a proper noun that is not
// the contact's, their company's or the sender's own word), a date (a month or weekday), or
// recency ("you recently ...", "last week", "congrats on ..."). A claim is supported when the
// sentence cites a source whose snippet or title contains it (numbers compared by their digits);
// recency needs a dated news source.

export interface Claim {
  kind: 'number' | 'name' | 'date' | 'recency';
  token: string;
}

const MONTHS = 'january|february|march|april|may|june|july|august|september|october|november|december';
const DAYS = 'monday|tuesday|wednesday|thursday|friday|saturday|sunday';
const DATE = new RegExp(`\\b(${MONTHS}|${DAYS})\\b`, 'gi');
const RECENCY =
  /\b(recent(ly)?|just (launched|raised|announced|hired|opened|closed|released|secured)|last (week|month|quarter|year)|this (week|month|quarter)|yesterday|congrat(s|ulations)|you('ve| have)? (raised|launched|announced|hired|opened|expanded|closed))\b/gi;
const NUMBER = /[$€£]?\d[\d,.]*(\s?(%|percent|[kmb]n?|million|billion|x))?(?![\w])/gi;
// Capitalized words, allowing inner capitals and hyphens (McKinsey, Series-B), and initials (E.).
const WORD = /\b[A-Z][\w'’-]*\.?/g;
/** Words capitalized for grammar, not because they name something. */
const COMMON = new Set([
  'i',
  "i'm",
  "i'd",
  "i'll",
  "i've",
  'hi',
  'hello',
  'hey',
  'dear',
  'thanks',
  'thank',
  'best',
  'regards',
  'cheers',
  'ps',
  'p.s.',
  'we',
  'our',
  'you',
  'your',
  'the',
  'a',
  'an',
  'if',
  'would',
  'could',
  'are',
  'is',
  'do',
  'does',
  'did',
  'can',
  'will',
  'let',
  'happy',
  'quick',
  'open',
  'no',
  'yes',
  'ok',
  'okay',
  're',
  'fwd',
  'fw',
  'ceo',
  'cto',
  'cfo',
  'coo',
  'cmo',
  'cro',
  'vp',
  'ai',
  'api',
  'crm',
  'saas',
  'b2b',
  'roi',
  'q1',
  'q2',
  'q3',
  'q4',
]);

const digits = (s: string) => s.replace(/[^\d]/g, '');
const fold = (s: string) => s.toLowerCase().replace(/[’']/g, "'").replace(/\s+/g, ' ');

/** The claims of one sentence; `known` are words the sender may use without a source (lower-case). */
export function claimsOf(sentence: string, known: ReadonlySet<string>): Claim[] {
  const claims: Claim[] = [];
  for (const m of sentence.matchAll(NUMBER)) {
    if (digits(m[0]).length > 0) claims.push({ kind: 'number', token: m[0].trim() });
  }
  for (const m of sentence.matchAll(DATE)) claims.push({ kind: 'date', token: m[0] });
  for (const m of sentence.matchAll(RECENCY)) claims.push({ kind: 'recency', token: m[0] });
  // Names: runs of capitalized words. A single capitalized word opening the sentence is grammar.
  const words = [...sentence.matchAll(WORD)];
  let run: string[] = [];
  let runStart = -1;
  const flush = () => {
    const kept = run.filter((w) => !COMMON.has(w.toLowerCase().replace(/\.$/, '')) && !known.has(w.toLowerCase().replace(/[.,]$/, '')));
    const opening = runStart === 0 && run.length === 1;
    if (kept.length > 0 && !opening && !new RegExp(`^(${MONTHS}|${DAYS})$`, 'i').test(kept.join(' '))) {
      claims.push({ kind: 'name', token: kept.join(' ') });
    }
    run = [];
  };
  let end = -1;
  for (const m of words) {
    const idx = m.index ?? 0;
    const adjacent = run.length > 0 && /^\s+$/.test(sentence.slice(end, idx));
    if (!adjacent) flush();
    if (run.length === 0) runStart = sentence.slice(0, idx).trim() === '' ? 0 : idx;
    // A full stop belongs to an initial ("E."), not to a word that ends a sentence ("March.").
    run.push(m[0].length > 2 ? m[0].replace(/\.$/, '') : m[0]);
    end = idx + m[0].length;
  }
  flush();
  return claims;
}

export interface CitedSource {
  snippet: string;
  title: string;
  dated: boolean;
}

/** The claims of a sentence that none of its cited sources supports. */
export function unsupported(claims: Claim[], cited: CitedSource[]): Claim[] {
  const texts = cited.map((c) => fold(`${c.title} ${c.snippet}`));
  const numbers = cited.flatMap((c) => [...`${c.title} ${c.snippet}`.matchAll(NUMBER)].map((m) => digits(m[0])));
  return claims.filter((c) => {
    if (c.kind === 'number') return !numbers.includes(digits(c.token));
    if (c.kind === 'recency') return !cited.some((s) => s.dated);
    return !texts.some((t) => t.includes(fold(c.token)));
  });
}
