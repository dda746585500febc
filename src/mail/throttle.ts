// Whether a temporary SMTP answer says "slow down": the receiving side limits how fast or how much
// we send (a rate limit, an unusual volume, a busy server), as opposed to a failure about the
// message or the recipient (a full mailbox, greylisting, a policy). The dispatcher backs off the
// server that said it (src/dispatch/backoff.ts); the same kind of failure in a delivery report
// backs off the recipient domain. One pure function over the reply code and text.
//
// A throttle is, in order:
//   - never a 2xx or 5xx, nor greylisting ("greylisted", "try again later" on its own is how
//     greylisting answers: 450/451 4.7.1), nor a per-message recipient limit (4.5.3);
//   - Gmail's 4.7.28 (unusual rate) and Outlook's 4.7.650 (server busy, rate limited);
//   - Yahoo's deferral codes in brackets ([TSS04] unexpected volume, [TS01]..[TS03]);
//   - any 421 with a 4.7.x status (the server closes the connection on our account's policy);
//   - a 4xx whose wording says so (a rate limit, throttling, too many messages or connections,
//     unusual volume, slow down, server busy), with or without a status.
import type { BounceReason } from './bounce-taxonomy.js';

/** Gmail unusual rate, Outlook server busy / rate limited. */
const THROTTLE_STATUSES = new Set(['4.7.28', '4.7.650']);
/** Yahoo's bracketed deferral codes. */
const YAHOO_DEFERRAL = /\[?\bTSS?0[1-4]\b\]?/i;
const GREYLISTING = /\bgrey-?list|\bgray-?list/i;
const SLOW_DOWN =
  /\brate[- ]?limit|\bthrottl|\btoo many (?:messages|mails|e-?mails|connections|concurrent|sessions)\b|\bunusual (?:rate|volume)|\bunexpected volume|\bslow down\b|\bserver (?:is )?busy\b|\bsending (?:rate|limit)|\b(?:message|connection) rate\b|\bexceeded (?:the )?(?:sending|message|hourly|daily) (?:rate|limit|quota)/i;
/** The RFC 3463 status right after the reply code ("421 4.7.28 ..."), as outcomes.ts reads it. */
const REPLY_STATUS = /^[245]\d\d[ -]([245]\.\d{1,3}\.\d{1,3})(?![\d.])/;

/** The reply code of an answer: the one given apart, else the one the text opens with. */
function codeOf(code: number | null, text: string): number | null {
  if (code !== null) return code;
  const m = /^([2-5]\d\d)\b/.exec(text);
  return m ? Number(m[1]) : null;
}

/** Whether an SMTP answer (its code, when known apart, and its text) asks the sender to slow down. */
export function isThrottle(answer: { code: number | null; response: string }): boolean {
  const text = answer.response.trim();
  const code = codeOf(answer.code, text);
  if (code === null || code < 400 || code >= 500) return false;
  if (GREYLISTING.test(text)) return false;
  const status = REPLY_STATUS.exec(text)?.[1] ?? /\b(4\.7\.\d{1,3})\b/.exec(text)?.[1] ?? null;
  if (status === '4.5.3') return false;
  if (status && THROTTLE_STATUSES.has(status)) return true;
  if (YAHOO_DEFERRAL.test(text)) return true;
  if (code === 421 && status?.startsWith('4.7.')) return true;
  return SLOW_DOWN.test(text);
}

/** The failure reasons (src/mail/bounce-taxonomy.ts) that mean "slow down": never a refusal of the sender for its health. */
export const THROTTLE_REASONS: readonly BounceReason[] = ['rate_limited', 'too_many_connections'];

export const isThrottleReason = (reason: string | null): boolean => reason !== null && (THROTTLE_REASONS as string[]).includes(reason);
