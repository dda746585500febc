// What the service reads from an inbound message, shared by the mail analysis (src/inbound/analyze/:
// MIME parsing, automatic mail, delivery and complaint reports, quote stripping, intent) and the
// ingestion pipeline (threading, storage, effects). The analysis never throws on what arrives from
// outside: a malformed message yields what could be read, a failing model the rules' answer.
import type { BounceClass, BounceReason } from '../mail/bounce-taxonomy.js';

export const INTENTS = [
  'interested',
  'not_interested',
  'unsubscribe',
  'out_of_office',
  'meeting_request',
  'bounce',
  'complaint',
  'other',
] as const;
export type Intent = (typeof INTENTS)[number];

/** The layer that decided: headers (automatic mail), a delivery or complaint report, the phrase rules, the model, or nothing matched. */
export type IntentSource = 'header' | 'report' | 'rules' | 'model' | 'default';

/** One recipient of a delivery report: what the report says of it, and the reason read from that. */
export interface ReportRecipient {
  recipient: string;
  /** RFC 3464 Action (`failed`, `delayed`, `delivered`, ...); a notice without fields: `failed` or `delayed`. */
  action: string | null;
  /** RFC 3463 status, from the Status field or where the text gives one as such. */
  status: string | null;
  diagnostic: string | null;
  /** A 5.x.x status, else a failed action (a notice without fields: not stated as temporary). */
  permanent: boolean;
  /** Why it failed (src/mail/bounce-reason.ts); `undefined` when nothing says. */
  reason: BounceReason;
  /** The reason's class of effect, temporary failures of the recipient being soft (src/mail/bounce-taxonomy.ts). */
  bounceClass: BounceClass;
}

/** An RFC 3464 delivery status notification (or a bounce recognised by the heuristic fallback). */
export interface DeliveryReport {
  kind: 'dsn';
  recipients: ReportRecipient[];
  /** Message-ID of the returned message (from its text/rfc822-headers or message/rfc822 part), `<...>` form. */
  originalMessageId: string | null;
  /** True when found by the fallback (no proper multipart/report), e.g. X-Failed-Recipients or a mailer-daemon text. */
  heuristic: boolean;
}

/**
 * Feedback types: RFC 5965's abuse, fraud, virus and other, RFC 6430's not-spam, RFC 6591's
 * auth-failure, and opt-out (the ARF drafts' unsubscribe request, still sent by some feedback loops
 * and meant by a mail client's unsubscribe message); `unknown` for any other value and for none.
 */
export const FEEDBACK_TYPES = ['abuse', 'fraud', 'virus', 'other', 'not-spam', 'auth-failure', 'opt-out', 'unknown'] as const;
export type FeedbackType = (typeof FEEDBACK_TYPES)[number];

/**
 * How a feedback report came: `arf` an RFC 5965 report (a message/feedback-report part); `jmrp` a
 * Microsoft (Hotmail, Outlook.com) complaint forward, the message attached; `aol` AOL's older
 * complaint notice, the message attached; `forward` a feedback loop's or abuse desk's spam report
 * with the message attached or quoted; `ses` an Amazon SES complaint notification (JSON);
 * `unsubscribe` a mail client's unsubscribe message (Apple Mail's).
 */
export type FeedbackFormat = 'arf' | 'jmrp' | 'aol' | 'forward' | 'ses' | 'unsubscribe';

/**
 * A feedback report about a message: a recipient (or their provider) complained, or reported
 * something else about it. `complaint` says whether it is a spam complaint (what suppresses as
 * COMPLAINT and counts in a complaint rate): an abuse report, or one of unknown or no type. An
 * auth-failure, fraud, virus, not-spam or other report is not (it is recorded for the operator),
 * nor is an opt-out, which is the recipient asking to receive no more mail (an unsubscribe).
 */
export interface ComplaintReport {
  kind: 'arf';
  format: FeedbackFormat;
  feedbackType: FeedbackType;
  /** The type as the report wrote it (lowercased, 40 characters), null when it gave none. */
  reportedType: string | null;
  complaint: boolean;
  /** The complaining recipient: Original-Rcpt-To (or the format's own field), else the To of the returned message; lowercased. */
  recipient: string | null;
  originalMessageId: string | null;
}

export interface ParsedMail {
  /** Message-IDs in `<...>` form, trimmed. */
  messageId: string | null;
  inReplyTo: string | null;
  references: string[];
  /** The header From; address lowercased. */
  from: { address: string; name: string | null } | null;
  /** To and Cc addresses, lowercased. */
  to: string[];
  subject: string | null;
  date: Date | null;
  /** The plain text body (HTML turned into text when there is no text part); '' when none. */
  text: string;
  /** The text without quoted earlier messages and the signature: what is classified and previewed. */
  strippedText: string;
  /** Automatic mail recognised from headers and sender (RFC 3834 and the markers big providers use); reason e.g. `auto-submitted:auto-replied`. */
  automatic: { automatic: boolean; reason: string | null };
  report: DeliveryReport | ComplaintReport | null;
  /** A few headers by lowercased name (first value), for the record. */
  headers: Record<string, string>;
}

export interface Classification {
  intent: Intent;
  /** 0-1. */
  confidence: number;
  /** A reason code a person can check, e.g. `dsn:5.1.1`, `arf:abuse`, `rule:unsubscribe`, `model`. */
  reason: string;
  source: IntentSource;
  /** out_of_office only: the return date the text gives, else null. */
  returnDate: Date | null;
}
