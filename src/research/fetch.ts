// The research fetcher: a GET the way a well-behaved crawler makes it. Every hop (the first
// request and each redirect) goes through the one SSRF guard (src/net/address.ts) and connects to
// the address the guard vetted; one deadline per request covers DNS, connect, TLS, headers and the
// whole body; the body is capped after decompression; only the expected media types are read.
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { bareHost, type GuardOptions, ResolveError, resolveTarget, UnsafeTargetError } from '../net/address.js';

export interface FetchPolicy {
  userAgent: string;
  allowPrivate: boolean;
  guard: GuardOptions;
  /** Limit of one request, redirects included. */
  timeoutMs: number;
  maxBytes: number;
  maxRedirects: number;
  /** Epoch ms after which nothing more is fetched (the end of the research run). */
  deadline: number;
  agents: { 'http:': http.Agent; 'https:': https.Agent };
}

export interface FetchOptions {
  /** The Accept header. */
  accept: string;
  /** Whether a media type (lower-case, no parameters) is one this fetch reads; others are not read. */
  acceptType?: (mime: string) => boolean;
  /** Whether a redirect to this URL is followed; a refused one ends the fetch ('off-site'). */
  followRedirect?: (url: string) => boolean;
  /** Keep the first maxBytes of a larger body instead of refusing it (robots.txt). */
  truncate?: boolean;
  maxBytes?: number;
}

export interface Fetched {
  ok: true;
  url: string;
  /** After redirects. */
  finalUrl: string;
  status: number;
  mime: string;
  charset: string | null;
  body: Buffer;
  fetchedAt: Date;
}

export type FailReason =
  | 'bad-url'
  | 'refused'
  | 'unresolvable'
  | 'timeout'
  | 'network'
  | 'too-large'
  | 'wrong-type'
  | 'http-status'
  | 'too-many-redirects'
  | 'off-site'
  | 'deadline';

export interface FetchFailure {
  ok: false;
  url: string;
  finalUrl: string;
  /** The status of the last answer, null when none arrived. */
  status: number | null;
  reason: FailReason;
  detail: string;
}

/** Keep-alive agents for one research run: pages of one site reuse their connections. */
export function runAgents(maxSockets: number): FetchPolicy['agents'] {
  return {
    'http:': new http.Agent({ keepAlive: true, maxSockets, timeout: 5000 }),
    'https:': new https.Agent({ keepAlive: true, maxSockets, timeout: 5000 }),
  };
}

export function closeAgents(agents: FetchPolicy['agents']): void {
  agents['http:'].destroy();
  agents['https:'].destroy();
}

class Timeout extends Error {}
class Abort extends Error {
  constructor(
    readonly reason: FailReason,
    message: string,
  ) {
    super(message);
  }
}

type Hop = { redirect: string; status: number } | Omit<Fetched, 'ok' | 'url' | 'finalUrl' | 'fetchedAt'>;

function decoder(encoding: string | undefined): zlib.Gunzip | zlib.Inflate | zlib.BrotliDecompress | null {
  switch ((encoding ?? '').trim().toLowerCase()) {
    case 'gzip':
    case 'x-gzip':
      return zlib.createGunzip();
    case 'deflate':
      return zlib.createInflate();
    case 'br':
      return zlib.createBrotliDecompress();
    default:
      return null;
  }
}

/** Reads a response body up to the cap (decompressed), or fails. */
function readBody(res: http.IncomingMessage, maxBytes: number, truncate: boolean): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const dec = decoder(res.headers['content-encoding']);
    const stream: Readable = dec ? res.pipe(dec) : res;
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (err: Error | null) => {
      if (done) return;
      done = true;
      if (err) reject(err);
      else resolve(Buffer.concat(chunks));
    };
    stream.on('data', (chunk: Buffer) => {
      if (done) return;
      if (size + chunk.length > maxBytes) {
        if (truncate) chunks.push(chunk.subarray(0, maxBytes - size));
        res.destroy();
        dec?.destroy();
        finish(truncate ? null : new Abort('too-large', `the body is larger than ${maxBytes} bytes`));
        return;
      }
      size += chunk.length;
      chunks.push(chunk);
    });
    stream.on('end', () => finish(null));
    stream.on('error', (e) => finish(e));
    res.on('error', (e) => finish(e));
    let ended = false;
    res.on('end', () => {
      ended = true;
    });
    res.on('close', () => {
      if (!ended) finish(new Abort('network', 'the connection closed before the body ended'));
    });
  });
}

/** One request to one vetted address; a redirect is reported, not followed. */
async function hop(u: URL, policy: FetchPolicy, opts: FetchOptions, until: number): Promise<Hop> {
  const remaining = until - Date.now();
  if (remaining <= 0) throw new Timeout();
  const target = (await resolveTarget(u, policy.allowPrivate, remaining, policy.guard)).addresses[0];
  const maxBytes = opts.maxBytes ?? policy.maxBytes;
  return new Promise<Hop>((resolve, reject) => {
    const mod = u.protocol === 'https:' ? https : http;
    const req = mod.request({
      protocol: u.protocol,
      host: target.address,
      port: u.port || undefined,
      path: `${u.pathname}${u.search}`,
      method: 'GET',
      agent: policy.agents[u.protocol as 'http:' | 'https:'],
      // The vetted address is connected to; the URL's own name goes in Host, SNI and the certificate check.
      headers: {
        host: u.host,
        'user-agent': policy.userAgent,
        accept: opts.accept,
        'accept-encoding': 'gzip, deflate, br',
        'accept-language': 'en;q=1, *;q=0.5',
      },
      servername: net.isIP(bareHost(u)) ? undefined : u.hostname,
    });
    let timedOut = false;
    const timer = setTimeout(
      () => {
        timedOut = true;
        req.destroy(new Timeout());
      },
      Math.max(1, until - Date.now()),
    );
    // Whatever error the cut connection reports, running out of time is the reason.
    const fail = (e: unknown) => {
      clearTimeout(timer);
      reject(timedOut ? new Timeout() : e);
    };
    req.on('error', fail);
    req.on('response', (res) => {
      res.on('error', () => {});
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if (status >= 300 && status < 400 && location) {
        res.resume();
        clearTimeout(timer);
        resolve({ redirect: location, status });
        return;
      }
      if (status < 200 || status > 299) {
        res.resume();
        fail(Object.assign(new Abort('http-status', `HTTP ${status}`), { status }));
        return;
      }
      const [type, ...params] = (res.headers['content-type'] ?? '').split(';');
      const mime = type.trim().toLowerCase();
      if (opts.acceptType && !opts.acceptType(mime)) {
        res.destroy();
        fail(Object.assign(new Abort('wrong-type', `content type "${mime || 'none'}" is not one research reads`), { status }));
        return;
      }
      const declared = Number(res.headers['content-length'] ?? NaN);
      if (!opts.truncate && !res.headers['content-encoding'] && declared > maxBytes) {
        res.destroy();
        fail(Object.assign(new Abort('too-large', `the body is ${declared} bytes, more than ${maxBytes}`), { status }));
        return;
      }
      const charset = params.map((p) => /^\s*charset\s*=\s*"?([^";]+)"?/i.exec(p)?.[1] ?? null).find((c) => c !== null) ?? null;
      readBody(res, maxBytes, opts.truncate === true).then(
        (body) => {
          clearTimeout(timer);
          resolve({ status, mime, charset, body });
        },
        (e) => fail(Object.assign(e, { status })),
      );
    });
    req.end();
  });
}

/**
 * GETs a URL, following up to policy.maxRedirects redirects (each vetted again). Never throws:
 * every way a fetch can fail is a FetchFailure with a reason.
 */
export async function guardedGet(url: string, policy: FetchPolicy, opts: FetchOptions): Promise<Fetched | FetchFailure> {
  let current = url;
  const fail = (reason: FailReason, detail: string, status: number | null = null): FetchFailure => ({
    ok: false,
    url,
    finalUrl: current,
    status,
    reason,
    detail,
  });
  if (Date.now() >= policy.deadline) return fail('deadline', 'the research run ran out of time');
  const until = Math.min(policy.deadline, Date.now() + policy.timeoutMs);
  for (let redirects = 0; ; redirects += 1) {
    let u: URL;
    try {
      u = new URL(current);
    } catch {
      return fail('bad-url', `"${current}" is not a URL`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return fail('bad-url', `the scheme ${u.protocol} is not fetched`);
    let r: Hop;
    try {
      r = await hop(u, policy, opts, until);
    } catch (e) {
      const status = (e as { status?: number }).status ?? null;
      if (e instanceof UnsafeTargetError) return fail('refused', `refused: ${e.message}`);
      if (e instanceof ResolveError) return fail('unresolvable', e.message);
      if (e instanceof Timeout) return fail('timeout', `no complete answer within ${policy.timeoutMs} ms`, status);
      if (e instanceof Abort) return fail(e.reason, e.message, status);
      const code = (e as NodeJS.ErrnoException).code;
      return fail('network', `network error${code ? ` ${code}` : ''}: ${(e as Error).message}`, status);
    }
    if (!('redirect' in r)) return { ok: true, url, finalUrl: current, fetchedAt: new Date(), ...r };
    if (redirects >= policy.maxRedirects) return fail('too-many-redirects', `more than ${policy.maxRedirects} redirects`, r.status);
    try {
      current = new URL(r.redirect, u).toString();
    } catch {
      return fail('bad-url', `redirect to "${r.redirect}", which is not a URL`, r.status);
    }
    if (opts.followRedirect && !opts.followRedirect(current)) return fail('off-site', `redirected off the site to ${current}`, r.status);
  }
}
