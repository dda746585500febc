// The return date an out-of-office text gives, read by chrono-node relative to the message date
// in the sender's time zone (the Date header's offset). Of the dates found, the one the text ties
// to coming back wins ("back on", "wieder erreichbar", "de retour le"), then an "until" date, then
// the latest other date; a date introduced as the start of the absence ("from", "ab", "depuis")
// and the start of a range never do. Only a date after the message and within a year of it counts;
// a date without a time of day means 09:00 in the sender's time zone.
import * as chrono from 'chrono-node';
import { fold } from './fold.js';
import { MAX_DATE_TEXT_CHARS } from './limits.js';

type Lang = 'en' | 'de' | 'fr' | 'es' | 'it' | 'nl' | 'pt';
const PARSERS: Record<Lang, chrono.Chrono> = {
  en: chrono.en.casual,
  de: chrono.de.casual,
  fr: chrono.fr.casual,
  es: chrono.es.casual,
  it: chrono.it.casual,
  nl: chrono.nl.casual,
  pt: chrono.pt.casual,
};

/** A few frequent short words per language: enough to pick the date parser (day-month order differs). */
const STOPWORDS: Record<Lang, string[]> = {
  en: ['the', 'and', 'i', 'you', 'to', 'of', 'am', 'will', 'my', 'with', 'until', 'back'],
  de: ['und', 'ich', 'nicht', 'der', 'die', 'sie', 'bin', 'ab', 'bis', 'wieder', 'im', 'ihre', 'mit'],
  fr: ['je', 'le', 'les', 'et', 'vous', 'pour', 'suis', 'du', 'au', 'de', 'retour', 'mes'],
  es: ['el', 'la', 'y', 'para', 'estoy', 'de', 'mi', 'hasta', 'con', 'por', 'su'],
  it: ['il', 'sono', 'per', 'di', 'non', 'la', 'fino', 'al', 'con', 'mio'],
  nl: ['ik', 'het', 'een', 'niet', 'en', 'ben', 'tot', 'op', 'met', 'mijn'],
  pt: ['eu', 'estou', 'para', 'com', 'nao', 'ate', 'de', 'meu', 'minha', 'em'],
};
const STOPWORD_LANG = new Map<string, Lang[]>();
for (const [lang, words] of Object.entries(STOPWORDS) as Array<[Lang, string[]]>) {
  for (const w of words) STOPWORD_LANG.set(w, [...(STOPWORD_LANG.get(w) ?? []), lang]);
}

export function guessLanguage(folded: string): Lang {
  const score: Record<Lang, number> = { en: 0, de: 0, fr: 0, es: 0, it: 0, nl: 0, pt: 0 };
  for (const w of folded.split(/[^a-z]+/)) for (const l of STOPWORD_LANG.get(w) ?? []) score[l] += 1;
  let best: Lang = 'en';
  for (const l of Object.keys(score) as Lang[]) if (score[l] > score[best]) best = l;
  return best;
}

const w = (words: string) => new RegExp(`(?<![a-z])(?:${words})(?![a-z])`);
const RETURN_BEFORE = w(
  'back|return|returning|returns|zuruck|zurueck|wieder|retour|de vuelta|regreso|regresare|rientro|rientrero|di ritorno|terug|volto|regresso',
);
const RETURN_AFTER = w('back|wieder|zuruck|zurueck|de retour|terug|de vuelta|di ritorno');
const UNTIL_BEFORE = w(
  "until|till|til|through|thru|bis|bis einschliesslich|jusqu'au|jusqu'a|hasta|fino al|fino a|tot en met|tot|up to|ate",
);
const START_BEFORE = w('from|since|starting|beginning|as of|ab|seit|vom|du|depuis|desde|dal|a partir|van|vanaf|a partir de');

const DAY_MS = 86_400_000;
const HORIZON_DAYS = 366;

/** The clause before `at` (back to a sentence end), folded. */
function before(text: string, at: number): string {
  let s = text.slice(Math.max(0, at - 40), at);
  const cut = Math.max(s.lastIndexOf('.'), s.lastIndexOf('!'), s.lastIndexOf('?'), s.lastIndexOf('\n'));
  // "13.01." style dates end in dots; keep cutting only at a dot followed by a space
  if (cut >= 0 && (s[cut] !== '.' || s[cut + 1] === ' ' || s[cut + 1] === undefined)) s = s.slice(cut + 1);
  return fold(s);
}

function after(text: string, at: number): string {
  let s = text.slice(at, at + 30);
  const cut = s.search(/[!?\n]|\.\s/);
  if (cut >= 0) s = s.slice(0, cut);
  return fold(s);
}

function toDate(c: chrono.ParsedComponents, offsetMinutes: number): Date {
  if (c.isCertain('hour')) return c.date();
  return new Date(Date.UTC(c.get('year') ?? 1970, (c.get('month') ?? 1) - 1, c.get('day') ?? 1, 9, 0, 0) - offsetMinutes * 60_000);
}

/** The return date an out-of-office text gives, or null. `offsetMinutes`: the sender's UTC offset (Date header). */
export function findReturnDate(text: string, reference: Date, offsetMinutes: number): Date | null {
  const t = text.slice(0, MAX_DATE_TEXT_CHARS);
  if (!t.trim()) return null;
  const lang = guessLanguage(fold(t));
  const ref = { instant: reference, timezone: offsetMinutes };
  const candidates: Array<{ date: Date; rank: number }> = [];
  for (const l of lang === 'en' ? (['en'] as Lang[]) : ([lang, 'en'] as Lang[])) {
    let results: chrono.ParsedResult[];
    try {
      results = PARSERS[l].parse(t, ref, { forwardDate: true });
    } catch {
      continue;
    }
    for (const r of results) {
      const pre = before(t, r.index);
      const post = after(t, r.index + r.text.length);
      const back = RETURN_BEFORE.test(pre) || RETURN_AFTER.test(post);
      const startRank = back ? 3 : UNTIL_BEFORE.test(pre) ? 2 : START_BEFORE.test(pre) ? 0 : 1;
      if (r.end) {
        candidates.push({ date: toDate(r.end, offsetMinutes), rank: Math.max(2, back ? 3 : 0) });
      } else {
        candidates.push({ date: toDate(r.start, offsetMinutes), rank: startRank });
      }
    }
    if (candidates.some((c) => c.rank > 0)) break;
  }
  const min = reference.getTime();
  const max = min + HORIZON_DAYS * DAY_MS;
  let best: { date: Date; rank: number } | null = null;
  for (const c of candidates) {
    const ms = c.date.getTime();
    if (c.rank === 0 || !(ms > min && ms <= max)) continue;
    if (!best || c.rank > best.rank || (c.rank === best.rank && ms > best.date.getTime())) best = c;
  }
  return best ? best.date : null;
}

/** The UTC offset in minutes of an RFC 5322 Date header value ("… +0100"), 0 when it gives none. */
export function dateOffsetMinutes(dateHeader: string | undefined): number {
  if (!dateHeader) return 0;
  const m = /([+-])(\d\d)(\d\d)(?:\s*\([^)]{0,40}\))?\s*$/.exec(dateHeader.slice(0, 200));
  if (!m) return 0;
  const minutes = Number(m[2]) * 60 + Number(m[3]);
  return minutes > 14 * 60 ? 0 : m[1] === '-' ? -minutes : minutes;
}
