// The reason of a delivery failure (a reason of src/mail/bounce-taxonomy.ts) read from what the
// failure says, wherever it is learnt: the fields of a delivery report (RFC 3464 Status, Action,
// Diagnostic-Code), the text of a failure notice sent without one, or the SMTP answer the
// dispatcher got at send time. One pure function, readBounceReason, over plain values.
//
// What is read, most telling first:
//  1. the wording of the mail servers people meet (Exchange, Notes/Domino, qmail, Postfix, Exim,
//     Sendmail, Gmail, Yahoo, Outlook, Amazon SES, Courier, ...), in rule order: who the refusal is
//     about comes first (our sender address or authentication, then the recipient: unknown, gone,
//     disabled, full), then the refusals of our server, IP or content (blocks, reputation, spam,
//     policy, rates), then delivery trouble (expiry, network, system); wording that says little
//     ("mailbox unavailable", "access denied") comes last, after the status;
//  2. the RFC 3463 enhanced status (X.Y.Z), from a Status field or where an SMTP answer or a
//     notice gives one as such ("550 5.1.1", "(#5.1.1)", "Status: 5.1.1"): never a number that
//     happens to look like one (a version "v4.6.1", an IP, a date);
//  3. the SMTP reply code;
//  4. the SMTP stage the answer came at: a recipient refusal after DATA is a filter (the address
//     was accepted at RCPT), a refusal at MAIL FROM is about our sender, one at the greeting or
//     HELO a block of our server.
// Temporary: a 4.x.x status, else a 4xx reply, else a delayed report or wording saying it will be
// retried. A report that gave up (Action failed) on a temporary network failure is expired; one
// that gave up while the server kept answering X.1.1 "user unknown" is final.
// `basis` says what the reason came from, so a caller holding more text (a notice's lines about the
// recipient) can read again when the first answer was only a status or nothing.
import { fold } from '../inbound/analyze/fold.js';
import { type BounceReason, bounceClass } from './bounce-taxonomy.js';

/** The SMTP stage an answer came at. */
export type SmtpStage = 'connect' | 'helo' | 'mail' | 'rcpt' | 'data';

export interface FailureEvidence {
  /** An RFC 3463 status from a status field (`5.1.1`, `4.4.7 (delayed)`). */
  status?: string | null;
  /** The SMTP reply code, when given apart from the text. */
  smtpCode?: number | string | null;
  /** What the server or the notice says: a Diagnostic-Code, an SMTP answer, a notice's text about the recipient. */
  diagnostic?: string | null;
  /** The RFC 3464 Action (`failed`, `delayed`, `expired`, ...). */
  action?: string | null;
  /** The SMTP stage or command answered, when known (`RCPT TO`, `DATA`, `rcpt`). */
  stage?: SmtpStage | string | null;
}

export interface ReadReason {
  reason: BounceReason;
  /** The failure is transient: the recipient may take mail later. */
  temporary: boolean;
  /** What the reason was read from: the wording, the status, the reply code, or nothing (`undefined`, `temporary`). */
  basis: 'wording' | 'status' | 'code' | 'none';
}

/** Characters of a diagnostic read: servers' explanations are short, a notice's text about one recipient too. */
const MAX_DIAGNOSTIC_CHARS = 4000;

// ---------------------------------------------------------------------------------------------
// Status codes and reply codes where they really are.

const STATUS_FIELD = /^\s*([245])\.(\d{1,3})\.(\d{1,3})(?![\d.])/;
/** A dotted triple that could be an enhanced status code: not part of a longer dotted number (an IP, a version) nor after a letter ("v4.6.1"). */
const STATUS_CANDIDATE = /(?<![\w.])([245])\.(\d{1,3})\.(\d{1,3})(?![.\d]|[a-z])/gi;
/**
 * The places servers write an enhanced status code, as what comes just before it: a reply code
 * ("550 5.1.1", "550-5.1.1", "550: 5.1.1", "#550 5.1.1", "550-'5.2.2"), a '#' ("(#5.1.1)"),
 * "status", "code", "smtp;" ("Status: 5.1.1", "ERROR_CODE :5.1.1", "DSN code 5.1.1"), or the start
 * of a line ("5.1.0 - Unknown address error").
 */
const STATUS_CONTEXT = [
  /(?:^|[^\w.])#?[245]\d\d[ \t]?[-: \t]?[ \t]*['"#([]?$/,
  /#$/,
  /(?:status|code|smtp;|dsn)[ \t]*[:=]?[ \t]*['"#([]?$/i,
  /(?:^|\n)[ \t]*['"([]?$/,
];
/** A reply code: three digits, 4xx or 5xx, not part of a longer word or number. */
const REPLY_CANDIDATE = /(?<![\w./-])#?([45][0-5]\d)(?![\w.])/g;
/** What follows a reply code opening an answer: a space, '-', ':', ',' or the line's end. */
const REPLY_FOLLOW = /^(?:[ \t]?[-:,]|[ \t]|\r?\n|$)/;

/** The status of a status field ("5.1.1 (user unknown)" → "5.1.1"), or null. */
export function statusField(v: string | null | undefined): string | null {
  const m = v ? STATUS_FIELD.exec(v) : null;
  return m ? `${m[1]}.${Number(m[2])}.${Number(m[3])}` : null;
}

/**
 * The enhanced status code a text gives as one (class 4 or 5), or null: the first that follows a
 * reply code (a relay quoting the remote server's answer after its own summary, as Amazon SES does,
 * gives the remote code there), else the first in any of the other places.
 */
export function enhancedStatusIn(text: string | null | undefined): string | null {
  if (!text) return null;
  const t = text.slice(0, MAX_DIAGNOSTIC_CHARS);
  let other: string | null = null;
  for (const m of t.matchAll(STATUS_CANDIDATE)) {
    if (m[1] === '2') continue;
    const before = t.slice(Math.max(0, m.index - 16), m.index);
    const found = `${m[1]}.${Number(m[2])}.${Number(m[3])}`;
    if (STATUS_CONTEXT[0].test(before)) return found;
    if (!other && STATUS_CONTEXT.some((re) => re.test(before))) other = found;
  }
  return other;
}

/** The first SMTP reply code (4xx or 5xx) a text gives as an answer, or null. */
export function replyCodeIn(text: string | null | undefined): number | null {
  if (!text) return null;
  const t = text.slice(0, MAX_DIAGNOSTIC_CHARS);
  for (const m of t.matchAll(REPLY_CANDIDATE)) {
    if (REPLY_FOLLOW.test(t.slice(m.index + m[0].length, m.index + m[0].length + 3))) return Number(m[1]);
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// The SMTP stage.

/** A command name as nodemailer or a transcript gives it ("RCPT TO", "MAIL FROM", "DATA", "EHLO", "CONN"), as a stage. */
export function smtpStageOf(command: string | null | undefined): SmtpStage | null {
  if (!command) return null;
  const c = command.trim().toLowerCase();
  if (c === 'connect' || c === 'helo' || c === 'mail' || c === 'rcpt' || c === 'data') return c;
  if (/^rcpt/.test(c)) return 'rcpt';
  if (/^mail/.test(c)) return 'mail';
  if (/^(?:data|end of data|message|bdat)/.test(c)) return 'data';
  if (/^(?:helo|ehlo|lhlo|starttls|auth)/.test(c)) return 'helo';
  if (/^(?:conn|greeting|banner|initial)/.test(c)) return 'connect';
  return null;
}

/** How the common MTAs say which command was answered, folded; the group names the command. */
const STAGE_WORDING: Array<[SmtpStage, RegExp]> = [
  // Postfix "(in reply to end of DATA command)", Exim "after end of data", DragonFly "our final DATA", qmail "failed after I sent the message"
  [
    'data',
    /in reply to (?:end of )?data\b|smtp command\W{0,12}data\b|after (?:end of )?data\b|after (?:the )?message (?:was|had been) sent|final data\b|failed after i sent the message|following data command|\(data\)|\[data\]/,
  ],
  [
    'rcpt',
    /in reply to rcpt\b|smtp command\W{0,12}rcpt\b|after rcpt\b|our rcpt\b|following rcpt command|does not like recipient|\[rcpt_to\]|rejected recipient/,
  ],
  [
    'mail',
    /in reply to mail\b|smtp command\W{0,12}mail\b|after mail from\b|our mail from\b|following mail command|sender was rejected|\[mail_from\]/,
  ],
  [
    'helo',
    /in reply to (?:helo|ehlo|helo\/ehlo)\b|after (?:helo|ehlo)\b|performing the (?:helo|ehlo) handshake|my name was rejected|our (?:helo|ehlo)\b/,
  ],
  [
    'connect',
    /after initial connection|greeting failed|in reply to (?:the )?(?:initial )?(?:greeting|banner)|while (?:connecting|receiving the initial server greeting)/,
  ],
];

/**
 * The stage a notice or an answer names ("in reply to RCPT TO command", "after end of data"), or
 * in a Sendmail-style transcript (">>> DATA" then "<<< 550 ..."), the command whose answer was the
 * first failure.
 */
export function smtpStageIn(text: string | null | undefined): SmtpStage | null {
  if (!text) return null;
  const lines = text.slice(0, MAX_DIAGNOSTIC_CHARS).split('\n');
  let last: SmtpStage | null = null;
  for (let i = 0; i < lines.length; i += 1) {
    const sent = /^\s*>>>\s*([A-Za-z]+(?: [A-Za-z]+)?)/.exec(lines[i]);
    if (sent) {
      last = smtpStageOf(sent[1]);
      continue;
    }
    if (!last || !/^\s*<<<\s*[45]\d\d/.test(lines[i])) continue;
    // with PIPELINING the answers to RCPT come after ">>> DATA": a failure followed by another
    // answer before the next command was RCPT's, the later one DATA's ("503 need RCPT")
    if (last === 'data') {
      for (let j = i + 1; j < lines.length && !/^\s*>>>/.test(lines[j]); j += 1) if (/^\s*<<<\s*\d{3}/.test(lines[j])) return 'rcpt';
    }
    return last;
  }
  const f = fold(text.slice(0, MAX_DIAGNOSTIC_CHARS));
  for (const [stage, re] of STAGE_WORDING) if (re.test(f)) return stage;
  return null;
}

// ---------------------------------------------------------------------------------------------
// Wording, in rule order. Strong rules decide over a status; weak ones only where the status says
// nothing specific. Written over folded text (lowercase, accents dropped, one space), with email
// addresses as "<>" and URLs as their host (an address like "filtered@..." or a help page's path
// naming a reason says nothing about this failure; a block list's host name does), and reply codes
// and status codes taken out (a multi-line answer repeats them inside its sentences).

interface Rule {
  reason: BounceReason;
  re: RegExp;
}

/** Wording of Japanese notices (Lotus Notes/Domino: "not in the directory"), as folded text has it (NFKD). */
const jp = (source: string) => new RegExp(source.normalize('NFKD'));

const STRONG: Rule[] = [
  // our sender's authentication: SPF, DKIM, DMARC, ARC
  {
    reason: 'auth_failure',
    re: /\bdmarc\b|\bspf\b.{0,60}\b(?:fail|fails|failed|failure|not pass|hard ?fail|soft ?fail|perm ?error|validation)|\bbad spf\b|\bper its? spf\b|\bdkim\b.{0,40}\b(?:fail|fails|failed|not pass|invalid)|\bunauthenticated (?:e-?mail|mail|message)|\bsender is unauthenticated|\bdoes not have authentication information|\bfails? to pass (?:authentication|spf|dkim)|\bauthentication checks? (?:failed|did not pass)|\bmultiple authentication checks|\bnot (?:allowed|authorized|permitted) to send (?:from|on behalf)|\barc validation/,
  },
  // our sender address (the envelope sender or its domain), or our right to post to a list or group
  {
    reason: 'rejected',
    re: /\bsender (?:address |domain )?(?:rejected|refused|denied|invalid|unknown|not (?:allowed|accepted|verified|found))|\b(?:domain of|invalid|unknown|bad|unverified|unroutable|unresolvable) sender\b|\bsender (?:domain|address) (?:does not|doesn't|must|did not) (?:exist|resolve)|\bsender verif\w* fail|\b(?:could|can) ?n[o']?t verify (?:the )?sender|\bpurported responsible address|\bnot a member of (?:this|the) (?:mailing )?list|\bpermission to post\b|\bnot (?:allowed|permitted|authorized) to post\b|\bsend mail as\b.{0,40}\bmisconfigured|\b(?:envelope from|mail from|return-path) (?:address )?(?:rejected|refused|not allowed)|\bnot a registered gateway user/,
  },
  // relaying refused: the server is not the recipient's, or will not carry our mail (an unverified sending identity)
  {
    reason: 'no_relaying',
    re: /\brelay(?:ing)? (?:access )?(?:denied|not (?:permitted|allowed)|prohibited|refused)|\bnot (?:configured|permitted|allowed|authorized) to relay|\b(?:insecure|open) mail relay|\bwe do not relay|\bunable to relay|\bno relaying|\brelay not permitted|\bemail address is not verified/,
  },
  // the connection's security: authentication or TLS the server requires
  {
    reason: 'security_error',
    re: /\b(?:smtp )?authentication (?:is )?required|\bauthrequired\b|\bturn on smtp authentication|\bmust (?:first )?(?:be )?authenticat|\bunauthenticated (?:senders?|relay|clients?)|\b(?:starttls|tls|encryption|secure connection) (?:is )?(?:required|needed|mandatory)|\bmust issue a starttls/,
  },
  // the recipient has moved
  {
    reason: 'has_moved',
    re: /\bhas moved\b|\bno longer (?:on (?:this |the )?server|at this (?:address|domain)|(?:with|at) (?:us|this (?:company|organi[sz]ation)))|\bnot our (?:user|customer)s?\b|\buser not local\b|\b(?:address|mailbox) has changed\b/,
  },
  // the recipient's account is disabled, suspended, closed (someone's, not ours)
  {
    reason: 'suspended',
    re: /(?<!your |sender |sending )\b(?:e-?mail account|account|mailbox|user|recipient|inbox)(?: account)?(?: <>)? (?:(?:that |which )?(?:you tried to reach )?(?:is|has been|was|is currently) )?(?:temporar(?:il)?y )?(?:disabled|suspended|deactivated|inactive|locked|frozen|closed|terminated|discontinued|expired)\b|\b(?:disabled|suspended|deactivated|inactive|locked|frozen|closed|terminated) (?:e-?mail )?(?:account|mailbox|user|recipient)\b|\brecipient(?:'s)? (?:account|mailbox) is (?:blocked|locked)|\bdisabled or discontinued\b|\bdisabled recipient\b|\baccount (?:has been )?(?:blocked|barred) (?:by|due)/,
  },
  // au (KDDI) and other Japanese carriers refuse mail their user's filter blocks with an answer naming no address (": User unknown")
  { reason: 'filtered', re: /(?:^|[^\w>)\]'"])\s*: user unknown/ },
  // the recipient does not exist here
  {
    reason: 'user_unknown',
    re: /\buser ?unknown\b|\brecipient address rejected: access denied|\bunknown (?:user|recipient|mailbox|local[- ]?part|account|addressee|e-?mail address|alias)|\bno such (?:user|mailbox|recipient|account|local user|person|addressee|e-?mail)|\b(?:user|recipient|mailbox|account|address|addressee|e-?mail|local[- ]?part|destination|group)(?: name| address| account)?(?: <>)? (?:(?:that |which )?you tried to reach )?(?:does not|doesn't|did not|didn't|do not|not|no longer) exists?\b|\b(?:user|recipient|mailbox|account|addressee|e-?mail address|address)(?: name)?(?: <>)? (?:was |is )?(?:not (?:found|known|listed|recogni[sz]ed|valid)|unknown)\b|\b(?:invalid|unknown|bad|non-?existent|inexistent|unrecogni[sz]ed) (?:recipient|mailbox|user(?:name|id)?|addressee|final delivery userid|destination mailbox)|\brecipient (?:address )?(?:is )?invalid|\bno mailbox (?:here )?by that name|\bnot listed in (?:the )?(?:public name|domino directory|directory|address book)|\bdo(?:es)? ?n[o']?t have an? \S+ account|\brecip(?:ient)?notfound|\baddress (?:couldn't|could not|can't|cannot) be found|\baddress (?:wasn't|was not) found|\baddress not found\b|\bnot a valid (?:user|recipient|mailbox)|\bno account (?:exists|by that name)|\bunknown or illegal alias|\binvalid (?:e-?mail )?address: user|\bmailbox (?:is )?not available\b/,
  },
  { reason: 'user_unknown', re: jp('ディレクトリ(?:のリスト)?に(?:は)?(?:ありません|見つかりません)') },
  // the recipient's domain does not exist, has no mail host, or its DNS fails for good
  {
    reason: 'host_unknown',
    re: /\bhost ?unknown\b|\bunknown (?:host|domain)\b|\b(?:host|domain)(?: or domain)?(?: name)? (?:not found|does not exist|doesn't exist|is unknown)|\bdomain (?:name )?(?:is )?not reachable|\bno such (?:host|domain)\b|\bcould ?n[o']?t find any host|\bunrouteable (?:mail )?(?:domain|address)|\binvalid (?:recipient )?domain\b|\bnxdomain\b|\bbad destination (?:system|host)|\bhost not found\b|\bdns lookup failure: host .{0,80} not found|\bno (?:such )?host named\b|(?:^|\s)[a-z0-9-]+(?:\.[a-z0-9-]+)+ does not exist\b|\bname service error for name=\S+ type=(?:mx|a|aaaa)\b|\baccount or domain may not exist\b/,
  },
  // the recipient's domain takes no mail (RFC 7505 null MX, no mail exchanger)
  {
    reason: 'not_accepted',
    re: /\bnull mx\b|\bdoes ?n[o']?t (?:receive|accept) (?:e-?)?mail(?! from)|\bnot accepting (?:network )?(?:messages|mail)\b|\bno mx (?:record|host)|\bcould ?n[o']?t find a mail exchanger|\bhost does not accept mail|\bindicated no smtp service/,
  },
  // the recipient's mailbox is full
  {
    reason: 'mailbox_full',
    re: /\bmail ?box (?:is |was )?(?:full|over ?quota)|\b(?:mail ?box|inbox|mail ?folder|account|user)(?: is)? (?:full|over ?quota)\b|\bover ?quota\b|\bquota (?:exceeded|exceeds|full|limit exceeded)|\bexceed(?:s|ed)? (?:the |their |its |his |her |(?:the )?user's )?(?:mailbox |disk |storage )?quota|\b(?:mail ?box|storage|disk) quota\b|\bout of (?:storage|mailbox) space|\bmailbox (?:size|storage)(?: limit)? (?:exceeded|reached)|\bexceeds allowed size|\bfull mail ?box\b|\binbox is full|\bnumber of messages in recipient's mailbox exceeded|\bstorage (?:quota|space) (?:exceeded|full)|\btheir mailbox is full/,
  },
  // the receiving system is out of room (not the mailbox)
  {
    reason: 'system_full',
    re: /\binsufficient (?:system )?(?:disk|storage)(?: space)?\b|\bsystem (?:is )?(?:full|out of (?:disk|storage))|\bmail (?:system|queue) (?:is )?full/,
  },
  // our message is too big for the recipient's limit (RFC 3463 X.2.3) or the system's (X.3.4)
  {
    reason: 'message_too_big',
    re: /\bmessage (?:is |was )?too (?:big|large)|\b(?:message )?(?:size|length) exceeds\b|\bexceeds? (?:the )?(?:maximum|fixed maximum|size|allowed) (?:message )?size|\btoo large for (?:this|the) recipient|\bmessage size (?:limit|exceeded)|\bsize limit\b|\b(?:mail|message) too large|\bline limit exceeded/,
  },
  // delivery gave up after retrying
  {
    reason: 'expired',
    re: /\bretry time(?:out)? (?:exceeded|reached)|\bmessage expired|\b(?:queue|envelope|delivery time) expired|\bqueue\.expired\b|\bin the queue too long|\bcould ?n[o']?t (?:be )?deliver(?:ed)? for (?:the last|more than|\d+ (?:days|hours))|\bgiving up\b(?! on)|\bfailing for a long time|\btoo many (?:delivery )?(?:attempts|retries)|\bmaximum (?:delivery |retry )?time|\bnot (?:been )?delivered within|\bafter multiple retries|\bdelivery failed \d+ attempts|\bwas aborted after|\btime ?out exceeded|\bwill be deleted from (?:the )?queue/,
  },
  // our server or IP has no valid reverse DNS, or its name does not match
  {
    reason: 'require_ptr',
    re: /\breverse (?:dns|lookup|mapping|hostname)\b|\brdns\b|\bptr\b|\bip name lookup failed|\bwithout a valid sender domain|\bcannot find your (?:hostname|reverse)|\bmismatches client ip|\b(?:client )?hostname (?:does not|doesn't) (?:match|resolve)|\bunresolvable (?:client )?host ?name|\bno (?:reverse|ptr) (?:record|dns)|\bunverifi?y?able sending ips?\b/,
  },
  // the reputation of our IP or domain
  {
    reason: 'bad_reputation',
    re: /\breputation\b|\bsender ?score\b/,
  },
  // the virus scanner
  {
    reason: 'virus_detected',
    re: /\bvirus\b|\bmalware\b|\binfected\b|\btrojan\b/,
  },
  // a link in our message is on a block list
  {
    reason: 'spam_detected',
    re: /\b(?:blacklisted|blocked|block ?listed) (?:url|domain|link)s?\b|\burls? (?:in (?:the )?message )?(?:is |are )?(?:blacklisted|blocked|listed)/,
  },
  // our IP or server is on a block list, banned, or refused as such (dynamic and residential ranges too)
  {
    reason: 'blocked',
    re: /\bblocked using\b|\b(?:black|block|deny)[- ]?list(?:ed)?\b|\bdnsbl\b|\brbl\b|\bspamhaus\b|\bspamcop\b|\bsorbs\b|\bbarracuda ?central\b|\bcloudmark\b|\bbanned sending ip|\b(?:ip|ip address|client|client host|host|sending (?:ip|host|server)|your (?:ip|server|host|network)|source)\b.{0,30}\b(?:blocked|blacklisted|banned|block ?listed|listed|rejected|not allowed|not permitted|denied)\b|\bclient host rejected\b|\bnot accepting connections\b|\binvalid ip for sending|\bno access from mail server|\bhost network not allowed|\bmay not be mail exchanger|\bdoes ?n[o']?t accept (?:e-?mail|mail|messages) from (?:your|this) (?:ip|server|host|network)|\buse the smtp server of your (?:isp|provider)|\bdynamic (?:ip|address|pool)|\bdial-?up\b|\bresidential (?:ip|address)|\bmessages from \S+ weren't sent\b/,
  },
  // our message looked like spam
  {
    reason: 'spam_detected',
    re: /\b(?:classified|detected|identified|scored|considered|marked|flagged|recogni[sz]ed|rejected|blocked)(?: as| due to)? (?:being |a )?(?:spam|junk|unsolicited)|\bspam (?:content|message|detected|score|classification|signature|filter(?:ed)?|policy)\b|\b(?:message|content|mail) (?:is |was |looks like |appears to be )(?:likely )?spam\b|\bunsolicited (?:bulk|commercial)|\bube\b|\buce\b|\bbulk mail\b|\bmessage content rejected|\bcontent rejected\b|- spam\b/,
  },
  // the recipient's policy, or the content's
  {
    reason: 'policy_violation',
    re: /\bpolic(?:y|ies)\b|\bprotocol violation|\bpotential security issue|\bprohibited\b|\bheader error\b|\bnot (?:allowed|permitted) by (?:the )?(?:administrator|organi[sz]ation)/,
  },
  // the message's form: encoding, headers, MIME
  {
    reason: 'content_error',
    re: /\bduplicate header|\b8-?bit data|\bheaders? too (?:large|long|many)|\bmedia error|\binvalid (?:mime|content|header)|\bline too long|\bbare (?:lf|cr|newline)|\bmessage header\b.{0,20}\b(?:invalid|malformed)|\bconversion (?:failed|not (?:supported|allowed))/,
  },
  // the message is not as RFC 5322 says
  {
    reason: 'not_compliant_rfc',
    re: /\brfc ?(?:5322|2822)\b(?!;)|\bnot (?:rfc ?\d* )?compliant|\bmultiple (?:addresses in from|(?:subject|from|date|to|sender|message-id) (?:headers|fields))|\bmissing (?:a )?(?:date|from|message-id) header/,
  },
  // we are sending too fast or too much
  {
    reason: 'too_many_connections',
    re: /\btoo many (?:connections|concurrent|simultaneous|sessions|recipients)\b(?! this)|\bconnection (?:rate|frequency|count) (?:limit|exceeded)|\b(?:ip|connection) frequency limited|\bconnection limit/,
  },
  {
    reason: 'rate_limited',
    re: /\brate[- ]limit|\b(?:sending|receiving|message) rate\b|\bat a rate\b|\btoo many (?:messages|mails|e-?mails|recipients this|requests)|\bsent to too many recipients|\bexceeded (?:the )?(?:sending|message|hourly|daily|maximum) (?:rate|limit|quota)|\bfrequency limited|\bthrottl|\bunexpected volume|\bmail flood|\bdeferred due to\b.{0,30}\bvolume|\bsending limit/,
  },
  // a recipient's or domain's filter refused this message
  {
    reason: 'filtered',
    re: /\bmessage filtered\b|\bfiltered\b|\brefused due to recipient preferences|\brejected by (?:the )?(?:recipient|user|domain filter|filter)(?! domain)|\b(?:recipient|user) (?:has )?(?:blocked|refused) (?:you|your|mail|messages)|\bdoes ?n[o']?t accept (?:e-?mail|mail|messages) from you/,
  },
  // the network between us and the recipient's server
  {
    reason: 'network_error',
    re: /\bconnection (?:timed out|refused|reset|closed|lost|dropped)|\blost connection|\btimed out\b|\b(?:unable|failed) to (?:connect|establish)|\bcould ?n[o']?t (?:connect|establish)|\bno route to host|\bnetwork (?:error|is unreachable|unreachable)|\bhost (?:is )?unreachable|\b(?:not reachable|unreachable)\b|\bdns (?:error|query failed|lookup failed|failure|timeout)|\bname (?:service|server) (?:error|failure|reply)|\btoo many hops|\bhop count exceeded|\brouting loop|\bmail loop|\bloop detected|\bdid not accept our requests to connect|\bsocket error|\bcould not find a gateway|\brefused to talk to me/,
  },
  // the recipient's mail system failed
  {
    reason: 'system_error',
    re: /\bsystem (?:error|problem|failure)|\binternal (?:server )?error|\bserver error|\blocal (?:error|problem)|\b(?:service|server|system) (?:currently |temporarily )?(?:unavailable|not available)|\btransaction failed|\bcould not load\b|\bunable to contact ldap|\bresources? temporarily unavailable|\bmail system (?:problem|error)|\bconfiguration error|\bduplicated message-id|\bqueue file write error/,
  },
  // the program delivering locally failed
  {
    reason: 'mailer_error',
    re: /\bmailer error|\bprocmail\b|\bpipe to \||\bcommand (?:died|failed)|\bexit (?:code|status)|\bx-unix; \d+\b|\blocal delivery failed|\bmail\.local\b/,
  },
  // the SMTP dialogue or an address was malformed
  {
    reason: 'syntax_error',
    re: /\bsyntax error|\bcommand (?:not recogni[sz]ed|unrecogni[sz]ed|not implemented)|\bparameter not implemented|\b(?:improper|bad) sequence of commands|\bmalformed (?:address|recipient)|\binvalid command\b/,
  },
  { reason: 'on_hold', re: /\bon hold\b/ },
];

/** Wording that says little: taken only where the status names nothing more specific. */
const WEAK: Rule[] = [
  {
    reason: 'user_unknown',
    re: /\bmailbox unavailable|\brecipient (?:address )?rejected|\baddress rejected|\binvalid (?:user )?address\b|\b(?:check|verify) (?:if |that )?(?:the )?(?:recipient(?:'s)? )?(?:e-?mail )?address(?:es)? (?:is |are )?correct|\bno valid recipients?\b|\bplease check the recipient address/,
  },
  { reason: 'blocked', re: /\baccess denied\b|\bblocked\b|\bnot accepted\b|\brefused\b|\bdenied\b/ },
];

const EMAIL = /[^\s<>()[\]"',;:]{1,64}@[a-z0-9.-]{1,253}/gi;
const URL = /\b(?:https?|ftp):\/\/([^\s/?#]*)\S*/gi;
/** Reply codes and status codes, in an answer's own lines and inside a multi-line answer's sentences ("550-5.7.1 "). */
const CODES = /(?<![\w.])(?:[245]\d\d(?:[- ]|(?=:))|[245]\.\d{1,3}\.\d{1,3}(?![\d.]))/g;

/** The text rules read: addresses as "<>", URLs as their host, codes out, folded. */
function wordingOf(diagnostic: string): string {
  return fold(diagnostic.slice(0, MAX_DIAGNOSTIC_CHARS).replace(URL, ' $1 ').replace(EMAIL, '<>').replace(CODES, ' '));
}

function ruleOf(rules: Rule[], text: string): BounceReason | null {
  for (const r of rules) if (r.re.test(text)) return r.reason;
  return null;
}

// ---------------------------------------------------------------------------------------------
// What a status says (RFC 3463 and the registry of RFC 5248, with Microsoft's widely seen extensions).

const STATUS_DETAIL: Record<string, BounceReason> = {
  '1.0': 'user_unknown',
  '1.1': 'user_unknown',
  '1.2': 'host_unknown',
  '1.3': 'user_unknown',
  '1.4': 'user_unknown',
  '1.6': 'has_moved',
  '1.7': 'rejected',
  '1.8': 'rejected',
  '1.10': 'user_unknown',
  '2.1': 'suspended',
  '2.2': 'mailbox_full',
  '2.3': 'exceed_limit',
  '2.4': 'system_error',
  '3.0': 'system_error',
  '3.1': 'system_full',
  '3.2': 'not_accepted',
  '3.3': 'content_error',
  '3.4': 'message_too_big',
  '3.5': 'system_error',
  '4.0': 'network_error',
  '4.1': 'network_error',
  '4.2': 'network_error',
  '4.3': 'system_error',
  '4.4': 'host_unknown',
  '4.5': 'system_error',
  '4.6': 'network_error',
  '4.7': 'expired',
  '5.1': 'syntax_error',
  '5.2': 'syntax_error',
  '5.3': 'too_many_connections',
  '5.4': 'syntax_error',
  '5.5': 'syntax_error',
  '5.6': 'syntax_error',
  '6.0': 'content_error',
  '6.1': 'content_error',
  '6.2': 'content_error',
  '6.3': 'content_error',
  '6.4': 'content_error',
  '6.5': 'content_error',
  '6.6': 'content_error',
  '6.7': 'content_error',
  '6.8': 'content_error',
  '6.9': 'content_error',
  '6.10': 'content_error',
  '7.0': 'security_error',
  '7.1': 'security_error',
  '7.2': 'policy_violation',
  '7.3': 'security_error',
  '7.4': 'security_error',
  '7.5': 'security_error',
  '7.6': 'security_error',
  '7.7': 'security_error',
  '7.8': 'security_error',
  '7.9': 'security_error',
  '7.10': 'security_error',
  '7.11': 'security_error',
  '7.12': 'security_error',
  '7.13': 'suspended',
  '7.14': 'security_error',
  '7.15': 'policy_violation',
  '7.16': 'message_too_big',
  '7.17': 'has_moved',
  '7.18': 'has_moved',
  '7.20': 'auth_failure',
  '7.21': 'auth_failure',
  '7.22': 'auth_failure',
  '7.23': 'auth_failure',
  '7.24': 'auth_failure',
  '7.25': 'require_ptr',
  '7.26': 'auth_failure',
  '7.27': 'rejected',
  '7.28': 'rate_limited',
  '7.29': 'auth_failure',
  '7.30': 'security_error',
  // Microsoft: 5.1.351 recipient unknown at the next hop, 5.7.509 DMARC, 5.7.606-649 banned IP ranges
  '1.351': 'user_unknown',
  '7.509': 'auth_failure',
  '7.510': 'security_error',
  '7.606': 'blocked',
  '7.650': 'bad_reputation',
  '7.708': 'bad_reputation',
};

function statusReason(status: string | null): BounceReason | null {
  if (!status) return null;
  const [, subject, detail] = status.split('.');
  const known = STATUS_DETAIL[`${subject}.${detail}`];
  if (known) return known;
  const d = Number(detail);
  if (subject === '7' && d >= 600 && d <= 649) return 'blocked';
  if (subject === '7' && d >= 700 && d <= 799) return 'rate_limited';
  return null;
}

/** A status that names nothing in particular (X.0.0). */
const generic = (status: string | null) => !status || status.endsWith('.0.0');

/** What a bare reply code says (RFC 5321 section 4.2.2, RFC 7504), when nothing else does. */
function codeReason(code: number | null): BounceReason | null {
  switch (code) {
    case 500:
    case 501:
    case 502:
    case 503:
    case 504:
      return 'syntax_error';
    case 521:
    case 556:
      return 'not_accepted';
    case 551:
      return 'has_moved';
    case 552:
      return 'mailbox_full';
    case 530:
    case 534:
    case 535:
    case 538:
      return 'security_error';
    default:
      return null;
  }
}

/** Words that an account does not exist, which no filter says. */
const ACCOUNT_GONE = /\bdo(?:es)? ?n[o']?t have an? \S+ account|\b(?:account|address) (?:that you tried to reach )?does not exist/;

const TEMPORARY_WORDING =
  /\btemporar(?:y|ily)\b|\btry (?:again )?later\b|\bwill (?:be )?retr(?:y|ied)|\bstill (?:being )?(?:retried|trying)|\bhas been delayed|\bdelivery (?:is )?delayed|\bthis is a warning|\bwarning message only|\bdo not need to re-?send|\bnot yet been delivered|\bwill (?:continue|keep) (?:trying|to try)|\bretried for \d/;

function codeNumber(v: number | string | null | undefined): number | null {
  if (v === null || v === undefined) return null;
  const n = typeof v === 'number' ? v : Number(String(v).trim().slice(0, 3));
  return Number.isInteger(n) && n >= 200 && n <= 599 ? n : null;
}

/** The reason and temporariness of one failure, from what it says. Pure, never throws on any input. */
export function readBounceReason(e: FailureEvidence): ReadReason {
  const diagnostic = typeof e.diagnostic === 'string' ? e.diagnostic.slice(0, MAX_DIAGNOSTIC_CHARS) : '';
  const action =
    typeof e.action === 'string'
      ? e.action
          .trim()
          .toLowerCase()
          .split(/[\s(;]/)[0]
      : null;
  let status = typeof e.status === 'string' ? statusField(e.status) : null;
  if (status?.startsWith('2')) status = null; // a success status says nothing about a failure
  // a generic status field (5.0.0) yields to the specific code the server gave in its answer
  const inText = enhancedStatusIn(diagnostic);
  if (generic(status) && inText && (!status || inText[0] === status[0])) status = inText;
  const code = codeNumber(e.smtpCode) ?? replyCodeIn(diagnostic);
  const stage = (typeof e.stage === 'string' ? smtpStageOf(e.stage) : null) ?? smtpStageIn(diagnostic);
  const text = wordingOf(diagnostic);

  let temporary =
    action === 'delayed' ||
    (status
      ? status.startsWith('4')
      : code
        ? code < 500
        : action === 'failed' || action === 'expired'
          ? false
          : TEMPORARY_WORDING.test(text));

  const strong = ruleOf(STRONG, text);
  const fromStatus = generic(status) ? null : statusReason(status);
  const weak = fromStatus ? null : ruleOf(WEAK, text);
  const fromCode = codeReason(code);
  let reason: BounceReason = strong ?? fromStatus ?? weak ?? fromCode ?? 'undefined';
  const basis: ReadReason['basis'] = strong || weak ? 'wording' : fromStatus ? 'status' : fromCode ? 'code' : 'none';

  // the stage says who was refused: our sender at MAIL FROM, our server at the greeting or HELO,
  // and a recipient refused after DATA was accepted at RCPT: a filter, not an unknown address,
  // unless the status (X.1.1) or the words say the account itself does not exist (Yahoo checks
  // recipients only after DATA)
  const about = bounceClass(reason, false);
  if (stage === 'mail' && (about === 'recipient' || reason === 'undefined' || reason === 'syntax_error')) reason = 'rejected';
  else if ((stage === 'connect' || stage === 'helo') && (about === 'recipient' || reason === 'undefined')) reason = 'blocked';
  else if (stage === 'data' && reason === 'user_unknown' && !status?.endsWith('.1.1') && !ACCOUNT_GONE.test(text)) reason = 'filtered';

  // a report that gave up on a transient failure: the delivery expired; but a server that kept
  // saying the mailbox does not exist (X.1.1) until the report gave up has said it for good
  const gaveUp = action === 'expired' || (action === 'failed' && status?.startsWith('4'));
  if (gaveUp && temporary && reason === 'user_unknown' && status?.endsWith('.1.1')) temporary = false;
  if (gaveUp && (reason === 'network_error' || reason === 'undefined')) reason = 'expired';
  if (temporary && reason === 'undefined') reason = 'temporary';
  return { reason, temporary, basis };
}
