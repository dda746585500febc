// The one comparison of a secret with what a caller sent (tokens, signatures, cursors' MACs).
// crypto.timingSafeEqual needs two buffers of one length and throws otherwise, and a string's
// length in characters is not its length in bytes (`é` is one character, two bytes), so comparing
// strings directly either throws on hostile input or leaks the secret's length. Both sides are
// first reduced to an HMAC-SHA256 under a key of this process: 32 bytes each, whatever was sent,
// compared in constant time.
import crypto from 'node:crypto';

const KEY = crypto.randomBytes(32);
const digest = (v: string | Uint8Array) => crypto.createHmac('sha256', KEY).update(v).digest();

/** Whether `given` equals `expected`, in time independent of both; never throws. Strings compare as their UTF-8 bytes. */
export function sameSecret(given: string | Uint8Array, expected: string | Uint8Array): boolean {
  return crypto.timingSafeEqual(digest(given), digest(expected));
}
