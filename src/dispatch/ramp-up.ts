// Ramp-up of a new mailbox: a mailbox with its own SMTP server (a new address, often a new domain,
// with no sending history) sends a few messages a day at first and more each day, as the warm-up
// tools of lemlist, Instantly and Smartlead ramp new mailboxes: its effective daily cap starts at
// `startCap` and grows by `dailyIncrease` each day (24 hours) since the mailbox was added, until
// its configured daily cap (organization setting `sending.rampUp`). The deployment sender
// (SMTP_URL, a relay with its own reputation) and mailboxes sending through it are not ramped.

export interface RampUp {
  enabled: boolean;
  /** The effective cap on the mailbox's first day. */
  startCap: number;
  /** What each following day adds. */
  dailyIncrease: number;
}

/** 20 a day, 3 more each day: a mailbox capped at 50 reaches it on day 11, at 100 on day 28. */
export const DEFAULT_RAMP_UP: RampUp = { enabled: true, startCap: 20, dailyIncrease: 3 };

const DAY_MS = 86_400_000;

/** The ramp-up settings as stored (some fields may be missing), with the defaults filled in. */
export const rampUpSettings = (stored: unknown): RampUp => ({
  ...DEFAULT_RAMP_UP,
  ...(stored && typeof stored === 'object' && !Array.isArray(stored) ? (stored as Partial<RampUp>) : {}),
});

/**
 * The daily cap a mailbox sends under now: its configured cap, or less while it ramps up (own SMTP
 * server, ramp-up on): the start cap on the day it was added, then one increase per day since.
 */
export function effectiveDailyCap(m: { dailyCap: number; ownSmtp: boolean; createdAt: Date }, ramp: RampUp, now: Date): number {
  if (!ramp.enabled || !m.ownSmtp) return m.dailyCap;
  const days = Math.max(0, Math.floor((now.getTime() - m.createdAt.getTime()) / DAY_MS));
  return Math.min(m.dailyCap, ramp.startCap + ramp.dailyIncrease * days);
}
