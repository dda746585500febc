// Factual claims in a sentence of a draft, and whether a cited snippet supports them. A claim is a
// number (amounts, counts, years, percentages; in digits or in words), a name (a proper noun that
// is not the contact's, their company's or the sender's own word), a date (a month, a weekday, a
// quarter), recency ("recently", "last week", "congrats on ..."), or an event (raised, hired,
// launched, acquired, ...). A claim is supported when the sentence cites a source whose snippet or
// title states it: numbers by value ("forty million" is "$40M"), names word by word (an inflected
// form counts: "Übernahme" is supported by "übernommen"), an event by a word of the same kind,
// recency by a dated source.

import { numbersIn, sameValue } from './numbers.js';
import { CONGRATS, dateWords, isDateWord } from './own-words.js';

export interface Claim {
  kind: 'number' | 'name' | 'date' | 'recency' | 'event';
  token: string;
  /** Where it stands in the sentence. */
  index: number;
  /** A number's value. */
  value?: number;
  /** An event's kind (funding, hiring, launch, ...). */
  event?: string;
  /** A name of one word (a capitalized noun in German reads like one). */
  single?: boolean;
  /** Recency or a date of the reader's taken for granted ("the new office", "your board meeting next month"): a claim even in a question or a meeting proposal. */
  presupposed?: boolean;
}

export interface CitedSource {
  snippet: string;
  title: string;
  dated: boolean;
}

const RECENCY =
  /(?<![\p{L}])(?:recent(?:ly)?|just (?:launched|raised|announced|hired|opened|closed|released|secured|won|joined|moved)|last (?:week|month|quarter|year)|this (?:week|month|quarter|year)|yesterday|you(?:'ve| have)? (?:raised|launched|announced|hired|opened|expanded|closed))(?![\p{L}])/giu;

/**
 * "the new ...", "your new ..." and their kin take a recent change of the reader's for granted
 * ("How is the new Berlin office working out?"); "a new ..." and "our new ..." do not.
 */
const PRESUPPOSED_NEW =
  /(?<![\p{L}'’])(?:(?:the|your|its|their)\s+(?:[\p{L}\p{N}]+\s+)?(?:new|newly)|(?:o|a|os|as|seu|sua|seus|suas|vosso|vossa|vossos|vossas)\s+nov[oa]s?|(?:el|la|los|las|su|sus|tus|vuestr\p{L}*)\s+nuev[oa]s?|(?:le|les|l'|votre|vos|son|sa|ses)\s*(?:nouvel|nouveaux?|nouvelles?)|la\s+nouvelle|(?:der|die|das|dem|den|des|ihr\p{L}*)\s+neue[nmrs]?|(?:il|lo|gli|i|suo|sua|vostr\p{L}*)\s+nuov[oaie]|(?:de|het|uw|jullie)\s+nieuwe)(?![\p{L}])/iu;

/** A date of the reader's own plans ("before your board meeting next month"); a named month or day is a date claim already. */
const THEIR_DATE =
  /(?<![\p{L}])your\s+(?:(?!(?:for|on|in|at|to|of|by|with)\s)[\p{L}-]+\s+){1,3}?(?:next|this|coming)\s+(?:week|month|quarter|year|spring|summer|fall|autumn|winter)(?![\p{L}])/iu;

/** Events, by kind; a sentence's event must be of a kind its cited source reports. */
const EVENTS: Record<string, RegExp> = {
  funding:
    /(?<![\p{L}])(?:rais(?:e|ed|es|ing)|funding|funded|round|invest(?:ment|ed|ors?)|backed|backing|secured|series [a-f])(?![\p{L}])/iu,
  hiring:
    /(?<![\p{L}])(?:hir(?:e|ed|es|ing)|recruit\p{L}*|join(?:ed|s|ing)?|appoint\p{L}*|promot\p{L}*|open roles|roles|vacanc\p{L}*|contratar|contrata\p{L}*|zatrudni\p{L}*|nanimae\p{L}*|нанима\p{L}*)(?![\p{L}])/iu,
  launch:
    /(?<![\p{L}])(?:launch\p{L}*|releas(?:e|ed|es|ing)|introduc\p{L}*|unveil\p{L}*|rolled out|debut\p{L}*|lanz\p{L}*|lança\p{L}*|lanc\p{L}*)(?![\p{L}])/iu,
  expansion:
    /(?<![\p{L}])(?:opened|inaugur\p{L}*|expan(?:d|ds|ded|ding|sion)|new (?:office|site|clinic|clinics|warehouse|store|plant|location|locations|hub)|abr\p{L}*|ouvert\p{L}*|ouvre|eröffne\p{L}*|otworzy\p{L}*|otwiera|açtı|открыл\p{L}*|открыти\p{L}*)(?![\p{L}])/iu,
  acquisition:
    /(?<![\p{L}])(?:acquir\p{L}*|acquisition\p{L}*|bought|buys|merger|merged|übernahme|übernomm\p{L}*|übernimmt|adquiri\p{L}*|adquisición|rachat|rachet\p{L}*)(?![\p{L}])/iu,
  founding: /(?<![\p{L}])(?:found(?:ed|ing)|established|fundad\p{L}*|gegründet|fondée?)(?![\p{L}])/iu,
  award: /(?<![\p{L}])(?:won|wins|winning|award\p{L}*|prize|recogni[sz]\p{L}*|named (?:a |the )?(?:leader|winner|best))(?![\p{L}])/iu,
  partnership: /(?<![\p{L}])(?:partner(?:ed|ing|s|ship)?|alliance|teamed up)(?![\p{L}])/iu,
  tools: /(?<![\p{L}])(?:using|uses|switch(?:ed|ing)|migrat\p{L}*|adopt(?:ed|ing|s))(?![\p{L}])/iu,
  relocation: /(?<![\p{L}])(?:moving|relocat\p{L}*)(?![\p{L}])/iu,
  layoffs: /(?<![\p{L}])(?:layoffs?|laid off|restructur\p{L}*)(?![\p{L}])/iu,
  departure:
    /(?<![\p{L}])(?:(?:left|leaves|leaving|quit|quitting)\s+(?=\p{Lu}|(?:the|her|his|their|its)\s)|(?:departed|departure|stepped down|steps down|stepping down|resign\p{L}*|dejó|abandonó|renunci\p{L}*|dimiti\p{L}*|deixou|saiu|quitté|quitte|démission\p{L}*|verlässt|verließ|verlassen|ausgeschieden|zurückgetreten)(?![\p{L}]))/iu,
  // Reported only when nothing else in the sentence is checkable.
  growth: /(?<![\p{L}])(?:grow(?:s|ing|n)?|grew|growth|scal(?:e|es|ed|ing)|doubl(?:e|ed|ing)|tripl(?:e|ed|ing)|booming)(?![\p{L}])/iu,
  trouble:
    /(?<![\p{L}])(?:struggl\p{L}*|missed|miss(?:es|ing)?|losing|lost|churn\p{L}*|behind|pain|problems?|issues?|challeng\p{L}*)(?![\p{L}])/iu,
  statement: /(?<![\p{L}])(?:mentioned|said|announced|posted|wrote|tweeted|spoke|interview\p{L}*|podcast)(?![\p{L}])/iu,
  focus: /(?<![\p{L}])(?:investing|invests|focus\p{L}*|prioriti[sz]\p{L}*|priority|doubling down|betting)(?![\p{L}])/iu,
};
/** Event kinds that must match the source even when the sentence's figures and names do. */
const DISTINCT = new Set([
  'funding',
  'hiring',
  'launch',
  'expansion',
  'acquisition',
  'founding',
  'award',
  'partnership',
  'tools',
  'relocation',
  'layoffs',
  'departure',
]);
/** Doubling is a figure: the source must say so too. */
const MULTIPLIER = /(?<![\p{L}])(?:doubl(?:ed|ing)|tripl(?:ed|ing)|quadrupl(?:ed|ing)|halv(?:ed|ing)|(\d+)x)(?![\p{L}])/iu;

// Capitalized words (any script with capitals), with inner capitals, hyphens and apostrophes.
const WORD = /(?<![\p{L}\p{N}'’])[\p{Lu}][\p{L}\p{N}'’-]*\.?/gu;
/** Words capitalized for grammar (in the languages drafts are written in), not because they name something. */
const COMMON = new Set(
  (
    "i i'm i'd i'll i've hi hello hey dear thanks thank best regards cheers ps p.s. we our you your the a an if would could are is do does did can will let " +
    'happy quick open no yes ok okay re fwd fw ai api crm saas b2b b2c roi kpi pt et ct mt cet cest pst pdt est edt gmt utc bst am pm faq ' +
    'sie ihnen ihr ihre ihrem ihren ihrer du dich dir dein deine ich wir uns euch vous tu usted ustedes ud vd você vocês lei ' +
    'pan pani panie pana panu panem panią państwo państwa państwu вы вас вам вами ваш ваша ваше ваши ' +
    'revops salesops devops gtm sdr sdrs bdr bdrs ae aes abm smb erp ' +
    'herr frau mr mrs ms dr prof sr sra monsieur madame hanım bey zoom teams meet google slack webex hangouts whatsapp calendly loom vidyard docusign notion linkedin'
  ).split(' '),
);
/** Titles read as names of a role: supported by the title or its spelled-out form. */
const TITLES: Record<string, string> = {
  ceo: 'chief executive officer',
  cto: 'chief technology officer',
  cfo: 'chief financial officer',
  coo: 'chief operating officer',
  cmo: 'chief marketing officer',
  cro: 'chief revenue officer',
  cio: 'chief information officer',
  cpo: 'chief product officer',
  vp: 'vice president',
  svp: 'senior vice president',
  evp: 'executive vice president',
};

export const foldText = (s: string) => s.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase().replace(/[’']/g, "'").replace(/\s+/g, ' ');

/** A name's word without an inflection after an apostrophe ("Patel's", "İzmir'deki"; "O'Brien" stays). */
const bare = (w: string) => w.replace(/['’](?=\p{Ll})[\p{L}]*$/u, '').replace(/[.,]$/, '');

const START = /^[\s¿¡"'“”‘’«»„([-]*$/;
/** Words an English contraction hangs on ("Here's", "That's"): their apostrophe is no inflection of a name. */
const CONTRACTED = new Set('here there it that what who let where how when this today everyone someone nobody one he she'.split(' '));
const inflected = (w: string) => /['’]\p{Ll}/u.test(w) && !CONTRACTED.has(w.split(/['’]/)[0].toLowerCase());

/** The claims of one sentence; `known` are words the sender may use without a source (lower-case). */
export function claimsOf(sentence: string, known: ReadonlySet<string>): Claim[] {
  const claims: Claim[] = [];
  for (const n of numbersIn(sentence)) claims.push({ kind: 'number', token: n.token, index: n.index, value: n.value });
  for (const d of dateWords(sentence)) {
    // "may" is a month only as "May 14" or "in May".
    if (/^may$/i.test(d.word) && !(/^May$/.test(d.word) && /^\s*\d|^$/.test(sentence.slice(d.index + 3, d.index + 6)))) continue;
    claims.push({ kind: 'date', token: d.word, index: d.index });
  }
  for (const m of sentence.matchAll(RECENCY)) claims.push({ kind: 'recency', token: m[0], index: m.index ?? 0 });
  const theirs = THEIR_DATE.exec(sentence);
  if (theirs) claims.push({ kind: 'date', token: theirs[0], index: theirs.index, presupposed: true });
  const congrats = CONGRATS.exec(sentence);
  if (congrats && !claims.some((c) => c.kind === 'recency')) claims.push({ kind: 'recency', token: congrats[0], index: congrats.index });
  const presupposed = PRESUPPOSED_NEW.exec(sentence);
  if (presupposed && !claims.some((c) => c.kind === 'recency'))
    claims.push({ kind: 'recency', token: presupposed[0], index: presupposed.index, presupposed: true });
  // Names: runs of capitalized words. A capitalized word opening the sentence is grammar, unless an
  // inflection is attached to it after an apostrophe ("Ankara'daki").
  const words = [...sentence.matchAll(WORD)];
  let run: Array<{ w: string; index: number }> = [];
  const flush = () => {
    let kept = run.filter((r) => {
      const w = bare(r.w).toLowerCase();
      // A word with digits in it is a code (FREIGHT25), not a name.
      return !COMMON.has(w) && !known.has(w) && !isDateWord(w) && w.length > 0 && !/\p{N}/u.test(w);
    });
    if (kept.length > 0 && START.test(sentence.slice(0, kept[0].index)) && !inflected(kept[0].w)) kept = kept.slice(1);
    if (kept.length > 0) {
      const token = kept.map((r) => bare(r.w)).join(' ');
      claims.push({ kind: 'name', token, index: kept[0].index, single: kept.length === 1 });
    }
    run = [];
  };
  let end = -1;
  for (const m of words) {
    const idx = m.index ?? 0;
    const gap = sentence.slice(end, idx);
    if (run.length > 0 && !/^(?:\s+|\s+&\s+|\s+(?:of|de|da|do|von|van|der|la|le|del|di)\s+)$/.test(gap)) flush();
    // A full stop belongs to an initial ("E.", "Co."), not to a word that ends a sentence ("March.").
    run.push({ w: m[0].length > 3 ? m[0].replace(/\.$/, '') : m[0], index: idx });
    end = idx + m[0].length;
  }
  flush();
  for (const [event, re] of Object.entries(EVENTS)) {
    const m = re.exec(sentence);
    if (m) claims.push({ kind: 'event', token: m[0], index: m.index, event });
  }
  const mult = MULTIPLIER.exec(sentence);
  if (mult && !mult[1]) claims.push({ kind: 'number', token: mult[0], index: mult.index });
  return claims.sort((a, b) => a.index - b.index);
}

/** The kind of event a word names ("bought" and "acquire" are both an acquisition), or undefined. */
export const eventKindOf = (word: string): string | undefined => Object.entries(EVENTS).find(([, re]) => re.test(word))?.[0];

/** Whether an event claim must match its source even beside other claims. */
export const isDistinctEvent = (c: Claim) => c.kind === 'event' && DISTINCT.has(c.event ?? '');

/** Words of a text for matching names: folded, without apostrophe inflections. */
function wordsOf(text: string): string[] {
  return foldText(text)
    .split(/[^\p{L}\p{N}'&]+/u)
    .map((w) => w.replace(/'(?=\p{Ll})\p{L}*$/u, ''))
    .filter(Boolean);
}

/** A word of a name is in a text when the text has it, or a form of it sharing its first five letters. */
function hasWord(words: string[], w: string): boolean {
  const f = foldText(bare(w));
  if (f.length < 6) return words.includes(f);
  const stem = f.slice(0, 5);
  return words.some((x) => x.startsWith(stem));
}

/** Whether a name (or a title) is stated by a text. */
export function statesName(text: string, token: string): boolean {
  const words = wordsOf(text);
  const title = TITLES[token.toLowerCase()];
  if (title) return words.includes(token.toLowerCase()) || foldText(text).includes(title);
  return token
    .split(/[\s-]+/)
    .filter((w) => w !== '&')
    .every((w) => hasWord(words, w));
}

/** The claims of a sentence that none of its cited sources supports. */
export function unsupported(claims: Claim[], cited: CitedSource[]): Claim[] {
  const text = cited.map((c) => `${c.title}\n${c.snippet}`).join('\n');
  const values = numbersIn(text).map((n) => n.value);
  const folded = foldText(text);
  return claims.filter((c) => {
    if (cited.length === 0) return true;
    if (c.kind === 'number') {
      if (c.value === undefined) return !MULTIPLIER.test(text) || !new RegExp(c.token.slice(0, 4), 'i').test(text);
      return !values.some((v) => sameValue(c.value!, v));
    }
    if (c.kind === 'recency') return !cited.some((s) => s.dated);
    if (c.kind === 'event') return !EVENTS[c.event ?? '']?.test(text);
    if (c.kind === 'date') return !folded.includes(foldText(c.token));
    return !statesName(text, c.token);
  });
}
