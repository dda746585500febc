// Mail corpus bench: `npm run bench mail-corpus DIR` (flags after `--`: `npm run bench -- mail-corpus
// DIR --list`). DIR is a corpus folder laid out like the public sisimai
// test set (messages/*.eml and expectations.json, whose "labels" text says what each class means), or a
// folder of such folders. The corpus is public material the project does not commit, so this area
// is not in the default set (unless BENCH_MAIL_CORPUS names the folder).
//
// For every file: a service process of this bench (as `npm start` runs it, capture transport, no
// model, the inbound listener on with a reply domain) really sends one message to a contact of an
// organization of that file's own, from its mailbox (template, contact, sequence, generated drafts
// approved, POST /drafts/{id}/send); the reply address (Reply-To, also the envelope sender) and the
// Message-ID are read from GET /admin/api/outbox; the file's bytes go over SMTP to the listener with
// RCPT TO that reply address. Once the job queue is drained, the outcome is read back through the
// APIs only (GET /messages, /events, /suppression, /sequences/{id}, /drafts; the operator's outbox,
// mailboxes, organization health and queue), judged as one of the corpus classes, and compared with the
// file's expected class: recall and precision per class, the issue's target lines, a table per
// sisimai reason, and (with --list or BENCH_MAIL_LIST=1) every misjudged file.
//
// One organization per file, so every event, suppression and health change read is that file's.
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import nodemailer from 'nodemailer';
import pLimit from 'p-limit';
import { BOUNCE_REASONS } from '../../src/mail/bounce-taxonomy.js';
import { ownDatabase, startOwnService, stopProcess, UNBOUNDED_SENDER } from './own-service.js';
import type { BenchArea, BenchContext } from './types.js';

const CONCURRENCY = Number(process.env.BENCH_MAIL_CONCURRENCY ?? 6);
const REPLY_DOMAIN = 'replies.corpus-bench.test';
const STEPS = [
  {
    dayOffset: 0,
    subject: 'A quick idea for your team',
    body: 'Hi {{firstName}},\n\nWe help revenue teams book more qualified meetings.\n\nWould a short call next week be useful?\n\nBest,\nSam',
  },
  // A second step keeps the sequence ACTIVE after the first, so a pause (replied, bounced, complained) shows.
  { dayOffset: 3, subject: 'Following up', body: 'Hi {{firstName}}, one more note. Worth a call?' },
];

const USAGE = `[mail-corpus] needs a corpus folder: npm run bench mail-corpus DIR
  DIR holds messages/*.eml and expectations.json (e.g. the public sisimai test set), or folders that do.
  Flags go after --: npm run bench -- mail-corpus DIR --list  (or BENCH_MAIL_LIST=1) lists the misjudged files.
  BENCH_MAIL_CORPUS=DIR adds the area to the default set of npm run bench.`;

// ---- the corpus ----------------------------------------------------------------------------

interface Expected {
  file: string;
  /** The expected class: hard, full, expired, temporary, block, other-permanent, complaint, auth-failure, auto-reply, delivered, mixed. */
  cls: string;
  /** A mixed file's classes. */
  classes: string[];
  /** Per recipient: sisimai's reason (userunknown, mailboxfull, ...). */
  reasons: string[];
}

function corporaIn(dir: string): string[] {
  const isCorpus = (d: string) => fs.existsSync(path.join(d, 'expectations.json')) && fs.existsSync(path.join(d, 'messages'));
  if (isCorpus(dir)) return [dir];
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && isCorpus(path.join(dir, e.name)))
    .map((e) => path.join(dir, e.name))
    .sort();
}

/** BENCH_MAIL_ONLY=<regular expression>: only the files whose name matches (to look at a few). */
const ONLY = process.env.BENCH_MAIL_ONLY ? new RegExp(process.env.BENCH_MAIL_ONLY) : null;

function readCorpus(dir: string): { name: string; labels: string; files: Expected[] } {
  const x = JSON.parse(fs.readFileSync(path.join(dir, 'expectations.json'), 'utf8')) as {
    corpus?: string;
    labels?: string;
    messages: { file: string; class: string; classes?: string[]; upstream?: { recipients?: unknown[][] } }[];
  };
  return {
    name: x.corpus ?? path.basename(dir),
    labels: x.labels ?? '',
    files: x.messages
      .filter((m) => ONLY === null || ONLY.test(m.file))
      .map((m) => ({
        file: m.file,
        cls: m.class,
        classes: m.classes ?? [m.class],
        reasons: (m.upstream?.recipients ?? []).map((r) => String(r[2] ?? '')),
      })),
  };
}

// ---- reasons and classes ---------------------------------------------------------------------

/** A reason name compared across spellings: `user_unknown`, `User unknown`, `userunknown`. */
function norm(reason: string): string {
  const n = reason.toLowerCase().replace(/[^a-z]/g, '');
  return (
    (
      { suspended: 'suspend', messagetoobig: 'mesgtoobig', toomanyconnections: 'toomanyconn', ratelimited: 'speeding' } as Record<
        string,
        string
      >
    )[n] ?? n
  );
}

const HARD = new Set(['userunknown', 'hostunknown', 'hasmoved', 'notaccept']);
const BLOCK = new Set(
  'blocked spamdetected policyviolation rejected badreputation authfailure requireptr notcompliantrfc securityerror virusdetected contenterror filtered toomanyconn speeding'.split(
    ' ',
  ),
);
const OTHER =
  'suspend mesgtoobig exceedlimit systemerror mailererror networkerror norelaying syntaxerror onhold undefined systemfull'.split(' ');
/** Every reason name the bench recognises in what the service says: sisimai's and the taxonomy's. */
const KNOWN = new Set([
  ...HARD,
  ...BLOCK,
  ...OTHER,
  'mailboxfull',
  'expired',
  'temporary',
  'delivered',
  'vacation',
  ...BOUNCE_REASONS.map(norm),
]);

/** The corpus class a service reason stands for, by the rule of expectations.json's labels. */
function classOfReason(reason: string, temporary: boolean): string {
  const r = norm(reason);
  if (r === 'vacation') return 'auto-reply';
  if (r === 'delivered') return 'delivered';
  if (HARD.has(r)) return 'hard';
  if (r === 'mailboxfull') return 'full';
  if (r === 'expired') return 'expired';
  if (temporary || r === 'temporary') return 'temporary';
  if (BLOCK.has(r)) return 'block';
  return 'other-permanent';
}

// ---- talking to the service ------------------------------------------------------------------

type Json = Record<string, unknown>;

interface Http {
  fivexx: string[];
  call(token: string, method: string, p: string, body?: unknown): Promise<Json>;
}

function http(origin: string): Http {
  const fivexx: string[] = [];
  return {
    fivexx,
    async call(token, method, p, body) {
      for (let attempt = 0; ; attempt += 1) {
        const res = await fetch(`${origin}${p}`, {
          method,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await res.text();
        if (res.status >= 500) fivexx.push(`${method} ${p.replace(/\?.*/, '')} ${res.status}`);
        // 429 (a limit of the bench's own pace) is waited out; anything else not 2xx stops this file.
        if (res.status === 429 && attempt < 20) {
          await sleep(500);
          continue;
        }
        if (res.status >= 300) throw new Error(`${method} ${p} -> ${res.status}: ${text.slice(0, 300)}`);
        return (text ? JSON.parse(text) : {}) as Json;
      }
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, timeoutMs: number, fn: () => Promise<T | null>): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== null) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(150);
  }
}

/** Every item of a cursor-paged list. */
async function all(h: Http, key: string, p: string): Promise<Json[]> {
  const out: Json[] = [];
  let cursor: string | null = null;
  do {
    const sep = p.includes('?') ? '&' : '?';
    const page = await h.call(key, 'GET', `${p}${sep}limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    out.push(...(page.data as Json[]));
    cursor = (page.nextCursor as string | null) ?? null;
  } while (cursor);
  return out;
}

interface Sent {
  orgId: string;
  key: string;
  contactId: string;
  email: string;
  sequenceId: string;
  replyTo: string;
  messageId: string;
  health: string;
  healthReasons: string[];
}

/** A new organization that really sent step 1 of a two-step sequence to a new contact. */
async function sendOne(h: Http, adminToken: string, i: number): Promise<Sent> {
  const admin = (method: string, p: string, body?: unknown) => h.call(adminToken, method, `/admin/api${p}`, body);
  const org = await admin('POST', '/organizations', { name: `Corpus file ${i}`, plan: 'growth' });
  const orgId = org.id as string;
  await admin('PATCH', `/organizations/${orgId}`, { flags: { v1_2_api_send: true } });
  const key = (await admin('POST', `/organizations/${orgId}/api-keys`, { scopes: ['*'], userId: (org.owner as Json).id })).key as string;
  // A mailbox of its own, as an operator sets one up: its status and health are the sender's side of a failure.
  const mailbox = await admin('POST', `/organizations/${orgId}/mailboxes`, { email: `sam.${i}@acme-sender.test`, name: 'Sam at Acme' });
  if (mailbox.status !== 'verified') throw new Error(`the mailbox is ${mailbox.status}: ${mailbox.statusReason}`);
  const templateId = (await admin('POST', `/organizations/${orgId}/sequence-templates`, { name: 'Corpus bench', steps: STEPS }))
    .id as string;
  const api = (method: string, p: string, body?: unknown) => h.call(key, method, `/api/v1${p}`, body);
  const email = `dana.${i}@prospect-${i}.example.com`;
  const contactId = (await api('POST', '/contacts', { email, name: 'Dana Whitfield' })).id as string;
  const sequenceId = (await api('POST', '/sequences', { contactId, templateId })).id as string;
  const drafts = await until('the drafts', 60_000, async () => {
    const d = (await api('GET', `/drafts?contactId=${contactId}&limit=50`)).data as Json[];
    return d.length >= STEPS.length ? d.sort((a, b) => (a.step as number) - (b.step as number)) : null;
  });
  for (const d of drafts) await api('POST', `/drafts/${d.id}/approve`);
  const queued = await api('POST', `/drafts/${drafts[0].id}/send`);
  if (queued.queued !== true) throw new Error(`POST /drafts/{id}/send queued nothing: ${JSON.stringify(queued)}`);
  const sent = await until('the message in the outbox', 60_000, async () => {
    const box = (await admin('GET', `/outbox?organizationId=${orgId}`)).data as Json[];
    return box.find((m) => m.status === 'sent') ?? null;
  });
  const headers = sent.headers as Record<string, string>;
  const replyTo = headers['Reply-To'];
  if (!replyTo) throw new Error('the sent message has no Reply-To (is INBOUND_REPLY_DOMAIN set?)');
  const health = await admin('GET', `/organizations/${orgId}/health`);
  return {
    orgId,
    key,
    contactId,
    email,
    sequenceId,
    replyTo,
    messageId: String(sent.messageId),
    health: String(health.state),
    healthReasons: (health.reasons as Json[]).map((r) => String(r.code)),
  };
}

/**
 * The envelope sender an MTA would give the file: its Return-Path, which is the null sender `<>`
 * for a report (some MTAs write it `<MAILER-DAEMON>` or `<null>`: anything without an @), else its From.
 */
function envelopeFrom(raw: Buffer): string {
  const head = raw
    .subarray(0, Math.min(raw.length, 64 * 1024))
    .toString('latin1')
    .split(/\r?\n\r?\n/)[0];
  const rp = /^return-path:\s*<([^>]*)>/im.exec(head);
  if (rp) return rp[1].includes('@') ? rp[1] : '';
  const from = /^from:[^\n]*?<?([^\s<>"]+@[^\s<>"]+)>?/im.exec(head);
  return from ? from[1] : '';
}

interface Delivery {
  code: number | null;
  response: string;
}

async function deliver(port: number, raw: Buffer, to: string): Promise<Delivery> {
  const t = nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true });
  try {
    const info = await t.sendMail({ envelope: { from: envelopeFrom(raw), to: [to] }, raw });
    return { code: Number(info.response.slice(0, 3)) || 250, response: info.response };
  } catch (e) {
    const err = e as { response?: string; responseCode?: number; message: string };
    return { code: err.responseCode ?? null, response: err.response ?? err.message };
  } finally {
    t.close();
  }
}

// ---- the outcome, through the APIs -----------------------------------------------------------

interface Outcome {
  stored: boolean;
  classified: boolean;
  linked: boolean;
  intent: string | null;
  intentReason: string | null;
  kind: string | null;
  complained: boolean;
  bounced: boolean;
  serviceReason: string | null;
  temporary: boolean;
  takenAsReply: boolean;
  suppressed: { reason: string; forever: boolean } | null;
  otherSuppressed: number;
  sequenceStatus: string;
  pausedReasons: string[];
  health: string;
  newHealthReasons: string[];
  /** The send record's status in the outbox (sent, bounced, ...). */
  sendStatus: string;
  /** The sending mailbox's status after the file (verified, paused, ...), with its reason. */
  mailbox: string;
}

/** A value that is a reason name (the whole value: free text that mentions one is not a reason given). */
const reasonIn = (value: unknown): string | null => (typeof value === 'string' && KNOWN.has(norm(value)) ? value : null);

async function outcomeOf(h: Http, adminToken: string, s: Sent): Promise<Outcome> {
  const api = (p: string) => h.call(s.key, 'GET', `/api/v1${p}`);
  const inbound = await all(h, s.key, '/api/v1/messages?direction=INBOUND');
  const m = inbound[0] ?? null;
  const events = await all(h, s.key, '/api/v1/events');
  const byType = (t: string) => events.filter((e) => e.type === t).map((e) => (e.data ?? {}) as Json);
  const classified = byType('reply.classified')[0] ?? null;
  const bouncedEvents = byType('email.bounced');
  const entries = await all(h, s.key, '/api/v1/suppression');
  const own = entries.find((e) => e.email === s.email) ?? null;
  const sequence = await api(`/sequences/${s.sequenceId}`);
  const drafts = (await api(`/drafts?contactId=${s.contactId}&limit=50`)).data as Json[];
  const outbox = (await h.call(adminToken, 'GET', `/admin/api/outbox?organizationId=${s.orgId}`)).data as Json[];
  const health = await h.call(adminToken, 'GET', `/admin/api/organizations/${s.orgId}/health`);
  const mailboxes = (await h.call(adminToken, 'GET', `/admin/api/organizations/${s.orgId}/mailboxes`)).data as Json[];
  const pausedReasons = byType('sequence.paused').map((d) => String(d.reason));
  const kind = (classified?.kind as string | undefined) ?? null;
  // The service's reason, when it gives one: on email.bounced first, then wherever else it shows.
  const places: unknown[] = [
    ...bouncedEvents.flatMap((d) => [d.reason, d.bounceReason]),
    // Any other event's reason or bounceReason that is a reason name (reply.classified's `reason` is
    // the classifier's code, `dsn:5.1.1`, not a failure reason; the message's intentReason is not read either).
    ...events.flatMap((e) => {
      const d = (e.data ?? {}) as Json;
      return e.type === 'reply.classified' ? [d.bounceReason] : [d.reason, d.bounceReason];
    }),
    ...outbox.flatMap((o) => [o.reason, o.bounceReason, o.failureReason]),
    m?.bounceReason,
  ];
  const serviceReason = places.map(reasonIn).find((r) => r !== null) ?? null;
  const codes = [...bouncedEvents.map((d) => String(d.code ?? '')), String(m?.intentReason ?? '')];
  return {
    stored: m !== null,
    classified: m?.intent !== null && m?.intent !== undefined,
    linked: m?.contactId === s.contactId,
    intent: (m?.intent as string | null) ?? null,
    intentReason: (m?.intentReason as string | null) ?? null,
    kind,
    complained: byType('email.complained').length > 0 || own?.reason === 'COMPLAINT',
    bounced:
      bouncedEvents.length > 0 ||
      own?.reason === 'HARD_BOUNCE' ||
      kind === 'hard_bounce' ||
      kind === 'soft_bounce' ||
      m?.intent === 'bounce',
    serviceReason,
    temporary: bouncedEvents.some((d) => d.temporary === true) || codes.some((c) => /^(dsn:)?4[.\d]/.test(c)),
    takenAsReply:
      kind === 'reply' || pausedReasons.includes('replied') || drafts.some((d) => d.repliedAt !== null && d.repliedAt !== undefined),
    suppressed: own ? { reason: String(own.reason), forever: own.expiresAt === null } : null,
    otherSuppressed: entries.filter((e) => e.email !== s.email).length,
    sequenceStatus: String(sequence.status),
    pausedReasons,
    health: String(health.state),
    newHealthReasons: (health.reasons as Json[]).map((r) => String(r.code)).filter((c) => !s.healthReasons.includes(c)),
    sendStatus: outbox.map((o) => String(o.status)).join(',') || '-',
    mailbox: mailboxes.map((b) => `${b.status}${b.statusReason ? ` (${b.statusReason})` : ''}`).join(',') || '-',
  };
}

/** The corpus class the service's outcome amounts to (or what else it did: human-reply, report, ...). */
function judge(o: Outcome): string {
  if (!o.stored) return 'not-stored';
  if (!o.classified) return 'unclassified';
  if (o.complained) return 'complaint';
  // An opt-out feedback report honoured as an unsubscribe (the corpus files it under complaints).
  if (/opt-out/.test(o.intentReason ?? '') && o.suppressed?.reason === 'UNSUBSCRIBE') return 'complaint';
  if (o.takenAsReply) return 'human-reply';
  const arf = /\barf:([a-z-]+)/i.exec(o.intentReason ?? '');
  if (arf || o.intent === 'complaint') return arf?.[1].toLowerCase() === 'auth-failure' ? 'auth-failure' : 'report';
  if (o.serviceReason) return classOfReason(o.serviceReason, o.temporary);
  if (o.bounced) {
    if (o.suppressed?.reason === 'HARD_BOUNCE' || o.kind === 'hard_bounce') return 'hard';
    if (o.kind === 'soft_bounce' || o.temporary) return /dsn:(2\.|deliver)/.test(o.intentReason ?? '') ? 'delivered' : 'temporary';
    return 'bounce-no-effect';
  }
  if (o.intent === 'out_of_office' || o.kind === 'out_of_office') return 'auto-reply';
  if (o.kind === 'automatic') return 'automatic';
  return 'other';
}

// ---- the report ------------------------------------------------------------------------------

interface Row {
  x: Expected;
  judged: string;
  o: Outcome | null;
  smtp: Delivery | null;
  error: string | null;
}

const pct = (a: number, b: number) => (b === 0 ? 'n/a' : `${((100 * a) / b).toFixed(1)}%`);
/** Judged as class `c`: automatic mail the service took as such (not a reply, no effect) counts as an auto-reply. */
const judgedAs = (judged: string, c: string) => judged === c || (c === 'auto-reply' && judged === 'automatic');
const right = (r: Row) => r.x.classes.some((c) => judgedAs(r.judged, c));
const pad = (s: string | number, n: number) => String(s).padEnd(n);
const lpad = (s: string | number, n: number) => String(s).padStart(n);
function tally(values: string[]): string {
  const c = new Map<string, number>();
  for (const v of values) c.set(v, (c.get(v) ?? 0) + 1);
  return [...c.entries()]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
}

function report(ctx: BenchContext, corpus: string, rows: Row[], extra: { fivexx: string[]; queue: Json; drained: boolean }, list: boolean) {
  const log = (s = '') => console.log(s);
  const done = rows.filter((r) => r.o !== null);
  const classes = [...new Set(rows.map((r) => r.x.cls))].sort(
    (a, b) => rows.filter((r) => r.x.cls === b).length - rows.filter((r) => r.x.cls === a).length,
  );

  log(`\nPer class (expected: expectations.json; judged: what the service did, read through the API)`);
  log(
    `${pad('class', 16)}${lpad('files', 6)}${lpad('right', 7)}${lpad('recall', 8)}${lpad('judged', 8)}${lpad('precision', 10)}  judged as`,
  );
  for (const c of classes) {
    const of = done.filter((r) => r.x.cls === c);
    const judgedC = done.filter((r) => judgedAs(r.judged, c));
    const hit = of.filter(right).length;
    const precise = judgedC.filter(right).length;
    log(
      `${pad(c, 16)}${lpad(of.length, 6)}${lpad(hit, 7)}${lpad(pct(hit, of.length), 8)}${lpad(judgedC.length, 8)}${lpad(c === 'mixed' ? '' : pct(precise, judgedC.length), 10)}  ${tally(of.map((r) => r.judged))}`,
    );
  }
  const others = [...new Set(done.map((r) => r.judged))].filter((j) => !classes.includes(j));
  if (others.length) log(`judged as no corpus class: ${tally(done.filter((r) => others.includes(r.judged)).map((r) => r.judged))}`);
  log(
    `(a mixed file counts as right when judged as one of its recipients' classes; "automatic", automatic mail with no effect, as auto-reply)`,
  );

  // The issue's target lines.
  log(`\nTargets`);
  const hard = done.filter((r) => r.x.cls === 'hard');
  const hardForever = hard.filter((r) => r.o?.suppressed?.forever && r.o.suppressed.reason === 'HARD_BOUNCE').length;
  const line = (name: string, figures: Record<string, string | number>, target: string, met: boolean) => {
    ctx.report({ area: 'mail-corpus', case: `${corpus}: ${name}`, figures, target, met });
  };
  line(
    'hard-bounce recall (HARD_BOUNCE suppression for ever)',
    { recognised: `${hardForever}/${hard.length}`, recall: pct(hardForever, hard.length) },
    '>= 98%',
    hardForever >= 0.98 * hard.length,
  );
  const soft = ['block', 'full', 'expired', 'temporary'];
  const notHard = done.filter((r) => soft.includes(r.x.cls));
  const wrongly = notHard.filter((r) => r.o?.suppressed?.forever);
  const perSoft = Object.fromEntries(
    soft.map((c) => [c, `${wrongly.filter((r) => r.x.cls === c).length}/${notHard.filter((r) => r.x.cls === c).length}`]),
  );
  line(
    'recipients suppressed for ever on failures that are not hard',
    { wrongly: `${wrongly.length}/${notHard.length}`, share: pct(wrongly.length, notHard.length), ...perSoft },
    '<= 3%',
    wrongly.length <= 0.03 * notHard.length,
  );
  const op = done.filter((r) => r.x.cls === 'other-permanent');
  const mixed = done.filter((r) => r.x.cls === 'mixed');
  log(
    `  (not in the target) suppressed for ever: other-permanent ${op.filter((r) => r.o?.suppressed?.forever).length}/${op.length}, mixed ${mixed.filter((r) => r.o?.suppressed?.forever).length}/${mixed.length}; suppressions of an address other than the contact's: ${done.filter((r) => (r.o?.otherSuppressed ?? 0) > 0).length} files`,
  );
  const asReply = done.filter((r) => r.o?.takenAsReply);
  line('bounces, auto-replies, challenge-response taken as human replies', { files: asReply.length }, '0', asReply.length === 0);
  for (const r of asReply)
    log(`    ${r.x.file} (${r.x.cls}; intent ${r.o?.intent}, ${r.o?.intentReason}; paused ${r.o?.pausedReasons.join(',') || '-'})`);
  const complaints = done.filter((r) => r.x.cls === 'complaint');
  // The corpus files a feedback report whose type is opt-out (the recipient asking to stop, not a
  // spam report) under complaints; the service honours it as an unsubscribe.
  const honours = (o: Outcome | null | undefined) =>
    (o?.complained && o.suppressed?.reason === 'COMPLAINT') ||
    (/opt-out/.test(o?.intentReason ?? '') && o?.suppressed?.reason === 'UNSUBSCRIBE');
  const honoured = complaints.filter((r) => honours(r.o)).length;
  line(
    'complaints honoured (COMPLAINT suppression; an opt-out report: UNSUBSCRIBE)',
    { honoured: `${honoured}/${complaints.length}` },
    'all',
    honoured === complaints.length,
  );
  for (const r of complaints.filter((r) => !honours(r.o)))
    log(`    missed: ${r.x.file} (judged ${r.judged}; intent ${r.o?.intent}, ${r.o?.intentReason})`);
  const auth = done.filter((r) => r.x.cls === 'auth-failure');
  const authAsComplaint = auth.filter((r) => r.o?.complained).length;
  line(
    'auth-failure reports counted as complaints',
    { counted: `${authAsComplaint}/${auth.length}`, 'health after': tally(auth.map((r) => r.o?.health ?? '?')) },
    '0',
    authAsComplaint === 0,
  );
  const smtp5 = rows.filter((r) => r.smtp?.code !== null && r.smtp?.code !== undefined && r.smtp.code >= 500);
  const smtp4 = rows.filter((r) => r.smtp?.code !== null && r.smtp?.code !== undefined && r.smtp.code >= 400 && r.smtp.code < 500);
  const noAnswer = rows.filter((r) => r.smtp !== null && r.smtp.code === null);
  const unclassified = done.filter((r) => !r.o?.classified);
  const stuck = Number(extra.queue.failed ?? 0) + (extra.drained ? 0 : Number(extra.queue.pending ?? 0) + Number(extra.queue.running ?? 0));
  line(
    '5xx and stuck jobs',
    {
      'HTTP 5xx': extra.fivexx.length,
      'SMTP 5xx': smtp5.length,
      'SMTP 4xx': smtp4.length,
      'SMTP no answer': noAnswer.length,
      'jobs failed or not drained': stuck,
      'stored, not classified': unclassified.length,
    },
    '0',
    extra.fivexx.length + smtp5.length + stuck + unclassified.length === 0,
  );
  for (const f of [...new Set(extra.fivexx)]) log(`    HTTP ${f}`);
  for (const r of [...smtp5, ...smtp4, ...noAnswer]) log(`    SMTP ${r.x.file}: ${r.smtp?.response.slice(0, 160)}`);
  const unlinked = done.filter((r) => r.o?.stored && !r.o.linked);
  const notStored = done.filter((r) => !r.o?.stored);
  log(
    `  stored linked to no contact (or another): ${unlinked.length}${unlinked.length ? ` (${unlinked.map((r) => r.x.file).join(', ')})` : ''}; not stored: ${notStored.length}`,
  );
  const failed = rows.filter((r) => r.error !== null);
  if (failed.length) {
    log(`  files the bench could not run (${failed.length}, not counted above):`);
    for (const r of failed) log(`    ${r.x.file}: ${r.error}`);
  }

  // The sender's side: the send record's status and the organization's health after each file, by class.
  log(
    `\nThe sender's side after the file, by class: the send record (outbox status), the mailbox, the organization's health (the reasons it gained)`,
  );
  for (const c of classes) {
    const of = done.filter((r) => r.x.cls === c);
    log(
      `  ${pad(c, 16)} send ${tally(of.map((r) => r.o?.sendStatus ?? '?'))}; mailbox ${tally(of.map((r) => r.o?.mailbox ?? '?'))}; health ${tally(of.map((r) => r.o?.health ?? '?'))}; gained: ${tally(of.flatMap((r) => r.o?.newHealthReasons ?? [])) || '-'}`,
    );
  }
  log(`(one organization and one send per file: rate-based health reasons need more sends than that)`);

  // Per sisimai reason: what the service said and did.
  log(`\nPer reason (sisimai's, per recipient; a file with several reasons counts under each)`);
  log(`${pad('reason', 17)}${lpad('files', 6)}${lpad('reason', 8)}${lpad('same', 6)}${lpad('forever', 9)}  service reasons | judged as`);
  const reasons = [...new Set(rows.flatMap((r) => r.x.reasons))].sort();
  for (const reason of reasons) {
    const of = done.filter((r) => r.x.reasons.includes(reason));
    const given = of.filter((r) => r.o?.serviceReason);
    const same = given.filter((r) => norm(r.o!.serviceReason!) === norm(reason)).length;
    log(
      `${pad(reason, 17)}${lpad(of.length, 6)}${lpad(given.length, 8)}${lpad(same, 6)}${lpad(of.filter((r) => r.o?.suppressed?.forever).length, 9)}  ${tally(given.map((r) => r.o!.serviceReason!)) || '-'} | ${tally(of.map((r) => r.judged))}`,
    );
  }
  log(`(reason: files the service gave a reason for; same: that reason is sisimai's; forever: the contact suppressed for ever)`);

  const wrong = done.filter((r) => !right(r));
  log(`\nMisjudged files: ${wrong.length} of ${done.length}${list ? '' : ' (--list or BENCH_MAIL_LIST=1 lists them)'}`);
  if (list)
    for (const r of wrong)
      log(
        `${r.x.file}\texpected ${r.x.cls}${r.x.cls === 'mixed' ? `(${r.x.classes.join('+')})` : ''}\tjudged ${r.judged}\tintent ${r.o?.intent} ${r.o?.intentReason ?? ''} (${r.o?.kind ?? '-'})\treason ${r.o?.serviceReason ?? '-'}\tsuppressed ${r.o?.suppressed ? `${r.o.suppressed.reason}${r.o.suppressed.forever ? ' for ever' : ' until'}` : '-'}`,
      );
}

// ---- the area --------------------------------------------------------------------------------

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

async function runCorpus(ctx: BenchContext, dir: string, list: boolean, index: number): Promise<void> {
  const corpus = readCorpus(dir);
  const url = await ownDatabase(ctx, `bench_mail_corpus_${index}`);
  const smtpPort = await freePort();
  let child: ChildProcess | null = null;
  try {
    const svc = await startOwnService(ctx, url, {
      INBOUND_SMTP_PORT: String(smtpPort),
      INBOUND_SMTP_HOST: '127.0.0.1',
      INBOUND_REPLY_DOMAIN: REPLY_DOMAIN,
      ...UNBOUNDED_SENDER,
      MAIL_FROM: 'Sam at Acme <sam@acme-sender.test>',
      // As `npm start` runs by default: the capture transport (the outbox) and the rules without a model.
      SMTP_URL: '',
      LLM_BASE_URL: '',
    });
    child = svc.child;
    const h = http(svc.origin);
    console.log(`  ${corpus.name}: ${corpus.files.length} files from ${dir}`);
    const t0 = performance.now();
    const limit = pLimit(CONCURRENCY);
    let finished = 0;
    const progress = setInterval(() => console.log(`  ... ${finished}/${corpus.files.length} files sent and delivered`), 30_000);
    const sent = await Promise.all(
      corpus.files.map((x, i) =>
        limit(async () => {
          try {
            const s = await sendOne(h, ctx.adminToken, i);
            const smtp = await deliver(smtpPort, fs.readFileSync(path.join(dir, x.file)), s.replyTo);
            return { x, s, smtp, error: null };
          } catch (e) {
            return { x, s: null, smtp: null, error: (e as Error).message };
          } finally {
            finished += 1;
          }
        }),
      ),
    );
    clearInterval(progress);
    const t1 = performance.now();
    // Whatever the messages set going in the background finishes before anything is read.
    let queue: Json = {};
    const drained = await until('the job queue to drain', 120_000, async () => {
      queue = await h.call(ctx.adminToken, 'GET', '/admin/api/queue');
      return Number(queue.pending) + Number(queue.running) === 0 ? true : null;
    }).catch(() => false);
    const rows: Row[] = await Promise.all(
      sent.map((r) =>
        limit(async (): Promise<Row> => {
          if (!r.s) return { x: r.x, judged: 'bench-error', o: null, smtp: r.smtp, error: r.error };
          try {
            const o = await outcomeOf(h, ctx.adminToken, r.s);
            return { x: r.x, judged: judge(o), o, smtp: r.smtp, error: null };
          } catch (e) {
            return { x: r.x, judged: 'bench-error', o: null, smtp: r.smtp, error: (e as Error).message };
          }
        }),
      ),
    );
    console.log(
      `  sent ${sent.filter((r) => r.s).length} messages (POST /drafts/{id}/send; reply addresses from GET /admin/api/outbox) and delivered the files over SMTP in ${((t1 - t0) / 1000).toFixed(1)} s; queue ${drained ? 'drained' : 'NOT drained'} (${JSON.stringify(queue)}); outcomes read in ${((performance.now() - t1) / 1000).toFixed(1)} s`,
    );
    report(ctx, corpus.name, rows, { fivexx: h.fivexx, queue, drained }, list);
  } finally {
    if (child) await stopProcess(child);
  }
}

const area: BenchArea = {
  name: 'mail-corpus: each corpus file delivered to the listener at the reply address of a message the service sent; the outcome read through the API',
  usage(args) {
    const dir = args.find((a) => !a.startsWith('-'));
    if (!dir) return USAGE;
    if (!fs.existsSync(dir) || corporaIn(dir).length === 0)
      throw new Error(`mail-corpus: no messages/ and expectations.json in ${dir} or its folders`);
    return null;
  },
  async run(ctx, args) {
    const dir = path.resolve(args.find((a) => !a.startsWith('-'))!);
    const list = args.includes('--list') || process.env.BENCH_MAIL_LIST === '1';
    const corpora = corporaIn(dir);
    for (const [i, c] of corpora.entries()) await runCorpus(ctx, c, list, i);
  },
};

export default area;
