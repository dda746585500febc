// Signing secrets and the X-Outbound-Signature header: `t=<unix seconds>,v1=<hex HMAC-SHA256>`
// keyed with the whole `whs_...` secret over `<t>.<raw body bytes>`.
import crypto from 'node:crypto';
import { sameSecret } from '../platform/secret-compare.js';

export const SIGNATURE_HEADER = 'X-Outbound-Signature';

export function newSigningSecret(): string {
  return `whs_${crypto.randomBytes(16).toString('hex')}`;
}

export function signatureHeader(secret: string, rawBody: string | Buffer, t = Math.floor(Date.now() / 1000)): string {
  const v1 = crypto.createHmac('sha256', secret).update(`${t}.`).update(rawBody).digest('hex');
  return `t=${t},v1=${v1}`;
}

/** Receiver-side check (used by tests and documented for clients): constant time, with a tolerance. */
export function verifySignature(header: string | undefined, rawBody: string | Buffer, secret: string, toleranceS = 300): boolean {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header ?? '');
  if (!m) return false;
  const t = Number(m[1]);
  if (Math.abs(Date.now() / 1000 - t) > toleranceS) return false;
  return sameSecret(m[2], signatureHeader(secret, rawBody, t).slice(`t=${t},v1=`.length));
}
