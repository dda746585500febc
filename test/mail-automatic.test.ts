// Automatic mail is not a reply (src/inbound/analyze/automatic.ts, challenge.ts, phrases.ts,
// return-date.ts): out-of-office answers in English, German, French, Spanish, Italian, Dutch and
// Portuguese with their return dates; challenge-response systems; mailing-list and postmaster
// notices; the providers' own automatic marks. None of it ever comes out as a human intent.
// Fixtures in test/fixtures/mail/automatic/, written for the project.
import { describe, expect, it } from 'vitest';
import { type Classification, INTENTS, type ParsedMail } from '../src/inbound/analysis.js';
import { CONFIDENCE, classify, findReturnDate, fromRules, parseMail } from '../src/inbound/analyze/index.js';
import { createModelClient } from '../src/llm/client.js';
import { loadConfig } from '../src/platform/config.js';
import { createLogger } from '../src/platform/logger.js';
import { FIXTURE_DEFAULTS, loadMailFile } from './support/mail-fixtures.js';

const noModel = createModelClient(loadConfig({}), createLogger('silent'));
const FROM = FIXTURE_DEFAULTS.from;
const SENT_AT = new Date('2025-01-06T09:15:00Z'); // the fixtures' Date: Mon, 6 Jan 2025 10:15:00 +0100
const HUMAN = new Set(['interested', 'not_interested', 'meeting_request', 'unsubscribe']);

const analyze = async (raw: Buffer | string) => {
  const mail = await parseMail(raw);
  return { mail, c: await classify(mail, { model: noModel }) };
};
const automatic = (file: string) => loadMailFile(`automatic/${file}.eml`);

/** A small message with the given headers (default headers of a person's reply). */
function message(headers: Record<string, string | null>, body = 'Thanks for your note.'): string {
  const all: Record<string, string | null> = {
    From: `Jane Doe <${FROM}>`,
    To: 'Sam Seller <sam@seller.example>',
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

const notHuman = (c: Classification) => expect(HUMAN.has(c.intent), `${c.intent} ${c.reason}`).toBe(false);

describe('out of office in seven languages, with the return date', () => {
  // [fixture, automatic evidence, return date (09:00 in the sender's +0100 unless the mark gives a time)]
  const cases: Array<[string, string, string]> = [
    ['ooo-en-gmail', 'auto-submitted:auto-replied', '2025-01-13T08:00:00.000Z'], // "back at my desk on Monday, January 13"
    ['ooo-de-exchange', 'exchange-inbox-rule', '2025-01-13T08:00:00.000Z'], // "ab Montag, den 13.1. wieder im Büro"
    ['ooo-fr', 'auto-submitted:auto-generated', '2025-01-13T08:00:00.000Z'], // "de retour le lundi 13 janvier"
    ['ooo-es', 'precedence:auto_reply', '2025-01-12T08:00:00.000Z'], // "de vacaciones del 2 al 12 de enero"
    ['ooo-it', 'x-autoreply', '2025-01-13T08:00:00.000Z'], // "Rientrerò in ufficio lunedì 13 gennaio 2025"
    ['ooo-nl', 'exchange-inbox-rule', '2025-01-13T08:00:00.000Z'], // "vanaf maandag 13-01-2025 weer aanwezig"
    ['ooo-pt', 'auto-submitted:auto-replied', '2025-01-13T08:00:00.000Z'], // "Estarei de volta no dia 13/01/2025"
    ['ooo-icloud-vacation', 'x-apple-action:vacation', '2025-01-12T22:59:59.000Z'], // X-Apple-Criteria endDate
  ];

  it.each(cases)('%s: out_of_office from the headers, with its return date', async (file, evidence, returnDate) => {
    const { mail, c } = await analyze(automatic(file));
    expect(mail.automatic).toEqual({ automatic: true, reason: evidence });
    expect(c).toMatchObject({
      intent: 'out_of_office',
      source: 'header',
      reason: `ooo:${evidence.split(':')[0]}`,
      confidence: CONFIDENCE.automaticOutOfOffice,
    });
    expect(c.returnDate?.toISOString()).toBe(returnDate);
  });

  it.each(cases.filter(([file]) => file !== 'ooo-icloud-vacation'))(
    '%s: the same text without automatic headers is out of office by the phrase rules, same date',
    async (file, _evidence, returnDate) => {
      const mail = await parseMail(automatic(file));
      const c = fromRules(mail);
      expect(c).toMatchObject({ intent: 'out_of_office', source: 'rules' });
      expect(c.reason).toMatch(/^rule:out_of_office:/);
      expect(c.returnDate?.toISOString()).toBe(returnDate);
    },
  );

  it('an iCloud vacation mark whose end is past, unreadable or over a year away gives no date from it', async () => {
    const raw = automatic('ooo-icloud-vacation').toString('latin1');
    for (const end of ['2024-12-31T22:59:59Z', 'soon', '2026-06-30T22:59:59Z']) {
      const { c } = await analyze(raw.replace('endDate=2025-01-12T22:59:59Z', `endDate=${end}`));
      expect(c, end).toMatchObject({ intent: 'out_of_office', returnDate: null });
    }
  });
});

describe('return dates in the other languages’ forms', () => {
  const at = (text: string, ref = SENT_AT, offset = 60) => findReturnDate(text, ref, offset)?.toISOString() ?? null;

  it('day-first numbers without a year ("13.1.", "13.01."), never a time such as 14.30', () => {
    expect(at('Ab 13.1. bin ich wieder im Büro.')).toBe('2025-01-13T08:00:00.000Z');
    expect(at('Ich bin ab Montag, den 13.01. wieder da.')).toBe('2025-01-13T08:00:00.000Z');
    expect(at('Bis 10.01. abwesend.')).toBe('2025-01-10T08:00:00.000Z');
    expect(at('Je serai de retour le 13.01.2025.')).toBe('2025-01-13T08:00:00.000Z');
    expect(at('Ich bin heute ab 14.30 Uhr nicht erreichbar.')).toBeNull();
  });

  it('ranges: the end, in the nearest year after the message ("vom 2. bis 14. Januar" read on 6 January)', () => {
    expect(at('Ich bin vom 2. bis 14. Januar im Urlaub.')).toBe('2025-01-14T08:00:00.000Z');
    expect(at('Je suis en congés du 2 au 14 janvier.')).toBe('2025-01-14T08:00:00.000Z');
    expect(at('Estoy de vacaciones del 2 al 14 de enero.')).toBe('2025-01-14T08:00:00.000Z');
    expect(at('Sono in ferie dal 2 al 14 gennaio.')).toBe('2025-01-14T08:00:00.000Z');
    expect(at('Ik ben met vakantie van 2 t/m 14 januari.')).toBe('2025-01-14T08:00:00.000Z');
    expect(at('Estou de férias de 2 a 14 de janeiro.')).toBe('2025-01-14T08:00:00.000Z');
    expect(at('Away from 20 December to 3 January.', new Date('2024-12-18T09:00:00Z'))).toBe('2025-01-03T08:00:00.000Z');
  });

  it('the return tied to coming back in each language wins over the until date; a line break is no clause end', () => {
    expect(at('Hasta el 10 de enero estoy fuera. Volveré el 13 de enero.')).toBe('2025-01-13T08:00:00.000Z');
    expect(at('Fino al 10 gennaio sono assente, tornerò il 13 gennaio.')).toBe('2025-01-13T08:00:00.000Z');
    expect(at('Tot 10 januari afwezig, op 13 januari weer\nbereikbaar.')).toBe('2025-01-13T08:00:00.000Z');
    expect(at('Até 10 de janeiro de férias. Estarei de volta\nem 13 de janeiro.')).toBe('2025-01-13T08:00:00.000Z');
    expect(at("Absent jusqu'au 10 janvier, je reviendrai le 13 janvier.")).toBe('2025-01-13T08:00:00.000Z');
  });
});

describe('absence phrases: a present or coming absence, never a past one or a turn of phrase', () => {
  const rules = (text: string) =>
    fromRules({
      messageId: null,
      inReplyTo: null,
      references: [],
      from: { address: FROM, name: null },
      to: [],
      subject: 'Re: Quick idea',
      date: SENT_AT,
      text,
      strippedText: text,
      automatic: { automatic: false, reason: null },
      report: null,
      headers: {},
    } satisfies ParsedMail);

  it('new wording in each language is out of office', () => {
    for (const text of [
      "I'm taking a few days off and will be back on Monday.",
      'I am currently travelling with limited access to email.',
      'Ich bin derzeit auf Dienstreise.',
      'Je serai absente toute la semaine.',
      'Me encuentro de viaje hasta el lunes.',
      'Sarò assente fino a lunedì.',
      'Ik ben op vakantie.',
      'Estarei ausente até segunda-feira.',
    ])
      expect(rules(text).intent, text).toBe('out_of_office');
  });

  it('a person writing back is not out of office', () => {
    expect(rules("I'll be back in touch next week, sounds interesting.").intent).toBe('interested');
    expect(rules('I was on vacation last week, tell me more.').intent).toBe('interested');
    expect(rules('Your website is nicht erreichbar for me, can you send the deck?').intent).toBe('interested');
  });
});

describe('challenge-response messages', () => {
  const cases: Array<[string, string]> = [
    ['challenge-boxtrapper', 'challenge:verify-subject'], // cPanel BoxTrapper: verify#<id> in the subject
    ['challenge-verify-human', 'challenge:verify-human'], // a filtering service, as a "Re:" from the recipient
    ['challenge-guest-list', 'challenge:approved-senders'], // Boxbe-style guest list, HTML only
    ['challenge-sanebox-style', 'challenge:get-delivered'], // an inbox filter holding unknown senders
    ['challenge-unknown-sender-de', 'challenge:challenge-de'], // a provider's confirmation for unknown senders
  ];

  it.each(cases)('%s: automatic, intent other, never a human reply', async (file, evidence) => {
    const { mail, c } = await analyze(automatic(file));
    expect(mail.automatic).toEqual({ automatic: true, reason: evidence });
    expect(c).toEqual({
      intent: 'other',
      confidence: CONFIDENCE.automatic,
      reason: 'automatic:challenge',
      source: 'header',
      returnDate: null,
    });
    expect(mail.report).toBeNull();
  });

  it('the challenge is named even when the message also carries Auto-Submitted or out-of-office words', async () => {
    const raw = message(
      { 'Auto-Submitted': 'auto-replied', Subject: 'Out of Office: Quick idea' },
      'I am away. Please verify that you are human so your message reaches me.',
    );
    const { mail, c } = await analyze(raw);
    expect(mail.automatic.reason).toBe('challenge:verify-human');
    expect(c).toMatchObject({ intent: 'other', reason: 'automatic:challenge' });
  });

  it('people asking to confirm or verify something are not challenges', async () => {
    for (const body of [
      'Can you confirm your address so we can send the contract? Sounds interesting.',
      "Let's verify the numbers on a call next week.",
      'Please add us to your safe senders so our invoices arrive.',
      'I added you to my contacts. Tell me more.',
    ]) {
      const { mail, c } = await analyze(message({}, body));
      expect(mail.automatic, body).toEqual({ automatic: false, reason: null });
      expect(c.source, body).not.toBe('header');
    }
  });
});

describe('mailing lists, postmaster and other notices', () => {
  const auto = async (headers: Record<string, string | null>, body?: string) => (await parseMail(message(headers, body))).automatic;

  it.each([
    ['list-moderation-notice', 'list:list-id', 'automatic:list'],
    ['postmaster-quarantine-notice', 'sender:postmaster', 'automatic:sender'],
    ['dmarc-aggregate-report', 'sender:no-reply', 'automatic:sender'],
  ])('%s: automatic, intent other', async (file, evidence, reason) => {
    const { mail, c } = await analyze(automatic(file));
    expect(mail.automatic).toEqual({ automatic: true, reason: evidence });
    expect(c).toMatchObject({ intent: 'other', reason, source: 'header' });
    expect(mail.report).toBeNull();
  });

  it('list software headers: List-Id, List-Post, Mailing-List, X-Mailing-List, X-MLServer, X-ML-Name, Mailman; X-Loop or List-Unsubscribe alone is not evidence', async () => {
    for (const [header, value] of [
      ['List-Id', '<sales.lists.customer.example>'],
      ['List-Post', '<mailto:sales@lists.customer.example>'],
      ['Mailing-List', 'contact sales-help@lists.customer.example; run by ezmlm'],
      ['X-Mailing-List', 'sales@lists.customer.example'],
      ['X-MLServer', 'fml [fml 4.0.3]'],
      ['X-ML-Name', 'sales'],
      ['X-Mailman-Version', '2.1.39'],
    ])
      expect(await auto({ [header]: value }), header).toEqual({ automatic: true, reason: `list:${header.toLowerCase()}` });
    expect(await auto({ 'List-Unsubscribe': '<https://tool.example/u/1>' })).toEqual({ automatic: false, reason: null });
    expect(await auto({ 'X-Loop': 'yes' }, 'Sounds interesting, tell me more.')).toEqual({ automatic: false, reason: null });
  });

  it("providers' automatic marks: X-Autogenerated, X-Mail-Autoreply, X-AutoReply-From, X-FC-MachineGenerated, X-Precedence, Precedence auto-reply", async () => {
    expect(await auto({ 'X-Autogenerated': 'Reply' })).toEqual({ automatic: true, reason: 'x-autogenerated' });
    expect(await auto({ 'X-Mail-Autoreply': 'yes' })).toEqual({ automatic: true, reason: 'x-mail-autoreply' });
    expect(await auto({ 'X-AutoReply-From': FROM })).toEqual({ automatic: true, reason: 'x-autoreply-from' });
    expect(await auto({ 'X-FC-MachineGenerated': 'true' })).toEqual({ automatic: true, reason: 'x-fc-machinegenerated' });
    expect(await auto({ 'X-Precedence': 'auto_reply' })).toEqual({ automatic: true, reason: 'precedence:auto_reply' });
    expect(await auto({ Precedence: 'auto-reply' })).toEqual({ automatic: true, reason: 'precedence:auto-reply' });
    expect(await auto({ 'X-Autogenerated': 'no' })).toEqual({ automatic: false, reason: null });
    expect(await auto({ 'X-Apple-Action': 'FORWARD' })).toEqual({ automatic: false, reason: null });
  });

  it('senders: post_master, mail-daemon, noreply-<anything>, autoresponders; a bracketed subject prefix', async () => {
    for (const [address, kind] of [
      ['post_master@vtext.example', 'postmaster'],
      ['Post-Master@customer.example', 'postmaster'],
      ['mail-daemon@customer.example', 'mailer-daemon'],
      ['noreply-dmarc-support@google.example', 'no-reply'],
      ['no-reply.billing@customer.example', 'no-reply'],
      ['autoresponder@customer.example', 'autoresponder'],
      ['auto-reply@customer.example', 'autoresponder'],
    ])
      expect(await auto({ From: `Robot <${address}>` }), address).toEqual({ automatic: true, reason: `sender:${kind}` });
    expect(await auto({ From: 'Noreen Plyer <noreen.plyer@customer.example>' })).toEqual({ automatic: false, reason: null });
    expect(await auto({ Subject: '[Auto-Reply] Quick idea' })).toEqual({ automatic: true, reason: 'subject:auto-reply' });
    expect(await auto({ Subject: 'Afwezigheidsbericht: Idee' })).toEqual({ automatic: true, reason: 'subject:afwezig' });
  });

  it('a postmaster writing "Re:" with interest-like words is still not a reply', async () => {
    const { c } = await analyze(automatic('postmaster-quarantine-notice'));
    expect(c.intent).toBe('other');
  });
});

describe('nothing automatic is a human intent', () => {
  const files = [
    ...[
      'ooo-en-gmail',
      'ooo-de-exchange',
      'ooo-fr',
      'ooo-es',
      'ooo-it',
      'ooo-nl',
      'ooo-pt',
      'ooo-icloud-vacation',
      'challenge-boxtrapper',
      'challenge-verify-human',
      'challenge-guest-list',
      'challenge-sanebox-style',
      'challenge-unknown-sender-de',
      'list-moderation-notice',
      'postmaster-quarantine-notice',
      'dmarc-aggregate-report',
    ].map((f) => `automatic/${f}`),
  ];

  it.each(files)('%s: out_of_office or other, automatic', async (file) => {
    const { mail, c } = await analyze(loadMailFile(`${file}.eml`));
    expect(mail.automatic.automatic).toBe(true);
    expect(INTENTS).toContain(c.intent);
    notHuman(c);
    expect(['out_of_office', 'other']).toContain(c.intent);
  });
});
