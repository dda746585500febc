// @outbound/client: a typed client of the Outbound public API, built on openapi-fetch and the
// types generated from the same OpenAPI document the service serves (src/openapi.ts, copied here
// by the service's `npm run generate`), plus the receiver-side check of webhook signatures.
import crypto from 'node:crypto';
import createClient, { type Client } from 'openapi-fetch';
import type { components, operations, paths, webhooks } from './openapi.js';

export type { components, operations, paths, webhooks };
export type Schemas = components['schemas'];
/** An RFC 7807 problem, as every error of the API answers. */
export type Problem = Schemas['Problem'];
/** The event envelope of GET /events and of every webhook delivery; `data` depends on `type`. */
export type WebhookEvent = Omit<Schemas['Event'], 'data'> & { data: Record<string, unknown> };
export type OutboundClient = Client<paths>;

export interface OutboundClientOptions {
  /** The service address, e.g. `https://outbound.example.com` (`/api/v1` is added when missing). */
  baseUrl: string;
  /** An API key, `obk_live_<32 hex>`, sent as `Authorization: Bearer <key>`. */
  apiKey: string;
  /** A fetch to use instead of the global one (a proxy agent, a test double, a retrying wrapper). */
  fetch?: (input: Request) => Promise<Response>;
  /** Headers added to every request (the Authorization header cannot be replaced here). */
  headers?: Record<string, string>;
}

/**
 * A client whose paths, parameters, bodies and answers are typed from the OpenAPI document:
 * `const { data, error, response } = await client.GET('/contacts/{id}', { params: { path: { id } } })`.
 * `error` is the Problem of a non-2xx answer; nothing throws on an HTTP error.
 */
export function createOutboundClient(options: OutboundClientOptions): OutboundClient {
  const { apiKey } = options;
  if (typeof apiKey !== 'string' || apiKey.length === 0 || /\s/.test(apiKey)) {
    throw new TypeError('createOutboundClient: apiKey must be a non-empty API key without whitespace (obk_live_<32 hex>).');
  }
  const url = new URL(options.baseUrl);
  const base = url.href.replace(/\/+$/, '');
  return createClient<paths>({
    baseUrl: /\/api\/v1$/.test(base) ? base : `${base}/api/v1`,
    ...(options.fetch ? { fetch: options.fetch } : {}),
    headers: { ...options.headers, Authorization: `Bearer ${apiKey}` },
  });
}

/**
 * The `Idempotency-Key` header for a write, to pass as `params: { header: idempotencyKey() }`.
 * Reuse the same key when retrying the same request (a network error, a 5xx): the service then
 * replays the first answer instead of acting twice. Without an argument a new random key is made.
 */
export function idempotencyKey(key: string = crypto.randomUUID()): { 'Idempotency-Key': string } {
  if (key.length < 1 || key.length > 255) throw new RangeError('An Idempotency-Key is 1 to 255 characters.');
  return { 'Idempotency-Key': key };
}

/** Whether the answer is the replay of an earlier request with the same Idempotency-Key. */
export function wasReplayed(response: Response): boolean {
  return response.headers.get('Idempotent-Replayed') === 'true';
}

// ---------------------------------------------------------------------------------------------
// Webhook signatures
// ---------------------------------------------------------------------------------------------

/** The header each delivery carries: `t=<unix seconds>,v1=<hex HMAC-SHA256>`. */
export const SIGNATURE_HEADER = 'X-Outbound-Signature';
export const DEFAULT_TOLERANCE_SECONDS = 300;

export interface VerifyWebhookOptions {
  /** The request body exactly as received (bytes or the undecoded string), never a re-serialization. */
  rawBody: string | Uint8Array;
  /** The value of the X-Outbound-Signature header (undefined or null when absent). */
  header: string | string[] | null | undefined;
  /**
   * The endpoint's signing secret (`whs_...`). While rotating, pass the new and the old secret:
   * a delivery signed just before the rotation still verifies.
   */
  secret: string | readonly string[];
  /** Largest accepted distance between the signature's time and now, in seconds (default 300); a RangeError unless finite and not negative. */
  toleranceSeconds?: number;
  /** The current time (a Date or milliseconds since the epoch); defaults to the clock. A RangeError unless finite (an invalid Date, NaN, Infinity). */
  now?: Date | number;
}

export type WebhookCheck =
  | { valid: true; timestamp: number }
  | { valid: false; reason: 'missing-header' | 'malformed-header' | 'stale-timestamp' | 'signature-mismatch'; timestamp?: number };

/** Parses `t=<digits>,v1=<hex>[,v1=<hex>...]`; other schemes are ignored, so later ones can be added. */
function parseHeader(header: string): { t: number; v1: string[] } | null {
  let t: number | null = null;
  const v1: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) return null;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name === 't') {
      if (t !== null || !/^\d{1,12}$/.test(value)) return null;
      t = Number(value);
    } else if (name === 'v1') {
      v1.push(value);
    }
  }
  return t === null || v1.length === 0 ? null : { t, v1 };
}

/**
 * Checks a delivery's signature and says why it fails: the HMAC-SHA256 of `<t>.<raw body>` keyed
 * with the secret must equal one of the header's `v1` values (compared in constant time), and `t`
 * must be within the tolerance of now, in either direction, so a captured delivery cannot be replayed later.
 */
export function checkWebhookSignature(options: VerifyWebhookOptions): WebhookCheck {
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  // NaN or Infinity would make every timestamp fresh: a replayed delivery would pass.
  if (typeof tolerance !== 'number' || !Number.isFinite(tolerance) || tolerance < 0)
    throw new RangeError('toleranceSeconds must be a finite number, zero or more.');
  const nowMs = options.now === undefined ? Date.now() : typeof options.now === 'number' ? options.now : options.now.getTime();
  if (typeof nowMs !== 'number' || !Number.isFinite(nowMs))
    throw new RangeError('now must be a valid Date or a finite number of milliseconds.');
  const secrets = typeof options.secret === 'string' ? [options.secret] : [...options.secret];
  if (secrets.length === 0 || secrets.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw new TypeError('secret must be a non-empty signing secret (whs_...) or a list of them.');
  }
  const header = Array.isArray(options.header) ? options.header.join(',') : options.header;
  if (header === undefined || header === null || header === '') return { valid: false, reason: 'missing-header' };
  const parsed = parseHeader(header);
  if (!parsed) return { valid: false, reason: 'malformed-header' };
  const { t } = parsed;
  if (Math.abs(nowMs / 1000 - t) > tolerance) return { valid: false, reason: 'stale-timestamp', timestamp: t };
  const body = typeof options.rawBody === 'string' ? Buffer.from(options.rawBody, 'utf8') : options.rawBody;
  const given = parsed.v1.filter((v) => /^[0-9a-f]{64}$/i.test(v)).map((v) => Buffer.from(v, 'hex'));
  for (const secret of secrets) {
    const expected = crypto.createHmac('sha256', secret).update(`${t}.`).update(body).digest();
    for (const g of given) {
      if (g.length === expected.length && crypto.timingSafeEqual(g, expected)) return { valid: true, timestamp: t };
    }
  }
  return { valid: false, reason: 'signature-mismatch', timestamp: t };
}

/** True when the delivery is authentic and fresh (see checkWebhookSignature for the reason when not). */
export function verifyWebhook(options: VerifyWebhookOptions): boolean {
  return checkWebhookSignature(options).valid;
}

export class WebhookVerificationError extends Error {
  readonly reason: Exclude<WebhookCheck, { valid: true }>['reason'];
  constructor(reason: WebhookVerificationError['reason']) {
    super(`webhook signature rejected: ${reason}`);
    this.name = 'WebhookVerificationError';
    this.reason = reason;
  }
}

/**
 * Verifies a delivery and returns its event; throws WebhookVerificationError when the signature
 * does not hold. Deduplicate on `event.id`: a delivery can arrive more than once.
 */
export function parseWebhook(options: VerifyWebhookOptions): WebhookEvent {
  const check = checkWebhookSignature(options);
  if (!check.valid) throw new WebhookVerificationError(check.reason);
  const text = typeof options.rawBody === 'string' ? options.rawBody : Buffer.from(options.rawBody).toString('utf8');
  return JSON.parse(text) as WebhookEvent;
}
