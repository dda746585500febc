// The bound on suppressions that unauthenticated mail may cause (src/inbound/unverified-unsubscribe.ts):
// a missed opt-out costs more than a lost prospect, so unsubscribe wording is honoured even when the
// sender could not be authenticated, but only so often, so nobody can empty a customer's pipeline
// with forged mail. The organization's health names the bound once it is reached
// (src/account/org-health.ts). An hour on the real clock (a rate limit, not a business date).

/** Suppressions from unauthenticated unsubscribe requests per organization per hour, at most. */
export const UNVERIFIED_SUPPRESSIONS_PER_HOUR = 20;
/** The suppression source of such an entry (what the bound counts). */
export const UNVERIFIED_SUPPRESSION_SOURCE = 'unverified reply';
