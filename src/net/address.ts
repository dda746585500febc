// The one SSRF guard: which network addresses the service may connect to when it reaches out on a
// user's behalf (webhook deliveries, company research). Unless the operator allows private
// targets, only globally routable unicast addresses: never loopback, private, link-local (cloud
// metadata lives there), CGNAT, unique-local, multicast or reserved ranges, in IPv4, IPv6, or
// IPv4 embedded in IPv6 (mapped, compatible, NAT64, 6to4). Callers connect to the address this
// module vetted, never to a name, so DNS cannot answer differently between check and connect.
import dns from 'node:dns';
import net from 'node:net';

type Range = [address: string, prefix: number, label: string];

const V4: Range[] = [
  ['0.0.0.0', 8, 'unspecified'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'CGNAT'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local (cloud metadata)'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'reserved'],
  ['192.0.2.0', 24, 'reserved'],
  ['192.88.99.0', 24, 'reserved'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'reserved'],
  ['198.51.100.0', 24, 'reserved'],
  ['203.0.113.0', 24, 'reserved'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
];

const V6: Range[] = [
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['64:ff9b:1::', 48, 'reserved'],
  ['100::', 64, 'reserved'],
  ['2001::', 23, 'reserved'],
  ['2001:db8::', 32, 'reserved'],
  ['fc00::', 7, 'unique-local'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'site-local'],
  ['ff00::', 8, 'multicast'],
];

function blockList(ranges: Range[], family: 'ipv4' | 'ipv6'): Array<[net.BlockList, string]> {
  return ranges.map(([a, p, label]) => {
    const b = new net.BlockList();
    b.addSubnet(a, p, family);
    return [b, label];
  });
}
const V4_LISTS = blockList(V4, 'ipv4');
const V6_LISTS = blockList(V6, 'ipv6');

/** The 16 bytes of an IPv6 address (which net.isIPv6 already accepted). */
function v6Bytes(addr: string): number[] {
  let a = addr.split('%')[0];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (dotted) {
    const [w, x, y, z] = dotted[1].split('.').map(Number);
    a = `${a.slice(0, -dotted[1].length)}${((w << 8) | x).toString(16)}:${((y << 8) | z).toString(16)}`;
  }
  const [head, tail] = a.includes('::') ? a.split('::') : [a, null];
  const hs = head ? head.split(':') : [];
  const ts = tail ? tail.split(':') : [];
  const groups = tail === null ? hs : [...hs, ...Array(8 - hs.length - ts.length).fill('0'), ...ts];
  return groups.flatMap((g) => {
    const n = parseInt(g, 16);
    return [n >> 8, n & 0xff];
  });
}

/** The IPv4 address an IPv6 address embeds (mapped, compatible, NAT64 or 6to4), if any. */
function embeddedV4(b: number[]): string | null {
  const zero = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  const v4 = (i: number) => b.slice(i, i + 4).join('.');
  if (zero(0, 10) && b[10] === 0xff && b[11] === 0xff) return v4(12); // ::ffff:a.b.c.d
  if (zero(0, 12) && !zero(12, 16) && !(zero(12, 15) && b[15] === 1)) return v4(12); // ::a.b.c.d (deprecated)
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zero(4, 12)) return v4(12); // 64:ff9b::/96
  if (b[0] === 0x20 && b[1] === 0x02) return v4(2); // 2002::/16 6to4
  return null;
}

/**
 * Why an IP address may not be connected to (for example `loopback`), or null when it is a
 * globally routable unicast address.
 */
export function forbiddenReason(address: string): string | null {
  const family = net.isIP(address);
  if (family === 4) {
    for (const [b, label] of V4_LISTS) if (b.check(address, 'ipv4')) return label;
    return null;
  }
  if (family === 6) {
    const embedded = embeddedV4(v6Bytes(address));
    if (embedded) return forbiddenReason(embedded);
    for (const [b, label] of V6_LISTS) if (b.check(address, 'ipv6')) return label;
    return null;
  }
  return 'not an IP address';
}

/** Host names that name the local machine or a cloud metadata service whatever DNS says. */
const FORBIDDEN_NAMES = /^(localhost|.*\.localhost|metadata|metadata\.google\.internal|instance-data(\.ec2\.internal)?)\.?$/i;

export interface ResolvedTarget {
  host: string;
  addresses: Array<{ address: string; family: 4 | 6 }>;
}

/** A DNS lookup of every address of a host (tests inject one to map names to chosen addresses). */
export type Lookup = (host: string) => Promise<ResolvedTarget['addresses']>;

const systemLookup: Lookup = (host) => dns.promises.lookup(host, { all: true, verbatim: true }) as Promise<ResolvedTarget['addresses']>;

export interface GuardOptions {
  /**
   * Exact `address:port` pairs (`[v6]:port` for IPv6) that may be connected to although their
   * address is private: an operator's one known internal site, or a test server on loopback.
   */
  exempt?: ReadonlySet<string>;
  lookup?: Lookup;
}

/** The port a URL connects to. */
export const portOf = (u: URL): number => Number(u.port || (u.protocol === 'https:' ? 443 : 80));

/** The `address:port` key of the exemption list. */
export const targetKey = (address: string, port: number): string => (net.isIPv6(address) ? `[${address}]:${port}` : `${address}:${port}`);

export class UnsafeTargetError extends Error {}
export class ResolveError extends Error {}

/** The URL's host without IPv6 brackets. */
export const bareHost = (u: URL): string => u.hostname.replace(/^\[|\]$/g, '');

/**
 * Resolves the URL's host (all addresses) and refuses it when any address is forbidden. The
 * caller connects only to an address returned here, so DNS cannot change the answer between the
 * check and the connection.
 */
export async function resolveTarget(u: URL, allowPrivate: boolean, timeoutMs: number, opts: GuardOptions = {}): Promise<ResolvedTarget> {
  const host = bareHost(u);
  const lookup = opts.lookup ?? systemLookup;
  if (!allowPrivate && FORBIDDEN_NAMES.test(host)) throw new UnsafeTargetError(`${host} names a local or metadata host`);
  const family = net.isIP(host);
  let addresses: ResolvedTarget['addresses'];
  if (family !== 0) {
    addresses = [{ address: host, family: family as 4 | 6 }];
  } else {
    let timer: NodeJS.Timeout | undefined;
    try {
      addresses = await Promise.race([
        lookup(host),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new ResolveError(`resolving ${host} timed out`)), timeoutMs);
        }),
      ]);
    } catch (e) {
      if (e instanceof ResolveError) throw e;
      throw new ResolveError(`cannot resolve ${host} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    } finally {
      clearTimeout(timer);
    }
    if (addresses.length === 0) throw new ResolveError(`cannot resolve ${host}`);
  }
  if (!allowPrivate) {
    const port = portOf(u);
    for (const a of addresses) {
      const reason = forbiddenReason(a.address);
      if (reason && !opts.exempt?.has(targetKey(a.address, port)))
        throw new UnsafeTargetError(`${host === a.address ? host : `${host} resolves to ${a.address}, which`} is a ${reason} address`);
    }
  }
  return { host, addresses };
}
