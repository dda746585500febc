// Signed tokens in the links a message carries (one-click unsubscribe, open pixel, click
// redirect): a JSON payload and a truncated HMAC-SHA256 keyed per purpose with a key derived from
// the deployment's secret key, so any API node can check them and nobody can forge one. A token
// names the organization and the send record (hence the recipient); nothing needs a login.
import crypto from 'node:crypto';

export type TokenPurpose = 'unsubscribe' | 'open' | 'click';

export interface Signer {
  sign(purpose: TokenPurpose, payload: Record<string, string>): string;
  /** The payload, or null for a token the service did not issue for that purpose. */
  verify(purpose: TokenPurpose, token: string): Record<string, string> | null;
}

export function createSigner(secretKey: Buffer): Signer {
  const key = crypto.createHmac('sha256', secretKey).update('outbound-mail-tokens-v1').digest();
  const mac = (purpose: string, body: string) => crypto.createHmac('sha256', key).update(`${purpose}.${body}`).digest('base64url').slice(0, 22);
  return {
    sign(purpose, payload) {
      const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
      return `${body}.${mac(purpose, body)}`;
    },
    verify(purpose, token) {
      const [body, sig, ...rest] = token.split('.');
      if (!body || !sig || rest.length > 0 || sig.length !== 22) return null;
      if (!crypto.timingSafeEqual(Buffer.from(sig), Buffer.from(mac(purpose, body)))) return null;
      try {
        const p = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as unknown;
        return p && typeof p === 'object' && !Array.isArray(p) ? p as Record<string, string> : null;
      } catch { return null; }
    },
  };
}
