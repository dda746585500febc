// One taxonomy for every delivery failure, wherever it is learnt (a delivery report or failure
// notice that comes back to the reply address, or the SMTP answer at send time): a reason, named
// after the reasons of the open-source bounce analyser sisimai so operators can compare, and the
// class of effect it has. The rules that read a reason from status codes, SMTP replies and the
// wording of the mail servers people meet are our own (src/mail/bounce-reason.ts).
//
// Effects by class:
//   recipient  a permanent failure about the recipient (the address or its domain does not exist,
//              the account is disabled or gone): the address is suppressed for ever;
//   soft       the recipient cannot take mail now (mailbox full, delivery expired, any temporary
//              failure): never re-sent as such; the address is suppressed only after repeated soft
//              failures over several days;
//   sender     a refusal of the sender, its IP, its content or its rate (blocks, reputation, spam,
//              policy, authentication, rate limits): never suppresses the recipient, counts against
//              the sending mailbox's health;
//   other      a permanent failure that is neither (a relay refused, a system or mailer error, a
//              message too big, nothing readable): the recipient is not suppressed.

export const BOUNCE_REASONS = [
  // recipient
  'user_unknown',
  'host_unknown',
  'has_moved',
  'suspended',
  'not_accepted',
  // soft
  'mailbox_full',
  'expired',
  'system_full',
  'exceed_limit',
  'temporary',
  // sender
  'blocked',
  'bad_reputation',
  'require_ptr',
  'spam_detected',
  'virus_detected',
  'content_error',
  'policy_violation',
  'filtered',
  'rejected',
  'auth_failure',
  'security_error',
  'not_compliant_rfc',
  'rate_limited',
  'too_many_connections',
  // other
  'message_too_big',
  'no_relaying',
  'system_error',
  'mailer_error',
  'network_error',
  'syntax_error',
  'on_hold',
  'undefined',
] as const;
export type BounceReason = (typeof BOUNCE_REASONS)[number];

export type BounceClass = 'recipient' | 'soft' | 'sender' | 'other';

const CLASS: Record<BounceReason, BounceClass> = {
  user_unknown: 'recipient',
  host_unknown: 'recipient',
  has_moved: 'recipient',
  suspended: 'recipient',
  not_accepted: 'recipient',
  mailbox_full: 'soft',
  expired: 'soft',
  system_full: 'soft',
  exceed_limit: 'soft',
  temporary: 'soft',
  blocked: 'sender',
  bad_reputation: 'sender',
  require_ptr: 'sender',
  spam_detected: 'sender',
  virus_detected: 'sender',
  content_error: 'sender',
  policy_violation: 'sender',
  filtered: 'sender',
  rejected: 'sender',
  auth_failure: 'sender',
  security_error: 'sender',
  not_compliant_rfc: 'sender',
  rate_limited: 'sender',
  too_many_connections: 'sender',
  message_too_big: 'other',
  no_relaying: 'other',
  system_error: 'other',
  mailer_error: 'other',
  network_error: 'other',
  syntax_error: 'other',
  on_hold: 'other',
  undefined: 'other',
};

/**
 * The class of a failure: its reason's, except that a temporary failure (a 4.x.x status or 4xx
 * reply, a delayed action) about the recipient or nothing in particular is soft, and so never a
 * suppression for ever; a temporary refusal of the sender (greylisting aside, a 4xx block or rate
 * limit) stays the sender's.
 */
export function bounceClass(reason: BounceReason, temporary: boolean): BounceClass {
  const c = CLASS[reason];
  return temporary && (c === 'recipient' || c === 'other') ? 'soft' : c;
}
