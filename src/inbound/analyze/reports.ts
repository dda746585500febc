// Delivery reports. RFC 3464 delivery status notifications
// (`multipart/report; report-type=delivery-status`: per recipient Final-Recipient, Action, Status,
// Diagnostic-Code) are read from their machine-readable parts, wherever the sender nested them;
// the returned message's Message-ID from its text/rfc822-headers or message/rfc822 part (feedback
// reports, ARF and the others, are complaints.ts's). Bounces without a proper report
// (X-Failed-Recipients; mailer-daemon or postmaster mail, or a bounce subject, stating an SMTP
// failure: a 5.x.x / 4.x.x status, "550 …", Gmail's "Address not found", Exchange's "Delivery has
// failed to these recipients") are recognised by a heuristic and marked `heuristic: true`.
import { type Attachment, parseAddressHeader } from 'mailparser';
import type { DeliveryReport } from '../analysis.js';
import { automaticSender, automaticSubject } from './automatic.js';
import { fold } from './fold.js';
import { MAX_BOUNCE_TEXT_CHARS, MAX_REPORT_PART_BYTES, MAX_REPORT_RECIPIENTS } from './limits.js';
import { clean, headerSection, mailboxes, normalizeId } from './mime.js';

export interface ReportInput {
  attachments: Attachment[];
  headers: Record<string, string>;
  from: { address: string } | null;
  to: string[];
  subject: string | null;
  text: string;
  inReplyTo: string | null;
}

export const DELIVERY_STATUS = new Set(['message/delivery-status', 'message/global-delivery-status']);
// text/rfc822-header (no s): a misspelling some feedback-loop generators use
const RETURNED = new Set(['text/rfc822-headers', 'text/rfc822-header', 'message/rfc822', 'message/global', 'message/global-headers']);

const STATUS = /^\s*([245])\.(\d{1,3})\.(\d{1,3})(?![\d.])/;
const STATUS_IN_TEXT = /(?<![\d.])([45])\.(\d{1,3})\.(\d{1,3})(?![\d.])/;
const SMTP_CODE_IN_TEXT = /(?<![\d.])(5[0-5]\d|4[2-5]\d)[ -](?!\d)/;
const ADDRESS = /[a-z0-9._%+'=-]{1,64}@[a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63}){0,8}\.[a-z]{2,24}/gi;
const INLINE_MESSAGE_ID = /^message-id:[ \t]*<([^<>\s]{1,900})>/im;
/** Failure wording of bounces sent without a report, folded (Gmail, Exchange, Postfix, Exim, qmail). */
const FAILURE_WORDING =
  /address not found|address couldn't be found|does not exist|doesn't exist|user unknown|unknown user|no such user|recipient address rejected|recipient not found|invalid recipient|mailbox unavailable|mailbox not found|delivery has failed to these recipients|could not be delivered|couldn't be delivered|wasn't delivered|was not delivered|permanent error|permanent failure|undeliverable/;
/** A delay warning, not a failure, when no status code says otherwise. */
const TEMPORARY_WORDING =
  /delivery (?:has been )?delayed|will be retried|will retry|still (?:being )?(?:retried|trying)|this is a warning|temporary (?:failure|error|problem)/;
const BOUNCE_SUBJECTS = new Set(['undeliverable', 'delivery-status', 'delivery-failed']);

export const partText = (a: Attachment) => clean(a.content.subarray(0, MAX_REPORT_PART_BYTES).toString('utf8'));

/** The field groups of a delivery-status or feedback-report part: `Name: value` lines, folded lines joined, groups split at empty lines. */
export function fieldGroups(text: string): Array<Map<string, string>> {
  const groups: Array<Map<string, string>> = [];
  let group = new Map<string, string>();
  let last: string | null = null;
  for (const line of text.split('\n')) {
    if (!line.trim()) {
      if (group.size) groups.push(group);
      group = new Map();
      last = null;
      continue;
    }
    if ((line[0] === ' ' || line[0] === '\t') && last) {
      group.set(last, `${group.get(last)} ${line.trim()}`);
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    if (!group.has(name)) group.set(name, line.slice(colon + 1).trim());
    last = name;
  }
  if (group.size) groups.push(group);
  return groups;
}

/** "rfc822; User@Example.com" → "user@example.com"; null when no address. */
export function typedAddress(v: string | undefined): string | null {
  if (!v) return null;
  const semi = v.indexOf(';');
  const a = (semi >= 0 ? v.slice(semi + 1) : v).trim().replace(/^<|>$/g, '').trim().toLowerCase();
  return a.includes('@') && a.length <= 320 ? a : null;
}

function statusOf(v: string | undefined): string | null {
  const m = v ? STATUS.exec(v) : null;
  return m ? `${m[1]}.${m[2]}.${m[3]}` : null;
}

const oneLine = (s: string, max: number) => s.replace(/\s+/g, ' ').trim().slice(0, max);

/** The header fields (lowercased names, first value) of the returned message, or null when none is attached. */
export function returnedHeaders(attachments: Attachment[]): Map<string, string> | null {
  const part = attachments.find((a) => RETURNED.has(a.contentType));
  if (!part) return null;
  return fieldGroups(clean(headerSection(part.content, MAX_REPORT_PART_BYTES).toString('utf8')))[0] ?? new Map<string, string>();
}

/** Message-ID and first To address of a returned message, read from its header section. */
export function returnedMessage(attachments: Attachment[]): { messageId: string | null; to: string | null } {
  const headers = returnedHeaders(attachments);
  if (!headers) return { messageId: null, to: null };
  const to = headers.get('to');
  return {
    messageId: normalizeId(headers.get('message-id')),
    to: to ? (mailboxes(parseAddressHeader(to.slice(0, 4000)))[0]?.address ?? null) : null,
  };
}

async function deliveryReport(part: Attachment, input: ReportInput): Promise<DeliveryReport> {
  const recipients: DeliveryReport['recipients'] = [];
  for (const g of fieldGroups(partText(part))) {
    const recipient = typedAddress(g.get('final-recipient')) ?? typedAddress(g.get('original-recipient'));
    if (!recipient) continue;
    const status = statusOf(g.get('status'));
    const action =
      g
        .get('action')
        ?.split(/[\s(;]/)[0]
        .toLowerCase() || null;
    const diagnostic = g.get('diagnostic-code');
    recipients.push({
      recipient,
      action,
      status,
      diagnostic: diagnostic ? oneLine(diagnostic, 500) : null,
      permanent: status ? status.startsWith('5') : action === 'failed',
    });
    if (recipients.length >= MAX_REPORT_RECIPIENTS) break;
  }
  const returned = returnedMessage(input.attachments);
  return {
    kind: 'dsn',
    recipients,
    originalMessageId: returned.messageId ?? inlineMessageId(input.text) ?? input.inReplyTo,
    heuristic: false,
  };
}

export function inlineMessageId(text: string): string | null {
  const m = INLINE_MESSAGE_ID.exec(text.slice(0, MAX_BOUNCE_TEXT_CHARS));
  return m ? `<${m[1]}>` : null;
}

/** The bounce heuristic, for failure notices sent without a delivery-status part. */
async function heuristicBounce(input: ReportInput): Promise<DeliveryReport | null> {
  const failedHeader = input.headers['x-failed-recipients'];
  const sender = automaticSender(input.from?.address);
  const bounceSender = sender === 'mailer-daemon' || sender === 'postmaster';
  const bounceSubject = BOUNCE_SUBJECTS.has(automaticSubject(input.subject) ?? '');
  if (failedHeader === undefined && !bounceSender && !bounceSubject) return null;
  const text = input.text.slice(0, MAX_BOUNCE_TEXT_CHARS);
  const status = STATUS_IN_TEXT.exec(text);
  const smtp = SMTP_CODE_IN_TEXT.exec(text);
  const wording = FAILURE_WORDING.test(fold(text));
  // a sender or subject alone (any automatic notice from a postmaster) needs a failure stated in the text
  if (failedHeader === undefined && !status && !smtp && !wording) return null;

  const statusCode = status ? `${status[1]}.${status[2]}.${status[3]}` : null;
  const temporary = statusCode ? statusCode.startsWith('4') : smtp ? smtp[1].startsWith('4') : TEMPORARY_WORDING.test(fold(text));
  const at = status?.index ?? smtp?.index ?? -1;
  const diagnostic = at >= 0 ? oneLine(lineAround(text, at), 300) : null;

  const own = new Set([input.from?.address, ...input.to].filter(Boolean));
  let recipients: string[] = [];
  if (failedHeader) {
    recipients = mailboxes(parseAddressHeader(failedHeader.slice(0, 4000))).map((m) => m.address);
  }
  if (recipients.length === 0) {
    for (const m of text.matchAll(ADDRESS)) {
      const a = m[0].toLowerCase();
      if (own.has(a) || automaticSender(a)) continue;
      recipients.push(a);
      break;
    }
  }
  const returned = returnedMessage(input.attachments);
  return {
    kind: 'dsn',
    recipients: [...new Set(recipients)].slice(0, MAX_REPORT_RECIPIENTS).map((recipient) => ({
      recipient,
      action: temporary ? 'delayed' : 'failed',
      status: statusCode,
      diagnostic,
      permanent: !temporary,
    })),
    originalMessageId: returned.messageId ?? inlineMessageId(text) ?? input.inReplyTo,
    heuristic: true,
  };
}

function lineAround(text: string, at: number): string {
  const start = text.lastIndexOf('\n', at) + 1;
  const end = text.indexOf('\n', at);
  return text.slice(start, end < 0 ? text.length : end);
}

/** The delivery report a message carries: a DSN, a bounce found by the heuristic, or null. */
export async function readReport(input: ReportInput): Promise<DeliveryReport | null> {
  const dsn = input.attachments.find((a) => DELIVERY_STATUS.has(a.contentType));
  if (dsn) return deliveryReport(dsn, input);
  return heuristicBounce(input);
}
