// An inbound message read with mailparser: ids, addresses, subject, date, the text (the HTML
// turned into text when there is no text part), a few headers, automatic-mail evidence, the
// delivery or complaint report, and the text without quotes and signature. Never throws: a message
// mailparser refuses is read for its header section alone, and anything unreadable yields an
// empty record.
import { compile } from 'html-to-text';
import type { StructuredHeader } from 'mailparser';
import type { ParsedMail } from '../analysis.js';
import { detectAutomatic } from './automatic.js';
import { MAX_HEADER_CHARS, MAX_HTML_CHARS, MAX_PARSED_BYTES, MAX_RECIPIENTS, MAX_REFERENCES, MAX_TEXT_CHARS } from './limits.js';
import { clean, headerEnd, headerSection, type MimeMail, mailboxes, normalizeId, normalizeIds, parseMime } from './mime.js';
import { readReport } from './reports.js';
import { stripReply } from './strip.js';

/** Headers kept (first value, unfolded) for the record and for the checks that read them. */
const KEPT_HEADERS = new Set([
  'date',
  'auto-submitted',
  'x-autoreply',
  'x-autorespond',
  'precedence',
  'x-auto-response-suppress',
  'x-ms-exchange-inbox-rules-loop',
  'x-ms-exchange-generated-message-source',
  'x-failed-recipients',
  'return-path',
  'reply-to',
  'sender',
  'delivered-to',
  'x-original-to',
  'envelope-to',
  'list-id',
  'list-unsubscribe',
  'content-type',
  'x-mailer',
  'user-agent',
]);

const htmlToText = compile({
  wordwrap: false,
  selectors: [
    { selector: 'img', format: 'skip' },
    { selector: 'style', format: 'skip' },
    { selector: 'script', format: 'skip' },
    { selector: 'head', format: 'skip' },
    { selector: 'a', options: { hideLinkHrefIfSameAsText: true, linkBrackets: ['[', ']'] } },
    ...['h1', 'h2', 'h3', 'h4', 'h5', 'h6'].map((selector) => ({ selector, options: { uppercase: false } })),
    { selector: 'table', format: 'block' },
    { selector: 'tr', format: 'block' },
    { selector: 'td', format: 'block' },
    { selector: 'th', format: 'block' },
  ],
  limits: { maxDepth: 100, maxChildNodes: 2000, maxInputLength: MAX_HTML_CHARS },
});

export const emptyMail = (): ParsedMail => ({
  messageId: null,
  inReplyTo: null,
  references: [],
  from: null,
  to: [],
  subject: null,
  date: null,
  text: '',
  strippedText: '',
  automatic: { automatic: false, reason: null },
  report: null,
  headers: {},
});

const MAX_HEADER_BYTES = 256 * 1024;

/**
 * A multipart message whose parts use another boundary than the one declared (a broken
 * generator) reads as empty; when the body's first delimiter line names a different boundary,
 * the message is read again with that one.
 */
function repairedBoundary(buf: Buffer, mime: MimeMail): Buffer | null {
  const ct = mime.headers?.get('content-type') as StructuredHeader | undefined;
  const declared = ct?.params?.boundary;
  if (!ct?.value?.startsWith('multipart/') || !declared || mime.text || mime.html || (mime.attachments?.length ?? 0) > 0) return null;
  const at = headerEnd(buf, MAX_HEADER_BYTES);
  if (!at) return null;
  const body = buf.subarray(at.body);
  const line = body
    .subarray(0, 64 * 1024)
    .toString('latin1')
    .split(/\r?\n/)
    .find((l) => l.startsWith('--') && l.length <= 200);
  const found = line?.slice(2).trim().replace(/--$/, '');
  if (!found || found === declared) return null;
  const head = buf.subarray(0, at.body).toString('latin1').replace(declared, found);
  return Buffer.concat([Buffer.from(head, 'latin1'), body]);
}

async function readMime(buf: Buffer): Promise<MimeMail | null> {
  if (buf.length === 0) return null;
  let mime: MimeMail;
  try {
    mime = await parseMime(buf);
  } catch {
    try {
      return await parseMime(headerSection(buf, MAX_HEADER_BYTES));
    } catch {
      return null;
    }
  }
  const repaired = repairedBoundary(buf, mime);
  if (repaired) {
    try {
      return await parseMime(repaired);
    } catch {
      return mime;
    }
  }
  return mime;
}

function keptHeaders(mime: MimeMail): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of mime.headerLines ?? []) {
    const key = h.key?.toLowerCase();
    if (!key || !KEPT_HEADERS.has(key) || key in out) continue;
    const colon = h.line.indexOf(':');
    out[key] = clean(h.line.slice(colon + 1, colon + 1 + MAX_HEADER_CHARS * 4))
      .replace(/\n[ \t]*/g, ' ')
      .trim()
      .slice(0, MAX_HEADER_CHARS);
  }
  return out;
}

const VOID_OR_IMPLIED = new Set([
  'area',
  'base',
  'br',
  'col',
  'embed',
  'hr',
  'img',
  'input',
  'link',
  'meta',
  'param',
  'source',
  'track',
  'wbr',
  'p',
  'li',
  'dt',
  'dd',
  'tr',
  'td',
  'th',
  'option',
  'o:p',
]);

/** Deeper than this, HTML is read by the plain tag-stripper: the converter's cost grows with depth faster than linearly. */
const MAX_HTML_DEPTH = 500;

/** Whether elements nest deeper than `max` (opening tags minus closing ones, void and implied-end elements aside). */
export function htmlTooDeep(html: string, max: number): boolean {
  let depth = 0;
  for (let i = html.indexOf('<'); i >= 0 && i < html.length; i = html.indexOf('<', i + 1)) {
    const closing = html[i + 1] === '/';
    let j = i + (closing ? 2 : 1);
    const start = j;
    while (j < html.length && j - start < 20 && /[a-zA-Z0-9:]/.test(html[j])) j += 1;
    if (j === start) continue;
    const name = html.slice(start, j).toLowerCase();
    if (VOID_OR_IMPLIED.has(name)) continue;
    const end = html.indexOf('>', j);
    if (end < 0) break;
    if (html[end - 1] === '/') continue;
    depth = closing ? Math.max(0, depth - 1) : depth + 1;
    if (depth > max) return true;
  }
  return false;
}

const ENTITIES: Record<string, string> = { nbsp: ' ', amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

/** Text of HTML by dropping tags, one pass: the fallback for HTML too deep to convert. */
export function stripTags(html: string): string {
  let out = '';
  let inTag = false;
  let from = 0;
  for (let i = 0; i < html.length; i += 1) {
    const c = html[i];
    if (!inTag && c === '<') {
      out += `${html.slice(from, i)} `;
      inTag = true;
    } else if (inTag && c === '>') {
      inTag = false;
      from = i + 1;
    }
  }
  if (!inTag) out += html.slice(from);
  return out
    .replace(/&(#\d{1,7}|#x[0-9a-f]{1,6}|[a-z]{2,8});/gi, (whole, e: string) => {
      if (e[0] !== '#') return ENTITIES[e.toLowerCase()] ?? whole;
      const code = e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    })
    .replace(/[ \t]+/g, ' ');
}

function textOf(mime: MimeMail): string {
  const text = clean(mime.text ?? '');
  if (text.trim()) return text.slice(0, MAX_TEXT_CHARS);
  if (typeof mime.html === 'string' && mime.html.trim()) {
    const html = mime.html.slice(0, MAX_HTML_CHARS);
    try {
      return clean(htmlTooDeep(html, MAX_HTML_DEPTH) ? stripTags(html) : htmlToText(html)).slice(0, MAX_TEXT_CHARS);
    } catch {
      return '';
    }
  }
  return text.slice(0, MAX_TEXT_CHARS);
}

function dateOf(value: string | undefined): Date | null {
  if (!value) return null;
  const d = new Date(value.slice(0, 200));
  return Number.isNaN(d.getTime()) ? null : d;
}

/** A delivery or complaint report is machine-written mail even when its headers do not say so. */
function withReportEvidence(mail: ParsedMail): ParsedMail {
  if (mail.report && !mail.automatic.automatic) mail.automatic = { automatic: true, reason: `report:${mail.report.kind}` };
  return mail;
}

async function build(mime: MimeMail): Promise<ParsedMail> {
  const headers = keptHeaders(mime);
  const from = mailboxes(mime.from)[0] ?? null;
  const to = [...new Set([...mailboxes(mime.to), ...mailboxes(mime.cc)].map((m) => m.address))].slice(0, MAX_RECIPIENTS);
  const subject = mime.subject ? clean(mime.subject).replace(/\n/g, ' ').trim().slice(0, MAX_HEADER_CHARS) || null : null;
  const text = textOf(mime);
  const inReplyTo = normalizeId(mime.inReplyTo);
  const mail: ParsedMail = {
    messageId: normalizeId(mime.messageId),
    inReplyTo,
    references: normalizeIds(mime.references, MAX_REFERENCES),
    from,
    to,
    subject,
    // mailparser makes up the current time for a missing or unreadable Date header; we read it ourselves
    date: dateOf(headers.date),
    text,
    strippedText: stripReply(text, from?.name ?? null),
    automatic: detectAutomatic(headers, from, subject),
    report: null,
    headers,
  };
  try {
    mail.report = await readReport({ attachments: mime.attachments ?? [], headers, from, to, subject, text, inReplyTo });
  } catch {
    mail.report = null;
  }
  return withReportEvidence(mail);
}

/**
 * A message given as fields rather than MIME (the operator row `inbound-messages` without `raw`):
 * the same record parseMail makes, read the same way (stripping, automatic subject and sender,
 * the bounce heuristic on the text). Never throws.
 */
export async function mailFromFields(f: {
  fromEmail: string;
  fromName?: string | null;
  subject?: string | null;
  text: string;
  messageId?: string | null;
  inReplyTo?: string | null;
  date?: Date | null;
  headers?: Record<string, string>;
}): Promise<ParsedMail> {
  try {
    const address = clean(String(f.fromEmail ?? ''))
      .trim()
      .toLowerCase();
    const from = address.includes('@')
      ? { address: address.slice(0, 320), name: f.fromName ? clean(f.fromName).trim().slice(0, 200) || null : null }
      : null;
    const subject = f.subject ? clean(f.subject).replace(/\n/g, ' ').trim().slice(0, MAX_HEADER_CHARS) || null : null;
    const text = clean(String(f.text ?? '')).slice(0, MAX_TEXT_CHARS);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(f.headers ?? {}))
      if (typeof v === 'string') headers[k.toLowerCase()] = clean(v).slice(0, MAX_HEADER_CHARS);
    const inReplyTo = normalizeId(f.inReplyTo);
    const mail: ParsedMail = {
      messageId: normalizeId(f.messageId),
      inReplyTo,
      references: inReplyTo ? [inReplyTo] : [],
      from,
      to: [],
      subject,
      date: f.date && !Number.isNaN(f.date.getTime()) ? f.date : null,
      text,
      strippedText: stripReply(text, from?.name ?? null),
      automatic: detectAutomatic(headers, from, subject),
      report: null,
      headers,
    };
    mail.report = await readReport({ attachments: [], headers, from, to: [], subject, text, inReplyTo }).catch(() => null);
    return withReportEvidence(mail);
  } catch {
    return emptyMail();
  }
}

export async function parseMail(raw: Buffer | string): Promise<ParsedMail> {
  try {
    let buf = typeof raw === 'string' ? Buffer.from(raw, 'utf8') : Buffer.isBuffer(raw) ? raw : Buffer.alloc(0);
    if (buf.length > MAX_PARSED_BYTES) buf = buf.subarray(0, MAX_PARSED_BYTES);
    const mime = await readMime(buf);
    return mime ? await build(mime) : emptyMail();
  } catch {
    return emptyMail();
  }
}
