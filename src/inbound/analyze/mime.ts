// mailparser with the options the analysis needs, and small helpers over what it returns.
import { type AddressObject, type EmailAddress, type ParsedMail as MimeMail, type SimpleParserOptions, simpleParser } from 'mailparser';

export type { MimeMail };

export const PARSER_OPTIONS: SimpleParserOptions = {
  keepDeliveryStatus: true, // message/delivery-status stays a part we read, not text
  ignoreEmbedded: true, // returned messages (message/rfc822) stay parts: their headers name the original
  skipHtmlToText: true, // HTML is turned into text by us, and only when there is no text part
  skipTextToHtml: true, // no textAsHtml (linkify work we never use)
  skipImageLinks: true,
  keepCidLinks: true, // no data: URLs built from inline images
  checksumAlgo: false, // no hashing of attachments
};

export function parseMime(buf: Buffer): Promise<MimeMail> {
  return simpleParser(buf, PARSER_OPTIONS);
}

/** Where the header section of a raw message ends (after its last header line) and its body starts; -1 when not within `max` bytes. */
export function headerEnd(buf: Buffer, max: number): { end: number; body: number } | null {
  const n = Math.min(buf.length, max);
  for (let i = 0; i < n - 1; i += 1) {
    if (buf[i] !== 0x0a) continue;
    if (buf[i + 1] === 0x0a) return { end: i + 1, body: i + 2 };
    if (buf[i + 1] === 0x0d && buf[i + 2] === 0x0a) return { end: i + 1, body: i + 3 };
  }
  return null;
}

/** The header section of a raw message (up to the first empty line), at most `max` bytes, ending in an empty line. */
export function headerSection(buf: Buffer, max: number): Buffer {
  const end = headerEnd(buf, max)?.end ?? Math.min(buf.length, max);
  return Buffer.concat([buf.subarray(0, end), Buffer.from('\r\n')]);
}

const ID_IN_BRACKETS = /<([^<>\s]{1,900})>/;
const BARE_ID = /^[^<>\s]{1,900}$/;

/** A Message-ID in `<...>` form: the first bracketed id, or a bare one wrapped; null when there is none. */
export function normalizeId(value: string | null | undefined): string | null {
  if (!value) return null;
  const v = value.slice(0, 2000).trim();
  const m = ID_IN_BRACKETS.exec(v);
  if (m) return `<${m[1]}>`;
  return BARE_ID.test(v) && v.includes('@') ? `<${v}>` : null;
}

/** Every Message-ID of a References-like value (whitespace- or comma-separated, brackets or not). */
export function normalizeIds(values: string | string[] | null | undefined, max: number): string[] {
  if (!values) return [];
  const out: string[] = [];
  for (const v of Array.isArray(values) ? values : [values]) {
    for (const part of v.slice(0, 100_000).split(/[\s,]+/)) {
      const id = normalizeId(part);
      if (id && !out.includes(id)) out.push(id);
      if (out.length >= max) return out;
    }
  }
  return out;
}

function flatten(list: EmailAddress[], out: EmailAddress[]): void {
  for (const a of list) {
    if (a.group) flatten(a.group, out);
    else out.push(a);
  }
}

/** Mailboxes of address headers (groups flattened), with an address containing `@`, lowercased. */
export function mailboxes(value: AddressObject | AddressObject[] | undefined): Array<{ address: string; name: string | null }> {
  if (!value) return [];
  const all: EmailAddress[] = [];
  for (const v of Array.isArray(value) ? value : [value]) flatten(v.value ?? [], all);
  const out: Array<{ address: string; name: string | null }> = [];
  for (const a of all) {
    const address = clean(a.address ?? '')
      .trim()
      .toLowerCase();
    if (!address.includes('@') || address.length > 320) continue;
    const name = clean(a.name ?? '')
      .trim()
      .slice(0, 200);
    out.push({ address, name: name || null });
  }
  return out;
}

// C0 controls other than tab and newline, and DEL: Postgres text refuses NUL, and none of them means anything in mail text
const CONTROLS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g;

/** Text as stored: CRLF as LF, control characters removed. */
export function clean(s: string): string {
  return s.replace(/\r\n?/g, '\n').replace(CONTROLS, '');
}
