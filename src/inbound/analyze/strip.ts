// Quoted earlier messages and the signature taken off a reply, so that what is classified and
// previewed is what the person wrote. Two passes:
// 1. our own line pass, linear and regex-light, for what clients write and email-reply-parser
//    misses: a Gmail "On … wrote:" line wrapped over two lines, Outlook's "-----Original
//    Message-----" and "From: … Sent: … To: … Subject:" blocks (also under a "____" rule), Apple
//    Mail's "On <date>, at <time>, X wrote:", `>`-quoted lines, "Sent from my iPhone" and the
//    like, the "-- " delimiter, a sign-off followed by a short signature, the sender's name alone
//    on the last line;
// 2. email-reply-parser (the maintained package; pinned 2.3.7 for Node 20) for the other
//    languages' quote headers and signature lines, on a short, line-wrapped text only: some of
//    its patterns backtrack catastrophically on long lines and long texts (see limits.ts).
import EmailReplyParser from 'email-reply-parser';
import { foldTrim } from './fold.js';
import { MAX_REPLY_PARSER_CHARS, REPLY_PARSER_LINE_CHARS } from './limits.js';

const replyParser = new EmailReplyParser();

/** First words of an attribution line ("On … wrote:", "Am … schrieb …:", "Le … a écrit :", …), folded. */
const ATTRIBUTION_STARTS = ['on ', 'am ', 'le ', 'el ', 'il ', 'op ', 'em ', 'den ', 'w dniu ', 'dnia ', 'pe ', 'in data '];
/** Verbs of an attribution line, folded. */
const ATTRIBUTION_VERBS = [
  'wrote',
  'writes',
  'schrieb',
  'ecrit',
  'escribio',
  'scritto',
  'schreef',
  'escreveu',
  'skrev',
  'napisal',
  'pisze',
  'kirjoitti',
  'yazdi',
  'napsal',
];
/** "-----Original Message-----" and its translations, folded, dashes and spaces trimmed. */
const ORIGINAL_MESSAGE = new Set([
  'original message',
  'ursprungliche nachricht',
  "message d'origine",
  'mensaje original',
  'messaggio originale',
  'oorspronkelijk bericht',
  'originalmeddelande',
  'oprindelig meddelelse',
  'opprinnelig melding',
  'alkuperainen viesti',
  'mensagem original',
  'wiadomosc oryginalna',
  'forwarded message',
  'weitergeleitete nachricht',
  'message transfere',
  'mensaje reenviado',
  'messaggio inoltrato',
  'doorgestuurd bericht',
]);
/** Header names that open a quoted Outlook header block, folded, without the colon. */
const BLOCK_FROM = new Set(['from', 'von', 'de', 'da', 'van', 'fran', 'fra', 'od', 'lahettaja', 'felado']);
const BLOCK_DATE = new Set([
  'sent',
  'date',
  'gesendet',
  'datum',
  'envoye',
  'enviado',
  'enviado el',
  'fecha',
  'inviato',
  'data',
  'verzonden',
  'skickat',
  'sendt',
  'lahetetty',
  'wyslano',
]);
const BLOCK_OTHER = new Set([
  'to',
  'an',
  'a',
  'para',
  'aan',
  'till',
  'til',
  'do',
  'subject',
  'betreff',
  'objet',
  'asunto',
  'oggetto',
  'onderwerp',
  'amne',
  'emne',
  'assunto',
  'temat',
  'aihe',
  'cc',
]);
/** Lines a phone or webmail appends, folded; the rest of the message is signature or quote. */
const SENT_FROM = [
  'sent from my ',
  'sent from mail for windows',
  'sent from outlook',
  'sent from yahoo mail',
  'sent from the all new aol app',
  'get outlook for ',
  'sent with proton mail',
  'sent from proton mail',
  'sent via ',
  'sent from samsung',
  'sent from gmail mobile',
  'von meinem iphone gesendet',
  'von meinem ipad gesendet',
  'von meinem smartphone gesendet',
  'gesendet von meinem',
  'gesendet mit ',
  'envoye de mon ',
  'envoye depuis ',
  'enviado desde mi ',
  'enviado do meu ',
  'inviato da ',
  'verzonden vanaf ',
  'verstuurd vanaf ',
  'skickat fran ',
  'sendt fra ',
];
/** Sign-offs, folded, trailing punctuation trimmed. Thanks-like ones only close a message that has content above them. */
const SIGN_OFFS = new Set([
  'best',
  'best regards',
  'kind regards',
  'regards',
  'warm regards',
  'warmest regards',
  'best wishes',
  'all the best',
  'sincerely',
  'yours sincerely',
  'sincerely yours',
  'yours truly',
  'yours',
  'cheers',
  'talk soon',
  'br',
  'rgds',
  'kr',
  'with best regards',
  'many regards',
  'mit freundlichen grussen',
  'freundliche grusse',
  'viele grusse',
  'beste grusse',
  'liebe grusse',
  'herzliche grusse',
  'gruss',
  'lg',
  'vg',
  'mfg',
  'cordialement',
  'bien cordialement',
  'bien a vous',
  'salutations',
  'meilleures salutations',
  'saludos',
  'un saludo',
  'saludos cordiales',
  'atentamente',
  'cordiali saluti',
  'saluti',
  'distinti saluti',
  'met vriendelijke groet',
  'vriendelijke groet',
  'groeten',
  'met vriendelijke groeten',
  'med vanlig halsning',
  'vanliga halsningar',
  'mvh',
  'hilsen',
  'med venlig hilsen',
  'atenciosamente',
  'abracos',
  'pozdrawiam',
]);
const THANKS = new Set([
  'thanks',
  'thank you',
  'many thanks',
  'thanks again',
  'thanks a lot',
  'thx',
  'danke',
  'vielen dank',
  'merci',
  'gracias',
  'grazie',
  'bedankt',
  'tack',
  'obrigado',
]);
/** A signature after a sign-off: at most this many non-empty lines of at most SIGNATURE_LINE_CHARS. */
const SIGNATURE_LINES = 6;
const SIGNATURE_LINE_CHARS = 100;
/** Lines longer than this are never attribution lines or header-block lines. */
const HEADER_LINE_CHARS = 400;

const isQuoted = (line: string) => line.trimStart().startsWith('>');

function isAttribution(line: string): boolean {
  if (line.length > HEADER_LINE_CHARS) return false;
  const f = foldTrim(line);
  if (!f.endsWith(':')) return false;
  // other word orders ("Sam <sam@x> wrote:", "mån 6 jan. 2025 kl. 09:02 skrev Sam <sam@x>:") when they name an address
  if (!ATTRIBUTION_STARTS.some((s) => f.startsWith(s)) && !(f.length <= 200 && f.includes('@'))) return false;
  return ATTRIBUTION_VERBS.some((v) => f.includes(v));
}

/** An attribution line, or one that wraps onto the next line (Gmail wraps "… <address>\nwrote:"). */
function attributionAt(lines: string[], i: number): boolean {
  if (isAttribution(lines[i])) return true;
  const next = lines[i + 1];
  if (next === undefined || next.length > 200 || lines[i].length > HEADER_LINE_CHARS) return false;
  const f = foldTrim(lines[i]);
  if (!ATTRIBUTION_STARTS.some((s) => f.startsWith(s))) return false;
  return isAttribution(`${lines[i]} ${next}`);
}

function isOriginalMessage(line: string): boolean {
  if (line.length > 120) return false;
  const t = line.trim();
  if (!t.startsWith('--') && !t.startsWith('__')) return false;
  return ORIGINAL_MESSAGE.has(foldTrim(t, '-_*'));
}

/** The folded header name of a `Name: value` line ("*From:* x" and "De :" too), or null. */
function headerName(line: string): string | null {
  if (line.length > HEADER_LINE_CHARS) return null;
  const colon = line.indexOf(':');
  if (colon <= 0 || colon > 24) return null;
  return foldTrim(line.slice(0, colon), '*');
}

/** An Outlook-style quoted header block: From, then within five lines a date and a To/Subject. */
function headerBlockAt(lines: string[], i: number): boolean {
  const name = headerName(lines[i]);
  if (name === null || !BLOCK_FROM.has(name)) return false;
  let date = false;
  let other = false;
  for (let j = i + 1; j < Math.min(lines.length, i + 6); j += 1) {
    const n = headerName(lines[j]);
    if (n === null) continue;
    if (BLOCK_DATE.has(n)) date = true;
    else if (BLOCK_OTHER.has(n)) other = true;
  }
  return date && other;
}

/** Outlook's rule of underscores above a header block. */
function ruleAt(lines: string[], i: number): boolean {
  const t = lines[i].trim();
  if (t.length < 10 || t.length > 120 || [...t].some((c) => c !== '_')) return false;
  for (let j = i + 1, seen = 0; j < lines.length && seen < 3; j += 1) {
    if (!lines[j].trim()) continue;
    seen += 1;
    if (headerBlockAt(lines, j)) return true;
  }
  return false;
}

function isSentFrom(line: string): boolean {
  if (line.length > 160) return false;
  const f = foldTrim(line);
  return SENT_FROM.some((s) => f.startsWith(s));
}

/** Where the quoted history or the signature starts: the first line that opens one. */
function hardCut(lines: string[]): number {
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i];
    if (isQuoted(line)) continue;
    if (line === '-- ' || line.trim() === '--' || line.trim() === '—') return i;
    if (attributionAt(lines, i) || isOriginalMessage(line) || ruleAt(lines, i) || headerBlockAt(lines, i) || isSentFrom(line)) return i;
  }
  return lines.length;
}

/** A sign-off line followed by nothing but a short signature closes the message. */
function signOffCut(lines: string[], end: number): number {
  let contentAbove = false;
  for (let i = 0; i < end; i += 1) {
    const line = lines[i];
    if (isQuoted(line)) continue;
    if (line.length <= 40) {
      const f = foldTrim(line, ',.!-–—:;');
      const thanks = THANKS.has(f);
      if ((SIGN_OFFS.has(f) || (thanks && contentAbove)) && shortTail(lines, i + 1, end)) return i;
    }
    if (line.trim()) contentAbove = true;
  }
  return end;
}

function shortTail(lines: string[], from: number, end: number): boolean {
  let n = 0;
  for (let j = from; j < end; j += 1) {
    if (isQuoted(lines[j]) || !lines[j].trim()) continue;
    n += 1;
    if (n > SIGNATURE_LINES || lines[j].length > SIGNATURE_LINE_CHARS) return false;
  }
  return true;
}

/** The sender's name (or first name) alone on the last line, as people sign short replies. */
function dropTrailingName(lines: string[], fromName: string | null): string[] {
  if (!fromName) return lines;
  let last = lines.length - 1;
  while (last >= 0 && !lines[last].trim()) last -= 1;
  if (last <= 0 || lines[last].length > 60) return lines;
  const name = foldTrim(fromName, '"\'');
  const first = name.split(' ')[0];
  const line = foldTrim(lines[last], '-–—,.!');
  // "Becker, Klaus" signs as "Klaus Becker"; compare the words as a set
  const words = (s: string) => s.split(/[ ,]+/).filter(Boolean).sort().join(' ');
  if (line && (line === first || line === name || words(line) === words(name))) return lines.slice(0, last);
  return lines;
}

/** Lines starting with these make email-reply-parser's whole-text patterns backtrack; a few are fine. */
const RISKY_LINE = /^\s*(?:op\s|[a-z]{3,4}\.\s|w\sdniu|dnia\s|在)/i;
const MAX_RISKY_LINES = 3;

/** Long lines broken at a space by turning that space into a newline: same length, same positions. */
function wrapInPlace(text: string, width: number): string {
  const chars = text.split('');
  let lineStart = 0;
  let lastSpace = -1;
  for (let i = 0; i < chars.length; i += 1) {
    const c = chars[i];
    if (c === '\n') {
      lineStart = i + 1;
      lastSpace = -1;
      continue;
    }
    if (c === ' ') lastSpace = i;
    if (i - lineStart >= width) {
      const at = lastSpace > lineStart ? lastSpace : i;
      if (chars[at] === ' ') chars[at] = '\n';
      else chars.splice(at, 0, '\n'); // no space to break at: a newline is inserted (rare, only in a word over `width`)
      lineStart = at + 1;
      lastSpace = -1;
    }
  }
  return chars.join('');
}

function runReplyParser(text: string): string {
  if (!text || text.length > MAX_REPLY_PARSER_CHARS) return text;
  let risky = 0;
  for (const line of text.split('\n')) if (RISKY_LINE.test(line) && ++risky > MAX_RISKY_LINES) return text;
  const wrapped = wrapInPlace(text, REPLY_PARSER_LINE_CHARS);
  let visible: string;
  try {
    visible = replyParser.read(wrapped).getVisibleText();
  } catch {
    return text;
  }
  const kept = visible.trimEnd();
  // The parser keeps a leading part of the text in nearly every case; then the original (unwrapped)
  // text up to the same length is the answer. Otherwise its text, with our wraps in it.
  if (wrapped.length === text.length && wrapped.startsWith(kept)) return text.slice(0, kept.length);
  return kept;
}

function tidy(text: string): string {
  return text
    .split('\n')
    .map((l) => l.trimEnd())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/** The reply without quoted earlier messages and the signature; '' when nothing of the sender's own remains. */
export function stripReply(text: string, fromName: string | null = null): string {
  if (!text) return '';
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  const end = signOffCut(lines, hardCut(lines));
  const own = dropTrailingName(
    lines.slice(0, end).filter((l) => !isQuoted(l)),
    fromName,
  );
  const first = tidy(own.join('\n'));
  return tidy(runReplyParser(first));
}
