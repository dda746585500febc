// What the API's codes mean, in words a rep reads (flags, advisories, holds, intents, statuses).
// An unknown code is shown as it is.

export const FLAG_KINDS = {
  'unsupported-claim': 'A statement about the prospect (a number, name, date or event) that no cited source states.',
  offer: 'An offer, price, discount, free thing, trial, guarantee or deadline that is not in the template or the list’s context.',
  'sender-claim': 'A claim about us (customers, results, awards, capabilities) that is not in the template or the list’s context.',
};

export const ADVISORY_KINDS = {
  'foreign-link': 'The model wrote a link that is not ours, the template’s or the prospect’s; it was removed with its sentence.',
};

export function advisoryWords(text) {
  const kind = String(text).split(':')[0].trim();
  return ADVISORY_KINDS[kind] ?? 'A finding left as a note for the reviewer.';
}

export const HOLDS = {
  kill_switch: 'The operator stopped all sending.',
  previous_step_pending: 'The step before has not gone out yet.',
  contact_snoozed: 'The contact is snoozed.',
  contact_out_of_office: 'The contact is out of office (held until their return date).',
  sending_window: 'Outside the organization’s sending window.',
  no_verified_mailbox: 'No verified mailbox to send from.',
  mailbox_unavailable: 'The mailbox is unavailable.',
  mailbox_paused: 'The mailbox is paused.',
  mailbox_daily_cap: 'The mailbox reached its daily cap.',
  min_gap: 'Waiting for the minimum gap between sends.',
  recipient_domain_daily_cap: 'The recipient’s domain reached its daily cap.',
  transport_retry: 'The mail server answered with a temporary failure; it will be retried.',
  not_yet_due: 'Not yet due.',
  possibly_sent: 'Its worker stopped while handing it over: it may have been sent and is never sent again automatically.',
};

export const holdWords = (code) => (code ? (HOLDS[code] ?? code) : 'Nothing holds it.');

export const INTENTS = {
  interested: 'Interested',
  not_interested: 'Not interested',
  unsubscribe: 'Asked to unsubscribe',
  out_of_office: 'Out of office',
  meeting_request: 'Asks for a meeting',
  bounce: 'Bounce',
  complaint: 'Complaint',
  other: 'Other',
};

export const intentWords = (code) => (code ? (INTENTS[code] ?? code) : 'Not classified yet');

export const STATUSES = {
  DRAFT_GENERATED: 'Generated',
  EDITED: 'Edited',
  REGENERATED: 'Regenerated',
  APPROVED: 'Approved',
  REJECTED: 'Rejected',
};

export const DECIDABLE = new Set(['DRAFT_GENERATED', 'EDITED', 'REGENERATED']);
