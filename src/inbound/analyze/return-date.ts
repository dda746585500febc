// The return date an out-of-office text gives, read by chrono-node relative to the message date
// in the sender's time zone (the Date header's offset). Of the dates found, the one the text ties
// to coming back wins ("back on", "wieder erreichbar", "de retour le", "regresaré el", "rientrerò
// il", "weer aanwezig", "volto em"), then an "until" date ("bis", "jusqu'au", "hasta", "fino al",
// "t/m", "até"), then the latest other date; a date introduced as the start of the absence
// ("from", "ab", "depuis", "desde", "dal", "vanaf") and the start of a range never do. Only a date
// after the message and within a year of it counts; a date without a time of day means 09:00 in
// the sender's time zone, and a time alone is no date.
// chrono's parsers for the other languages are given what they miss: the day-first numeric date
// without a year ("15.1.", "13.01."; the trailing dot tells it from a time such as 14.30) and the
// Spanish range "del 2 al 14 de enero" (which chrono reads as hours). The end of a range whose year
// is not written is the nearest one after the message, not the one after its start moved forward.
import * as chrono from 'chrono-node';
import { fold } from './fold.js';
import { MAX_DATE_TEXT_CHARS } from './limits.js';

type Lang = 'en' | 'de' | 'fr' | 'es' | 'it' | 'nl' | 'pt';

/** "15.1." and "13.01.2025" day-first (a trailing dot or a year: "14.30" is a time). */
const DAY_MONTH_DOTTED: chrono.Parser = {
  pattern: () => /(^|[^\d.:/,])(\d{1,2})\.(\d{1,2})\.(?:(\d{4}|\d{2})(?!\d))?/,
  extract: (context, match) => {
    const day = Number(match[2]);
    const month = Number(match[3]);
    if (day < 1 || day > 31 || month < 1 || month > 12) return null;
    const components: Record<string, number> = { day, month };
    if (match[4]) components.year = match[4].length === 2 ? 2000 + Number(match[4]) : Number(match[4]);
    const lead = match[1].length;
    return context.createParsingResult((match.index ?? 0) + lead, match[0].slice(lead), components);
  },
};

const ES_MONTHS: Record<string, number> = {
  enero: 1,
  febrero: 2,
  marzo: 3,
  abril: 4,
  mayo: 5,
  junio: 6,
  julio: 7,
  agosto: 8,
  septiembre: 9,
  setiembre: 9,
  octubre: 10,
  noviembre: 11,
  diciembre: 12,
};
/** "del 2 al 14 de enero (de 2025)", "desde el 2 hasta el 14 de enero". */
const ES_RANGE: chrono.Parser = {
  pattern: () =>
    new RegExp(
      `(?<![\\p{L}\\d])(?:del|desde el) (\\d{1,2}) (?:al|hasta el) (\\d{1,2}) de (${Object.keys(ES_MONTHS).join('|')})(?: de (\\d{4}))?(?![\\p{L}\\d])`,
      'iu',
    ),
  extract: (context, match) => {
    const month = ES_MONTHS[match[3].toLowerCase()];
    const from = Number(match[1]);
    const to = Number(match[2]);
    if (!month || from < 1 || from > 31 || to < 1 || to > 31) return null;
    const year = match[4] ? { year: Number(match[4]) } : {};
    return context.createParsingResult(match.index ?? 0, match[0], { day: from, month, ...year }, { day: to, month, ...year });
  },
};

function extended(base: chrono.Chrono, extra: chrono.Parser[]): chrono.Chrono {
  const c = base.clone();
  c.parsers.push(...extra);
  return c;
}

const PARSERS: Record<Lang, chrono.Chrono> = {
  en: chrono.en.casual,
  de: extended(chrono.de.casual, [DAY_MONTH_DOTTED]),
  fr: extended(chrono.fr.casual, [DAY_MONTH_DOTTED]),
  es: extended(chrono.es.casual, [DAY_MONTH_DOTTED, ES_RANGE]),
  it: extended(chrono.it.casual, [DAY_MONTH_DOTTED]),
  nl: extended(chrono.nl.casual, [DAY_MONTH_DOTTED]),
  pt: extended(chrono.pt.casual, [DAY_MONTH_DOTTED]),
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
  [
    'back|return|returning|returns',
    'zuruck|zurueck|wieder',
    'retour|reviendrai|rentrerai|reprendrai',
    'de vuelta|regreso|regresare|volvere|vuelvo|me reincorporare',
    'rientro|rientrero|tornero|di ritorno|di nuovo in ufficio',
    'terug|weer',
    'volto|voltarei|regresso|regressarei|retorno|retornarei|de volta',
  ].join('|'),
);
const RETURN_AFTER = w('back|wieder|zuruck|zurueck|de retour|terug|weer|de vuelta|di ritorno|de volta');
const UNTIL_BEFORE = w(
  [
    'until|till|til|through|thru|up to|up until',
    'bis|bis einschliesslich|bis und mit',
    "jusqu'au|jusqu'a",
    'hasta',
    'fino al|fino a|sino al',
    'tot en met|t/m|tot',
    'ate',
  ].join('|'),
);
const START_BEFORE = w(
  'from|since|starting|beginning|as of|ab|seit|vom|du|depuis|a compter du|desde|dal|a partire dal|van|vanaf|sinds|a partir|a partir de',
);

const DAY_MS = 86_400_000;
const HORIZON_DAYS = 366;

/** A window of text as one line: a single line break is wrapping; a blank line ends the clause (kept as "\n"). */
const unwrap = (s: string) =>
  s
    .replace(/\n[ \t]*\n\s*/g, '\u0000')
    .replace(/\s+/g, ' ')
    .replace(/\u0000/g, '\n');

/** The clause before `at` (back to a sentence end or a blank line), folded. */
function before(text: string, at: number): string {
  let s = unwrap(text.slice(Math.max(0, at - 40), at));
  const cut = Math.max(s.lastIndexOf('.'), s.lastIndexOf('!'), s.lastIndexOf('?'), s.lastIndexOf('\n'));
  // "13.01." style dates end in dots; keep cutting only at a dot followed by a space
  if (cut >= 0 && (s[cut] !== '.' || s[cut + 1] === ' ' || s[cut + 1] === undefined)) s = s.slice(cut + 1);
  return fold(s);
}

function after(text: string, at: number): string {
  let s = unwrap(text.slice(at, at + 30));
  const cut = s.search(/[!?\n]|\.\s/);
  if (cut >= 0) s = s.slice(0, cut);
  return fold(s);
}

function toDate(c: chrono.ParsedComponents, offsetMinutes: number, reference: Date): Date {
  let year = c.get('year') ?? 1970;
  // an implied year is the nearest after the message: the end of "2 to 14 January" read on 3 January is this January 14
  if (!c.isCertain('year') && c.isCertain('month') && atNine(c, year - 1, offsetMinutes) > reference.getTime()) year -= 1;
  if (c.isCertain('hour')) {
    const d = c.date();
    if (year !== c.get('year')) d.setUTCFullYear(d.getUTCFullYear() - 1);
    return d;
  }
  return new Date(atNine(c, year, offsetMinutes));
}

const onlyTime = (c: chrono.ParsedComponents) => !(['weekday', 'day', 'month', 'year'] as const).some((k) => c.isCertain(k));

const atNine = (c: chrono.ParsedComponents, year: number, offsetMinutes: number) =>
  Date.UTC(year, (c.get('month') ?? 1) - 1, c.get('day') ?? 1, 9, 0, 0) - offsetMinutes * 60_000;

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
      if (onlyTime(r.start)) continue; // "from 2 to 4" read as hours is no return date
      const pre = before(t, r.index);
      const post = after(t, r.index + r.text.length);
      const back = RETURN_BEFORE.test(pre) || RETURN_AFTER.test(post);
      const startRank = back ? 3 : UNTIL_BEFORE.test(pre) ? 2 : START_BEFORE.test(pre) ? 0 : 1;
      if (r.end) {
        candidates.push({ date: toDate(r.end, offsetMinutes, reference), rank: Math.max(2, back ? 3 : 0) });
      } else {
        candidates.push({ date: toDate(r.start, offsetMinutes, reference), rank: startRank });
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

/**
 * The end of an iCloud vacation auto-reply, from its X-Apple-Criteria header
 * (`{kind=VACATION,startDate=…,endDate=2025-01-12T22:59:59Z}`): null when absent, unreadable, not
 * after the message or more than a year after it.
 */
export function vacationEnd(criteria: string | undefined, reference: Date): Date | null {
  const m = criteria
    ? /enddate=(\d{4}-\d\d-\d\dt\d\d:\d\d(?::\d\d(?:\.\d{1,3})?)?(?:z|[+-]\d\d:?\d\d))/i.exec(criteria.slice(0, 500))
    : null;
  if (!m) return null;
  const end = new Date(m[1].toUpperCase());
  const ms = end.getTime();
  return Number.isNaN(ms) || ms <= reference.getTime() || ms > reference.getTime() + HORIZON_DAYS * DAY_MS ? null : end;
}

/** The UTC offset in minutes of an RFC 5322 Date header value ("… +0100"), 0 when it gives none. */
export function dateOffsetMinutes(dateHeader: string | undefined): number {
  if (!dateHeader) return 0;
  const m = /([+-])(\d\d)(\d\d)(?:\s*\([^)]{0,40}\))?\s*$/.exec(dateHeader.slice(0, 200));
  if (!m) return 0;
  const minutes = Number(m[2]) * 60 + Number(m[3]);
  return minutes > 14 * 60 ? 0 : m[1] === '-' ? -minutes : minutes;
}
