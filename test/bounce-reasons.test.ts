// Delivery-failure reasons (src/mail/bounce-reason.ts) and the bounce side of the inbound analysis
// (src/inbound/analyze/reports.ts, notice.ts, ses.ts): one reason per failure read from status
// fields, SMTP answers and the wording of the common mail servers, temporary or not, with its class
// of effect (src/mail/bounce-taxonomy.ts); the failure notices of each MTA format read per
// recipient; the original Message-ID wherever the notice returns it. Fixtures in
// test/fixtures/mail/bounces/, written for the project.
import { describe, expect, it } from 'vitest';
import type { DeliveryReport, ReportRecipient } from '../src/inbound/analysis.js';
import { CONFIDENCE, classify, parseMail } from '../src/inbound/analyze/index.js';
import { createModelClient } from '../src/llm/client.js';
import {
  enhancedStatusIn,
  type FailureEvidence,
  readBounceReason,
  replyCodeIn,
  smtpStageIn,
  smtpStageOf,
} from '../src/mail/bounce-reason.js';
import { BOUNCE_REASONS, type BounceReason, bounceClass } from '../src/mail/bounce-taxonomy.js';
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
const bounce = (file: string) => loadMailFile(`bounces/${file}.eml`);

describe('readBounceReason: a reason for every failure', () => {
  // one answer per reason, as servers word them (written for these tests)
  const cases: Array<[BounceReason, FailureEvidence, boolean]> = [
    [
      'user_unknown',
      {
        smtpCode: 550,
        diagnostic: '550 5.1.1 <jane@customer.example>: Recipient address rejected: User unknown in local recipient table',
        stage: 'RCPT TO',
      },
      false,
    ],
    [
      'host_unknown',
      { status: '5.4.4', diagnostic: 'Host or domain name not found. Name service error for name=nowhere.example type=A: Host not found' },
      false,
    ],
    ['has_moved', { diagnostic: '551 5.1.6 User has moved; the mailbox is no longer at this address' }, false],
    ['suspended', { diagnostic: '550 5.2.1 This mailbox has been disabled by its owner' }, false],
    ['not_accepted', { diagnostic: '556 5.1.10 The domain customer.example does not accept mail (null MX)' }, false],
    ['mailbox_full', { diagnostic: '552 5.2.2 Mailbox full: quota exceeded for this user' }, false],
    ['expired', { status: '4.4.7', action: 'failed', diagnostic: 'Message expired after 5 days in the queue' }, true],
    ['system_full', { diagnostic: '452 4.3.1 Insufficient system storage' }, true],
    ['exceed_limit', { status: '5.2.3', diagnostic: '552 5.2.3 Over the limit set for this recipient' }, false],
    ['temporary', { smtpCode: 451, diagnostic: '451 Please come back later' }, true],
    ['blocked', { diagnostic: '554 5.7.1 Service unavailable; Client host [192.0.2.10] blocked using bl.example.net' }, false],
    ['bad_reputation', { diagnostic: '550 5.7.1 Rejected: the sending IP has a poor reputation' }, false],
    ['require_ptr', { diagnostic: '550 5.7.25 The sending IP 192.0.2.10 has no PTR record' }, false],
    ['spam_detected', { diagnostic: '550 5.7.1 Message rejected as spam by the content filter' }, false],
    ['virus_detected', { diagnostic: '554 5.7.1 Virus found in the attachment' }, false],
    ['content_error', { diagnostic: '550 5.6.0 Invalid MIME structure in part 2' }, false],
    ['policy_violation', { diagnostic: '554 5.7.1 Message refused by local policy' }, false],
    ['filtered', { diagnostic: "550 Message filtered by the recipient's rules" }, false],
    ['rejected', { stage: 'MAIL FROM', diagnostic: '553 5.1.8 Domain of sender address seller.example does not exist' }, false],
    [
      'auth_failure',
      { diagnostic: "550 5.7.26 Unauthenticated email from seller.example is not accepted due to the domain's DMARC policy" },
      false,
    ],
    ['security_error', { diagnostic: '530 5.7.0 Must issue a STARTTLS command first' }, false],
    ['not_compliant_rfc', { diagnostic: '550 5.7.1 This message is not RFC 5322 compliant: two From headers' }, false],
    ['rate_limited', { diagnostic: '450 4.7.1 Rate limit exceeded for 192.0.2.10, slow down' }, true],
    ['too_many_connections', { diagnostic: '421 4.7.0 Too many concurrent connections from your IP' }, true],
    ['message_too_big', { diagnostic: '552 5.3.4 Message size exceeds the fixed limit' }, false],
    ['no_relaying', { diagnostic: '554 5.7.1 <jane@elsewhere.example>: Relay access denied' }, false],
    ['system_error', { diagnostic: '554 5.3.0 Internal server error while storing the message' }, false],
    ['mailer_error', { status: '5.3.0', diagnostic: 'x-unix; procmail: command died with exit code 75' }, false],
    ['network_error', { status: '5.4.6', diagnostic: '554 5.4.6 Too many hops: mail loop detected' }, false],
    ['syntax_error', { diagnostic: '501 5.5.4 Syntax error in parameters' }, false],
    ['on_hold', { diagnostic: '550 5.0.0 Message placed on hold by the administrator' }, false],
    ['undefined', { status: '5.0.0', diagnostic: '550 5.0.0 Rejected' }, false],
  ];

  it('covers every reason of the taxonomy', () => {
    expect(new Set(cases.map(([reason]) => reason))).toEqual(new Set(BOUNCE_REASONS));
  });

  it.each(cases)('%s', (reason, evidence, temporary) => {
    const read = readBounceReason(evidence);
    expect(read).toMatchObject({ reason, temporary });
    expect(bounceClass(read.reason, read.temporary)).toBe(bounceClass(reason, temporary));
  });

  it('recipient wording is not shadowed by generic words; block and policy wording wins over a bare status', () => {
    // "refused" is a generic word; the recipient's absence is what the answer says
    expect(
      readBounceReason({ diagnostic: '550 Recipient address rejected: the mailbox does not exist here; message refused' }).reason,
    ).toBe('user_unknown');
    // a sender-address refusal names "user unknown" too: it is about our sender
    expect(readBounceReason({ diagnostic: '553 5.1.7 Sender address rejected: User unknown in local recipient table' }).reason).toBe(
      'rejected',
    );
    // a status saying "bad address" (5.1.0) yields to the words saying our IP is listed
    expect(readBounceReason({ status: '5.1.0', diagnostic: '550 5.1.0 Your IP 192.0.2.10 is listed on our block list' }).reason).toBe(
      'blocked',
    );
    expect(readBounceReason({ status: '5.0.0', diagnostic: '554 Delivery not allowed by local policy' }).reason).toBe('policy_violation');
    // with nothing in words, the status decides; with neither, the reply code
    expect(readBounceReason({ status: '5.1.1', diagnostic: 'smtp; 550 5.1.1' })).toMatchObject({ reason: 'user_unknown', basis: 'status' });
    expect(readBounceReason({ smtpCode: 552, diagnostic: '' })).toMatchObject({ reason: 'mailbox_full', basis: 'code' });
    expect(readBounceReason({})).toEqual({ reason: 'undefined', temporary: false, basis: 'none' });
  });

  it('a status only where one is written as such: never a version, an IP, a date or a number in a word', () => {
    expect(enhancedStatusIn('by gw2.customer.example (Lotus SMTP MTA v4.6.1  (569.2 2-6-1999)) with SMTP')).toBeNull();
    expect(enhancedStatusIn('Received: from [192.0.2.1] (5.4.3.2) on 4.5.2025')).toBeNull();
    expect(enhancedStatusIn('ISO 4.1.1 compliance and build 5.2.2a')).toBeNull();
    expect(enhancedStatusIn('Sorry, no mailbox here by that name. (#5.1.1)')).toBe('5.1.1');
    expect(enhancedStatusIn('smtp; 550-5.7.1 [192.0.2.10] Our system has detected')).toBe('5.7.1');
    expect(enhancedStatusIn('Status: 4.4.7')).toBe('4.4.7');
    // a relay's own summary code, then the remote server's answer quoted: the remote one
    expect(enhancedStatusIn("smtp; 5.1.0 - Unknown address error 552-'5.2.2 quota exceeded'")).toBe('5.2.2');
    expect(replyCodeIn('Remote host said: 550 sorry, no mailbox here')).toBe(550);
    expect(replyCodeIn('Sent: Mon, 6 Jan 2025 10:15:01 +0100 by mta1061 (LPN007_416) [416]')).toBeNull();
    // a Lotus Notes notice read whole: the version in its Received line is no temporary status
    expect(readBounceReason({ diagnostic: 'User not listed in public Name & Address Book\nby gw2 (Lotus SMTP MTA v4.6.1)' })).toMatchObject(
      {
        reason: 'user_unknown',
        temporary: false,
      },
    );
  });

  it('temporary: a 4.x.x status, else a 4xx code, else a delayed report or words of a retry; a report that gave up on "user unknown" is final', () => {
    expect(readBounceReason({ status: '4.2.2', diagnostic: '452 4.2.2 Mailbox full' })).toMatchObject({
      reason: 'mailbox_full',
      temporary: true,
    });
    expect(readBounceReason({ diagnostic: '450 Requested mail action not taken: mailbox busy' }).temporary).toBe(true);
    expect(readBounceReason({ action: 'delayed', diagnostic: 'Connection timed out' })).toMatchObject({
      reason: 'network_error',
      temporary: true,
    });
    expect(readBounceReason({ diagnostic: 'The server will retry delivery for 2 more days' }).temporary).toBe(true);
    expect(readBounceReason({ status: '5.1.1', action: 'failed', diagnostic: 'will be retried' }).temporary).toBe(false);
    // a temporary "user unknown" is soft; after the reporting server gave up on it, it is the recipient's
    const soft = readBounceReason({
      status: '4.1.1',
      diagnostic: '450 4.1.1 <jane@customer.example>: Recipient address rejected: User unknown',
    });
    expect(bounceClass(soft.reason, soft.temporary)).toBe('soft');
    const gaveUp = readBounceReason({
      status: '4.1.1',
      action: 'failed',
      diagnostic: '450 4.1.1 Recipient address rejected: User unknown',
    });
    expect(bounceClass(gaveUp.reason, gaveUp.temporary)).toBe('recipient');
    // a report that gave up on a network failure: the delivery expired
    expect(
      readBounceReason({ status: '4.4.1', action: 'failed', diagnostic: 'connect to mx.customer.example: Connection timed out' }).reason,
    ).toBe('expired');
  });

  it('the SMTP stage: after DATA a recipient refusal is a filter, at MAIL FROM our sender, at the greeting or HELO our server', () => {
    expect(smtpStageOf('RCPT TO')).toBe('rcpt');
    expect(smtpStageOf('DATA')).toBe('data');
    expect(smtpStageOf('MAIL FROM')).toBe('mail');
    expect(smtpStageOf('EHLO')).toBe('helo');
    expect(smtpStageOf('CONN')).toBe('connect');
    expect(readBounceReason({ stage: 'DATA', diagnostic: '550 User unknown' }).reason).toBe('filtered');
    // unless the status or the words say the account itself does not exist
    expect(readBounceReason({ stage: 'DATA', diagnostic: '550 5.1.1 User unknown' }).reason).toBe('user_unknown');
    expect(
      readBounceReason({ stage: 'DATA', diagnostic: "554 delivery error: this user doesn't have a customer.example account" }).reason,
    ).toBe('user_unknown');
    expect(readBounceReason({ stage: 'MAIL FROM', diagnostic: '550 5.1.1 User unknown' }).reason).toBe('rejected');
    expect(readBounceReason({ stage: 'EHLO', smtpCode: 421, diagnostic: '421 Come back later' })).toMatchObject({
      reason: 'blocked',
      temporary: true,
    });
    // the stage as notices write it
    expect(smtpStageIn('host mx[203.0.113.25] said: 550 User unknown (in reply to end of DATA command)')).toBe('data');
    expect(smtpStageIn('SMTP error from remote mail server after RCPT TO:<jane@customer.example>:')).toBe('rcpt');
    expect(smtpStageIn('Connected to 203.0.113.25 but sender was rejected.')).toBe('mail');
    // a Sendmail transcript with PIPELINING: the failure answered RCPT, the next answer DATA
    expect(smtpStageIn('>>> DATA\n<<< 550 5.1.1 <jane@customer.example>... No such user\n<<< 503 5.5.1 No recipients')).toBe('rcpt');
    expect(smtpStageIn('>>> DATA\n<<< 550 Unknown user jane@customer.example\n554 5.0.0 Service unavailable')).toBe('data');
  });

  it('reads the SMTP answer the dispatcher gets at send time, whatever the inbound types', () => {
    expect(
      readBounceReason({
        smtpCode: 550,
        diagnostic: '550-5.1.1 The email account that you tried to reach does not exist.',
        stage: 'RCPT TO',
      }),
    ).toEqual({
      reason: 'user_unknown',
      temporary: false,
      basis: 'wording',
    });
    expect(
      readBounceReason({
        smtpCode: '421',
        diagnostic: '421 4.7.0 [TSS04] Messages from 192.0.2.10 temporarily deferred due to unexpected volume',
        stage: 'DATA',
      }),
    ).toMatchObject({
      reason: 'rate_limited',
      temporary: true,
    });
    expect(
      readBounceReason({ smtpCode: 550, diagnostic: '550 5.7.606 Access denied, banned sending IP [192.0.2.10]', stage: 'RCPT TO' }).reason,
    ).toBe('blocked');
  });

  it('never throws and stays bounded on hostile input', () => {
    const long = `${'550 5.1.1 '.repeat(2000)}${'a.'.repeat(20_000)} does not exist`;
    const started = Date.now();
    expect(() => readBounceReason({ diagnostic: long, status: long, smtpCode: long, action: long, stage: long })).not.toThrow();
    expect(() => readBounceReason({ diagnostic: 42 as unknown as string, status: {} as unknown as string })).not.toThrow();
    expect(Date.now() - started).toBeLessThan(1000);
  });
});

type Expected = Partial<ReportRecipient> & { recipient: string };
interface FixtureCase {
  /** The MTA format the fixture is written in, and what it shows. */
  about: string;
  heuristic: boolean;
  recipients: Expected[];
  originalMessageId: string | null;
  /** The classification reason code. */
  code: string;
}

const FIXTURES: Record<string, FixtureCase> = {
  'exchange2003-name-not-recognized': {
    about: 'Exchange 5.5/2003 NDR without a report part: "The recipient name is not recognized"',
    heuristic: true,
    recipients: [{ recipient: FROM, reason: 'user_unknown', bounceClass: 'recipient', status: null, permanent: true }],
    originalMessageId: null,
    code: 'dsn-heuristic:user_unknown',
  },
  'notes-not-in-address-book': {
    about: 'Lotus Notes: reason before the address, "Lotus SMTP MTA v4.6.1" in the returned copy is no status',
    heuristic: true,
    recipients: [{ recipient: FROM, reason: 'user_unknown', bounceClass: 'recipient', status: null, action: 'failed' }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn-heuristic:user_unknown',
  },
  'qmail-two-recipients': {
    about: 'qmail-send: one paragraph per recipient, each with its own reason',
    heuristic: true,
    recipients: [
      { recipient: FROM, reason: 'user_unknown', bounceClass: 'recipient', status: '5.1.1' },
      { recipient: 'ops@customer-isp.example', reason: 'mailbox_full', bounceClass: 'soft', status: '5.2.2' },
    ],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn-heuristic:5.1.1',
  },
  'postfix-dsn-blocklist': {
    about: 'Postfix DSN: our IP on a block list (in reply to RCPT TO)',
    heuristic: false,
    recipients: [{ recipient: FROM, reason: 'blocked', bounceClass: 'sender', status: '5.7.1', permanent: true }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn:5.7.1',
  },
  'postfix-dsn-after-data': {
    about: 'Postfix DSN: "User unknown" after DATA, the address accepted at RCPT: a filter',
    heuristic: false,
    recipients: [{ recipient: FROM, reason: 'filtered', bounceClass: 'sender', status: '5.0.0' }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn:5.0.0',
  },
  'exim-retry-timeout': {
    about: 'Exim: "retry timeout exceeded", X-Failed-Recipients',
    heuristic: true,
    recipients: [{ recipient: FROM, reason: 'expired', bounceClass: 'soft' }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn-heuristic:expired',
  },
  'exim3-message-log-unknown-host': {
    about: 'Exim 3 "mail failed, returning to sender": a message log, "... unknown host"',
    heuristic: true,
    recipients: [{ recipient: FROM, reason: 'host_unknown', bounceClass: 'recipient' }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn-heuristic:host_unknown',
  },
  'sendmail-dsn-pipelined': {
    about: 'Sendmail DSN: a pipelined transcript, the failure answered RCPT',
    heuristic: false,
    recipients: [{ recipient: FROM, reason: 'user_unknown', bounceClass: 'recipient', status: '5.1.1' }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn:5.1.1',
  },
  'gmail-dsn-account-disabled': {
    about: 'Gmail DSN: the account is disabled',
    heuristic: false,
    recipients: [{ recipient: FROM, reason: 'suspended', bounceClass: 'recipient', status: '5.2.1' }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn:5.2.1',
  },
  'gmail-delay-warning': {
    about: 'Gmail delay warning without a report: delayed, soft',
    heuristic: true,
    recipients: [{ recipient: FROM, action: 'delayed', reason: 'network_error', bounceClass: 'soft', permanent: false }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn-heuristic:network_error',
  },
  'yahoo-failure-notice': {
    about: 'Yahoo "Failure Notice": the remote answer quoted, mailbox full',
    heuristic: true,
    recipients: [{ recipient: FROM, reason: 'mailbox_full', bounceClass: 'soft', status: '5.2.2' }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn-heuristic:5.2.2',
  },
  'outlook-dsn-blocklist': {
    about: 'Outlook.com DSN: our network on their block list',
    heuristic: false,
    recipients: [{ recipient: FROM, reason: 'blocked', bounceClass: 'sender', status: '5.7.1' }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn:5.7.1',
  },
  'exchange-online-dmarc': {
    about: 'Exchange Online (2007 and later) DSN: DMARC failure, 5.7.509',
    heuristic: false,
    recipients: [{ recipient: FROM, reason: 'auth_failure', bounceClass: 'sender', status: '5.7.509' }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn:5.7.509',
  },
  'ses-bounce-notification': {
    about: 'Amazon SES bounce notification (SNS JSON): recipients and our Message-ID from its fields',
    heuristic: true,
    recipients: [{ recipient: FROM, reason: 'user_unknown', bounceClass: 'recipient', status: '5.1.1', action: 'failed' }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn-heuristic:5.1.1',
  },
  'ses-dsn-relayed-answer': {
    about: "Amazon SES DSN: its own summary code, then the remote server's answer: the remote one counts",
    heuristic: false,
    recipients: [{ recipient: FROM, reason: 'mailbox_full', bounceClass: 'soft', status: '5.2.2' }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn:5.2.2',
  },
  'courier-no-such-domain': {
    about: 'Courier DSN: no diagnostic field, "No such domain." in the notice',
    heuristic: false,
    recipients: [{ recipient: FROM, reason: 'host_unknown', bounceClass: 'recipient', status: '5.0.0' }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn:5.0.0',
  },
  'opensmtpd-generic-status': {
    about: "OpenSMTPD DSN: Status 5.0.0 only, the server's answer in the notice",
    heuristic: false,
    recipients: [{ recipient: FROM, reason: 'require_ptr', bounceClass: 'sender', status: '5.7.25' }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn:5.7.25',
  },
  'postmaster-re-subject-no-such-user': {
    about: 'a carrier postmaster answering "Re:" with a 550 "no such user" (and an inner part whose boundary is not indented)',
    heuristic: true,
    recipients: [{ recipient: FROM, reason: 'user_unknown', bounceClass: 'recipient', status: null }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn-heuristic:user_unknown',
  },
  'forwarded-dsn-inside-notice': {
    about: 'a gateway notice carrying the real DSN as an attached message',
    heuristic: false,
    recipients: [{ recipient: FROM, reason: 'user_unknown', bounceClass: 'recipient', status: '5.1.1' }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn:5.1.1',
  },
  'dsn-misdelimited-headers': {
    about: 'Sendmail DSN whose returned-headers part uses another boundary: our Message-ID still found',
    heuristic: false,
    recipients: [{ recipient: FROM, reason: 'suspended', bounceClass: 'recipient', status: '5.2.1' }],
    originalMessageId: OUTBOUND_ID,
    code: 'dsn:5.2.1',
  },
};

describe('failure notices of each MTA format, read per recipient', () => {
  it.each(Object.keys(FIXTURES))('%s', async (file) => {
    const e = FIXTURES[file];
    const { mail, c } = await analyze(bounce(file));
    const report = mail.report as DeliveryReport;
    expect(report, e.about).toMatchObject({ kind: 'dsn', heuristic: e.heuristic, originalMessageId: e.originalMessageId });
    expect(report.recipients).toHaveLength(e.recipients.length);
    for (const [i, r] of e.recipients.entries()) expect(report.recipients[i], e.about).toMatchObject(r);
    expect(c).toMatchObject({ intent: 'bounce', source: 'report', reason: e.code });
    expect(c.confidence).toBe(e.heuristic ? CONFIDENCE.dsnHeuristic : CONFIDENCE.dsn);
    expect(mail.automatic.automatic).toBe(true);
  });
});

describe('report fields', () => {
  it('an expired action without a status is a bounce that expired, not a permanent failure', async () => {
    const raw = bounce('postfix-dsn-blocklist')
      .toString('latin1')
      .replace('Action: failed\r\nStatus: 5.7.1\r\n', 'Action: expired\r\n')
      .replace(/Diagnostic-Code: smtp; 554[\s\S]*?(?=\r\n\r\n)/, 'Diagnostic-Code: smtp; Connection timed out');
    const { mail, c } = await analyze(raw);
    expect((mail.report as DeliveryReport).recipients).toEqual([
      expect.objectContaining({
        recipient: FROM,
        action: 'expired',
        status: null,
        permanent: false,
        reason: 'expired',
        bounceClass: 'soft',
      }),
    ]);
    expect(c).toMatchObject({ intent: 'bounce', reason: 'dsn:expired' });
  });
});

describe('broken notices are read as far as they go', () => {
  it('a report declared multipart whose parts were never delimited is read as text: its fields give the recipients', async () => {
    const { mail, c } = await analyze(
      [
        'From: Mail Delivery Subsystem <MAILER-DAEMON@relay.customer.example>',
        'To: sam@seller.example',
        'Subject: Returned mail: Service unavailable',
        'MIME-Version: 1.0',
        'Content-Type: multipart/report; report-type=delivery-status;',
        '    boundary="NEVER.USED/relay.customer.example"',
        '',
        '   ----- The following addresses had permanent fatal errors -----',
        `<${FROM}>`,
        '',
        '   ----- Transcript of session follows -----',
        `local delivery: no such user: ${FROM.split('@')[0]}`,
        `554 <${FROM}>... Service unavailable`,
        '',
        'Reporting-MTA: dns; relay.customer.example',
        '',
        `Final-Recipient: RFC822; <${FROM}>`,
        'Action: failed',
        'Status: 5.5.0',
        '',
        `Message-Id: ${OUTBOUND_ID}`,
        'Subject: Quick idea for Customer Co',
      ].join('\r\n'),
    );
    expect(mail.report).toMatchObject({
      kind: 'dsn',
      heuristic: true,
      originalMessageId: OUTBOUND_ID,
      recipients: [{ recipient: FROM, status: '5.5.0', reason: 'user_unknown', bounceClass: 'recipient' }],
    });
    expect(c.intent).toBe('bounce');
  });

  it('a report without blank lines between its recipients is read per recipient', async () => {
    const raw = bounce('postfix-dsn-blocklist')
      .toString('latin1')
      .replace(
        /Final-Recipient: rfc822; [^\r]*\r\nOriginal-Recipient[^\r]*\r\n/,
        `Final-Recipient: rfc822; ops@customer.example\r\nAction: failed\r\nStatus: 5.2.2\r\nDiagnostic-Code: smtp; 552 5.2.2 Mailbox full\r\nFinal-Recipient: rfc822; ${FROM}\r\n`,
      );
    const report = (await parseMail(raw)).report as DeliveryReport;
    expect(report.recipients.map((r) => [r.recipient, r.status, r.reason])).toEqual([
      ['ops@customer.example', '5.2.2', 'mailbox_full'],
      [FROM, '5.7.1', 'blocked'],
    ]);
  });
});

describe('the recipients a notice names', () => {
  it('an address on a contact or summary line is no recipient; a recipient named like one (support@…) is', async () => {
    const mail = await parseMail(
      [
        'From: MAILER-DAEMON@relay.customer.example',
        'To: sam@seller.example',
        'Subject: failure notice',
        '',
        'Your message',
        '  From: sam@seller.example',
        '  To: support@customer.example',
        'could not be delivered:',
        '',
        '<support@customer.example>: 550 5.1.1 user unknown',
        '',
        'For assistance contact help@relay.customer.example.',
      ].join('\r\n'),
    );
    expect((mail.report as DeliveryReport).recipients.map((r) => [r.recipient, r.reason])).toEqual([
      ['support@customer.example', 'user_unknown'],
    ]);
  });
});

describe('bounces are never taken for human replies', () => {
  it('a postmaster answering "Re:" with a 5xx "no such user" is a bounce, not a reply', async () => {
    const { mail, c } = await analyze(bounce('postmaster-re-subject-no-such-user'));
    expect(mail.subject).toBe('Re:Quick idea for Customer Co');
    expect(mail.text).toContain('550 No such user here');
    expect(c).toMatchObject({ intent: 'bounce', source: 'report' });
  });

  it('a mail system writing without a failure stated (a quarantine or quota notice) is no bounce; a person quoting an error neither', async () => {
    const notice = await parseMail(
      [
        'From: Mail Gateway <postmaster@customer.example>',
        'To: sam@seller.example',
        'Subject: Re: Quick idea for Customer Co',
        'Content-Type: text/plain',
        '',
        'Your message to jane.doe@customer.example is held for a scan under our policy and will be delivered after it.',
      ].join('\r\n'),
    );
    expect(notice.report).toBeNull();
    const person = await parseMail(
      [
        'From: Jane Doe <jane.doe@customer.example>',
        'To: sam@seller.example',
        'Subject: Re: Quick idea',
        '',
        'Our server said 550 5.1.1 User unknown for bob@customer.example last week.',
      ].join('\r\n'),
    );
    expect(person.report).toBeNull();
  });

  it('a Sendmail or Postfix notice with a "Fwd:" or unusual subject stating "User unknown" is a bounce', async () => {
    const { c } = await analyze(
      [
        'From: Mail Delivery Subsystem <MAILER-DAEMON@relay.customer.example>',
        'To: sam@seller.example',
        'Subject: Postmaster notify: see transcript for details',
        'Content-Type: text/plain',
        '',
        '   ----- The following addresses had permanent fatal errors -----',
        `<${FROM}>`,
        '    (reason: 550 5.1.1 User unknown)',
      ].join('\r\n'),
    );
    expect(c).toMatchObject({ intent: 'bounce', reason: 'dsn-heuristic:5.1.1' });
  });
});

describe('the original Message-ID of a failure notice', () => {
  it('from the returned headers part, from a copy given inline, from a part that swallowed mis-delimited headers, from an SES notification', async () => {
    for (const file of ['postfix-dsn-blocklist', 'notes-not-in-address-book', 'dsn-misdelimited-headers', 'ses-bounce-notification']) {
      const mail = await parseMail(bounce(file));
      expect((mail.report as DeliveryReport).originalMessageId, file).toBe(OUTBOUND_ID);
      expect(mail.inReplyTo, file).toBeNull(); // not from In-Reply-To: these fixtures carry none
    }
  });

  it('a notice forwarded whole names its own Message-ID first: the returned one (the last) is taken', async () => {
    const mail = await parseMail(
      [
        'From: Mail Delivery System <MAILER-DAEMON@relay.customer.example>',
        'To: sam@seller.example',
        'Subject: Undelivered Mail Returned to Sender',
        'Content-Type: text/plain',
        '',
        '> Message-ID: <notice-1@relay.customer.example>',
        `> <${FROM}>: host mx said: 550 5.1.1 User unknown`,
        `> Message-ID: ${OUTBOUND_ID}`,
        '> Subject: Quick idea for Customer Co',
      ].join('\r\n'),
    );
    expect(mail.report).toMatchObject({
      kind: 'dsn',
      originalMessageId: OUTBOUND_ID,
      recipients: [{ recipient: FROM, reason: 'user_unknown' }],
    });
  });
});
