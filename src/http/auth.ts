// API key authentication and the per-key rate limit, in one database round trip
// (the authenticate_api_key function of db/migrations).
import crypto from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from '../../db/database.js';
import { sameSecret } from '../platform/secret-compare.js';
import type { AuthInfo } from './handler.js';
import { ProblemError } from './problems.js';

const KEY_FORMAT = /^obk_live_[0-9a-f]{32}$/;

export const hashKey = (key: string): Buffer => crypto.createHash('sha256').update(key).digest();

export function newApiKey(): string {
  return `obk_live_${crypto.randomBytes(16).toString('hex')}`;
}

export interface RateState {
  limit: number;
  count: number;
  remaining: number;
  reset: number;
}

export interface AuthRow {
  key_id: string;
  organization_id: string;
  key_name: string | null;
  scopes: string[];
  user_id: string | null;
  user_role: string | null;
  expires_at: Date | null;
  key_created_at: Date;
  org_name: string;
  org_plan: string;
  org_flags: { v1_2_api_send: boolean };
  org_created_at: Date;
  request_count: number;
  window_reset: number;
}

export function bearerToken(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1] : null;
}

/** Whether `token` is the configured secret `expected` (constant time, any input; an unset secret matches nothing). */
export function tokenMatches(token: string, expected: string | null | undefined): boolean {
  return !!expected && sameSecret(token, expected);
}

/** Looks the key up and counts the request; throws 401 for a bad key. The rate verdict is the caller's. */
export async function authenticate(db: Db, header: string | undefined, limit: number): Promise<{ auth: AuthInfo; rate: RateState }> {
  const token = keyOf(header);
  const hash = hashKey(token);
  const { rows } = await sql<AuthRow>`select * from authenticate_api_key(${hash})`.execute(db);
  const r = rows[0];
  if (!r) {
    recent.delete(hash.toString('hex'));
    throw new ProblemError('unauthorized', 'The API key is unknown, expired or revoked.');
  }
  const out = fromRow(r, limit);
  remember(hash.toString('hex'), out.auth);
  return out;
}

/** The request's API key from its Authorization header; throws 401 for a missing or malformed one. */
export function keyOf(header: string | undefined): string {
  const token = bearerToken(header);
  if (token === null) throw new ProblemError('unauthorized', 'Send the API key as `Authorization: Bearer obk_live_<32 hex>`.');
  if (!KEY_FORMAT.test(token)) throw new ProblemError('unauthorized', 'The API key is malformed.');
  return token;
}

/** What one row of the authentication functions says of the key and its count. */
export function fromRow(r: AuthRow, limit: number): { auth: AuthInfo; rate: RateState } {
  return {
    auth: {
      keyId: r.key_id,
      organizationId: r.organization_id,
      keyName: r.key_name,
      scopes: r.scopes,
      userId: r.user_id,
      userRole: r.user_role,
      expiresAt: r.expires_at,
      keyCreatedAt: r.key_created_at,
      org: { name: r.org_name, plan: r.org_plan, flags: r.org_flags, createdAt: r.org_created_at },
    },
    rate: { limit, count: r.request_count, remaining: Math.max(0, limit - r.request_count), reset: Number(r.window_reset) },
  };
}

// What each recently seen key hash authenticated to last time (never the key itself), so that a
// keyed read can start before this request's authentication answers (src/http/deferred-auth.ts,
// which checks it against the fresh answer). Bounded: the oldest entry goes first.
const RECENT_MAX = 10_000;
const recent = new Map<string, AuthInfo>();

export function remember(hashHex: string, auth: AuthInfo): void {
  recent.delete(hashHex);
  if (recent.size >= RECENT_MAX) recent.delete(recent.keys().next().value as string);
  recent.set(hashHex, auth);
}

export function forget(hashHex: string): void {
  recent.delete(hashHex);
}

export function recalled(hashHex: string): AuthInfo | undefined {
  return recent.get(hashHex);
}

/** Whether two answers of the authentication are the same (so a handler run with one may stand for the other). */
export function sameAuth(a: AuthInfo, b: AuthInfo): boolean {
  return (
    a.keyId === b.keyId &&
    a.organizationId === b.organizationId &&
    a.keyName === b.keyName &&
    a.scopes.join('\n') === b.scopes.join('\n') &&
    a.userId === b.userId &&
    a.userRole === b.userRole &&
    a.expiresAt?.getTime() === b.expiresAt?.getTime() &&
    a.keyCreatedAt.getTime() === b.keyCreatedAt.getTime() &&
    a.org.name === b.org.name &&
    a.org.plan === b.org.plan &&
    a.org.createdAt.getTime() === b.org.createdAt.getTime() &&
    JSON.stringify(a.org.flags) === JSON.stringify(b.org.flags)
  );
}

/** Fails closed: an operation the document gives no scope declaration is refused. */
export function scopeAllows(auth: AuthInfo, scope: string | null): boolean {
  if (scope === 'none' || scope === 'per-action' || scope === 'public') return true;
  return scope !== null && auth.scopes.includes(scope);
}

export function rateHeaders(rate: RateState): Record<string, string> {
  return {
    'X-RateLimit-Limit': String(rate.limit),
    'X-RateLimit-Reset': String(rate.reset),
    'X-RateLimit-Remaining': String(rate.remaining),
  };
}

/** Throws 429 when the request was past the limit of its window. */
export function enforceRate(rate: RateState): void {
  if (rate.count <= rate.limit) return;
  const retryAfter = Math.max(0, Math.min(60, rate.reset - Math.floor(Date.now() / 1000)));
  throw new ProblemError(
    'rate-limited',
    `This key may make ${rate.limit} requests per 60-second window; retry after ${retryAfter} s.`,
    {},
    { 'Retry-After': String(retryAfter), 'X-RateLimit-Remaining': '0' },
  );
}
