// Delivery reports. RFC 3464 delivery status notifications
// (`multipart/report; report-type=delivery-status`: per recipient Final-Recipient, Action, Status,
// Diagnostic-Code) are read from their machine-readable parts, wherever the sender nested them;
// the returned message's Message-ID from its text/rfc822-headers or message/rfc822 part (feedback
// reports, ARF and the others, are complaints.ts's). Bounces without a proper report
// (X-Failed-Recipients; mail from a mail system, or with a bounce subject, a null Return-Path or
// Auto-Submitted, stating a failure: a 5.x.x / 4.x.x status, "550 …", the wording of a failure
// notice or of a failure reason) are recognised by a heuristic and marked `heuristic: true`: an
// Amazon SES notification, the fields of a report given in the text, or a notice read per
// recipient (src/inbound/analyze/notice.ts). Every failed recipient gets a reason and its class
// (src/mail/bounce-reason.ts), read from its status, diagnostic, and the notice's lines about it.
import { type Attachment, parseAddressHeader } from 'mailparser';
import { enhancedStatusIn, type ReadReason, readBounceReason, replyCodeIn, smtpStageIn } from '../../mail/bounce-reason.js';
import { bounceClass } from '../../mail/bounce-taxonomy.js';
import type { DeliveryReport } from '../analysis.js';
import { automaticSender, automaticSubject } from './automatic.js';
import { fold } from './fold.js';
import { MAX_BOUNCE_TEXT_CHARS, MAX_REPORT_PART_BYTES, MAX_REPORT_RECIPIENTS } from './limits.js';
import { clean, headerSection, mailboxes, normalizeId, parseMime } from './mime.js';
import { inlineMessageId, inlineTo, noticeBody, noticeRecipients, returnedCopy } from './notice.js';
import { sesNotification } from './ses.js';

/** The Message-ID of a message quoted or copied inline (notice.ts's reader, which the complaint reader uses too). */
export { inlineMessageId };

export interface ReportInput {
  attachments: Attachment[];
  headers: Record<string, string>;
  from: { address: string; name?: string | null } | null;
  to: string[];
  subject: string | null;
  text: string;
  inReplyTo: string | null;
}

export const DELIVERY_STATUS = new Set(['message/delivery-status', 'message/global-delivery-status']);
// text/rfc822-header (no s): a misspelling some feedback-loop generators use
const RETURNED = new Set(['text/rfc822-headers', 'text/rfc822-header', 'message/rfc822', 'message/global', 'message/global-headers']);

const STATUS = /^\s*([245])\.(\d{1,3})\.(\d{1,3})(?![\d.])/;
/**
 * Wording of a failure (or delay) notice about its recipients, folded: what makes automatic mail a
 * bounce. A delay is a notice when it names the recipients it is about ("delivery to the following
 * recipient has been delayed"); "your message has been delayed" alone says no failure.
 */
const NOTICE_WORDING =
  /address not found|delivery has failed|could ?n[o']?t be delivered|was ?n[o']?t delivered|was not delivered|not (?:be )?delivered to|did not reach|could not reach|failed permanently|permanent (?:fatal )?errors?|permanent failure|undeliverable|unable to deliver|was ?n[o']?t able to deliver|not able to be delivered|error (?:occurred )?(?:while )?(?:trying to deliver|delivering)|trouble delivering|delivery (?:to the following recipients? )?failed|following (?:address(?:es|\(es\))?|recipients?)(?: or groups)? (?:failed|had|has|was|were|could|did)|following list of recipients|delivery problems|delivery errors|returned to sender|returning message to sender|message could not be delivered|rejected by a remote mail server|fatal errors|delayed for more than|could not deliver|not yet been delivered|failure reasons/;
/** Local parts and display names of mail systems' senders, beyond mailer-daemon and postmaster. */
const SYSTEM_SENDER =
  /^(?:mailer[-_.]?daemon|post[-_.]?master|mail[-_.]?delivery(?:[-_.](?:system|subsystem))?|mail[-_.]?daemon|mdaemon|mail[-_.]?administrator|bounces?|ndr)$/i;
const SYSTEM_NAME = /\b(?:mail delivery (?:sub)?system|mailer[- ]daemon|postmaster|mail administrator|delivery status notification)\b/i;
/** Subjects of failure and delay notices, folded. */
const NOTICE_SUBJECT =
  /undeliver|undelivered|delivery (?:status )?(?:notification|failure|failed|problem|report|has failed)|returned mail|mail delivery failed|delivery failed|failure notice|non[- ]?delivery|could not be delivered|delivery error|mail (?:system )?error|returning message|failed delivery|delivery failure|permanent delivery|delayed mail|message .{0,60} delayed|mail failure|error sending your mail|message delivery has failed|returned to sender|nondeliverable/;
const NO_FIELDS: ReadonlySet<string> = new Set();
/** Fields once per recipient: their second appearance in a group starts the next recipient's. */
const RECIPIENT_FIELDS: ReadonlySet<string> = new Set(['final-recipient', 'original-recipient', 'action', 'status', 'diagnostic-code']);

/** A part's text: UTF-8, or ISO-2022-JP where its escapes show (Japanese servers write report fields in it). */
export function partText(a: Attachment): string {
  const bytes = a.content.subarray(0, MAX_REPORT_PART_BYTES);
  if (bytes.includes('\x1b$B') || bytes.includes('\x1b$@')) {
    try {
      return clean(new TextDecoder('iso-2022-jp').decode(bytes));
    } catch {}
  }
  return clean(bytes.toString('utf8'));
}

/**
 * The field groups of a delivery-status or feedback-report part: `Name: value` lines, folded lines
 * joined, groups split at empty lines, and (for a report written without them) where one of
 * `startsGroup` comes again.
 */
export function fieldGroups(text: string, startsGroup: ReadonlySet<string> = NO_FIELDS): Array<Map<string, string>> {
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
    if (startsGroup.has(name) && group.has(name)) {
      groups.push(group);
      group = new Map();
    }
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

/** A failed (or delayed, or delivered) recipient with its reason read from all it says. */
function reportRecipient(
  recipient: string,
  action: string | null,
  status: string | null,
  diagnostic: string | null,
  notice: { text: string; preamble: string } | null,
  permanent: boolean,
): DeliveryReport['recipients'][number] {
  const stage = smtpStageIn(notice?.text) ?? smtpStageIn(diagnostic);
  // the diagnostic first; where it says nothing in words, the notice's lines about the recipient,
  // then its opening lines (Notes and IMail state the reason before naming the address)
  let read: ReadReason = readBounceReason({ status, action, diagnostic, stage });
  for (const more of [notice?.text, notice?.preamble]) {
    if (read.basis === 'wording' || !more) continue;
    const next = readBounceReason({ status, action, diagnostic: [diagnostic, more].filter(Boolean).join('\n'), stage });
    if (next.basis === 'wording' || read.basis === 'none') read = next;
  }
  // a status field that names nothing (X.0.0) yields to the specific code of the same class the answer gave
  const given = status?.endsWith('.0.0') ? (enhancedStatusIn(diagnostic) ?? enhancedStatusIn(notice?.text)) : null;
  return {
    recipient,
    action,
    status: given && status && given[0] === status[0] ? given : status,
    diagnostic: diagnostic ? oneLine(diagnostic, 500) : null,
    permanent,
    reason: read.reason,
    bounceClass: bounceClass(read.reason, read.temporary),
  };
}

/** What a notice says about each recipient it names, by address. */
function noticeAbout(text: string, skip: (a: string) => boolean) {
  const { recipients, preamble } = noticeRecipients(noticeBody(text.slice(0, MAX_BOUNCE_TEXT_CHARS)), skip, systemAddress);
  return { about: new Map(recipients.map((r) => [r.recipient, r.text])), order: recipients.map((r) => r.recipient), preamble };
}

/** The per-recipient groups of delivery-status fields, as recipients with their reasons. */
function fieldRecipients(groups: Array<Map<string, string>>, text: string, skip: (a: string) => boolean): DeliveryReport['recipients'] {
  const notice = noticeAbout(text, skip);
  const recipients: DeliveryReport['recipients'] = [];
  // one recipient reported, one named by the notice: the same one, whatever form each gives the address in
  const single = groups.filter((g) => g.has('final-recipient') || g.has('original-recipient')).length === 1 && notice.order.length === 1;
  for (const g of groups) {
    const recipient = typedAddress(g.get('final-recipient')) ?? typedAddress(g.get('original-recipient'));
    if (!recipient) continue;
    const status = statusOf(g.get('status'));
    const action =
      g
        .get('action')
        ?.split(/[\s(;]/)[0]
        .toLowerCase() || null;
    const diagnostic = g.get('diagnostic-code') ?? null;
    const about = notice.about.get(recipient) ?? (single ? notice.about.get(notice.order[0]) : undefined);
    recipients.push(
      reportRecipient(
        recipient,
        action,
        status,
        diagnostic,
        { text: about ?? '', preamble: notice.preamble },
        status ? status.startsWith('5') : action === 'failed',
      ),
    );
    if (recipients.length >= MAX_REPORT_RECIPIENTS) break;
  }
  return recipients;
}

/** Addresses a notice names that are not a failed recipient: ours (the notice's From and To). */
function skipOf(input: ReportInput): (a: string) => boolean {
  const own = new Set([input.from?.address, ...input.to].filter(Boolean));
  return (a) => own.has(a);
}

/** Role addresses notices give as contacts. */
const ROLE = /^(?:support|help|helpdesk|abuse|hostmaster|webmaster|noc|security|admin|administrator)$/;

/** A mail system's address (postmaster, mailer-daemon, no-reply) or a role's: a recipient only when a notice names no other. */
const systemAddress = (a: string) => automaticSender(a) !== null || ROLE.test(a.slice(0, a.lastIndexOf('@')).split('+')[0]);

/**
 * The Message-ID of the returned message: its own part (text/rfc822-headers, message/rfc822),
 * else headers given inline in the notice's copy, in another part (a text attachment, a report
 * part that swallowed a mis-delimited headers part), or anywhere in the text; else In-Reply-To.
 */
function originalId(input: ReportInput, returned: string | null): string | null {
  if (returned) return returned;
  const text = input.text.slice(0, MAX_BOUNCE_TEXT_CHARS * 4);
  const inCopy = inlineMessageId(returnedCopy(text));
  if (inCopy) return inCopy;
  for (const a of input.attachments) {
    if (!/^(?:text|message)\//.test(a.contentType) || RETURNED.has(a.contentType)) continue;
    const id = inlineMessageId(partText(a));
    if (id) return id;
  }
  return inlineMessageId(text, 'last') ?? input.inReplyTo;
}

async function deliveryReport(part: Attachment, input: ReportInput): Promise<DeliveryReport> {
  const recipients = fieldRecipients(fieldGroups(partText(part), RECIPIENT_FIELDS), input.text, skipOf(input));
  const returned = returnedMessage(input.attachments);
  return {
    kind: 'dsn',
    recipients,
    originalMessageId: originalId(input, returned.messageId),
    heuristic: false,
  };
}

/** Why a message may be a failure notice though it carries no report: who sent it, its subject, its headers. */
function noticeSigns(input: ReportInput): { strong: boolean; subject: boolean; weak: boolean } {
  const from = input.from?.address ?? '';
  const local = from.slice(0, Math.max(0, from.lastIndexOf('@'))).split('+')[0];
  const sender = automaticSender(from);
  const name = input.from?.name ?? '';
  const systemSender = sender === 'mailer-daemon' || sender === 'postmaster' || SYSTEM_SENDER.test(local) || SYSTEM_NAME.test(name);
  const subject = fold((input.subject ?? '').slice(0, 300));
  const bounceSubject =
    ['undeliverable', 'delivery-status', 'delivery-failed'].includes(automaticSubject(input.subject) ?? '') || NOTICE_SUBJECT.test(subject);
  const nullPath = (input.headers['return-path'] ?? '').replace(/\s/g, '') === '<>';
  const autoSubmitted =
    (input.headers['auto-submitted'] ?? 'no')
      .trim()
      .toLowerCase()
      .split(/[\s;(]/)[0] !== 'no';
  const failedHeader = input.headers['x-failed-recipients'] !== undefined;
  return {
    strong: failedHeader || systemSender || bounceSubject,
    subject: failedHeader || bounceSubject,
    weak: nullPath || autoSubmitted || !input.from || sender === 'no-reply',
  };
}

/** The text a notice states its failure in: the message's text, and plain text parts it carries as attachments (a notice whose part headers were broken). */
function noticeText(input: ReportInput): string {
  let text = input.text.slice(0, MAX_BOUNCE_TEXT_CHARS);
  for (const a of input.attachments) {
    if (text.length >= MAX_BOUNCE_TEXT_CHARS) break;
    if (a.contentType.startsWith('text/plain')) text += `\n${partText(a)}`.slice(0, MAX_BOUNCE_TEXT_CHARS - text.length);
  }
  return text;
}

/** The bounce heuristic, for failure notices sent without a delivery-status part. */
async function heuristicBounce(input: ReportInput): Promise<DeliveryReport | null> {
  const signs = noticeSigns(input);
  const text = noticeText(input);
  const returned = returnedMessage(input.attachments);
  const skip = skipOf(input);

  const ses = sesNotification(text);
  // an SES notification naming no recipient is no report we can act on (nor a notice to read as text)
  if (ses && ses.recipients.length === 0) return null;
  if (ses && (signs.strong || signs.weak || /amazonaws\.com$/.test(input.from?.address ?? ''))) {
    return {
      kind: 'dsn',
      recipients: ses.recipients.slice(0, MAX_REPORT_RECIPIENTS).map((r) => {
        const status = statusOf(r.status ?? undefined);
        const permanent = r.action === 'delivered' ? false : status ? status.startsWith('5') : !ses.transient;
        return reportRecipient(r.recipient, r.action, status, r.diagnostic, null, permanent);
      }),
      originalMessageId: ses.messageId ?? originalId(input, returned.messageId),
      heuristic: true,
    };
  }
  if (!signs.strong && !signs.weak) return null;

  const body = noticeBody(text);
  const folded = fold(body);
  const failedHeader = input.headers['x-failed-recipients'];
  const coded = enhancedStatusIn(body) !== null || replyCodeIn(body) !== null;
  const worded = NOTICE_WORDING.test(folded);
  const read = readBounceReason({ diagnostic: body });
  // a bounce subject or X-Failed-Recipients needs a failure stated in the text (a code, a notice's
  // or a failure's words); a mail system's sender alone (it sends other notices too) a code, a
  // notice's words, or words that the recipient cannot take mail; a null Return-Path or
  // Auto-Submitted alone (any auto-reply has them) a code or a notice's words
  const stated =
    coded ||
    worded ||
    (signs.subject && read.basis === 'wording') ||
    (signs.strong && read.basis === 'wording' && bounceClass(read.reason, false) === 'recipient');
  if (failedHeader === undefined && !stated) return null;

  // a report's fields given in the text (a report whose parts were not delimited, or pasted in)
  const groups = fieldGroups(text, RECIPIENT_FIELDS).filter((g) => g.has('final-recipient') || g.has('original-recipient'));
  let recipients: DeliveryReport['recipients'] = groups.length > 0 ? fieldRecipients(groups, text, skip) : [];

  if (recipients.length === 0) {
    const notice = noticeAbout(text, skip);
    let named = notice.order;
    if (failedHeader) {
      const listed = mailboxes(parseAddressHeader(failedHeader.slice(0, 4000))).map((m) => m.address);
      if (listed.length > 0) named = listed;
    }
    if (named.length === 0) {
      const to = returned.to ?? inlineTo(returnedCopy(text));
      if (to && !skip(to)) named = [to];
    }
    recipients = [...new Set(named)].slice(0, MAX_REPORT_RECIPIENTS).map((recipient) => {
      const about = notice.about.get(recipient) ?? (named.length === 1 ? body : '');
      const r = readBounceReason({ diagnostic: `${about}\n${notice.preamble}` });
      const status = enhancedStatusIn(about) ?? (named.length === 1 ? enhancedStatusIn(body) : null);
      const line = lineOf(about, status) ?? (named.length === 1 ? lineOf(body, status) : null);
      return reportRecipient(
        recipient,
        r.temporary ? 'delayed' : 'failed',
        status,
        line,
        { text: about, preamble: notice.preamble },
        !r.temporary,
      );
    });
  }
  return {
    kind: 'dsn',
    recipients,
    originalMessageId: originalId(input, returned.messageId),
    heuristic: true,
  };
}

/** The line of a text that gives its status or reply code (the server's answer), else null. */
function lineOf(text: string, status: string | null): string | null {
  const lines = text.split('\n').map((l) => l.trim());
  const hit =
    (status ? lines.find((l) => enhancedStatusIn(l) === status) : undefined) ?? lines.find((l) => replyCodeIn(l) !== null) ?? null;
  return hit ? oneLine(hit, 300) : null;
}

/** A delivery report carried as a message inside a notice (a report forwarded, or wrapped by a relay). */
async function nestedReport(input: ReportInput): Promise<DeliveryReport | null> {
  const signs = noticeSigns(input);
  if (!signs.strong && !signs.weak) return null;
  for (const a of input.attachments) {
    if (a.contentType !== 'message/rfc822' && a.contentType !== 'message/global') continue;
    try {
      const inner = await parseMime(a.content.subarray(0, MAX_REPORT_PART_BYTES * 4));
      const attachments = inner.attachments ?? [];
      const dsn = attachments.find((x) => DELIVERY_STATUS.has(x.contentType));
      if (!dsn) continue;
      const from = mailboxes(inner.from)[0] ?? null;
      const to = mailboxes(inner.to).map((m) => m.address);
      return await deliveryReport(dsn, {
        attachments,
        headers: {},
        from,
        to: [...new Set([...to, ...input.to])],
        subject: inner.subject ?? null,
        text: clean(inner.text ?? ''),
        inReplyTo: normalizeId(inner.inReplyTo) ?? input.inReplyTo,
      });
    } catch {}
  }
  return null;
}

/** The delivery report a message carries: a DSN, a bounce found by the heuristic, or null. */
export async function readReport(input: ReportInput): Promise<DeliveryReport | null> {
  const dsn = input.attachments.find((a) => DELIVERY_STATUS.has(a.contentType));
  if (dsn) return deliveryReport(dsn, input);
  return (await nestedReport(input)) ?? heuristicBounce(input);
}
