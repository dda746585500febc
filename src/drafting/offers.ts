// What only the sender may promise or claim: offers, prices, discounts, free things, trials,
// guarantees, deadlines and payment requests (an "offer"), and facts about the sender (customers,
// results, awards, history, capabilities: a "sender claim"). Either is the sender's own only when
// its substance is in the template or the list's context (the same figures, dates, names and kind
// of terms, in any words); a cited source never makes it so, since a source is the prospect's page,
// or a hostile one.
import { foldText, statesName } from './claims.js';
import { numbersIn, sameValue } from './numbers.js';
import { DATE_WORD, dateWords, FIRST_PERSON, isSignOff } from './own-words.js';

const B = '(?<![\\p{L}\\p{N}])';
const E = '(?![\\p{L}\\p{N}])';
const re = (s: string) => new RegExp(s.replace(/\\b</g, B).replace(/\\b>/g, E), 'iu');

/** Kinds of terms, each found by its words in several languages. */
const TERMS: Array<[string, RegExp]> = [
  [
    'discount',
    re(
      '\\b<discount(?:s|ed)?\\b>|\\d+\\s?%\\s*(?:off|discount)\\b>|\\b<(?:half|\\d+%?)\\s+off\\b>|\\b<half[- ]price\\b>|\\b<(?:desconto|descuento|réduction|remise|rabais|rabatt|nachlass|sconto|rabat|indirim|korting|aanbieding|offerta|promozione)\\b>|скидк|zniżk',
    ),
  ],
  [
    'free',
    re(
      "\\b<(?:complimentary|gratis|grátis|gratuit\\p{L}*|kostenlos\\p{L}*|offerts?|ücretsiz|darmow\\p{L}*)\\b>|бесплатн|at no (?:extra )?cost|free of charge|no charge|\\b<(?:is|are|it's|that's|be) on us\\b>|\\b<on the house\\b>|\\b<(?:sin|sem) (?:coste|costo|custo)\\b>|giv(?:e|ing) away|giveaway|waive",
    ),
  ],
  [
    'price',
    re(
      "\\b<pric(?:e|es|ing) (?:starts?|is|are|from|at|of)\\b>|\\b<(?:today's|this|current) price\\b>|(?:starts?|starting|from|only|just) (?:at )?[$€£]\\s?\\d|\\b<per (?:seat|user|month|year|license|licence)\\b>|[$€£]\\s?\\d[\\d,.]*\\s*(?:/|a |per )\\s*(?:mo|month|year|yr|seat|user)\\b>|\\b<fees?\\b>|\\b<(?:founder'?s|special|discounted|launch|introductory|early[- ]bird) (?:rate|price|pricing)\\b>|\\b<(?:preço|precio|prix|preis) (?:de|del|à|von|ab)\\b>|цена от",
    ),
  ],
  ['trial', re('\\b<trials?\\b>|prueba gratis|teste grátis|essai gratuit|testphase|testversion')],
  [
    'guarantee',
    re(
      '\\b<guarantee(?:s|d)?\\b>|money[- ]back|\\b<refund|risk[- ]free|\\b<no risk\\b>|\\b<promise\\b>|\\b<(?:garantia|garantía|garantie)\\b>|гарант',
    ),
  ],
  [
    'gift',
    re(
      '\\b<gift(?:s| cards?)?\\b>|\\b<voucher|\\b<coupon|\\b<promo(?:tion(?:al)?)? code|\\b<code [A-Z0-9]{3,}\\b>|\\b<bonus\\b>|\\b<rewards?\\b>|\\b<prizes?\\b>|\\b<upgrade\\b>|\\b<(?:free )?credits\\b>|[$€£]\\s?\\d[\\d,.]*\\s+credit\\b>|\\b<credit (?:toward|towards|on your)\\b>',
    ),
  ],
  [
    'deadline',
    re(
      '\\b<expir(?:es|ing|y|ed)\\b>|\\b<ends (?:on|at|tonight|today|soon|this|next|in|friday|monday|sunday)\\b>|last chance|\\b<act now\\b>|today only|\\b<only \\p{L}+ (?:spots|seats|places|slots) (?:are )?left|\\b<left at this\\b>|limited[- ](?:time|spots|seats|offer)|\\b<lock in\\b>|\\b<within \\d+ hours\\b>|\\b<secure your spot\\b>|\\b<nur (?:diese|heute|noch)\\b>|только до|\\b<unless you confirm\\b>|\\b<will be (?:deleted|suspended|closed|cancell?ed)\\b>',
    ),
  ],
  [
    'offer',
    re(
      '\\b<offer(?:s|ing|ed)?\\b>|\\b<exclusive\\b>|\\b<(?:oferecemos|oferta|ofertas|ofrecemos|regalamos|offre|offrons|offrir|offrez|angebot|bieten wir|schenken|предлагаем)\\b>|\\b<you get\\b>|\\b<you qualify\\b>|\\b<qualify for\\b>|\\b<claim (?:it|your|now|this)\\b>|\\b<te damos\\b>|\\b<profitez\\b>',
    ),
  ],
  [
    'payment',
    re(
      '\\b<transfer (?:the |your )?(?:\\p{L}+ )?(?:fee|payment|money|funds|amount)\\b>|\\b<pay (?:now|today|upfront)\\b>|\\b<wire\\b>|bank details|credit card',
    ),
  ],
];
/** Terms that only name the kind of thing offered: they are the sender's when the template or list offers anything. */
const GENERIC = new Set(['offer']);
/** A date an offer runs until ("until March 31", "before Friday", "jusqu'à vendredi"): a deadline beside other terms. */
const UNTIL = re(
  `\\b<(?:until|till|before|by|through|até|hasta|antes del?|jusqu'à|avant le|bis|до)\\s+(?:the\\s+)?(?:end of (?:the )?)?(?:(?:${DATE_WORD.source})|\\d|today|tonight|tomorrow|midnight|this|next|sexta|viernes|vendredi|freitag|пятниц)`,
);

/** "free" as a price, not as availability ("are you free on Friday?", "feel free", "Free for a call?"). */
function freeAsPrice(s: string): string[] {
  const out: string[] = [];
  for (const m of s.matchAll(/(?<![\p{L}-])free(?![\p{L}-])/giu)) {
    const i = m.index ?? 0;
    const before = s.slice(Math.max(0, i - 30), i).toLowerCase();
    const after = s.slice(i + 4, i + 40).toLowerCase();
    if (/feel\s+$/.test(before) || /^\s+up\b/.test(after)) continue;
    if (/(?:\b(?:you|you're|you are|are you|i|i'm|i am|i'll be|we|we're|we are|anyone|someone|be|'re)\s+(?:\p{L}+\s+)?)$/iu.test(before))
      continue;
    const duration = /^\s+for\s+(?:\d+|\p{L}+)\s+(?:days?|weeks?|months?|years?)\b|^\s+for\s+the\s+first\b/iu.test(after);
    if (!duration && /^\s*$/.test(s.slice(0, i).replace(/[¿¡"'“(]/g, '')) && /^\s+(?:for|on|at|this|next|to)\b/.test(after)) continue;
    if (!duration && /^\s+(?:on|at|tomorrow|today|later|now|around)\b/.test(after)) continue;
    out.push(m[0]);
  }
  return out;
}

export interface Terms {
  kinds: Set<string>;
  /** The words that made each kind, by kind. */
  words: Map<string, string>;
}

/** The offer terms of a text (quoted text of someone else left out by the caller). */
export function termsOf(text: string): Terms {
  const words = new Map<string, string>();
  for (const [kind, r] of TERMS) {
    const m = r.exec(text);
    if (m) words.set(kind, m[0].trim());
  }
  // A pilot, written in lower case (a product named "... Pilot" is not one).
  const pilot = /(?<![\p{L}])pilots?(?![\p{L}])/u.exec(text);
  if (pilot && !words.has('trial')) words.set('trial', pilot[0]);
  const free = freeAsPrice(text);
  if (free.length && !words.has('free')) words.set('free', free[0]);
  const until = UNTIL.exec(text);
  if (until && words.size > 0 && !words.has('deadline')) words.set('deadline', until[0]);
  return { kinds: new Set(words.keys()), words };
}

/** What the sender's own material (the filled template and the list's context) holds. */
export interface OwnMaterial {
  text: string;
  terms: Terms;
  /** Its figures, each with what it counts. */
  figures: Figure[];
  dates: Set<string>;
}

export function ownMaterial(texts: Array<string | null | undefined>): OwnMaterial {
  // A sign-off line ("Best,") is not a claim the template makes.
  const text = texts
    .filter((t): t is string => typeof t === 'string' && t.trim() !== '')
    .join('\n')
    .split('\n')
    .filter((l) => !isSignOff(l) || l.trim().split(/\s+/).length > 3)
    .join('\n');
  return {
    text,
    terms: termsOf(text),
    figures: figuresOf(text),
    dates: new Set(dateWords(text).map((d) => foldText(d.word))),
  };
}

/** A figure and the first words after it, which say what it counts ("20 minutes", "twenty of your target accounts"). */
interface Figure {
  value: number;
  token: string;
  counts: string[];
}
const PERCENT = /^(?:percent|per cent|pour cent|por ciento|por cento|prozent|procent|per cento)/iu;
const COUNT_SKIP = new Set(
  'of per a an the your our their its de da do des der von vos nos tus sus seus suas ihre ihren unsere each every more than over'.split(
    ' ',
  ),
);
function figuresOf(text: string): Figure[] {
  return numbersIn(text).map((n) => {
    const after = text.slice(n.end, n.end + 60).split(/[.,;:!?\n]/)[0];
    const counts = PERCENT.test(after.trim()) || /^\s?%/.test(after) ? ['%'] : [];
    for (const w of after.split(/[^\p{L}]+/u).filter(Boolean)) {
      if (counts.length >= 3) break;
      const f = foldText(w);
      if (!COUNT_SKIP.has(f)) counts.push(f.replace(/s$/, '').slice(0, 3));
    }
    return { value: n.value, token: n.token, counts };
  });
}
/**
 * Whether the sender's own material has a figure: the same value, counting the same thing when both
 * say what they count (the template's "20 minutes" is not "twenty target accounts").
 */
const hasFigure = (own: OwnMaterial, f: Figure) =>
  own.figures.some(
    (x) => sameValue(f.value, x.value) && (f.counts.length === 0 || x.counts.length === 0 || f.counts.some((c) => x.counts.includes(c))),
  );

/** The offer terms of a sentence that the sender's own material does not hold; empty when it makes no offer. */
export function newOfferTerms(sentence: string, own: OwnMaterial): string[] {
  const t = termsOf(sentence);
  if (t.kinds.size === 0) return [];
  const missing: string[] = [];
  const ownAny = own.terms.kinds.size > 0;
  for (const [k, word] of t.words) if (!own.terms.kinds.has(k) && !(GENERIC.has(k) && ownAny)) missing.push(word);
  for (const f of figuresOf(sentence)) if (!hasFigure(own, f)) missing.push(f.token);
  for (const d of dateWords(sentence)) if (!own.dates.has(foldText(d.word))) missing.push(d.word);
  for (const u of sentence.match(/https?:\/\/\S+/gi) ?? []) if (!own.text.includes(u.replace(/[.,;)]+$/, ''))) missing.push(u);
  // The same terms in other words keep most of the sender's words; other things offered do not.
  if (missing.length === 0) {
    const fresh = freshWords(sentence, own);
    if (fresh.length * 2 > contentWords(sentence).length) missing.push(...fresh.slice(0, 4));
  }
  return [...new Set(missing)];
}

/** Durations, in the languages drafts are written in: a changed one is a changed term. */
const DURATION =
  /(?<![\p{L}])(second|minute|hour|day|week|month|quarter|year|segundo|minuto|hora|día|dia|semana|mes|mês|trimestre|año|ano|seconde|heure|jour|semaine|mois|année|sekunde|stunde|tag|woche|monat|quartal|jahr)(?:s|e|en|n|es)?(?![\p{L}])/giu;
const durations = (text: string) => new Set([...foldText(text).matchAll(DURATION)].map((m) => foldText(m[1])));

/**
 * The sender's own sentence a sentence rewords with another duration ("Most teams are live in
 * under an hour" for the template's "under a day"): the changed words and whether the own sentence
 * makes an offer; null when the sentence changes no term of its own material.
 */
export function alteredOwnTerms(sentence: string, own: OwnMaterial): { changed: string[]; offer: boolean } | null {
  const words = contentWords(sentence);
  const mine = durations(sentence);
  if (words.length < 3 || mine.size === 0) return null;
  for (const o of own.text.split(/(?<=[.!?])\s+|\n/)) {
    const theirs = durations(o);
    if (theirs.size === 0) continue;
    const stems = new Set(contentWords(o).map(stem));
    if (words.filter((w) => stems.has(stem(w))).length < 0.6 * words.length) continue;
    const changed = [...mine].filter((d) => !theirs.has(d));
    if (changed.length > 0 && [...theirs].some((d) => !mine.has(d))) return { changed, offer: termsOf(o).kinds.size > 0 };
  }
  return null;
}

// ---- claims about the sender ----------------------------------------------------------------

/** Words that make a first-person sentence a claim about the sender's business. */
const SENDER_CLAIM = re(
  '\\b<(?:customers?|clients?|clientes|kunden|klanten|clienti|specializ\\p{L}*|provid\\p{L}*|deliver\\p{L}*|enabl\\p{L}*|power\\p{L}*|automat\\p{L}*|work(?:ing)? with|worked (?:at|with|for)|partner(?:s|ed|ing)?|help(?:s|ed|ing)?|serve[sd]?|build|built|integrat\\p{L}*|support(?:s|ed)?|used by|trusted by|named|award\\p{L}*|leader|leading|best|only|better|faster|fastest|largest|first to|number one|certified|compliant|founded|profitable|raised|funded|closed|spent|years|record|cut|increas\\p{L}*|reduc\\p{L}*|sav(?:e|es|ed|ing)|doubl\\p{L}*|tripl\\p{L}*|boost\\p{L}*|lift|improv\\p{L}*|results?|guarantee)\\b>|#1',
);
const STRONG = re(
  "\\b<(?:only|best|better|faster|fastest|largest|biggest|leading|leader|first to|number one|award\\p{L}*|certified|compliant|accredited|launched|released|raised|acquired|won|hired|opened|founded|meilleur\\p{L}*|élu\\p{L}*|primé\\p{L}*|récompensé\\p{L}*|lauréat\\p{L}*|certifié\\p{L}*|seule?s?|numéro un|mejor(?:es)?|premiad\\p{L}*|galardonad\\p{L}*|líder(?:es)?|únic[oa]s?|certificad\\p{L}*|elegid\\p{L}*|melhor(?:es)?|eleit\\p{L}*|beste[nmrs]?|ausgezeichnet|prämiert|zertifiziert|führend\\p{L}*|marktführer|einzige[nmrs]?|migliore|premiat\\p{L}*|certificat\\p{L}*|gecertificeerd|bekroond)(?![\\p{L}\\p{N}'’])|#1",
);
/** Someone vouching for the sender: a referral or a testimonial. */
const VOUCHED = re(
  '\\b<(?:suggested|recommended) (?:I|we|that I|that we|you)\\b>|\\b<(?:referred|introduced) (?:me|us)\\b>|\\b<called us\\b>|\\b<told me\\b>',
);
const STOP = new Set(
  (
    'the a an and or but of to in on at for with by from as is are was were be been being it its this that these those there their they them ' +
    'we our us you your yours i my me he she his her who which what when where why how than then so too very just also already more most ' +
    'many much some any all each every other another such not no nor only own same can will would could should may might must do does did ' +
    'have has had into over under about after before between while during up down out off again further once here both few like per via'
  ).split(' '),
);
const contentWords = (text: string) =>
  foldText(text)
    .split(/[^\p{L}]+/u)
    .filter((w) => w.length > 2 && !STOP.has(w));
const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const stem = (w: string) => (w.length > 5 ? w.slice(0, 5) : w.replace(/s$/, ''));
/** The content words of a sentence that the sender's own material does not use (in any form). */
function freshWords(sentence: string, own: OwnMaterial): string[] {
  const ownStems = new Set(contentWords(own.text).map(stem));
  return contentWords(sentence).filter((w) => !ownStems.has(stem(w)));
}

/**
 * The clause in which a sentence speaks of the sender, or null: a clause that opens in the first
 * person or with the sender's name ("One more thing: we integrate with ..."), "teams that use
 * <product>", or someone vouching for the sender (then the whole sentence).
 */
export function senderClause(sentence: string, senderNames: ReadonlyArray<string>): string | null {
  // A name counts as written (a proper noun): "Pipeline Pilot gives ...", not "pipeline must matter".
  const names = senderNames.filter((n) => n.trim() !== '').map((n) => new RegExp(`^${literal(n.trim())}(?:['’]s)?(?![\\p{L}\\p{N}])`, 'u'));
  const s = sentence.replace(/^[\s"'“(]+/, '');
  if (VOUCHED.test(s)) return s;
  for (const clause of s.split(/[,;:—–]\s+|\s+(?:but|and|so)\s+/i)) {
    const c = clause.trim().replace(/^(?:but|and|so|also|plus|yet)\s+/i, '');
    const opening = /^(?:(?:most|many|all|some|one|none|several) of )?(\S+)/i.exec(c)?.[1] ?? '';
    if (FIRST_PERSON.test(opening.replace(/[,.:;]+$/, ''))) return c;
    if (names.some((n) => n.test(c.replace(/^(?:(?:most|many|all|some|one|none|several) of )?(?:the )?/i, '')))) return c;
  }
  return senderNames.some((n) => n.trim() !== '' && new RegExp(`(?:use|using) ${literal(n.trim())}(?![\\p{L}\\p{N}])`, 'u').test(s))
    ? s
    : null;
}

/**
 * What a sentence about the sender states that the sender's own material does not: its figures,
 * names and dates, and, when it claims something of the business (customers, results, awards,
 * capabilities), its substance. Empty when the sentence is the sender's own.
 */
export function newSenderClaims(
  sentence: string,
  names: string[],
  own: OwnMaterial,
  opts: { skipValues?: (value: number) => boolean } = {},
): string[] {
  const missing: string[] = [];
  for (const f of figuresOf(sentence)) if (!hasFigure(own, f) && !opts.skipValues?.(f.value)) missing.push(f.token);
  for (const d of dateWords(sentence)) if (!own.dates.has(foldText(d.word))) missing.push(d.word);
  for (const n of names) if (!statesName(own.text, n)) missing.push(n);
  // Superiority, awards and certifications are claims of their own, whatever else the sentence repeats.
  const strong = STRONG.exec(sentence);
  if (strong && !re(`\\b<${strong[0]}\\b>`).test(own.text)) missing.push(strong[0]);
  if (missing.length === 0 && (SENDER_CLAIM.test(sentence) || VOUCHED.test(sentence))) {
    const fresh = freshWords(sentence, own);
    if (fresh.length >= 3 && fresh.length * 2 >= contentWords(sentence).length) missing.push(...fresh.slice(0, 4));
  }
  return missing;
}
