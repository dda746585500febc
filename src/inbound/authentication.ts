// Who sent it: whether an inbound message may act for the person it claims to come from. It is
// authenticated, in this order, by
//   - `operator`: it was filed through the operator row (the operator vouches for it);
//   - `token`: a verified reply token in its recipient address (only a reader of our message has it);
//   - `thread`: its In-Reply-To/References name a Message-ID we sent to the address it comes from;
//   - `dmarc`: an aligned DMARC pass for its From domain (mailauth: SPF with the SMTP session's
//     client address, HELO and MAIL FROM; DKIM; DMARC; ARC is read and recorded, never trusted).
// The DNS lookups of one message share one budget (AUTH_DNS_BUDGET_MS): a lookup it cuts short is
// a failure, so a silent DNS server makes a message unauthenticated, never a hung listener. The
// checks wait on the outside world, so they run outside any database transaction (ingest.ts).
// What an unauthenticated message may still do is in classify-reply.ts.
import { authenticate } from 'mailauth';
import { normalizeEmail } from '../crm/domains.js';
import { budgetedResolver } from '../net/dns-resolver.js';
import type { ParsedMail } from './analysis.js';
import type { Route } from './route.js';

/** All DNS of one message's checks, in all: past it the message is not authenticated. */
export const AUTH_DNS_BUDGET_MS = 3000;

/**
 * Body-hashing signatures (DKIM-Signature, ARC-Message-Signature) checked per message at most: each
 * distinct one hashes the body again, so a message carrying many is not checked at all (a forwarded
 * message through a few lists carries a handful).
 */
export const MAX_SIGNATURES = 10;

export type AuthenticatedBy = 'operator' | 'token' | 'thread' | 'dmarc';

/** What the SMTP session said about the sending side (the SPF inputs). */
export interface SmtpSession {
  /** The client's IP address. */
  ip: string;
  /** The name it gave in EHLO/HELO ('' when none). */
  helo: string;
  /** The envelope sender (MAIL FROM); '' for the null sender of a report. */
  mailFrom: string;
}

/** The result words of the DNS checks, kept with the message for the operator (no names, no addresses). */
export interface SenderChecks {
  spf: string;
  dkim: string;
  dmarc: string;
  arc: string;
  /** The DNS budget ran out before the checks were done. */
  dnsTimedOut: boolean;
}

export interface Authentication {
  authenticated: boolean;
  by: AuthenticatedBy | null;
  checks: SenderChecks | null;
}

/** Authenticated by where it was routed over SMTP (a token, a thread to the sender's own address); null when not. */
export function authenticatedByRoute(route: Route, mail: ParsedMail): AuthenticatedBy | null {
  if (route.threadMethod === 'token') return 'token';
  const from = mail.from?.address ? normalizeEmail(mail.from.address) : null;
  const sentTo = route.record?.toEmail ? normalizeEmail(route.record.toEmail) : null;
  if (route.threadMethod === 'header' && from !== null && from === sentTo) return 'thread';
  return null;
}

const word = (x: { status?: { result?: unknown } } | false | undefined | null): string =>
  x && typeof x.status?.result === 'string' ? x.status.result : 'none';

/**
 * SPF, DKIM, DMARC and ARC of a message received over SMTP, through `servers` (null: the system
 * resolver), within `budgetMs` in all. Never throws: whatever fails is a failed check.
 */
export async function checkSender(
  raw: Buffer,
  session: SmtpSession,
  opts: { servers: readonly string[] | null; budgetMs?: number; mta?: string },
): Promise<SenderChecks> {
  const head = raw
    .subarray(0, 256 * 1024)
    .toString('latin1')
    .split(/\r?\n\r?\n/, 1)[0];
  if ((head.match(/^(dkim-signature|arc-message-signature)[ \t]*:/gim) ?? []).length > MAX_SIGNATURES)
    return { spf: 'none', dkim: 'permerror', dmarc: 'none', arc: 'permerror', dnsTimedOut: false };
  const budgetMs = opts.budgetMs ?? AUTH_DNS_BUDGET_MS;
  const resolver = budgetedResolver(opts.servers, budgetMs);
  const failed = (dnsTimedOut: boolean): SenderChecks => ({
    spf: 'temperror',
    dkim: 'temperror',
    dmarc: 'temperror',
    arc: 'temperror',
    dnsTimedOut,
  });
  let timer: NodeJS.Timeout | undefined;
  // The lookups are bounded by the resolver; this bounds the rest (hashing a large body included).
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), budgetMs + 250);
    timer.unref();
  });
  const checked = authenticate(raw, {
    ip: session.ip,
    helo: session.helo || undefined,
    sender: session.mailFrom || undefined,
    mta: opts.mta,
    resolver: resolver.resolve as (name: string, rrtype: string) => Promise<string[][] | string[]>,
    disableBimi: true,
  }).catch(() => 'error' as const);
  try {
    const r = await Promise.race([checked, late]);
    if (r === null) return failed(true);
    if (r === 'error') return failed(resolver.expired());
    const dkim = r.dkim.results?.find((x) => x.status?.result === 'pass') ?? r.dkim.results?.[0];
    const checks = { spf: word(r.spf), dkim: word(dkim), dmarc: word(r.dmarc), arc: word(r.arc), dnsTimedOut: resolver.expired() };
    // A DMARC answer reached after the budget cut a lookup short is not trusted either way.
    return checks.dnsTimedOut ? { ...checks, dmarc: checks.dmarc === 'pass' ? 'temperror' : checks.dmarc } : checks;
  } finally {
    clearTimeout(timer);
    resolver.cancel();
  }
}

/** The message's authentication: by its route when that proves it, else by an aligned DMARC pass. */
export function authenticationOf(byRoute: AuthenticatedBy | null, checks: SenderChecks | null): Authentication {
  if (byRoute) return { authenticated: true, by: byRoute, checks };
  if (checks?.dmarc === 'pass' && !checks.dnsTimedOut) return { authenticated: true, by: 'dmarc', checks };
  return { authenticated: false, by: null, checks };
}
