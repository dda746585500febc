// Understanding an inbound message (src/inbound/analyze): real MIME fixtures parsed and classified,
// the automatic-mail header rules one by one, delivery and complaint reports, quote and signature
// stripping, the phrase rules with negation, return dates, malformed input, and the model layer
// against the fake OpenAI-compatible model on loopback.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { INTENTS, type ParsedMail } from '../src/inbound/analysis.js';
import {
  CONFIDENCE,
  classify,
  findReturnDate,
  fromRules,
  limits,
  MODEL_THRESHOLD,
  mailFromFields,
  parseMail,
  stripReply,
} from '../src/inbound/analyze/index.js';
import { createModelClient } from '../src/llm/client.js';
import { loadConfig } from '../src/platform/config.js';
import { createLogger } from '../src/platform/logger.js';
import { type FakeModel, startFakeModel } from './support/fake-llm.js';
import { FIXTURE_DEFAULTS, loadMailFixture, MAIL_FIXTURES, type MailFixtureName, mailFixtureNames } from './support/mail-fixtures.js';

const noModel = createModelClient(loadConfig({}), createLogger('silent'));
const FROM = FIXTURE_DEFAULTS.from;
const TO = FIXTURE_DEFAULTS.to;
const OUTBOUND_ID = `<${FIXTURE_DEFAULTS.inReplyTo}>`;
const SENT_AT = new Date('2025-01-06T09:15:00Z'); // the fixtures' default Date header, Mon, 6 Jan 2025 10:15:00 +0100

const analyze = async (raw: Buffer | string) => {
  const mail = await parseMail(raw);
  return { mail, c: await classify(mail, { model: noModel }) };
};

/** A small message: default headers, overridden or removed (null) by `headers`. */
function message(headers: Record<string, string | null>, body = 'Thanks for your note.'): string {
  const all: Record<string, string | null> = {
    From: `Jane Doe <${FROM}>`,
    To: `Sam Seller <${TO}>`,
    Subject: 'Re: Quick idea for Customer Co',
    'Message-ID': '<m1@customer.example>',
    Date: 'Mon, 6 Jan 2025 10:15:00 +0100',
    'MIME-Version': '1.0',
    'Content-Type': 'text/plain; charset=utf-8',
    ...headers,
  };
  return `${Object.entries(all)
    .filter(([, v]) => v !== null)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\r\n')}\r\n\r\n${body.replace(/\r?\n/g, '\r\n')}`;
}

/** A ParsedMail for rule tests: only the stripped text (and a date) matter. */
const replyOf = (strippedText: string, extra: Partial<ParsedMail> = {}): ParsedMail => ({
  messageId: '<r@customer.example>',
  inReplyTo: null,
  references: [],
  from: { address: FROM, name: 'Jane Doe' },
  to: [TO],
  subject: 'Re: Quick idea',
  date: SENT_AT,
  text: strippedText,
  strippedText,
  automatic: { automatic: false, reason: null },
  report: null,
  headers: { date: 'Mon, 6 Jan 2025 10:15:00 +0100' },
  ...extra,
});

interface Expected {
  from: string | null;
  name?: string | null;
  stripped?: string;
  textHas?: string[];
  intent: string;
  source: string;
  reason: string;
  returnDate?: string | null;
  automatic?: string | null;
}

const EXPECTED: Record<MailFixtureName, Expected> = {
  'gmail-reply-interested': {
    from: FROM,
    name: 'Jane Doe',
    textHas: ['> Hi Jane,', 'wrote:'],
    stripped: 'Hi Sam,\n\nSounds interesting — could you send me pricing for a team of 25? We’re\nevaluating options this quarter.',
    intent: 'interested',
    source: 'rules',
    reason: 'rule:interested:sounds-interesting',
  },
  'gmail-reply-quoting-ooo': {
    from: FROM,
    name: 'Jane Doe',
    textHas: ['>> I am out of the office until Monday, January 13, 2025'],
    stripped: 'Sorry for the slow reply, I was travelling. Tell me more about how the\npricing works for smaller teams?',
    intent: 'interested',
    source: 'rules',
    reason: 'rule:interested:tell-me-more',
  },
  'outlook-desktop-reply-meeting-request': {
    from: FROM,
    name: 'Mark Müller',
    textHas: ['-----Original Message-----', 'Sent: Monday, January 6, 2025 9:02 AM'],
    stripped:
      'Hi Sam,\n\nThanks for reaching out. Are you free Tuesday at 2pm CET for a 30-minute call? I’d like to include our head of sales – I’ll send an invite if that works for you.',
    intent: 'meeting_request',
    source: 'rules',
    reason: 'rule:meeting_request:availability',
  },
  'outlook-web-reply-not-interested': {
    from: FROM,
    name: 'Priya Raman',
    textHas: ['________________________________\nFrom: Sam Seller'],
    stripped: 'Thanks, but we already use HubSpot for this and it’s not a fit for us right now.',
    intent: 'not_interested',
    source: 'rules',
    reason: 'rule:not_interested:already-use',
  },
  'apple-mail-ios-reply-unsubscribe': {
    from: FROM,
    name: 'Tom Baker',
    textHas: ['Sent from my iPhone', '> On Jan 6, 2025, at 09:02'],
    stripped: 'Please remove me from your list. We’re not looking for this.',
    intent: 'unsubscribe',
    source: 'rules',
    reason: 'rule:unsubscribe:remove-me',
  },
  'apple-mail-mac-reply-meeting-link': {
    from: FROM,
    name: 'Lena Vogel',
    textHas: ['> Am 06.01.2025 um 09:02 schrieb Sam Seller'],
    stripped: 'Hi Sam,\n\nHappy to chat. Grab a slot that suits you here: https://calendly.com/lena-customer/30min',
    intent: 'meeting_request',
    source: 'rules',
    reason: 'rule:meeting_request:lets-talk',
  },
  'thunderbird-reply-no-need-to-unsubscribe': {
    from: FROM,
    name: 'Erik Svensson',
    textHas: ['Could we book a time next week?'], // format=flowed joined
    stripped:
      'Hi Sam,\n\nno need to unsubscribe me, this actually came at a good time. Could we book a time next week? Thursday afternoon works for me.',
    intent: 'meeting_request',
    source: 'rules',
    reason: 'rule:meeting_request:availability',
  },
  'thunderbird-signature-only-reply': {
    from: FROM,
    name: 'Peter Lind',
    textHas: ['Head of Operations'],
    stripped: '',
    intent: 'other',
    source: 'default',
    reason: 'default:empty',
  },
  'html-only-reply-interested': {
    from: FROM,
    name: 'María García',
    textHas: ['Sent with Proton Mail', '> Hi María,'],
    stripped: 'Hi Sam,\n\nTell me more! Could you send over a case study and your pricing?',
    intent: 'interested',
    source: 'rules',
    reason: 'rule:interested:tell-me-more',
  },
  'exchange-out-of-office-return-date': {
    from: FROM,
    name: 'Anna Schmidt',
    automatic: 'auto-submitted:auto-generated',
    stripped:
      'Thank you for your message. I am out of the office until Monday, January 13, 2025 with limited access to email.\n\nFor urgent matters, please contact office@customer.example.',
    intent: 'out_of_office',
    source: 'header',
    reason: 'ooo:auto-submitted',
    returnDate: '2025-01-13T08:00:00.000Z',
  },
  'vacation-autoreply-no-date': {
    from: FROM,
    name: 'Ola Nordmann',
    automatic: 'auto-submitted:auto-replied',
    stripped: "Hello,\n\nI'm away on vacation with limited access to my email. I will reply when I\nget back.",
    intent: 'out_of_office',
    source: 'header',
    reason: 'ooo:auto-submitted',
    returnDate: null,
  },
  'german-abwesenheitsnotiz': {
    from: FROM,
    name: 'Becker, Klaus',
    automatic: 'subject:abwesenheitsnotiz',
    textHas: ['Büro', 'Grüßen'],
    intent: 'out_of_office',
    source: 'header',
    reason: 'ooo:subject',
    returnDate: '2025-01-13T08:00:00.000Z', // "ab dem 13. Januar … wieder", not "bis 10.01."
  },
  'postfix-dsn-5.1.1-user-unknown': {
    from: 'mailer-daemon@mail.seller.example',
    automatic: 'auto-submitted:auto-replied',
    textHas: ['User unknown in virtual'],
    intent: 'bounce',
    source: 'report',
    reason: 'dsn:5.1.1',
  },
  'postfix-dsn-4.4.1-delayed': {
    from: 'mailer-daemon@mail.seller.example',
    automatic: 'auto-submitted:auto-replied',
    intent: 'bounce',
    source: 'report',
    reason: 'dsn:4.4.1',
  },
  'gmail-bounce-no-report': {
    from: 'mailer-daemon@googlemail.com',
    automatic: 'auto-submitted:auto-replied',
    textHas: ['** Address not found **'],
    intent: 'bounce',
    source: 'report',
    reason: 'dsn-heuristic:5.1.1',
  },
  'exim-bounce-x-failed-recipients': {
    from: 'mailer-daemon@mail.customer-isp.example',
    automatic: 'auto-submitted:auto-replied',
    intent: 'bounce',
    source: 'report',
    reason: 'dsn-heuristic:5.1.1',
  },
  'arf-complaint-aol': {
    from: 'scomp@aol.net',
    name: null,
    automatic: 'return-path:null',
    intent: 'complaint',
    source: 'report',
    reason: 'arf:abuse',
  },
  'arf-complaint-yahoo': {
    from: 'feedback@arf.mail.yahoo.com',
    automatic: 'report:arf',
    intent: 'complaint',
    source: 'report',
    reason: 'arf:abuse',
  }, // no automatic headers: the report says it
  'malformed-broken-boundary': {
    from: FROM,
    stripped: 'Sounds interesting, tell me more.',
    intent: 'interested',
    source: 'rules',
    reason: 'rule:interested:sounds-interesting',
  },
  'malformed-unknown-charset': {
    from: FROM,
    textHas: ['Not interested, thanks.'],
    intent: 'not_interested',
    source: 'rules',
    reason: 'rule:not_interested:not-interested',
  },
  'malformed-truncated': {
    from: FROM,
    textHas: ['evaluating opt'],
    intent: 'interested',
    source: 'rules',
    reason: 'rule:interested:sounds-interesting',
  },
  'malformed-binary-garbage': { from: null, stripped: '', intent: 'other', source: 'default', reason: 'default:empty' },
  'malformed-empty': { from: null, stripped: '', intent: 'other', source: 'default', reason: 'default:empty' },
};

describe('fixtures: every message parsed and classified', () => {
  it.each(mailFixtureNames())('%s', async (name) => {
    const e = EXPECTED[name];
    const { mail, c } = await analyze(loadMailFixture(name));
    const readable = name !== 'malformed-binary-garbage' && name !== 'malformed-empty';
    expect(mail.messageId).toBe(readable ? `<${name}@fixtures.customer.example>` : null);
    expect(mail.from?.address ?? null).toBe(e.from);
    if (e.name !== undefined) expect(mail.from?.name ?? null).toBe(e.name);
    if (readable) {
      expect(mail.to).toEqual([TO]);
      expect(mail.date?.toISOString()).toBe(SENT_AT.toISOString());
    }
    for (const t of e.textHas ?? []) expect(mail.text).toContain(t);
    if (e.stripped !== undefined) expect(mail.strippedText).toBe(e.stripped);
    expect(mail.text).not.toContain('{{');
    if (e.automatic !== undefined) expect(mail.automatic).toEqual({ automatic: e.automatic !== null, reason: e.automatic });
    expect(c).toMatchObject({ intent: e.intent, source: e.source, reason: e.reason });
    expect(c.intent).toBe(MAIL_FIXTURES[name].intent);
    expect(c.confidence).toBeGreaterThanOrEqual(0);
    expect(c.confidence).toBeLessThanOrEqual(1);
    expect(c.returnDate?.toISOString() ?? null).toBe(e.returnDate ?? null);
    expect(mail.report?.kind ?? null).toBe(MAIL_FIXTURES[name].report);
    expect(mail.automatic.automatic).toBe(MAIL_FIXTURES[name].automatic);
  });

  it('threads replies: In-Reply-To and References in <...> form, the client quirks included', async () => {
    const gmail = await parseMail(loadMailFixture('gmail-reply-quoting-ooo'));
    expect(gmail.inReplyTo).toBe(OUTBOUND_ID);
    expect(gmail.references).toEqual(['<ooo-first-step-1192@seller.example>', '<ooo-autoreply-7731@customer.example>', OUTBOUND_ID]);
    const owa = await parseMail(loadMailFixture('outlook-web-reply-not-interested')); // Message-ID folded onto a second line
    expect(owa.messageId).toBe('<outlook-web-reply-not-interested@fixtures.customer.example>');
    expect(owa.inReplyTo).toBe(OUTBOUND_ID);
    expect(owa.references).toEqual([OUTBOUND_ID]);
  });

  it('fills the placeholders a test chooses; ids are accepted with or without brackets; dates are written in UTC', async () => {
    const raw = loadMailFixture('exchange-out-of-office-return-date', {
      from: 'anna@other.example',
      to: 'rep@seller.example',
      messageId: '<ooo-1@other.example>',
      inReplyTo: 'sent-9@seller.example',
      date: new Date('2026-03-02T08:00:00Z'),
      returnDate: new Date('2026-03-16T12:00:00Z'),
    });
    expect(raw.includes(Buffer.from('\r\n'))).toBe(true);
    const { mail, c } = await analyze(raw);
    expect(mail).toMatchObject({
      messageId: '<ooo-1@other.example>',
      inReplyTo: '<sent-9@seller.example>',
      from: { address: 'anna@other.example' },
      to: ['rep@seller.example'],
    });
    expect(mail.headers['x-ms-exchange-inbox-rules-loop']).toBe('anna@other.example');
    expect(mail.date?.toISOString()).toBe('2026-03-02T08:00:00.000Z');
    expect(mail.strippedText).toContain('until Monday, March 16, 2026');
    expect(c.returnDate?.toISOString()).toBe('2026-03-16T09:00:00.000Z'); // no time of day: 09:00 in the sender's zone (UTC here)
    const de = await analyze(
      loadMailFixture('german-abwesenheitsnotiz', { date: new Date('2026-03-02T08:00:00Z'), returnDate: new Date('2026-03-16T12:00:00Z') }),
    );
    expect(de.c.returnDate?.toISOString()).toBe('2026-03-16T09:00:00.000Z');
  });

  it('keeps a few headers by lowercased name, unfolded, for the record', async () => {
    const m = await parseMail(loadMailFixture('exchange-out-of-office-return-date'));
    expect(m.headers).toMatchObject({
      'auto-submitted': 'auto-generated',
      'x-auto-response-suppress': 'All',
      'x-ms-exchange-inbox-rules-loop': FROM,
      date: 'Mon, 6 Jan 2025 10:15:00 +0100',
    });
    expect(m.headers['content-type']).toMatch(/^multipart\/alternative; boundary="_000_AM9PR04MB8211/);
    expect(m.headers).not.toHaveProperty('received');
    const dsn = await parseMail(loadMailFixture('exim-bounce-x-failed-recipients'));
    expect(dsn.headers['x-failed-recipients']).toBe(FROM);
  });
});

describe('automatic mail, header by header', () => {
  const auto = async (headers: Record<string, string | null>, body?: string) => (await parseMail(message(headers, body))).automatic;

  it('RFC 3834 Auto-Submitted: any value but "no", comments and case aside', async () => {
    expect(await auto({ 'Auto-Submitted': 'auto-generated' })).toEqual({ automatic: true, reason: 'auto-submitted:auto-generated' });
    expect(await auto({ 'Auto-Submitted': 'Auto-Replied (vacation)' })).toEqual({ automatic: true, reason: 'auto-submitted:auto-replied' });
    expect(await auto({ 'Auto-Submitted': 'auto-notified; owner-email="x@y.example"' })).toEqual({
      automatic: true,
      reason: 'auto-submitted:auto-notified',
    });
    expect(await auto({ 'Auto-Submitted': 'no' })).toEqual({ automatic: false, reason: null });
    expect(await auto({ 'Auto-Submitted': 'No (a person wrote this)' })).toEqual({ automatic: false, reason: null });
  });

  it('X-Autoreply and X-Autorespond (unless they say no)', async () => {
    expect(await auto({ 'X-Autoreply': 'yes' })).toEqual({ automatic: true, reason: 'x-autoreply' });
    expect(await auto({ 'X-Autorespond': 'On vacation' })).toEqual({ automatic: true, reason: 'x-autorespond' });
    expect(await auto({ 'X-Autoreply': 'no' })).toEqual({ automatic: false, reason: null });
  });

  it('Precedence bulk, junk, list, auto_reply; not other values', async () => {
    for (const p of ['bulk', 'junk', 'list', 'auto_reply'])
      expect(await auto({ Precedence: p })).toEqual({ automatic: true, reason: `precedence:${p}` });
    expect(await auto({ Precedence: 'first-class' })).toEqual({ automatic: false, reason: null });
  });

  it('X-Auto-Response-Suppress alone is not evidence; with X-MS-Exchange-Inbox-Rules-Loop it is (Exchange out of office)', async () => {
    const alone = message({ 'X-Auto-Response-Suppress': 'All' }, 'Sounds interesting, tell me more.');
    const { mail, c } = await analyze(alone);
    expect(mail.automatic).toEqual({ automatic: false, reason: null });
    expect(c).toMatchObject({ intent: 'interested', source: 'rules' });
    expect(await auto({ 'X-Auto-Response-Suppress': 'DR, RN, NRN, OOF, AutoReply' })).toEqual({ automatic: false, reason: null });
    expect(await auto({ 'X-MS-Exchange-Inbox-Rules-Loop': FROM })).toEqual({ automatic: false, reason: null });
    expect(await auto({ 'X-Auto-Response-Suppress': 'All', 'X-MS-Exchange-Inbox-Rules-Loop': FROM })).toEqual({
      automatic: true,
      reason: 'exchange-inbox-rule',
    });
  });

  it('a null Return-Path, and the senders mailer-daemon, postmaster, no-reply (any spelling, plus-tags aside)', async () => {
    expect(await auto({ 'Return-Path': '<>' })).toEqual({ automatic: true, reason: 'return-path:null' });
    expect(await auto({ 'Return-Path': `<${FROM}>` })).toEqual({ automatic: false, reason: null });
    const cases: Array<[string, string]> = [
      ['MAILER-DAEMON@mx.example', 'mailer-daemon'],
      ['Mailer_Daemon@mx.example', 'mailer-daemon'],
      ['postmaster@customer.example', 'postmaster'],
      ['no-reply@customer.example', 'no-reply'],
      ['noreply+abc@customer.example', 'no-reply'],
      ['do-not-reply@customer.example', 'no-reply'],
      ['donotreply@customer.example', 'no-reply'],
    ];
    for (const [address, kind] of cases)
      expect(await auto({ From: `Robot <${address}>` }), address).toEqual({ automatic: true, reason: `sender:${kind}` });
    expect(await auto({ From: 'Reply Guy <reply@customer.example>' })).toEqual({ automatic: false, reason: null });
  });

  it('localized automatic subject prefixes, only at the start', async () => {
    const cases: Array<[string, string]> = [
      ['Automatic reply: Quick idea', 'automatic-reply'],
      ['Auto: Quick idea', 'auto'],
      ['Out of Office: Quick idea', 'out-of-office'],
      ['AutoReply: Quick idea', 'auto-reply'],
      ['Abwesenheitsnotiz: Kurze Idee', 'abwesenheitsnotiz'],
      ['Automatische Antwort: Kurze Idee', 'automatische-antwort'],
      ['Réponse automatique : Idée', 'reponse-automatique'],
      ['Respuesta automática: Idea', 'respuesta-automatica'],
      ['Fuori sede: idea', 'fuori-sede'],
      ['Automatisch antwoord: idee', 'automatisch-antwoord'],
      ['Autosvar: idé', 'autosvar'],
      ['Undeliverable: Quick idea', 'undeliverable'],
    ];
    for (const [subject, key] of cases)
      expect(await auto({ Subject: `=?utf-8?Q?${encodeQ(subject)}?=` }), subject).toEqual({ automatic: true, reason: `subject:${key}` });
    for (const subject of ['Re: Automatic reply: Quick idea', 'Autopilot for sales?', 'Out of curiosity', 'Re: Quick idea']) {
      expect(await auto({ Subject: subject }), subject).toEqual({ automatic: false, reason: null });
    }
  });

  it('automatic mail with out-of-office wording is out_of_office (header); without it other, naming the evidence', async () => {
    const ooo = await analyze(message({ 'X-Autoreply': 'yes' }, 'I am currently on parental leave and will be back on 3 March 2025.'));
    expect(ooo.c).toMatchObject({
      intent: 'out_of_office',
      source: 'header',
      reason: 'ooo:x-autoreply',
      confidence: CONFIDENCE.automaticOutOfOffice,
    });
    expect(ooo.c.returnDate?.toISOString()).toBe('2025-03-03T08:00:00.000Z');
    const subjectOnly = await analyze(message({ Subject: 'Out of Office: Quick idea' }, 'Thank you for your email.'));
    expect(subjectOnly.c).toMatchObject({ intent: 'out_of_office', source: 'header', reason: 'ooo:subject', returnDate: null });
    const ticket = await analyze(
      message(
        { 'Auto-Submitted': 'auto-replied', Subject: 'Re: Quick idea [Ticket #4411]' },
        'We received your request and will answer within 2 business days. Sounds interesting? Tell me more!',
      ),
    );
    expect(ticket.c).toMatchObject({
      intent: 'other',
      source: 'header',
      reason: 'automatic:auto-submitted',
      confidence: CONFIDENCE.automatic,
      returnDate: null,
    });
    const list = await analyze(message({ Precedence: 'list' }, 'Please remove me from your list.'));
    expect(list.c).toMatchObject({ intent: 'other', reason: 'automatic:precedence' });
  });
});

function encodeQ(s: string): string {
  return [...Buffer.from(s, 'utf8')]
    .map((b) =>
      (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a)
        ? String.fromCharCode(b)
        : b === 0x20
          ? '_'
          : `=${b.toString(16).toUpperCase().padStart(2, '0')}`,
    )
    .join('');
}

describe('delivery and complaint reports', () => {
  it('RFC 3464 DSN: per recipient, action, status, diagnostic, permanence; the returned message id', async () => {
    const hard = await parseMail(loadMailFixture('postfix-dsn-5.1.1-user-unknown'));
    expect(hard.report).toEqual({
      kind: 'dsn',
      heuristic: false,
      originalMessageId: OUTBOUND_ID,
      recipients: [
        {
          recipient: FROM,
          action: 'failed',
          status: '5.1.1',
          permanent: true,
          reason: 'user_unknown',
          bounceClass: 'recipient',
          diagnostic: `smtp; 550 5.1.1 <${FROM}>: Recipient address rejected: User unknown in virtual mailbox table`,
        },
      ],
    });
    const soft = await parseMail(loadMailFixture('postfix-dsn-4.4.1-delayed')); // text/rfc822-headers part
    expect(soft.report).toEqual({
      kind: 'dsn',
      heuristic: false,
      originalMessageId: OUTBOUND_ID,
      recipients: [
        {
          recipient: FROM,
          action: 'delayed',
          status: '4.4.1',
          permanent: false,
          reason: 'network_error',
          bounceClass: 'soft',
          diagnostic: 'X-Postfix; connect to mx.customer.example[203.0.113.25]:25: Connection timed out',
        },
      ],
    });
    expect(soft.text).not.toContain('Final-Recipient'); // the delivery-status part is a report, not text
  });

  it('a DSN nested differently (inside multipart/mixed), with several recipients; a success notice is no bounce', async () => {
    const report = (action: string, status: string) =>
      [
        'Reporting-MTA: dns; mx.relay.example',
        '',
        `Final-Recipient: rfc822; <Jane.Doe@Customer.example>`,
        `Action: ${action}`,
        `Status: ${status}`,
        '',
        'Original-Recipient: rfc822;bob@customer.example',
        'Final-Recipient: rfc822;bob@customer.example',
        'Action: failed',
        'Status: 5.2.2 (mailbox full)',
        'Diagnostic-Code: smtp; 552 5.2.2 Mailbox full',
      ].join('\r\n');
    const raw = (action: string, status: string) =>
      message(
        {
          From: 'Mail Delivery System <MAILER-DAEMON@mx.relay.example>',
          Subject: 'Delivery report',
          'Content-Type': 'multipart/mixed; boundary="outer"',
        },
        [
          '--outer',
          'Content-Type: text/plain',
          '',
          'Forwarded delivery report.',
          '',
          '--outer',
          'Content-Type: multipart/report; report-type=delivery-status; boundary="inner"',
          '',
          '--inner',
          'Content-Type: text/plain',
          '',
          'Delivery report.',
          '',
          '--inner',
          'Content-Type: message/delivery-status',
          '',
          report(action, status),
          '',
          '--inner',
          'Content-Type: text/rfc822-headers',
          '',
          `Message-ID: ${OUTBOUND_ID}`,
          `To: ${FROM}`,
          '',
          '--inner--',
          '--outer--',
          '',
        ].join('\n'),
      );
    const { mail, c } = await analyze(raw('failed', '5.1.1'));
    expect(mail.report).toMatchObject({ kind: 'dsn', heuristic: false, originalMessageId: OUTBOUND_ID });
    expect((mail.report as { recipients: unknown[] }).recipients).toEqual([
      {
        recipient: FROM,
        action: 'failed',
        status: '5.1.1',
        diagnostic: null,
        permanent: true,
        reason: 'user_unknown',
        bounceClass: 'recipient',
      },
      {
        recipient: 'bob@customer.example',
        action: 'failed',
        status: '5.2.2',
        diagnostic: 'smtp; 552 5.2.2 Mailbox full',
        permanent: true,
        reason: 'mailbox_full',
        bounceClass: 'soft',
      },
    ]);
    expect(c).toMatchObject({ intent: 'bounce', reason: 'dsn:5.1.1', source: 'report', confidence: CONFIDENCE.dsn });
    const delivered = await analyze(
      raw('delivered', '2.0.0').replace('Action: failed', 'Action: relayed').replace('Status: 5.2.2 (mailbox full)', 'Status: 2.0.0'),
    );
    expect(delivered.c).toMatchObject({ intent: 'other', reason: 'dsn:delivered', source: 'report' });
  });

  it('bounces without a report: Gmail "Address not found", X-Failed-Recipients, Exchange NDR text; marked heuristic', async () => {
    const gmail = await parseMail(loadMailFixture('gmail-bounce-no-report'));
    expect(gmail.report).toMatchObject({ kind: 'dsn', heuristic: true, originalMessageId: OUTBOUND_ID }); // its In-Reply-To
    expect((gmail.report as { recipients: unknown[] }).recipients).toEqual([
      {
        recipient: FROM,
        action: 'failed',
        status: '5.1.1',
        permanent: true,
        reason: 'user_unknown',
        bounceClass: 'recipient',
        diagnostic: expect.stringMatching(/^550 5\.1\.1 The email account that you tried to reach does not exist/),
      },
    ]);
    const exim = await parseMail(loadMailFixture('exim-bounce-x-failed-recipients'));
    expect(exim.report).toMatchObject({
      kind: 'dsn',
      heuristic: true,
      originalMessageId: OUTBOUND_ID,
      recipients: [{ recipient: FROM, status: '5.1.1', permanent: true, reason: 'user_unknown', bounceClass: 'recipient' }],
    }); // id from the inline copy
    const ndr = await analyze(
      message(
        { From: 'Microsoft Outlook <postmaster@outlook.example>', Subject: 'Undeliverable: Quick idea for Customer Co' },
        [
          "Your message to bob@customer.example couldn't be delivered.",
          '',
          'Delivery has failed to these recipients or groups:',
          '',
          'bob@customer.example',
          '',
          "Remote Server returned '550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup'",
        ].join('\n'),
      ),
    );
    expect(ndr.mail.report).toMatchObject({
      kind: 'dsn',
      heuristic: true,
      recipients: [
        {
          recipient: 'bob@customer.example',
          status: '5.1.10',
          permanent: true,
          action: 'failed',
          reason: 'user_unknown',
          bounceClass: 'recipient',
        },
      ],
    });
    expect(ndr.c).toMatchObject({ intent: 'bounce', reason: 'dsn-heuristic:5.1.10', confidence: CONFIDENCE.dsnHeuristic });
    const smtpOnly = await parseMail(
      message(
        { From: 'MAILER-DAEMON@mx.example', Subject: 'failure notice' },
        `<${FROM}>:\n198.51.100.2 does not like recipient.\nRemote host said: 550 sorry, no mailbox here by that name.`,
      ),
    );
    expect(smtpOnly.report).toMatchObject({
      heuristic: true,
      recipients: [{ recipient: FROM, status: null, permanent: true, reason: 'user_unknown', bounceClass: 'recipient' }],
    });
    const delay = await parseMail(
      message(
        { From: 'postmaster@mx.example', Subject: 'Delivery delayed: Quick idea' },
        `Delivery to ${FROM} has been delayed. The server will retry.\nThis is a warning: delivery has been delayed.`,
      ),
    );
    expect(delay.report).toBeNull(); // no failure stated: a delay notice without a code is not a bounce
    const delayCoded = await parseMail(
      message(
        { From: 'postmaster@mx.example', Subject: 'Delivery Status Notification (Delay)' },
        `Delivery to ${FROM} is delayed: 451 4.4.1 no answer from host. Will retry.`,
      ),
    );
    expect(delayCoded.report).toMatchObject({
      recipients: [{ recipient: FROM, status: '4.4.1', permanent: false, action: 'delayed', reason: 'network_error', bounceClass: 'soft' }],
    });
  });

  it('no bounce from a person, or from a mailer-daemon notice stating no failure', async () => {
    const person = await parseMail(message({}, 'Our server said 550 5.1.1 last week when I mailed bob@customer.example, weird.'));
    expect(person.report).toBeNull();
    const notice = await parseMail(
      message({ From: 'postmaster@customer.example', Subject: 'Your mailbox quota' }, 'Your mailbox is 90% full.'),
    );
    expect(notice.report).toBeNull();
    expect(notice.automatic).toEqual({ automatic: true, reason: 'sender:postmaster' });
  });

  it('RFC 5965 ARF: feedback type, Original-Rcpt-To, else the To of the returned message; its Message-ID', async () => {
    const aol = await parseMail(loadMailFixture('arf-complaint-aol'));
    const abuse = { kind: 'arf', format: 'arf', feedbackType: 'abuse', reportedType: 'abuse', complaint: true };
    expect(aol.report).toEqual({ ...abuse, recipient: FROM, originalMessageId: OUTBOUND_ID });
    const yahoo = await parseMail(loadMailFixture('arf-complaint-yahoo', { from: 'Jane.Doe@Customer.example' }));
    expect(yahoo.report).toEqual({ ...abuse, recipient: 'jane.doe@customer.example', originalMessageId: OUTBOUND_ID });
    const { c } = await analyze(loadMailFixture('arf-complaint-yahoo'));
    expect(c).toMatchObject({ intent: 'complaint', source: 'report', reason: 'arf:abuse', confidence: CONFIDENCE.arf });
  });
});

describe('quote and signature stripping', () => {
  it('Gmail: an "On … wrote:" line wrapped over two lines, and the quote under it', () => {
    expect(
      stripReply(
        'Yes, please.\n\nOn Mon, Jan 6, 2025 at 9:02 AM Sam Seller from Seller Inc <sam@seller.example>\nwrote:\n\n> Hi Jane,\n> Worth a look?\n',
      ),
    ).toBe('Yes, please.');
  });

  it('Outlook: "-----Original Message-----", the From/Sent/To/Subject block, under a rule or not, in German too', () => {
    expect(stripReply('Sure.\n\n-----Original Message-----\nFrom: Sam\nSent: Monday\nTo: Jane\nSubject: Hi\n\nHi Jane')).toBe('Sure.');
    expect(
      stripReply(
        'Sure.\n\n________________________________\nFrom: Sam Seller <sam@seller.example>\nSent: Monday, January 6, 2025 09:02\nTo: Jane\nSubject: Hi\n\nHi Jane',
      ),
    ).toBe('Sure.');
    expect(
      stripReply('Gerne.\n\nVon: Sam Seller <sam@seller.example>\nGesendet: Montag, 6. Januar 2025 09:02\nAn: Jane\nBetreff: Hi\n\nHallo'),
    ).toBe('Gerne.');
    expect(stripReply('Sure.\n\n*From:* Sam Seller\n*Sent:* Monday\n*To:* Jane\n*Subject:* Hi\n\nHi Jane')).toBe('Sure.');
    // a line starting "From:" in the reply itself is no header block
    expect(stripReply('From: the team, thanks!\nWe will look at it.')).toBe('From: the team, thanks!\nWe will look at it.');
  });

  it('Apple Mail "On <date>, at <time>, X wrote:", iOS "Sent from my iPhone", other clients and languages', () => {
    expect(stripReply('Deal.\n\nOn Jan 6, 2025, at 09:02, Sam Seller <sam@seller.example> wrote:\n\n> Hi')).toBe('Deal.');
    expect(stripReply('Deal.\n\nSent from my iPhone\n\n> On Jan 6, 2025, at 09:02, Sam wrote:\n> Hi')).toBe('Deal.');
    expect(stripReply('Gerne.\n\nAm 06.01.2025 um 09:02 schrieb Sam Seller <sam@seller.example>:\n\n> Hallo')).toBe('Gerne.');
    expect(stripReply('Avec plaisir.\n\nLe lun. 6 janv. 2025 à 09:02, Sam Seller <sam@seller.example> a écrit :\n\n> Bonjour')).toBe(
      'Avec plaisir.',
    );
    expect(stripReply('Claro.\n\nEl lun, 6 ene 2025 a las 9:02, Sam Seller (<sam@seller.example>) escribió:\n\n> Hola')).toBe('Claro.');
    expect(stripReply('Ja graag.\n\nOp ma 6 jan 2025 om 09:02 schreef Sam Seller <sam@seller.example>:\n\n> Hoi')).toBe('Ja graag.');
    expect(stripReply('OK.\n\nVon meinem iPhone gesendet')).toBe('OK.');
  });

  it('>-quoted lines go, the reply between them stays', () => {
    expect(stripReply('> Are you free Tuesday?\nYes, 2pm works.\n> And the pricing?\nSend it over.')).toBe(
      'Yes, 2pm works.\nSend it over.',
    );
  });

  it('signatures: the "-- " delimiter, a sign-off with a short signature, the sender\'s name alone at the end', () => {
    expect(stripReply('Interested.\n\n-- \nJane Doe\nCustomer Co')).toBe('Interested.');
    expect(stripReply('Interested.\n\nBest regards,\nJane Doe\nVP Sales | Customer Co\n+1 555 0100')).toBe('Interested.');
    expect(stripReply('Interested.\n\nMit freundlichen Grüßen\nJane Doe')).toBe('Interested.');
    expect(stripReply('Interested.\n\nThanks,\nJane')).toBe('Interested.');
    expect(stripReply('Interested.\n\nJane', 'Jane Doe')).toBe('Interested.');
    expect(stripReply('Interested.\n\n- Jane Doe', 'Jane Doe')).toBe('Interested.');
    // a sign-off followed by more than a signature is part of the message; "Thanks" first is the message
    expect(
      stripReply(
        'Regards,\nwe looked at this and we would like a demo next week with the whole team of eight people, including finance and ops, please send times.',
      ),
    ).toContain('we would like a demo');
    expect(stripReply('Thanks!\n\nWe would love a demo.')).toBe('Thanks!\n\nWe would love a demo.');
  });

  it('a reply that is only a signature (or a phone footer, or a sign-off) strips to ""', () => {
    expect(stripReply('\n-- \nPeter Lind\nHead of Operations\n\nOn 1/6/25 09:02, Sam Seller wrote:\n> Hi')).toBe('');
    expect(stripReply('Sent from my iPhone')).toBe('');
    expect(stripReply('Best regards,\nPeter Lind\nCustomer Co')).toBe('');
    expect(stripReply('')).toBe('');
  });

  it('bounded work on hostile text: long lines and many quote-header look-alikes come back (the package sees a short, wrapped text)', () => {
    for (const unit of [
      'abc. skrev skrev x\n',
      'Op schreef schreef \n',
      '2020 from <a> ',
      'On a b c\n',
      'From: [ <\nSent: x\n',
      '____________\nFrom: a\n',
    ]) {
      const text = unit.repeat(Math.ceil(limits.MAX_TEXT_CHARS / unit.length)).slice(0, limits.MAX_TEXT_CHARS);
      expect(typeof stripReply(text)).toBe('string');
    }
  });
});

describe('phrase rules over the stripped text', () => {
  const rules = (text: string) => fromRules(replyOf(text));

  it('each intent, in English and another language', () => {
    const cases: Array<[string, string, string]> = [
      ['Please take me off your mailing list.', 'unsubscribe', 'take-me-off'],
      ['Stop emailing me.', 'unsubscribe', 'stop-emailing'],
      ['Do not contact me again', 'unsubscribe', 'do-not-contact'],
      ['Bitte tragen Sie mich aus Ihrem Verteiler aus.', 'unsubscribe', 'unsubscribe-de'],
      ['Merci de me désinscrire.', 'unsubscribe', 'unsubscribe-fr'],
      ['No thanks.', 'not_interested', 'no-thanks'],
      ['We are all set, thank you.', 'not_interested', 'all-set'],
      ['Kein Interesse.', 'not_interested', 'not-interested-de'],
      ['No nos interesa, gracias.', 'not_interested', 'not-interested-es'],
      ["Let's set up a call next week.", 'meeting_request', 'set-up-call'],
      ['Here is my link: https://cal.com/jane/30min', 'meeting_request', 'scheduling-link'],
      ['How about Thursday?', 'meeting_request', 'day-works'],
      ['Können wir einen Termin vereinbaren?', 'meeting_request', 'meeting-de'],
      ['Tell me more.', 'interested', 'tell-me-more'],
      ['Interested!', 'interested', 'interested'],
      ['Hi Sam. Still interested.', 'interested', 'interested'],
      ['Can you send me pricing?', 'interested', 'send-info'],
      ['How much does it cost?', 'interested', 'pricing'],
      ['Klingt interessant!', 'interested', 'interested-de'],
      ['Me interesa, cuéntame más.', 'interested', 'interested-es'],
      ['I am out of the office until Friday.', 'out_of_office', 'out-of-office'],
      ['Je suis absent du bureau.', 'out_of_office', 'ooo-fr'],
    ];
    for (const [text, intent, key] of cases) {
      expect(rules(text), text).toMatchObject({
        intent,
        source: 'rules',
        reason: `rule:${intent}:${key}`,
        confidence: CONFIDENCE.rule[intent as 'interested'],
      });
    }
  });

  it('negation: "not interested" is no interest, "no need to unsubscribe" no unsubscribe request', () => {
    expect(rules("I'm not interested in this.")).toMatchObject({ intent: 'not_interested', reason: 'rule:not_interested:not-interested' });
    expect(rules('No need to unsubscribe me.')).toMatchObject({ intent: 'other', source: 'default' });
    expect(rules("Please don't unsubscribe me, tell me more.")).toMatchObject({
      intent: 'interested',
      reason: 'rule:interested:tell-me-more',
    });
    expect(rules("It doesn't sound interesting.")).toMatchObject({ intent: 'other' });
    expect(rules('Not interested.')).toMatchObject({ intent: 'not_interested' });
    expect(rules('Not really. Interested parties should call the front desk')).toMatchObject({ intent: 'other' });
    expect(rules('No problem, tell me more.')).toMatchObject({ intent: 'interested' });
    expect(rules("We don't need to have a call.")).toMatchObject({ intent: 'other' });
  });

  it('order: an unsubscribe request beats interest and keeps its confidence; other opposing signals lower the winner', () => {
    expect(rules('Sounds interesting, but please remove me from your list.')).toMatchObject({
      intent: 'unsubscribe',
      confidence: CONFIDENCE.rule.unsubscribe,
    });
    const mixed = rules('Not interested right now, but tell me more about pricing.');
    expect(mixed.intent).toBe('not_interested');
    expect(mixed.confidence).toBeCloseTo(CONFIDENCE.rule.not_interested - CONFIDENCE.conflictPenalty, 5);
    expect(mixed.confidence).toBeLessThan(MODEL_THRESHOLD);
    expect(rules("Sounds interesting. Let's set up a call.")).toMatchObject({
      intent: 'meeting_request',
      confidence: CONFIDENCE.rule.meeting_request,
    });
    const long = rules(`Let's set up a call. ${'We have many details to share about our team. '.repeat(40)}`);
    expect(long.confidence).toBeCloseTo(CONFIDENCE.rule.meeting_request - CONFIDENCE.longTextPenalty, 5);
  });

  it('out of office without headers, with its return date; nothing matched is other (default)', () => {
    const ooo = rules('I am on annual leave and will be back on Monday, 13 January.');
    expect(ooo).toMatchObject({ intent: 'out_of_office', source: 'rules', reason: 'rule:out_of_office:away' });
    expect(ooo.returnDate?.toISOString()).toBe('2025-01-13T08:00:00.000Z');
    expect(rules('Who is this?')).toEqual({
      intent: 'other',
      confidence: CONFIDENCE.default,
      reason: 'default:no-match',
      source: 'default',
      returnDate: null,
    });
    expect(rules('')).toMatchObject({ intent: 'other', reason: 'default:empty', source: 'default' });
  });
});

describe('return date', () => {
  const at = (text: string, ref = SENT_AT, offset = 60) => findReturnDate(text, ref, offset)?.toISOString() ?? null;

  it('the date tied to coming back, else the "until" date, else the latest; never a start date; times kept', () => {
    expect(at('Out from 8 January, back on 20 January.')).toBe('2025-01-20T08:00:00.000Z');
    expect(at('I am away from January 8 until January 17.')).toBe('2025-01-17T08:00:00.000Z');
    expect(at('Out of office until 15 January; on the 10th I check mail once.')).toBe('2025-01-15T08:00:00.000Z');
    expect(at('I am out of the office starting January 20.')).toBeNull();
    expect(at('I will be back on January 14 at 1pm.')).toBe('2025-01-14T12:00:00.000Z');
    expect(at('Back next Monday.')).toBe('2025-01-13T08:00:00.000Z');
  });

  it('in the future of the message and within a year; German, French and Spanish texts read day-first', () => {
    expect(at('Back on January 2, 2025.', SENT_AT)).toBeNull();
    expect(at('Ich bin bis zum 17.01.2025 nicht im Büro.')).toBe('2025-01-17T08:00:00.000Z');
    expect(at('Je suis en congés, de retour le 3 février.')).toBe('2025-02-03T08:00:00.000Z');
    expect(at('Estoy de vacaciones hasta el 20 de enero.')).toBe('2025-01-20T08:00:00.000Z');
    expect(at('Back on 13/01/2025.', SENT_AT, -300)).toBe('2025-01-13T14:00:00.000Z'); // 09:00 at UTC-5
    expect(at('On sabbatical, back in March 2027.')).toBeNull();
    expect(at('')).toBeNull();
  });
});

describe('a message given as fields (the operator row without raw MIME)', () => {
  it('reads like the same message in MIME: stripped, automatic subject and sender, the bounce heuristic', async () => {
    const reply = await mailFromFields({
      fromEmail: ' Jane.Doe@Customer.example ',
      fromName: 'Jane Doe',
      subject: 'Re: Quick idea',
      text: "Let's set up a call.\n\nJane\n\nOn Mon, Jan 6, 2025 at 9:02 AM Sam <sam@seller.example> wrote:\n> Hi",
      inReplyTo: 'sent-1@seller.example',
    });
    expect(reply).toMatchObject({
      from: { address: FROM, name: 'Jane Doe' },
      inReplyTo: '<sent-1@seller.example>',
      references: ['<sent-1@seller.example>'],
      strippedText: "Let's set up a call.",
      automatic: { automatic: false },
    });
    expect(await classify(reply, { model: noModel })).toMatchObject({ intent: 'meeting_request', source: 'rules' });
    const ooo = await mailFromFields({ fromEmail: FROM, subject: 'Automatic reply: Quick idea', text: 'I am out of the office.' });
    expect(await classify(ooo, { model: noModel })).toMatchObject({ intent: 'out_of_office', reason: 'ooo:subject' });
    const bounce = await mailFromFields({
      fromEmail: 'mailer-daemon@mx.example',
      subject: 'Undeliverable',
      text: `Delivery has failed to these recipients: ${FROM}\n550 5.1.1 User unknown`,
    });
    expect(bounce.report).toMatchObject({
      kind: 'dsn',
      heuristic: true,
      recipients: [{ recipient: FROM, status: '5.1.1', permanent: true }],
    });
    expect(await mailFromFields({ fromEmail: undefined as unknown as string, text: undefined as unknown as string })).toMatchObject({
      from: null,
      text: '',
    });
  });
});

describe('malformed input never throws and yields what could be read', () => {
  it('broken boundary, unknown charset, truncated, binary garbage, empty: headers and text as far as they go', async () => {
    const broken = await parseMail(loadMailFixture('malformed-broken-boundary'));
    expect(broken).toMatchObject({
      subject: 'Re: Quick idea for Customer Co',
      inReplyTo: OUTBOUND_ID,
      strippedText: 'Sounds interesting, tell me more.',
    });
    const charset = await parseMail(loadMailFixture('malformed-unknown-charset'));
    expect(charset.subject).toContain('Quick idea');
    const truncated = await parseMail(loadMailFixture('malformed-truncated'));
    expect(truncated).toMatchObject({ subject: 'Re: Quick idea for Customer Co', inReplyTo: OUTBOUND_ID, references: [OUTBOUND_ID] });
    for (const name of ['malformed-binary-garbage', 'malformed-empty'] as const) {
      const { mail, c } = await analyze(loadMailFixture(name));
      expect(mail).toMatchObject({
        messageId: null,
        from: null,
        to: [],
        text: '',
        strippedText: '',
        report: null,
        automatic: { automatic: false },
      });
      expect(c).toMatchObject({ intent: 'other', source: 'default' });
    }
  });

  it('odd inputs: a string, no Date (null, not now), NULs, a huge message (text capped), deep HTML, not a buffer at all', async () => {
    const s = await parseMail(message({ Date: null }, 'Hello\u0000 there'));
    expect(s.date).toBeNull();
    expect(s.text).toBe('Hello there');
    const badDate = await parseMail(message({ Date: 'sometime soon' }));
    expect(badDate.date).toBeNull();
    const huge = await parseMail(message({}, 'word '.repeat(3_000_000)));
    expect(huge.text.length).toBe(limits.MAX_TEXT_CHARS);
    const deep = await parseMail(
      message({ 'Content-Type': 'text/html' }, `${'<div>'.repeat(5000)}Tell me more &amp; send pricing${'</div>'.repeat(5000)}`),
    );
    expect(deep.text).toContain('Tell me more & send pricing');
    const beyond = Buffer.concat([Buffer.from(message({}, 'Not interested.\n')), Buffer.alloc(limits.MAX_PARSED_BYTES, 0x61)]);
    expect((await parseMail(beyond)).strippedText.startsWith('Not interested.')).toBe(true);
    for (const odd of [undefined, null, 42, {}] as unknown[]) {
      const m = await parseMail(odd as Buffer);
      expect(m).toMatchObject({ messageId: null, text: '' });
      expect(await classify(m, { model: noModel })).toMatchObject({ intent: 'other' });
    }
  });

  it('classify never throws, even on a record missing its parts', async () => {
    const c = await classify({} as ParsedMail, { model: noModel });
    expect(c).toMatchObject({ intent: 'other', source: 'default' });
  });
});

describe('the model layer', () => {
  let fake: FakeModel;
  beforeAll(async () => {
    fake = await startFakeModel();
  });
  afterAll(async () => {
    await fake?.close();
  });
  beforeEach(() => fake.reset());

  // A time limit a loaded machine's loopback answer cannot reach (an answer past it would leave the
  // rules' answer, which the nonsense cases expect anyway); the hang case sets a short one of its own.
  const model = (timeoutMs = '20000') =>
    createModelClient(
      loadConfig({ LLM_BASE_URL: fake.baseUrl, LLM_MODEL: 'gpt-4o-mini', LLM_TIMEOUT_MS: timeoutMs, LLM_MAX_RETRIES: '0' }),
      createLogger('silent'),
    );
  const answer = (a: Record<string, unknown>) => fake.answer(() => ({ content: JSON.stringify(a) }));

  it('is not asked when the rules are sure, nor for headers and reports, nor without a model, nor for an empty reply', async () => {
    answer({ intent: 'interested', confidence: 0.99, reason: 'x', returnDate: null });
    for (const name of [
      'apple-mail-ios-reply-unsubscribe',
      'outlook-web-reply-not-interested',
      'exchange-out-of-office-return-date',
      'postfix-dsn-5.1.1-user-unknown',
      'thunderbird-signature-only-reply',
    ] as const) {
      const c = await classify(await parseMail(loadMailFixture(name)), { model: model() });
      expect(c.source, name).not.toBe('model');
    }
    expect(fake.calls).toHaveLength(0);
    const unsure = await parseMail(loadMailFixture('gmail-reply-interested'));
    expect(await classify(unsure, { model: noModel })).toMatchObject({ intent: 'interested', source: 'rules' });
    expect(fake.calls).toHaveLength(0);
  });

  it('is asked when the rules are unsure: a strict JSON schema, the stripped text only; a valid answer is taken', async () => {
    answer({ intent: 'meeting_request', confidence: 0.91, reason: 'Asks for pricing\nand a call', returnDate: null });
    const mail = await parseMail(loadMailFixture('gmail-reply-interested'));
    const rules = fromRules(mail);
    expect(rules.confidence).toBeLessThan(MODEL_THRESHOLD);
    const c = await classify(mail, { model: model() });
    expect(c).toEqual({
      intent: 'meeting_request',
      confidence: 0.91,
      reason: 'model:Asks for pricing and a call',
      source: 'model',
      returnDate: null,
    });
    expect(fake.calls).toHaveLength(1);
    const body = fake.calls[0].body;
    expect(body.response_format).toMatchObject({ type: 'json_schema', json_schema: { name: 'reply_intent', strict: true } });
    const schema = body.response_format.json_schema.schema;
    expect(schema.required).toEqual(['intent', 'confidence', 'reason', 'returnDate']);
    expect(schema.properties.intent.enum).toEqual([...INTENTS]);
    expect(schema.additionalProperties).toBe(false);
    expect(body.messages[1]).toEqual({ role: 'user', content: mail.strippedText });
    expect(JSON.stringify(body.messages)).not.toContain('I noticed Customer Co');
  });

  it('nothing matched: the model may say out of office with a future return date; the prompt is bounded', async () => {
    answer({ intent: 'out_of_office', confidence: 0.8, reason: 'absence notice', returnDate: '2025-01-20' });
    const long = `Hallo, ich melde mich nach meiner Reise. ${'x'.repeat(10_000)}`;
    const c = await classify(replyOf(long), { model: model() });
    expect(c).toMatchObject({ intent: 'out_of_office', source: 'model', reason: 'model:absence notice' });
    expect(c.returnDate?.toISOString()).toBe('2025-01-20T00:00:00.000Z');
    expect(fake.calls[0].body.messages[1].content.length).toBe(limits.MAX_RULES_CHARS);
    expect(fake.calls[0].body.messages[0].content).toContain('2025-01-06T09:15:00.000Z'); // relative dates resolve from the message date
    answer({ intent: 'out_of_office', confidence: 0.9, reason: 'away', returnDate: null });
    const conflicted = replyOf('I am out of the office until 20 January, but tell me more when I am back.');
    expect(fromRules(conflicted).confidence).toBeLessThan(MODEL_THRESHOLD);
    const dated = await classify(conflicted, { model: model() });
    expect(dated).toMatchObject({ intent: 'out_of_office', source: 'model' });
    expect(dated.returnDate?.toISOString()).toBe('2025-01-20T08:00:00.000Z'); // the model gave none: the text's
  });

  it('nonsense falls back to the rules: confidence out of range, a past or unreadable return date, a report-only intent, an intent outside the enum', async () => {
    const mail = await parseMail(loadMailFixture('gmail-reply-interested'));
    const rules = fromRules(mail);
    const nonsense: Array<Record<string, unknown>> = [
      { intent: 'interested', confidence: 1.7, reason: 'x', returnDate: null },
      { intent: 'interested', confidence: -0.1, reason: 'x', returnDate: null },
      { intent: 'out_of_office', confidence: 0.9, reason: 'x', returnDate: '2024-12-24' },
      { intent: 'out_of_office', confidence: 0.9, reason: 'x', returnDate: 'soon' },
      { intent: 'bounce', confidence: 0.9, reason: 'x', returnDate: null },
      { intent: 'complaint', confidence: 0.9, reason: 'x', returnDate: null },
      { intent: 'maybe', confidence: 0.9, reason: 'x', returnDate: null },
    ];
    for (const a of nonsense) {
      answer(a);
      expect(await classify(mail, { model: model() }), JSON.stringify(a)).toEqual(rules);
    }
    fake.answer(() => ({ content: 'I think they are interested!' }));
    expect(await classify(mail, { model: model() })).toEqual(rules);
    expect(fake.calls.length).toBeGreaterThanOrEqual(nonsense.length);
  });

  it('a 5xx or a model that never answers (timeout) leaves the rules answer; with nothing matched, other from the default layer', async () => {
    const mail = await parseMail(loadMailFixture('html-only-reply-interested'));
    fake.answer(() => ({ status: 503 }));
    expect(await classify(mail, { model: model() })).toMatchObject({
      intent: 'interested',
      source: 'rules',
      reason: 'rule:interested:tell-me-more',
    });
    fake.answer(() => ({ hang: true }));
    expect(await classify(mail, { model: model('300') })).toMatchObject({ intent: 'interested', source: 'rules' });
    expect(await classify(replyOf('Who is this?'), { model: model('300') })).toEqual({
      intent: 'other',
      confidence: CONFIDENCE.default,
      reason: 'default:no-match',
      source: 'default',
      returnDate: null,
    });
    expect(fake.calls.length).toBe(3);
  });
});
