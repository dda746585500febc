// The one way the service POSTs to a webhook URL: the target is resolved and vetted first (see
// address.ts) and the connection goes to that vetted address, so a DNS answer
// cannot change between check and connect; redirects are not followed; one deadline covers DNS,
// connect, TLS and the answer's status line.
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { bareHost, ResolveError, resolveTarget, UnsafeTargetError } from '../net/address.js';

export type Outcome = 'success' | 'retry' | 'reject';

export interface SendResult {
  outcome: Outcome;
  /** The receiver's status, null when none arrived (timeout, network error, refused address). */
  httpStatus: number | null;
  /** Why the attempt failed; null on success. */
  error: string | null;
  durationMs: number;
}

export interface SendOptions {
  url: string;
  body: string;
  headers: Record<string, string>;
  timeoutMs: number;
  allowPrivate: boolean;
}

// Keep-alive pools per protocol: a pooled socket is already connected to a vetted address. Idle
// sockets close after 4 s, before the usual 5 s keep-alive of Node receivers.
const agents = {
  'http:': new http.Agent({ keepAlive: true, timeout: 4000, maxSockets: 64 }),
  'https:': new https.Agent({ keepAlive: true, timeout: 4000, maxSockets: 64 }),
};

class TimeoutError extends Error {}

function describe(e: unknown, timeoutMs: number): string {
  if (e instanceof TimeoutError) return `timeout: no answer within ${timeoutMs} ms`;
  const code = (e as NodeJS.ErrnoException).code;
  const msg = (e as Error).message ?? String(e);
  return code ? `network error ${code}: ${msg}` : `network error: ${msg}`;
}

function once(
  u: URL,
  target: { address: string; family: 4 | 6 },
  opts: SendOptions,
  deadline: number,
): Promise<{ status: number } | { error: unknown; reused: boolean }> {
  return new Promise((resolve) => {
    const mod = u.protocol === 'https:' ? https : http;
    const req = mod.request({
      protocol: u.protocol,
      host: target.address,
      port: u.port || undefined,
      path: `${u.pathname}${u.search}`,
      method: 'POST',
      agent: agents[u.protocol as 'http:' | 'https:'],
      // Connect to the vetted address; the URL's own host name goes in the Host header and TLS
      // (SNI and the certificate check).
      headers: { ...opts.headers, host: u.host, 'content-length': Buffer.byteLength(opts.body) },
      servername: net.isIP(bareHost(u)) ? undefined : u.hostname,
    });
    const timer = setTimeout(() => req.destroy(new TimeoutError()), Math.max(1, deadline - Date.now()));
    req.on('response', (res) => {
      clearTimeout(timer);
      // Drain the answer so the socket can be reused; a receiver that keeps streaming is cut off.
      res.on('error', () => {});
      const cut = setTimeout(() => res.destroy(), opts.timeoutMs);
      cut.unref();
      res.on('close', () => clearTimeout(cut));
      res.resume();
      resolve({ status: res.statusCode ?? 0 });
    });
    req.on('error', (error) => {
      clearTimeout(timer);
      resolve({ error, reused: req.reusedSocket });
    });
    req.end(opts.body);
  });
}

/** POSTs the body to the URL and classifies the answer: 2xx success, 5xx/timeout/network retry, anything else reject. */
export async function postWebhook(opts: SendOptions): Promise<SendResult> {
  const started = Date.now();
  const deadline = started + opts.timeoutMs;
  const done = (outcome: Outcome, httpStatus: number | null, error: string | null): SendResult => ({
    outcome,
    httpStatus,
    error,
    durationMs: Date.now() - started,
  });
  let u: URL;
  try {
    u = new URL(opts.url);
  } catch {
    return done('reject', null, 'invalid URL');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return done('reject', null, `unsupported scheme ${u.protocol}`);
  let target: Awaited<ReturnType<typeof resolveTarget>>['addresses'][number];
  try {
    const resolved = await resolveTarget(u, opts.allowPrivate, opts.timeoutMs);
    target = resolved.addresses[0];
  } catch (e) {
    if (e instanceof UnsafeTargetError) return done('reject', null, `refused: ${e.message}`);
    if (e instanceof ResolveError) return done('retry', null, `network error: ${e.message}`);
    throw e;
  }
  // A pooled keep-alive socket the receiver has just closed fails before the request left; such a
  // failure is retried at once on a fresh socket (a few times at most) rather than counted.
  for (let i = 0; ; i += 1) {
    const r = await once(u, target, opts, deadline);
    if ('status' in r) {
      const s = r.status;
      if (s >= 200 && s < 300) return done('success', s, null);
      return done(s >= 500 ? 'retry' : 'reject', s, `HTTP ${s}`);
    }
    const code = (r.error as NodeJS.ErrnoException).code;
    if (r.reused && (code === 'ECONNRESET' || code === 'EPIPE') && i < 3 && Date.now() < deadline) continue;
    return done('retry', null, describe(r.error, opts.timeoutMs));
  }
}
