// Feedback reports (src/inbound/analyze/complaints.ts): RFC 5965 ARF reports keep their feedback
// type and say whether they are a spam complaint; the common non-ARF formats (Microsoft's JMRP
// forwards, AOL's older notice, a feedback loop's or an abuse desk's spam report, Amazon SES's
// notification, Apple Mail's unsubscribe message) are read for the complaining recipient and the
// Message-ID of the message we sent. Fixtures in test/fixtures/mail/complaints/, written for the
// project.
import { describe, expect, it } from 'vitest';
import type { ComplaintReport } from '../src/inbound/analysis.js';
import { CONFIDENCE, classify, parseMail } from '../src/inbound/analyze/index.js';
import { createModelClient } from '../src/llm/client.js';
import { loadConfig } from '../src/platform/config.js';
import { createLogger } from '../src/platform/logger.js';
import { FIXTURE_DEFAULTS, loadMailFile } from './support/mail-fixtures.js';

const noModel = createModelClient(loadConfig({}), createLogger('silent'));
const FROM = FIXTURE_DEFAULTS.from;
const OUTBOUND_ID = `<${FIXTURE_DEFAULTS.inReplyTo}>`;

const analyze = async (raw: Buffer | string) => {
  const mail = await parseMail(raw);
  return { mail, c: await classify(mail, { model: noModel }) };
};
const complaint = (file: string) => loadMailFile(`complaints/${file}.eml`);

describe('RFC 5965 ARF reports keep their feedback type', () => {
  const cases: Array<[string, Partial<ComplaintReport>, string, string]> = [
    ['arf-abuse', { feedbackType: 'abuse', reportedType: 'abuse', complaint: true }, 'complaint', 'arf:abuse'],
    ['arf-auth-failure', { feedbackType: 'auth-failure', reportedType: 'auth-failure', complaint: false }, 'other', 'arf:auth-failure'],
    ['arf-fraud', { feedbackType: 'fraud', reportedType: 'fraud', complaint: false }, 'other', 'arf:fraud'],
    ['arf-virus', { feedbackType: 'virus', reportedType: 'virus', complaint: false }, 'other', 'arf:virus'],
    ['arf-not-spam', { feedbackType: 'not-spam', reportedType: 'not-spam', complaint: false }, 'other', 'arf:not-spam'],
    ['arf-other', { feedbackType: 'other', reportedType: 'other', complaint: false }, 'other', 'arf:other'],
    ['arf-opt-out', { feedbackType: 'opt-out', reportedType: 'opt-out', complaint: false }, 'unsubscribe', 'arf:opt-out'],
    ['arf-unknown-type', { feedbackType: 'unknown', reportedType: 'dissatisfied', complaint: true }, 'complaint', 'arf:unknown'],
    ['arf-no-type', { feedbackType: 'unknown', reportedType: null, complaint: true }, 'complaint', 'arf:unknown'],
  ];

  it.each(cases)(
    '%s: abuse and unknown or absent types are complaints; auth-failure, fraud, virus, not-spam, other are not; opt-out is an unsubscribe',
    async (file, report, intent, reason) => {
      const { mail, c } = await analyze(complaint(file));
      expect(mail.report).toEqual({ kind: 'arf', format: 'arf', recipient: FROM, originalMessageId: OUTBOUND_ID, ...report });
      expect(c).toEqual({ intent, confidence: CONFIDENCE.arf, reason, source: 'report', returnDate: null });
      expect(mail.automatic.automatic).toBe(true);
    },
  );

  it('the opt-out drafts: Removal-Recipient names the recipient and text/rfc822-header (sic) returns the message; old type names are mapped', async () => {
    const optOut = await parseMail(complaint('arf-opt-out'));
    expect(optOut.report).toMatchObject({ recipient: FROM, originalMessageId: OUTBOUND_ID });
    const raw = complaint('arf-not-spam').toString('latin1');
    for (const [written, type] of [
      ['miscategorized', 'not-spam'],
      ['opt-out-list', 'opt-out'],
      ['Auth-Failure', 'auth-failure'],
      ['ABUSE (user pressed spam)', 'abuse'],
    ]) {
      const m = await parseMail(raw.replace('Feedback-Type: not-spam', `Feedback-Type: ${written}`));
      expect(m.report, written).toMatchObject({ feedbackType: type, complaint: type === 'abuse' });
    }
  });

  it('a recipient written as a display name and address is read as the address', async () => {
    const raw = complaint('arf-fraud')
      .toString('latin1')
      .replace(`Original-Rcpt-To: <${FROM}>`, `Original-Rcpt-To: "Jane Doe" <${FROM.toUpperCase()}>`);
    expect((await parseMail(raw)).report).toMatchObject({ recipient: FROM });
  });
});

describe('complaints in other formats', () => {
  const cases: Array<[string, Partial<ComplaintReport>, string, number]> = [
    ['jmrp-outlook', { format: 'jmrp', recipient: FROM, originalMessageId: OUTBOUND_ID }, 'jmrp:abuse', CONFIDENCE.complaintForward],
    ['aol-client-tos', { format: 'aol', recipient: FROM, originalMessageId: OUTBOUND_ID }, 'aol:abuse', CONFIDENCE.complaintForward],
    ['fbl-forward', { format: 'forward', recipient: FROM, originalMessageId: OUTBOUND_ID }, 'forward:abuse', CONFIDENCE.complaintForward],
    [
      'abuse-desk-inline',
      { format: 'forward', recipient: null, originalMessageId: OUTBOUND_ID },
      'forward:abuse',
      CONFIDENCE.complaintForward,
    ],
    [
      'ses-complaint',
      { format: 'ses', recipient: FROM, originalMessageId: OUTBOUND_ID, reportedType: 'abuse' },
      'ses:abuse',
      CONFIDENCE.arf,
    ],
  ];

  it.each(cases)(
    '%s: a complaint, with the recipient and the Message-ID of the message we sent',
    async (file, report, reason, confidence) => {
      const { mail, c } = await analyze(complaint(file));
      expect(mail.report).toEqual({ kind: 'arf', feedbackType: 'abuse', reportedType: null, complaint: true, ...report });
      expect(c).toEqual({ intent: 'complaint', confidence, reason, source: 'report', returnDate: null });
      expect(mail.automatic.automatic).toBe(true);
    },
  );

  it("Microsoft's forward: the complainant from X-HmXmrOriginalRecipient, whatever the attached To says; or a Microsoft sender and subject alone", async () => {
    const raw = complaint('jmrp-outlook').toString('latin1');
    const hidden = await parseMail(raw.replace(`To: Jane Doe <${FROM}>`, 'To: undisclosed-recipients:;'));
    expect(hidden.report).toMatchObject({ format: 'jmrp', recipient: FROM, originalMessageId: OUTBOUND_ID });
    const noMark = await parseMail(raw.replace(/^X-HmXmrOriginalRecipient:.*\r\n/m, ''));
    expect(noMark.report).toMatchObject({ format: 'jmrp', recipient: FROM, complaint: true });
  });

  it('Amazon SES: the JSON read by its fields even when a mail system broke its long line', async () => {
    const raw = complaint('ses-complaint').toString('latin1').replace('"subject":"Quick idea', '"subject":"Quick !\r\n idea');
    expect((await parseMail(raw)).report).toMatchObject({
      format: 'ses',
      recipient: FROM,
      originalMessageId: OUTBOUND_ID,
      complaint: true,
    });
    const bounce = raw.replace('"notificationType":"Complaint"', '"notificationType":"Bounce"');
    expect((await parseMail(bounce)).report).toBeNull();
  });

  it("Apple Mail's unsubscribe message: an opt-out by its sender, not a complaint, never a human reply", async () => {
    const { mail, c } = await analyze(complaint('apple-mail-unsubscribe'));
    expect(mail.report).toEqual({
      kind: 'arf',
      format: 'unsubscribe',
      feedbackType: 'opt-out',
      reportedType: null,
      complaint: false,
      recipient: FROM,
      originalMessageId: null,
    });
    expect(c).toMatchObject({ intent: 'unsubscribe', source: 'report', reason: 'unsubscribe:opt-out' });
    expect(mail.automatic).toEqual({ automatic: true, reason: 'auto-submitted:auto-replied' });
  });

  it('not complaints: a person forwarding our message as an attachment, a bounce returning it, a person speaking of spam', async () => {
    const fbl = complaint('fbl-forward').toString('latin1');
    const colleague = fbl
      .replace('From: ISP Feedback Loop <feedbackloop@isp.example>', 'From: Jane Doe <jane.doe@customer.example>')
      .replace('Subject: Spam complaint from one of our subscribers', 'Subject: FW: Quick idea for Customer Co')
      .replace(/You are enrolled[\s\S]*?mailing them\./, 'Mark, have a look at this one, sounds interesting.');
    const forwarded = await analyze(colleague);
    expect(forwarded.mail.report).toBeNull();
    expect(forwarded.c.intent).toBe('interested');
    const bounce = fbl
      .replace('From: ISP Feedback Loop <feedbackloop@isp.example>', 'From: Mail Delivery System <mailer-daemon@isp.example>')
      .replace('Subject: Spam complaint from one of our subscribers', 'Subject: Undelivered Mail Returned to Sender')
      .replace(/You are enrolled[\s\S]*?mailing them\./, '550 5.1.1 <jane.doe@customer.example>: Recipient address rejected');
    expect((await parseMail(bounce)).report?.kind).not.toBe('arf');
    const person = await analyze(
      [
        `From: Jane Doe <${FROM}>`,
        'To: sam@seller.example',
        'Subject: Re: Quick idea',
        'Message-ID: <p1@customer.example>',
        '',
        'Your first email landed in my spam folder, glad I found it. Tell me more!',
      ].join('\r\n'),
    );
    expect(person.mail.report).toBeNull();
    expect(person.c.intent).toBe('interested');
    // an abuse desk's note without the reported message (nothing to match) is no complaint
    const note = complaint('abuse-desk-inline')
      .toString('latin1')
      .replace(/^Message-ID: <outbound[^\r\n]*\r\n/m, '');
    expect((await parseMail(note)).report).toBeNull();
  });
});
