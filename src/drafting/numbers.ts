// Numbers in a sentence of a draft or a source, by value: digits in the usual forms ($40M, 40
// million, 1,200, 12.000, 12 000, 18%, 3x) and numbers written as words in English, Portuguese, Spanish,
// French and German ("forty million", "two hundred and forty", "twelve hundred", "quarenta e cinco",
// "dos millones", "douze"), so "forty million" and "$40 million" are the same claim. Written by hand:
// the npm number-word parsers read English only.

export interface NumberMention {
  /** The text as written. */
  token: string;
  value: number;
  index: number;
  end: number;
}

const UNITS: Record<string, number> = {
  // English
  two: 2,
  three: 3,
  four: 4,
  five: 5,
  six: 6,
  seven: 7,
  eight: 8,
  nine: 9,
  ten: 10,
  eleven: 11,
  twelve: 12,
  thirteen: 13,
  fourteen: 14,
  fifteen: 15,
  sixteen: 16,
  seventeen: 17,
  eighteen: 18,
  nineteen: 19,
  twenty: 20,
  thirty: 30,
  forty: 40,
  fifty: 50,
  sixty: 60,
  seventy: 70,
  eighty: 80,
  ninety: 90,
  twice: 2,
  // Portuguese
  dois: 2,
  duas: 2,
  três: 3,
  quatro: 4,
  cinco: 5,
  seis: 6,
  sete: 7,
  oito: 8,
  nove: 9,
  dez: 10,
  onze: 11,
  doze: 12,
  treze: 13,
  catorze: 14,
  quatorze: 14,
  quinze: 15,
  vinte: 20,
  trinta: 30,
  quarenta: 40,
  cinquenta: 50,
  sessenta: 60,
  setenta: 70,
  oitenta: 80,
  noventa: 90,
  cem: 100,
  dezasseis: 16,
  dezesseis: 16,
  dezassete: 17,
  dezessete: 17,
  dezoito: 18,
  dezanove: 19,
  dezenove: 19,
  duzentos: 200,
  duzentas: 200,
  trezentos: 300,
  trezentas: 300,
  quatrocentos: 400,
  quatrocentas: 400,
  quinhentos: 500,
  quinhentas: 500,
  seiscentos: 600,
  seiscentas: 600,
  setecentos: 700,
  setecentas: 700,
  oitocentos: 800,
  oitocentas: 800,
  novecentos: 900,
  novecentas: 900,
  // Spanish
  tres: 3,
  cuatro: 4,
  siete: 7,
  ocho: 8,
  nueve: 9,
  diez: 10,
  doce: 12,
  trece: 13,
  catorce: 14,
  veinte: 20,
  treinta: 30,
  cuarenta: 40,
  cincuenta: 50,
  sesenta: 60,
  ochenta: 80,
  cien: 100,
  quince: 15,
  dieciséis: 16,
  diecisiete: 17,
  dieciocho: 18,
  diecinueve: 19,
  doscientos: 200,
  doscientas: 200,
  trescientos: 300,
  trescientas: 300,
  cuatrocientos: 400,
  cuatrocientas: 400,
  quinientos: 500,
  quinientas: 500,
  setecientos: 700,
  setecientas: 700,
  ochocientos: 800,
  ochocientas: 800,
  novecientos: 900,
  novecientas: 900,
  // French
  deux: 2,
  trois: 3,
  quatre: 4,
  cinq: 5,
  huit: 8,
  neuf: 9,
  dix: 10,
  douze: 12,
  treize: 13,
  seize: 16,
  vingt: 20,
  trente: 30,
  quarante: 40,
  cinquante: 50,
  soixante: 60,
  // German
  zwei: 2,
  drei: 3,
  fünf: 5,
  sechs: 6,
  sieben: 7,
  neun: 9,
  zehn: 10,
  zwölf: 12,
  zwanzig: 20,
  dreißig: 30,
  vierzig: 40,
  fünfzig: 50,
};
/** Words that are numbers in one language and ordinary words in another: numbers only beside another number word. */
const AMBIGUOUS: Record<string, number> = { once: 11, dos: 2, elf: 11, acht: 8, vier: 4, sept: 7, mil: 1000 };
/** "a", "one" and their kin count only before a scale ("a thousand", "um milhão"). */
const ONE = new Set(['a', 'an', 'one', 'um', 'uma', 'un', 'une', 'uno', 'una', 'ein', 'eine', 'einen']);
const HUNDRED = new Set(['hundred', 'hundreds', 'cento', 'centos', 'ciento', 'cientos', 'cent', 'cents', 'hundert']);
const SCALES: Record<string, number> = {
  thousand: 1e3,
  thousands: 1e3,
  k: 1e3,
  mil: 1e3,
  mille: 1e3,
  tausend: 1e3,
  тысяч: 1e3,
  тысячи: 1e3,
  тыс: 1e3,
  million: 1e6,
  millions: 1e6,
  m: 1e6,
  mn: 1e6,
  mio: 1e6,
  millón: 1e6,
  millones: 1e6,
  milhão: 1e6,
  milhões: 1e6,
  millionen: 1e6,
  млн: 1e6,
  миллион: 1e6,
  миллиона: 1e6,
  миллионов: 1e6,
  billion: 1e9,
  billions: 1e9,
  b: 1e9,
  bn: 1e9,
  milliard: 1e9,
  milliards: 1e9,
  milliarde: 1e9,
  milliarden: 1e9,
  dozen: 12,
};
const CONNECTORS = new Set(['and', 'e', 'y', 'et', 'und']);

// German writes a number as one word ("sechshundertzwanzig", "einundzwanzig", "zweitausendfünfhundert").
const GERMAN_UNITS: Record<string, number> = {
  ein: 1,
  eins: 1,
  zwei: 2,
  drei: 3,
  vier: 4,
  fünf: 5,
  sechs: 6,
  sech: 6,
  sieben: 7,
  sieb: 7,
  acht: 8,
  neun: 9,
  zehn: 10,
  elf: 11,
  zwölf: 12,
};
const GERMAN_TENS: Record<string, number> = {
  zwanzig: 20,
  dreißig: 30,
  vierzig: 40,
  fünfzig: 50,
  sechzig: 60,
  siebzig: 70,
  achtzig: 80,
  neunzig: 90,
};
const GERMAN_BELOW_100 = new RegExp(
  `^(?:(${Object.keys(GERMAN_UNITS).join('|')})und)?(${Object.keys(GERMAN_TENS).join('|')})$|^(${Object.keys(GERMAN_UNITS).join('|')})(zehn)?$`,
);
function germanBelow100(w: string): number | null {
  if (w === '') return 0;
  const m = GERMAN_BELOW_100.exec(w);
  if (!m) return null;
  if (m[2]) return (m[1] ? GERMAN_UNITS[m[1]] : 0) + GERMAN_TENS[m[2]];
  return GERMAN_UNITS[m[3]] + (m[4] ? 10 : 0);
}
function germanBelow1000(w: string): number | null {
  const at = w.indexOf('hundert');
  if (at < 0) return germanBelow100(w);
  const head = w.slice(0, at);
  const hundreds = head === '' ? 1 : germanBelow100(head);
  const rest = germanBelow100(w.slice(at + 'hundert'.length));
  return hundreds === null || rest === null || hundreds > 9 ? null : hundreds * 100 + rest;
}
/** A German number word of more than one part, or null (a plain word in the lists above is read there). */
export function germanCompound(w: string): number | null {
  if (w.length < 9 || !/(?:hundert|tausend|zig|ßig|und)/.test(w)) return null;
  const at = w.indexOf('tausend');
  if (at < 0) return germanBelow1000(w);
  const thousands = at === 0 ? 1 : germanBelow1000(w.slice(0, at));
  const rest = germanBelow1000(w.slice(at + 'tausend'.length));
  return thousands === null || rest === null ? null : thousands * 1000 + rest;
}

const numberWord = (w: string) => UNITS[w] ?? AMBIGUOUS[w] ?? germanCompound(w) ?? undefined;
const isNumberWord = (w: string) =>
  w in UNITS || w in AMBIGUOUS || HUNDRED.has(w) || (w in SCALES && w.length > 2) || germanCompound(w) !== null;

/** A digit string's value: "1,200", "12.000" and "12 000" group thousands; "2.5" and "2,5" are decimals. */
function digitValue(s: string): number {
  const t = s.replace(/[\s\u00a0\u202f]/g, '');
  if (/^\d{1,3}([.,]\d{3})+$/.test(t)) return Number(t.replace(/[.,]/g, ''));
  return Number(t.replace(',', '.'));
}

// A figure in digits, its currency, and a scale after it ("40M", "40 million", "2 millones", "5 млн").
const DIGITS =
  /([$€£¥]\s?)?(\d{1,3}(?: \d{3})+(?![\d.,]\d)|\d+(?:[.,\u00a0\u202f]\d{3})*(?:[.,]\d+)?)(?:\s?(k|m|mn|bn|b|mio|thousand|million|millions|billion|billions|mil|millones|millón|milhões|milhão|mille|millions?|milliards?|tausend|millionen|milliarden?|тыс|тысяч[аи]?|млн|миллион(?:а|ов)?)(?![\p{L}\p{N}]))?/giu;
const WORD = /[\p{L}]+/gu;

/** Every number in a text, in digits or in words, by value. */
export function numbersIn(text: string): NumberMention[] {
  const out: NumberMention[] = [];
  for (const m of text.matchAll(DIGITS)) {
    const index = m.index ?? 0;
    // Digits inside a word (SAVE50, Q3, B2B) are codes, not figures.
    if (index > 0 && /[A-Za-z]/.test(text[index - 1]) && !m[1]) continue;
    const scale = m[3] ? SCALES[m[3].toLowerCase()] : 1;
    out.push({ token: m[0].trim(), value: digitValue(m[2]) * (scale ?? 1), index, end: index + m[0].length });
  }
  // Runs of number words, joined by spaces, hyphens and "and".
  const words = [...text.matchAll(WORD)].map((m) => ({ w: m[0].toLowerCase(), index: m.index ?? 0, end: (m.index ?? 0) + m[0].length }));
  let i = 0;
  while (i < words.length) {
    const run: typeof words = [];
    let j = i;
    while (j < words.length) {
      const w = words[j].w;
      const gap = run.length ? text.slice(run[run.length - 1].end, words[j].index) : '';
      if (run.length && !/^[\s-]+$/.test(gap)) break;
      if (isNumberWord(w) || (ONE.has(w) && j + 1 < words.length && (HUNDRED.has(words[j + 1].w) || words[j + 1].w in SCALES))) {
        run.push(words[j]);
        j += 1;
      } else if (run.length && CONNECTORS.has(w) && j + 1 < words.length && isNumberWord(words[j + 1].w)) {
        run.push(words[j]);
        j += 1;
      } else break;
    }
    const value = runValue(run.map((r) => r.w));
    if (value !== null) {
      const index = run[0].index;
      const end = run[run.length - 1].end;
      // "40 million" was read with its digits.
      if (!out.some((o) => o.index <= index && o.end >= end)) out.push({ token: text.slice(index, end), value, index, end });
    }
    i = run.length ? j : i + 1;
  }
  return out.sort((a, b) => a.index - b.index);
}

function runValue(run: string[]): number | null {
  const ws = run.filter((w) => !CONNECTORS.has(w));
  if (ws.length === 0) return null;
  // An ambiguous word alone, or a scale word alone ("million"), is not a number.
  if (ws.length === 1 && !(ws[0] in UNITS) && germanCompound(ws[0]) === null) return null;
  let total = 0;
  let current = 0;
  let seen = false;
  for (const w of ws) {
    if (ONE.has(w)) current += 1;
    else if (HUNDRED.has(w)) current = (current || 1) * 100;
    else if (w in SCALES && !(w in UNITS) && !(w in AMBIGUOUS && current === 0 && !seen)) {
      total += (current || 1) * SCALES[w];
      current = 0;
    } else {
      const n = numberWord(w);
      if (n === undefined) return null;
      if (w === 'mil') {
        total += (current || 1) * 1000;
        current = 0;
      } else current += n;
    }
    seen = true;
  }
  return total + current;
}

/** The values of every number in a text. */
export const valuesIn = (text: string): number[] => numbersIn(text).map((n) => n.value);

/** Whether two figures are the same number (within rounding of a written decimal). */
export const sameValue = (a: number, b: number) => Math.abs(a - b) <= Math.max(1e-9, Math.abs(b) * 1e-9);
