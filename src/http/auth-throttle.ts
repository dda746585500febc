// Failed authentications with the operator token (the operator API and GET /metrics, which
// accepts that token too) are slowed and limited per source address: every failure answers after
// the same fixed delay, and past AUTH_FAILURE_LIMIT failures in a window of
// AUTH_FAILURE_WINDOW_SECONDS from one address (an IPv6 /64 counts as one, src/net/client-ip.ts)
// the answer is 429 `authentication-throttled` until the window ends. Callers check the token
// first, so the right token is never limited, whatever its address's failures.
//
// The counts live in this process: each API node limits on its own (an address may fail
// AUTH_FAILURE_LIMIT times per node and window). The limit only slows a guesser down; what keeps
// the token safe is its length (ADMIN_TOKEN: 16 characters at least, 192 random bits when
// generated), and a shared count would cost every operator request a database round trip.
import type { IncomingMessage } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Context } from 'hono';
import { clientIp, rateKeyOf } from '../net/client-ip.js';
import { ProblemError } from './problems.js';

/** Failures one source address may make per window before it is answered 429. */
export const AUTH_FAILURE_LIMIT = 10;
export const AUTH_FAILURE_WINDOW_SECONDS = 600;
/** The wait before every refusal (401 or 429), the same for any wrong token. */
export const AUTH_FAILURE_DELAY_MS = 250;
/** Addresses tracked at most; past it, the oldest window is forgotten first. */
const MAX_TRACKED = 10_000;

export interface AuthThrottle {
  /**
   * Counts a failed authentication of the request's source address, waits the fixed delay, and
   * throws `unauthorized`, or 429 `authentication-throttled` once the address is past the limit.
   */
  refuse(c: Context, unauthorized: ProblemError): Promise<never>;
}

/** The request's source address: the socket's peer, or behind a trusted proxy the address it forwarded. */
function sourceOf(c: Context, trustProxy: boolean): string {
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  const ip = clientIp(incoming?.socket?.remoteAddress, c.req.header('x-forwarded-for'), trustProxy) ?? 'unknown';
  return rateKeyOf(ip);
}

export function authThrottle(opts: { trustProxy: boolean }): AuthThrottle {
  // Insertion order is the order windows started in: the first entry is the oldest.
  const windows = new Map<string, { count: number; endsAt: number }>();
  return {
    async refuse(c, unauthorized) {
      const source = sourceOf(c, opts.trustProxy);
      const now = Date.now();
      let w = windows.get(source);
      if (w === undefined || w.endsAt <= now) {
        windows.delete(source);
        w = { count: 0, endsAt: now + AUTH_FAILURE_WINDOW_SECONDS * 1000 };
        windows.set(source, w);
        if (windows.size > MAX_TRACKED) windows.delete(windows.keys().next().value!);
      }
      w.count += 1;
      const throttled = w.count > AUTH_FAILURE_LIMIT;
      const retryAfter = Math.max(1, Math.ceil((w.endsAt - now) / 1000));
      await sleep(AUTH_FAILURE_DELAY_MS);
      if (!throttled) throw unauthorized;
      throw new ProblemError(
        'authentication-throttled',
        `Too many failed authentications from this address (more than ${AUTH_FAILURE_LIMIT} in ${AUTH_FAILURE_WINDOW_SECONDS / 60} minutes); retry after ${retryAfter} s.`,
        {},
        { 'Retry-After': String(retryAfter) },
      );
    },
  };
}
