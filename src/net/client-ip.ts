// The source address of a request and the key a per-address limit counts it under (the lead
// capture window, failed operator authentications), and the keyed hash of a lead capture's address:
// the lead's `ip_hash` rests on the hash, and the address itself is never stored.
import crypto from 'node:crypto';
import net from 'node:net';

/**
 * HMAC-SHA256 (hex) under a key derived from the deployment's secret key, so the hashes of one
 * deployment agree across its nodes and cannot be reversed by trying the 2^32 IPv4 addresses
 * without the key.
 */
export function createIpHasher(secretKey: Buffer): (ip: string) => string {
  const key = crypto.createHmac('sha256', secretKey).update('outbound-lead-ip-v1').digest();
  return (ip: string) => crypto.createHmac('sha256', key).update(ip).digest('hex');
}

/** The eight 16-bit groups of an IPv6 address (`::` expanded, a trailing dotted IPv4 converted). */
function ipv6Groups(ip: string): number[] | null {
  let s = ip.toLowerCase().replace(/%.*$/, '');
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (v4) {
    const b = v4[1].split('.').map(Number);
    s = `${s.slice(0, -v4[1].length)}${((b[0] << 8) | b[1]).toString(16)}:${((b[2] << 8) | b[3]).toString(16)}`;
  }
  const [head, tail, ...rest] = s.split('::');
  if (rest.length > 0) return null;
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const missing = 8 - h.length - t.length;
  if (tail === undefined ? missing !== 0 : missing < 1) return null;
  const groups = [...h, ...Array<string>(tail === undefined ? 0 : missing).fill('0'), ...t].map((g) => parseInt(g, 16));
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : null;
}

/**
 * The address a rate limit counts: an IPv4 address as it is (also when written IPv4-mapped,
 * `::ffff:1.2.3.4`); an IPv6 address by its /64 network, since one subscriber commonly holds a
 * whole /64 and could otherwise change address per submission. Unparseable input is kept as is.
 */
export function rateKeyOf(ip: string): string {
  const s = ip.trim();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(s);
  if (mapped) return mapped[1];
  if (net.isIPv4(s)) return s;
  if (!net.isIPv6(s)) return s;
  const g = ipv6Groups(s);
  return g
    ? `${g
        .slice(0, 4)
        .map((x) => x.toString(16))
        .join(':')}::/64`
    : s;
}

/**
 * The client's address: the socket's peer; behind a trusted proxy (TRUST_PROXY=true), the last
 * entry of X-Forwarded-For, which that proxy appended (earlier entries are the client's to
 * forge). Null when neither is known.
 */
export function clientIp(socketAddress: string | undefined, forwardedFor: string | undefined, trustProxy: boolean): string | null {
  if (trustProxy && forwardedFor) {
    const last = forwardedFor
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean)
      .pop();
    // A port may follow an IPv4 address (`1.2.3.4:5678`) or a bracketed IPv6 one (`[::1]:5678`).
    const bare = last?.replace(/^\[([^\]]+)\](:\d+)?$/, '$1').replace(/^(\d+\.\d+\.\d+\.\d+):\d+$/, '$1');
    if (bare && net.isIP(bare)) return bare;
  }
  return socketAddress ?? null;
}
