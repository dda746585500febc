// The one SSRF guard: which network addresses the service may connect to when it reaches out on a
// user's behalf (webhook deliveries, company research, any future outbound fetch). Unless the
// operator allows private targets, only globally routable unicast addresses: never loopback,
// private, link-local (cloud metadata lives there), CGNAT, unique-local, multicast or reserved
// ranges, in IPv4 or IPv6. IPv6 that embeds IPv4 is judged by the IPv4 address only in the two
// forms a deployment meets in practice: IPv4-mapped (dual-stack sockets) and the NAT64 well-known
// prefix (DNS64 on IPv6-only networks). The other embedding forms (IPv4-translated, IPv4-compatible,
// NAT64 local-use, 6to4, Teredo) are deprecated or depend on a relay or on where a network chose
// to put the IPv4, and no legitimate target lives at one: they are refused whatever they embed,
// leaving no decoding of them to get wrong. Callers connect to the address this module vetted,
// never to a name, so DNS cannot answer differently between check and connect.
import dns from 'node:dns';
import net from 'node:net';

type Range = [network: string, prefix: number, label: string];

/** Refused IPv4 ranges (listed in docs/configuration.md and spec/decisions/webhooks-events.md). */
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

/**
 * Refused IPv6 ranges, the first that holds an address naming it. Only 2000::/3 is allocated for
 * global unicast, so an address outside it that none of these names (100::/64 discard, the rest of
 * ::/8, 4000::/2, …) is refused as reserved. IPv4-mapped (::ffff:0:0/96) and the NAT64 well-known
 * prefix (64:ff9b::/96) are judged before these, by their IPv4 address.
 */
const V6: Range[] = [
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['::ffff:0:0:0', 96, 'SIIT IPv4-translated'],
  ['::', 96, 'deprecated IPv4-compatible'],
  ['64:ff9b:1::', 48, 'NAT64 local-use'],
  ['fc00::', 7, 'unique-local'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'site-local'],
  ['ff00::', 8, 'multicast'],
  ['2001::', 32, 'Teredo'],
  ['2001::', 23, 'reserved'], // IETF protocol assignments: benchmarking, ORCHID, AMT, AS112, DRIP, …
  ['2001:db8::', 32, 'reserved'],
  ['2002::', 16, '6to4'],
  ['3fff::', 20, 'reserved'],
  ['5f00::', 16, 'reserved'],
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
const GLOBAL_UNICAST = new net.BlockList();
GLOBAL_UNICAST.addSubnet('2000::', 3, 'ipv6');

/**
 * The canonical text of an IPv6 address (which net.isIP accepted) and its eight 16-bit groups.
 * The WHATWG URL parser reads every written form (dotted tails, upper case, uncompressed) and
 * writes one; the zone (%eth0) names an interface, not an address, so it is dropped first.
 * (ipaddr.js, the usual package for this, reads the IPv4-compatible ::a.b.c.d as the IPv4-mapped
 * ::ffff:a.b.c.d, a different address, so it is not used here.)
 */
export function canonicalV6(address: string): { text: string; groups: number[] } {
  const text = new URL(`http://[${address.split('%')[0]}]/`).hostname.slice(1, -1);
  const [head, tail] = text.split('::');
  const hs = head ? head.split(':') : [];
  const ts = tail ? tail.split(':') : [];
  const all = tail === undefined ? hs : [...hs, ...Array(8 - hs.length - ts.length).fill('0'), ...ts];
  return { text, groups: all.map((g) => parseInt(g, 16)) };
}

const v4Reason = (address: string): string | null => V4_LISTS.find(([b]) => b.check(address, 'ipv4'))?.[1] ?? null;

function v6Reason(address: string): string | null {
  const { text, groups: g } = canonicalV6(address);
  const mapped = g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff;
  const nat64 = g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0);
  if (mapped || nat64) return v4Reason([g[6] >> 8, g[6] & 0xff, g[7] >> 8, g[7] & 0xff].join('.'));
  const named = V6_LISTS.find(([b]) => b.check(text, 'ipv6'));
  if (named) return named[1];
  return GLOBAL_UNICAST.check(text, 'ipv6') ? null : 'reserved';
}

/**
 * Why an IP address may not be connected to (for example `loopback`), or null when it is a
 * globally routable unicast address.
 */
export function forbiddenReason(address: string): string | null {
  const family = net.isIP(address);
  if (family === 4) return v4Reason(address);
  try {
    if (family === 6) return v6Reason(address);
  } catch {
    // Valid to net.isIP but not to the URL parser: refused rather than guessed at.
  }
  return 'not an IP address';
}

/** Host names that name the local machine or a cloud metadata service whatever DNS says. */
const FORBIDDEN_NAMES = /^(localhost|.*\.localhost|metadata|metadata\.google\.internal|instance-data(\.ec2\.internal)?)\.?$/i;

/**
 * Why a host of a URL (a name, or an IP address without brackets) is not a public one: a name of
 * the local machine or a cloud metadata service, or an address `forbiddenReason` refuses; null
 * for any other name (what DNS answers for it is not looked at here).
 */
export function localHostReason(host: string): string | null {
  if (FORBIDDEN_NAMES.test(host)) return 'local host name';
  return net.isIP(host) === 0 ? null : forbiddenReason(host);
}

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
