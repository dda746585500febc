// Real MIME messages as mail clients and mail servers produce them (test/fixtures/mail/*.eml),
// with placeholders for what a test wants to choose: addresses, Message-IDs, dates. The loader
// fills them and answers the message with CRLF line ends, as it travels over SMTP.
//
// Placeholders: {{FROM}} the contact (sender of a reply; failed recipient of a bounce; complaining
// recipient of an ARF report), {{TO}} our mailbox, {{MESSAGE_ID}} this message's id,
// {{IN_REPLY_TO}} the id of our outbound message it answers (or returns), {{DATE}} its Date
// header, {{RETURN_DATE}} / {{RETURN_DATE_DE}} the return date an out-of-office text gives.
// Ids are written without angle brackets (the files add them).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const MAIL_FIXTURE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/mail');

export interface MailFixtureValues {
  from?: string;
  to?: string;
  messageId?: string;
  inReplyTo?: string;
  /** The Date header; default Mon, 6 Jan 2025 10:15:00 +0100. A Date given here is written in UTC. */
  date?: Date | string;
  /** The return date written in out-of-office texts; default 13 January 2025. */
  returnDate?: Date;
}

export const FIXTURE_DEFAULTS = {
  from: 'jane.doe@customer.example',
  to: 'sam@seller.example',
  inReplyTo: 'outbound-1.a1b2c3@seller.example',
  date: 'Mon, 6 Jan 2025 10:15:00 +0100',
  returnDate: new Date('2025-01-13T12:00:00Z'),
};

/** What each fixture is, for tests that replay them (the pipeline's SMTP tests, the bench). */
export const MAIL_FIXTURES = {
  'gmail-reply-interested': { intent: 'interested', automatic: false, report: null },
  'gmail-reply-quoting-ooo': { intent: 'interested', automatic: false, report: null },
  'outlook-desktop-reply-meeting-request': { intent: 'meeting_request', automatic: false, report: null },
  'outlook-web-reply-not-interested': { intent: 'not_interested', automatic: false, report: null },
  'apple-mail-ios-reply-unsubscribe': { intent: 'unsubscribe', automatic: false, report: null },
  'apple-mail-mac-reply-meeting-link': { intent: 'meeting_request', automatic: false, report: null },
  'thunderbird-reply-no-need-to-unsubscribe': { intent: 'meeting_request', automatic: false, report: null },
  'thunderbird-signature-only-reply': { intent: 'other', automatic: false, report: null },
  'html-only-reply-interested': { intent: 'interested', automatic: false, report: null },
  'exchange-out-of-office-return-date': { intent: 'out_of_office', automatic: true, report: null },
  'vacation-autoreply-no-date': { intent: 'out_of_office', automatic: true, report: null },
  'german-abwesenheitsnotiz': { intent: 'out_of_office', automatic: true, report: null },
  'postfix-dsn-5.1.1-user-unknown': { intent: 'bounce', automatic: true, report: 'dsn' },
  'postfix-dsn-4.4.1-delayed': { intent: 'bounce', automatic: true, report: 'dsn' },
  'gmail-bounce-no-report': { intent: 'bounce', automatic: true, report: 'dsn' },
  'exim-bounce-x-failed-recipients': { intent: 'bounce', automatic: true, report: 'dsn' },
  'arf-complaint-aol': { intent: 'complaint', automatic: true, report: 'arf' },
  'arf-complaint-yahoo': { intent: 'complaint', automatic: true, report: 'arf' },
  'malformed-broken-boundary': { intent: 'interested', automatic: false, report: null },
  'malformed-unknown-charset': { intent: 'not_interested', automatic: false, report: null },
  'malformed-truncated': { intent: 'interested', automatic: false, report: null },
  'malformed-binary-garbage': { intent: 'other', automatic: false, report: null },
  'malformed-empty': { intent: 'other', automatic: false, report: null },
} as const;

export type MailFixtureName = keyof typeof MAIL_FIXTURES;

const stripBrackets = (id: string) => id.trim().replace(/^<|>$/g, '');

function rfc5322(d: Date): string {
  return d.toUTCString().replace('GMT', '+0000');
}

function english(d: Date): string {
  return d.toLocaleDateString('en-US', { weekday: 'long', year: 'numeric', month: 'long', day: 'numeric', timeZone: 'UTC' });
}

/** dd.mm.yyyy: ASCII, so it fits the fixture's ISO-8859-1 quoted-printable body as is. */
function german(d: Date): string {
  return d.toLocaleDateString('de-DE', { year: 'numeric', month: '2-digit', day: '2-digit', timeZone: 'UTC' });
}

/** The raw message of a fixture with its placeholders filled, CRLF line ends. */
export function loadMailFixture(name: MailFixtureName, values: MailFixtureValues = {}): Buffer {
  return loadMailFile(`${name}.eml`, values);
}

/** A fixture file by its path under test/fixtures/mail (e.g. `automatic/ooo-fr.eml`), filled like loadMailFixture's. */
export function loadMailFile(file: string, values: MailFixtureValues = {}): Buffer {
  return filled(readFileSync(path.join(MAIL_FIXTURE_DIR, file)), path.basename(file, '.eml'), values);
}

function filled(file: Buffer, name: string, values: MailFixtureValues): Buffer {
  const date = values.date ?? FIXTURE_DEFAULTS.date;
  const returnDate = values.returnDate ?? FIXTURE_DEFAULTS.returnDate;
  const fill: Record<string, string> = {
    FROM: values.from ?? FIXTURE_DEFAULTS.from,
    TO: values.to ?? FIXTURE_DEFAULTS.to,
    MESSAGE_ID: stripBrackets(values.messageId ?? `${name}@fixtures.customer.example`),
    IN_REPLY_TO: stripBrackets(values.inReplyTo ?? FIXTURE_DEFAULTS.inReplyTo),
    DATE: typeof date === 'string' ? date : rfc5322(date),
    RETURN_DATE: english(returnDate),
    RETURN_DATE_DE: german(returnDate),
  };
  // latin1 keeps every byte (8-bit bodies, binary garbage) as one char; the values are written as UTF-8
  const text = file
    .toString('latin1')
    .replace(/\{\{([A-Z_]+)\}\}/g, (whole, key: string) => (key in fill ? Buffer.from(fill[key], 'utf8').toString('latin1') : whole))
    .replace(/\r?\n/g, '\r\n');
  return Buffer.from(text, 'latin1');
}

export const mailFixtureNames = () => Object.keys(MAIL_FIXTURES) as MailFixtureName[];
