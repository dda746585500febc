// TEMPORARY STAND-IN (branch `effects`): replaced at merge by the real reader of bounce reasons
// (status fields, SMTP replies, the wording of the mail servers people meet). It reads only the
// RFC 3463 status code, and only the few codes whose meaning is fixed by the RFC, so the effects
// by reason can be written and tested against the shape the real reader answers.
import type { BounceReason } from './bounce-taxonomy.js';

export interface BounceFacts {
  /** An RFC 3463 status (`5.1.1`), from a status field or after the SMTP reply code; null when none. */
  status: string | null;
  /** The SMTP reply code (`550`), when one is known. */
  smtpCode: number | string | null;
  /** What the server said (a Diagnostic-Code, an SMTP reply). */
  diagnostic: string | null;
  /** The DSN action (`failed`, `delayed`, …), when one is known. */
  action: string | null;
}

/** The reason of a delivery failure, and whether it was temporary (4.x.x, 4xx, a delayed action). */
export function readBounceReason(f: BounceFacts): { reason: BounceReason; temporary: boolean } {
  const code = f.smtpCode === null ? '' : String(f.smtpCode);
  const temporary = f.status ? f.status.startsWith('4') : code.startsWith('4') || f.action === 'delayed';
  const m = f.status ? /^[245]\.(\d{1,3})\.(\d{1,3})$/.exec(f.status) : null;
  const detail = m ? `${m[1]}.${m[2]}` : '';
  const reason: BounceReason =
    detail === '1.2'
      ? 'host_unknown'
      : detail.startsWith('1.')
        ? 'user_unknown'
        : detail === '2.2'
          ? 'mailbox_full'
          : detail === '3.4'
            ? 'message_too_big'
            : detail === '4.7'
              ? 'expired'
              : detail.startsWith('7.')
                ? 'blocked'
                : temporary
                  ? 'temporary'
                  : 'undefined';
  return { reason, temporary };
}
