// An organization's sending settings (operator: PATCH /admin/api/organizations/{orgId} `sending`),
// with the defaults a new organization gets, and the sending window: when, in the organization's
// IANA time zone, a step may go out (daylight-saving time included, through luxon).
import { DateTime } from 'luxon';
import { invalid } from '../http/problems.js';

export interface SendingSettings {
  /** IANA time zone the window is read in. */
  timeZone: string;
  /** ISO weekdays the window is open (1 Monday .. 7 Sunday). */
  days: number[];
  /** Local opening and closing times, HH:MM (24:00 is the end of the day). */
  from: string;
  to: string;
  /** Least seconds between two sends of one mailbox. */
  minGapSeconds: number;
  /** Most messages per recipient domain per rolling 24 hours (per organization). */
  recipientDomainDailyCap: number;
  /** Open and click tracking (off: it hurts deliverability). */
  tracking: boolean;
  /** Whether an organization without a verified mailbox sends from MAIL_FROM. */
  allowDeploymentSender: boolean;
  /** Daily cap of the deployment sender for this organization. */
  deploymentDailyCap: number;
  /** Most messages to one contact per local day (in `timeZone`), across every sequence and mailbox. */
  contactDailyLimit: number;
}

export const DEFAULT_SENDING: SendingSettings = {
  timeZone: 'UTC',
  days: [1, 2, 3, 4, 5, 6, 7],
  from: '00:00',
  to: '24:00',
  minGapSeconds: 0,
  recipientDomainDailyCap: 25,
  tracking: false,
  allowDeploymentSender: true,
  deploymentDailyCap: 200,
  contactDailyLimit: 1,
};

/** A mailbox's daily cap when the operator gives none (lemlist and Instantly advise 30 to 100). */
export const DEFAULT_MAILBOX_DAILY_CAP = 50;

export const sendingSettings = (stored: unknown): SendingSettings => ({
  ...DEFAULT_SENDING,
  ...(stored && typeof stored === 'object' && !Array.isArray(stored) ? (stored as Partial<SendingSettings>) : {}),
});

const minutes = (hhmm: string) => {
  const [h, m] = hhmm.split(':').map(Number);
  return h * 60 + m;
};

/** Whether a time zone name is one luxon (ICU) knows. */
export const validTimeZone = (zone: string): boolean => DateTime.now().setZone(zone).isValid;

/** The first instant at or after `at` when the window is open. */
export function windowOpensAt(s: SendingSettings, at: Date): Date {
  const from = minutes(s.from);
  const to = minutes(s.to);
  let local = DateTime.fromJSDate(at).setZone(s.timeZone);
  for (let i = 0; i < 8; i += 1) {
    if (s.days.includes(local.weekday)) {
      const now = local.hour * 60 + local.minute;
      if (now >= from && now < to) return local.toJSDate();
      // Set as wall-clock time, so a day with a daylight-saving change still opens at `from`.
      if (now < from) return local.set({ hour: Math.floor(from / 60), minute: from % 60, second: 0, millisecond: 0 }).toJSDate();
    }
    local = local.startOf('day').plus({ days: 1 });
  }
  return at; // no open day at all: the settings refuse that, so this is never reached
}

/** The start of the next local day after `at` in the organization's time zone (a day with a daylight-saving change included). */
export function nextLocalDay(s: SendingSettings, at: Date): Date {
  return DateTime.fromJSDate(at).setZone(s.timeZone).startOf('day').plus({ days: 1 }).toJSDate();
}

/** The start of the local day of `at` in the organization's time zone. */
export function localDayStart(s: SendingSettings, at: Date): Date {
  return DateTime.fromJSDate(at).setZone(s.timeZone).startOf('day').toJSDate();
}

/** Stored sending settings with the sent ones replacing theirs; 400 for an unknown zone, a window that closes before it opens or a contact limit under 1. */
export function checkedSending(patch: Partial<SendingSettings>, stored: unknown): Partial<SendingSettings> {
  const merged = { ...(stored && typeof stored === 'object' ? (stored as Partial<SendingSettings>) : {}), ...patch };
  const full = sendingSettings(merged);
  if (!validTimeZone(full.timeZone)) throw invalid(`${full.timeZone} is not a known IANA time zone.`, 'body.sending.timeZone');
  if (full.from >= full.to)
    throw invalid(`The sending window must open before it closes (from ${full.from}, to ${full.to}).`, 'body.sending.to');
  if (!Number.isInteger(full.contactDailyLimit) || full.contactDailyLimit < 1)
    throw invalid(`contactDailyLimit must be an integer of 1 or more (got ${full.contactDailyLimit}).`, 'body.sending.contactDailyLimit');
  return merged;
}
