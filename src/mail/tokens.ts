// Signed tokens in the links a message carries (one-click unsubscribe, open pixel, click
// redirect): a JSON payload and a truncated HMAC-SHA256 keyed per purpose with a key derived from
// the deployment's secret key, so any API node can check them and nobody can forge one. A token
// names the organization and the send record (hence the recipient); nothing needs a login.
// The reply address (`reply+<token>@INBOUND_REPLY_DOMAIN`) carries a token of the same key: the
// two ids as bytes and an 80-bit tag, in lowercase base32, so it fits a 64-character local part
// and survives mail systems that fold the case of addresses.
import crypto from 'node:crypto';
import { sameSecret } from '../platform/secret-compare.js';

export type TokenPurpose = 'unsubscribe' | 'open' | 'click';

export interface Signer {
  sign(purpose: TokenPurpose, payload: Record<string, string>): string;
  /** The payload, or null for a token the service did not issue for that purpose. */
  verify(purpose: TokenPurpose, token: string): Record<string, string> | null;
  /** The reply token of a send record; null for ids not of the service's `<prefix>_<24 hex>` form. */
  replyToken(organizationId: string, sendRecordId: string): string | null;
  /** The organization and send record a reply token names; null for anything the service did not issue (any case accepted). */
  openReplyToken(token: string): { organizationId: string; sendRecordId: string } | null;
}

const B32 = 'abcdefghijklmnopqrstuvwxyz234567';

function base32(bytes: Buffer): string {
  let out = '';
  let acc = 0;
  let bits = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += B32[(acc >>> (bits - 5)) & 31];
      bits -= 5;
    }
    acc &= (1 << bits) - 1;
  }
  return bits > 0 ? out + B32[(acc << (5 - bits)) & 31] : out;
}

function unbase32(text: string): Buffer | null {
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const ch of text) {
    const v = B32.indexOf(ch);
    if (v < 0) return null;
    acc = (acc << 5) | v;
    bits += 5;
    if (bits >= 8) {
      out.push((acc >>> (bits - 8)) & 255);
      bits -= 8;
    }
    acc &= (1 << bits) - 1;
  }
  const bytes = Buffer.from(out);
  // One spelling per token: leftover bits must be the zeros base32() writes.
  return base32(bytes) === text ? bytes : null;
}

/** 12 id bytes of the organization, 12 of the send record, 10 of tag: 55 base32 characters. */
const REPLY_ID = /^([a-z]+)_([0-9a-f]{24})$/;
const REPLY_TAG_BYTES = 10;
const REPLY_TOKEN_LENGTH = 55;

/** The reply address of a send record at the reply domain; null when its ids cannot be tokenized. */
export function replyAddress(signer: Signer, domain: string, organizationId: string, sendRecordId: string): string | null {
  const token = signer.replyToken(organizationId, sendRecordId);
  return token === null ? null : `reply+${token}@${domain}`;
}

/** What a reply address names, when it is one (`reply+<token>@<any domain>`, any case) with a genuine token. */
export function openReplyAddress(signer: Signer, address: string): { organizationId: string; sendRecordId: string } | null {
  const m = /^reply\+([a-z2-7]{55})@[^@\s]+$/i.exec(address.trim());
  return m ? signer.openReplyToken(m[1]) : null;
}

export function createSigner(secretKey: Buffer): Signer {
  const key = crypto.createHmac('sha256', secretKey).update('outbound-mail-tokens-v1').digest();
  const mac = (purpose: string, body: string) =>
    crypto.createHmac('sha256', key).update(`${purpose}.${body}`).digest('base64url').slice(0, 22);
  const replyTag = (ids: Buffer) => crypto.createHmac('sha256', key).update('reply.').update(ids).digest().subarray(0, REPLY_TAG_BYTES);
  return {
    replyToken(organizationId, sendRecordId) {
      const o = REPLY_ID.exec(organizationId);
      const r = REPLY_ID.exec(sendRecordId);
      if (o?.[1] !== 'org' || !r || r[1] !== 'snd') return null;
      const ids = Buffer.from(o[2] + r[2], 'hex');
      return base32(Buffer.concat([ids, replyTag(ids)]));
    },
    openReplyToken(token) {
      if (token.length !== REPLY_TOKEN_LENGTH) return null;
      const bytes = unbase32(token.toLowerCase());
      if (!bytes || bytes.length !== 24 + REPLY_TAG_BYTES) return null;
      const ids = bytes.subarray(0, 24);
      if (!sameSecret(bytes.subarray(24), replyTag(ids))) return null;
      return { organizationId: `org_${ids.subarray(0, 12).toString('hex')}`, sendRecordId: `snd_${ids.subarray(12).toString('hex')}` };
    },
    sign(purpose, payload) {
      const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
      return `${body}.${mac(purpose, body)}`;
    },
    verify(purpose, token) {
      const [body, sig, ...rest] = token.split('.');
      if (!body || !sig || rest.length > 0 || !sameSecret(sig, mac(purpose, body))) return null;
      try {
        const p = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as unknown;
        return p && typeof p === 'object' && !Array.isArray(p) ? (p as Record<string, string>) : null;
      } catch {
        return null;
      }
    },
  };
}
