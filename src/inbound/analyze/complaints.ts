// Feedback reports: a recipient, or their mailbox provider, reporting a message we sent.
//   - RFC 5965 ARF: a `message/feedback-report` part anywhere in the message (Feedback-Type,
//     Original-Rcpt-To; the opt-out drafts' Removal-Recipient), the message returned beside it;
//   - Microsoft's complaint forwards (JMRP: Hotmail, Outlook.com, Live, MSN): no report part, the
//     message attached as message/rfc822 carrying X-HmXmrOriginalRecipient (the complainant), or a
//     Microsoft sender with the subject "complaint about message from …";
//   - AOL's older complaint notice: from scomp@aol…, or the subject "Client TOS Notification", the
//     message attached;
//   - other feedback loops and abuse desks forwarding a spam report: an abuse or feedback-loop
//     sender (abuse@, fbl@, feedbackloop@, spam-report@, …) or a subject saying so (spam report,
//     abuse report, complaint, SpamCop), with the reported message attached or quoted with its
//     Message-ID;
//   - Amazon SES complaint notifications (the SNS JSON mailed to a subscriber);
//   - a mail client's unsubscribe message (Apple Mail: `X-Apple-Unsubscribe: true`): an opt-out.
// A message with a delivery-status part is a bounce, never a complaint. The feedback type is kept
// as written and normalised; an abuse report, or one of unknown or no type, is a complaint; the
// other types are reports for the operator (see ComplaintReport in ../analysis.ts).
import { parseAddressHeader } from 'mailparser';
import type { ComplaintReport, FeedbackFormat, FeedbackType } from '../analysis.js';
import { automaticSender } from './automatic.js';
import { fold } from './fold.js';
import { MAX_REPORT_PART_BYTES } from './limits.js';
import { mailboxes, normalizeId } from './mime.js';
import {
  DELIVERY_STATUS,
  fieldGroups,
  inlineMessageId,
  partText,
  type ReportInput,
  returnedHeaders,
  returnedMessage,
  typedAddress,
} from './reports.js';

const FEEDBACK_REPORT = 'message/feedback-report';

/** Feedback-Type values as reports write them, to the normalised type. */
const FEEDBACK_TYPES: Record<string, FeedbackType> = {
  abuse: 'abuse',
  fraud: 'fraud',
  virus: 'virus',
  other: 'other',
  'not-spam': 'not-spam',
  miscategorized: 'not-spam', // the ARF drafts' name for not-spam
  'auth-failure': 'auth-failure',
  'opt-out': 'opt-out',
  'opt-out-list': 'opt-out',
  unsubscribe: 'opt-out',
};

/** Sender local parts of feedback loops and abuse desks (plus-tags and a trailing -report/-loop aside). */
const ABUSE_SENDERS =
  /^(?:abuse|abuse-?desk|abuse-?reports?|fbl|fbl-?reports?|feedback|feedback-?loop|feedbackloop|feedback-?reports?|arf|scomp|spam|spam-?reports?|spamreport|spam-?complaints?|complaints?|junk-?reports?)$/;
/** Wording of a spam report in a subject or text, folded. */
const REPORT_WORDING =
  /(?<![a-z])(?:(?:spam|abuse|junk|complaint|feedback[- ]loop) (?:report|complaint|notification|notice)|complaint about (?:a |the )?message|spam complaint|(?:reported|marked|flagged) (?:this |it |your message )?as (?:spam|junk)|unsolicited (?:commercial |bulk )?e-?mail|this is an? (?:spam|abuse) report|\[spamcop)/;
const MICROSOFT_DOMAINS = /(?:^|\.)(?:hotmail|outlook|live|msn)\.[a-z.]{2,10}$/;
const JMRP_SUBJECT = /^complaint about message from/;
const AOL_SUBJECT = /^client tos notification/;

const SES_COMPLAINT = /"(?:notificationType|eventType)"\s*:\s*"Complaint"/;
const SES_FEEDBACK_TYPE = /"complaintFeedbackType"\s*:\s*"([A-Za-z-]{1,40})"/;
const SES_RECIPIENT = /"emailAddress"\s*:\s*"([^"\s]{3,320})"/;
const SES_HEADER_ID = /"name"\s*:\s*"message-id"\s*,\s*"value"\s*:\s*"([^"]{3,900})"/i;
const SES_COMMON_ID = /"messageId"\s*:\s*"(<[^"<>]{3,900}>)"/;
const SES_MESSAGE_ID = /"messageId"\s*:\s*"([A-Za-z0-9._@-]{3,200})"/;

function normaliseType(reported: string | null): FeedbackType {
  return reported ? (FEEDBACK_TYPES[reported] ?? 'unknown') : 'unknown';
}

/** A type read from a header-like value: its first token, lowercased, bounded. */
function reportedType(v: string | undefined): string | null {
  return (
    v
      ?.trim()
      .split(/[\s(;]/)[0]
      .toLowerCase()
      .slice(0, 40) || null
  );
}

function report(
  format: FeedbackFormat,
  reported: string | null,
  recipient: string | null,
  originalMessageId: string | null,
  type: FeedbackType = normaliseType(reported),
): ComplaintReport {
  return {
    kind: 'arf',
    format,
    feedbackType: type,
    reportedType: reported,
    complaint: type === 'abuse' || type === 'unknown',
    recipient,
    originalMessageId,
  };
}

/** The first address of a header-like value ("rfc822; a@b", "<a@b>", "Name <a@b>"), lowercased. */
function addressOf(v: string | undefined): string | null {
  if (!v) return null;
  return (v.includes(';') ? typedAddress(v) : null) ?? mailboxes(parseAddressHeader(v.slice(0, 1000)))[0]?.address ?? null;
}

function localAndDomain(address: string | null | undefined): [string, string] {
  if (!address) return ['', ''];
  const at = address.lastIndexOf('@');
  return at < 0 ? [address, ''] : [address.slice(0, at).split('+')[0], address.slice(at + 1)];
}

function arfReport(text: string, input: ReportInput): ComplaintReport {
  const fields = fieldGroups(text)[0] ?? new Map<string, string>();
  const returned = returnedMessage(input.attachments);
  const recipient = addressOf(fields.get('original-rcpt-to')) ?? addressOf(fields.get('removal-recipient')) ?? returned.to;
  return report('arf', reportedType(fields.get('feedback-type')), recipient, returned.messageId);
}

/** An Amazon SES complaint notification: JSON in the text (read by fields: mail systems wrap its long line). */
function sesComplaint(input: ReportInput): ComplaintReport | null {
  const text = input.text.slice(0, MAX_REPORT_PART_BYTES);
  if (!SES_COMPLAINT.test(text)) return null;
  const recipients = text.indexOf('"complainedRecipients"');
  const recipient = recipients >= 0 ? (SES_RECIPIENT.exec(text.slice(recipients, recipients + 2000))?.[1].toLowerCase() ?? null) : null;
  const mail = text.indexOf('"mail"');
  const about = mail >= 0 ? text.slice(mail) : text;
  const header = SES_HEADER_ID.exec(about)?.[1];
  const common = SES_COMMON_ID.exec(about)?.[1];
  const sesId = SES_MESSAGE_ID.exec(about)?.[1];
  const messageId = normalizeId(header) ?? normalizeId(common) ?? (sesId ? `<${sesId}>` : null);
  return report('ses', reportedType(SES_FEEDBACK_TYPE.exec(text)?.[1]), recipient?.includes('@') ? recipient : null, messageId);
}

/** A complaint forwarded without a report part: Microsoft's, AOL's, a feedback loop's or an abuse desk's. */
function forwardedComplaint(input: ReportInput): ComplaintReport | null {
  const attached = returnedHeaders(input.attachments);
  const [local, domain] = localAndDomain(input.from?.address);
  const subject = fold(input.subject ?? '').trim();
  const original = (headers: Map<string, string>) => normalizeId(headers.get('message-id'));
  const to = (headers: Map<string, string>) => addressOf(headers.get('to'));

  if (attached) {
    const hotmailRecipient = addressOf(attached.get('x-hmxmroriginalrecipient'));
    if (hotmailRecipient || (MICROSOFT_DOMAINS.test(domain) && JMRP_SUBJECT.test(subject)))
      return report('jmrp', null, hotmailRecipient ?? to(attached), original(attached), 'abuse');
    if ((local === 'scomp' && domain.startsWith('aol.')) || AOL_SUBJECT.test(subject))
      return report('aol', null, to(attached), original(attached), 'abuse');
  }
  const abuseSender = ABUSE_SENDERS.test(local);
  const wording = REPORT_WORDING.test(subject) || REPORT_WORDING.test(fold(input.text.slice(0, 2000)));
  if (attached && ((abuseSender && wording) || REPORT_WORDING.test(subject)))
    return report('forward', null, to(attached), original(attached), 'abuse');
  // the reported message quoted in the text (SpamCop and abuse desks paste it): its Message-ID line
  if (!attached && abuseSender && wording) {
    const quoted = inlineMessageId(input.text);
    if (quoted) return report('forward', null, null, quoted, 'abuse');
  }
  return null;
}

/** A mail client's unsubscribe message (Apple Mail sends one to a List-Unsubscribe mailto): the sender opts out. */
function clientUnsubscribe(input: ReportInput): ComplaintReport | null {
  const apple = input.headers['x-apple-unsubscribe']?.trim().toLowerCase();
  if (apple !== 'true' && apple !== 'yes') return null;
  if (automaticSender(input.from?.address)) return null;
  return report('unsubscribe', null, input.from?.address ?? null, input.inReplyTo, 'opt-out');
}

/** The feedback report a message carries, or null (a delivery report is never one). */
export function readComplaint(input: ReportInput): ComplaintReport | null {
  const arf = input.attachments.find((a) => a.contentType === FEEDBACK_REPORT);
  if (arf) return arfReport(partText(arf), input);
  if (input.attachments.some((a) => DELIVERY_STATUS.has(a.contentType))) return null;
  return sesComplaint(input) ?? forwardedComplaint(input) ?? clientUnsubscribe(input);
}
