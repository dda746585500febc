// What a delivery report says about the one message of ours it was matched to. Each
// of our messages has one recipient, so a delivery report is judged on that recipient's entry
// alone (a report listing several recipients is judged per recipient: the others are not ours);
// an entry that says nothing failed for good (delivered, relayed, expanded: a success notice;
// delayed: a warning, the server still trying) has no effect.
import { normalizeEmail } from '../crm/domains.js';
import { readBounceReason } from '../mail/bounce-reason.js';
import { type BounceClass, type BounceReason, bounceClass } from '../mail/bounce-taxonomy.js';
import type { DeliveryReport } from './analysis.js';

/** A report entry, with the reason and class the analysis reads when it reads them. */
type Entry = DeliveryReport['recipients'][number] & { reason?: BounceReason; bounceClass?: BounceClass };

export interface Judged {
  recipient: string;
  status: string | null;
  diagnostic: string | null;
  reason: BounceReason;
  bounceClass: BounceClass;
  /** A 4.x.x status or a delayed action: the failure was said to be temporary. */
  temporary: boolean;
}

/** Actions that say nothing failed for good (RFC 3464 section 2.3.3). */
const NOT_FAILED = new Set(['delivered', 'relayed', 'expanded', 'delayed']);

function failed(e: DeliveryReport['recipients'][number]): boolean {
  if (e.action && NOT_FAILED.has(e.action)) return false;
  if (e.status?.startsWith('2')) return false;
  return e.action === 'failed' || e.permanent || /^[45]\./.test(e.status ?? '');
}

/**
 * The failure a delivery report states for our recipient (`sentTo`, the send record's address);
 * null when it states none. The entry of that address is judged; when no entry names it (the
 * receiving side rewrote it: an alias, a forward), the report, matched to our message, speaks
 * for our one recipient through its failed entries (the first permanent one first). A failure
 * notice the heuristic found without any address is a failure of our recipient with nothing more
 * known (reason `undefined`).
 */
export function judgeDeliveryReport(report: DeliveryReport, sentTo: string | null): Judged | null {
  const to = sentTo ? normalizeEmail(sentTo) : null;
  // A failure notice found by the heuristic states a failure even when it names no address it could read.
  const entries: Entry[] =
    report.recipients.length === 0 && report.heuristic && to !== null
      ? [{ recipient: to, action: 'failed', status: null, diagnostic: null, permanent: true, reason: 'undefined', bounceClass: 'other' }]
      : report.recipients;
  const ours = entries.filter((e) => to !== null && normalizeEmail(e.recipient) === to);
  const failures = (ours.length ? ours : entries).filter(failed);
  const e = failures.find((x) => x.permanent) ?? failures[0];
  if (!e) return null;
  const read = readBounceReason({ status: e.status, smtpCode: null, diagnostic: e.diagnostic, action: e.action });
  const reason = e.reason ?? read.reason;
  return {
    recipient: e.recipient,
    status: e.status,
    diagnostic: e.diagnostic,
    reason,
    bounceClass: e.bounceClass ?? bounceClass(reason, read.temporary),
    temporary: read.temporary,
  };
}
