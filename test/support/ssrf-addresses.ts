// The one table of addresses the SSRF guard (src/net/address.ts) is held to, shared by every test
// of an outbound user: the guard itself (test/net-address.test.ts), webhook registration
// (test/webhooks.test.ts) and research (test/research.test.ts). Each row names the form, the
// address, and the guard's verdict: the reason it is refused (as in "… is a <reason> address"),
// or null when it may be connected to. A new outbound user runs its own path over this table.

export interface AddressCase {
  form: string;
  address: string;
  /** Why the guard refuses it, or null when it is a public address. */
  reason: string | null;
}

// Teredo (2001::/32) embeds the server's IPv4 in bits 32-63 and the client's, XORed with
// 0xffffffff, in the last 32 bits: 80ff:fffe is 127.0.0.1 obfuscated, 7f00:1 the server 127.0.0.1.
export const ADDRESS_CASES: readonly AddressCase[] = [
  // IPv4
  { form: 'IPv4 loopback', address: '127.0.0.1', reason: 'loopback' },
  { form: 'IPv4 loopback (not .1)', address: '127.1.2.3', reason: 'loopback' },
  { form: 'IPv4 unspecified', address: '0.0.0.0', reason: 'unspecified' },
  { form: 'IPv4 private 10/8', address: '10.0.0.1', reason: 'private' },
  { form: 'IPv4 private 172.16/12', address: '172.20.1.1', reason: 'private' },
  { form: 'IPv4 private 192.168/16', address: '192.168.0.10', reason: 'private' },
  { form: 'IPv4 cloud metadata', address: '169.254.169.254', reason: 'link-local (cloud metadata)' },
  { form: 'IPv4 CGNAT', address: '100.64.1.1', reason: 'CGNAT' },
  { form: 'IPv4 documentation', address: '192.0.2.1', reason: 'reserved' },
  { form: 'IPv4 benchmarking', address: '198.18.0.1', reason: 'reserved' },
  { form: 'IPv4 multicast', address: '224.0.0.1', reason: 'multicast' },
  { form: 'IPv4 broadcast', address: '255.255.255.255', reason: 'reserved' },
  { form: 'IPv4 public', address: '8.8.8.8', reason: null },
  { form: 'IPv4 public just past 172.16/12', address: '172.32.0.1', reason: null },
  { form: 'IPv4 public just past CGNAT', address: '100.128.0.1', reason: null },
  // Plain IPv6
  { form: 'IPv6 loopback', address: '::1', reason: 'loopback' },
  { form: 'IPv6 loopback, uncompressed', address: '0:0:0:0:0:0:0:1', reason: 'loopback' },
  { form: 'IPv6 unspecified', address: '::', reason: 'unspecified' },
  { form: 'IPv6 unique-local fc00::/7 (fc)', address: 'fc00::1', reason: 'unique-local' },
  { form: 'IPv6 unique-local (AWS metadata fd00:ec2::254)', address: 'fd00:ec2::254', reason: 'unique-local' },
  { form: 'IPv6 link-local', address: 'fe80::1', reason: 'link-local' },
  { form: 'IPv6 link-local with a zone', address: 'fe80::1%eth0', reason: 'link-local' },
  { form: 'IPv6 link-local, end of fe80::/10', address: 'febf::1', reason: 'link-local' },
  { form: 'IPv6 site-local fec0::/10', address: 'fec0::1', reason: 'site-local' },
  { form: 'IPv6 multicast', address: 'ff02::1', reason: 'multicast' },
  { form: 'IPv6 discard 100::/64', address: '100::1', reason: 'reserved' },
  { form: 'IPv6 dummy prefix 100:0:0:1::/64', address: '100:0:0:1::1', reason: 'reserved' },
  { form: 'IPv6 benchmarking 2001:2::/48', address: '2001:2::1', reason: 'reserved' },
  { form: 'IPv6 AMT 2001:3::/32', address: '2001:3::1', reason: 'reserved' },
  { form: 'IPv6 AS112 2001:4:112::/48', address: '2001:4:112::1', reason: 'reserved' },
  { form: 'IPv6 ORCHIDv2 2001:20::/28', address: '2001:20::1', reason: 'reserved' },
  { form: 'IPv6 DRIP 2001:30::/28', address: '2001:30::1', reason: 'reserved' },
  { form: 'IPv6 documentation 2001:db8::/32', address: '2001:db8::1', reason: 'reserved' },
  { form: 'IPv6 documentation 3fff::/20', address: '3fff::1', reason: 'reserved' },
  { form: 'IPv6 SRv6 SIDs 5f00::/16', address: '5f00::1', reason: 'reserved' },
  { form: 'IPv6 outside global unicast 2000::/3', address: '4000::1', reason: 'reserved' },
  { form: 'IPv6 public', address: '2606:4700:4700::1111', reason: null },
  { form: 'IPv6 public in 2001::/16, past 2001::/23', address: '2001:4860:4860::8888', reason: null },
  { form: 'IPv6 public, first past 2001::/23', address: '2001:200::1', reason: null },
  // IPv4-mapped ::ffff:0:0/96: judged as the IPv4 address it maps
  { form: 'IPv4-mapped loopback, dotted', address: '::ffff:127.0.0.1', reason: 'loopback' },
  { form: 'IPv4-mapped loopback, hex', address: '::ffff:7f00:1', reason: 'loopback' },
  { form: 'IPv4-mapped loopback, uncompressed', address: '0:0:0:0:0:ffff:7f00:1', reason: 'loopback' },
  { form: 'IPv4-mapped loopback, upper case', address: '::FFFF:7F00:1', reason: 'loopback' },
  { form: 'IPv4-mapped cloud metadata', address: '::ffff:a9fe:a9fe', reason: 'link-local (cloud metadata)' },
  { form: 'IPv4-mapped private', address: '::ffff:10.0.0.1', reason: 'private' },
  { form: 'IPv4-mapped unspecified', address: '::ffff:0.0.0.0', reason: 'unspecified' },
  { form: 'IPv4-mapped public', address: '::ffff:8.8.8.8', reason: null },
  // IPv4-translated ::ffff:0:0:0/96 (SIIT, RFC 2765): refused whatever it embeds
  { form: 'IPv4-translated loopback, hex', address: '::ffff:0:7f00:1', reason: 'SIIT IPv4-translated' },
  { form: 'IPv4-translated loopback, dotted', address: '::ffff:0:127.0.0.1', reason: 'SIIT IPv4-translated' },
  { form: 'IPv4-translated loopback, uncompressed', address: '0:0:0:0:ffff:0:7f00:1', reason: 'SIIT IPv4-translated' },
  { form: 'IPv4-translated cloud metadata', address: '::ffff:0:a9fe:a9fe', reason: 'SIIT IPv4-translated' },
  { form: 'IPv4-translated public', address: '::ffff:0:808:808', reason: 'SIIT IPv4-translated' },
  // IPv4-compatible ::/96 (deprecated, RFC 4291): refused whatever it embeds
  { form: 'IPv4-compatible loopback, dotted', address: '::127.0.0.1', reason: 'deprecated IPv4-compatible' },
  { form: 'IPv4-compatible loopback, hex', address: '::7f00:1', reason: 'deprecated IPv4-compatible' },
  { form: 'IPv4-compatible cloud metadata', address: '::169.254.169.254', reason: 'deprecated IPv4-compatible' },
  { form: 'IPv4-compatible public', address: '::8.8.8.8', reason: 'deprecated IPv4-compatible' },
  // NAT64 well-known prefix 64:ff9b::/96 (RFC 6052): judged as the IPv4 address it embeds
  { form: 'NAT64 loopback, hex', address: '64:ff9b::7f00:1', reason: 'loopback' },
  { form: 'NAT64 loopback, dotted', address: '64:ff9b::127.0.0.1', reason: 'loopback' },
  { form: 'NAT64 cloud metadata', address: '64:ff9b::a9fe:a9fe', reason: 'link-local (cloud metadata)' },
  { form: 'NAT64 private', address: '64:ff9b::10.0.0.1', reason: 'private' },
  { form: 'NAT64 public', address: '64:ff9b::808:808', reason: null },
  { form: 'NAT64 prefix with non-zero bits 32-95', address: '64:ff9b::1:0:7f00:1', reason: 'reserved' },
  // NAT64 local-use 64:ff9b:1::/48 (RFC 8215): where the IPv4 sits is the network's choice
  { form: 'NAT64 local-use loopback', address: '64:ff9b:1::7f00:1', reason: 'NAT64 local-use' },
  { form: 'NAT64 local-use public', address: '64:ff9b:1::808:808', reason: 'NAT64 local-use' },
  // 6to4 2002::/16 (IPv4 in bits 16-47): refused whatever it embeds
  { form: '6to4 loopback', address: '2002:7f00:1::', reason: '6to4' },
  { form: '6to4 private', address: '2002:c0a8:101::1', reason: '6to4' },
  { form: '6to4 cloud metadata', address: '2002:a9fe:a9fe::1', reason: '6to4' },
  { form: '6to4 public', address: '2002:808:808::1', reason: '6to4' },
  // Teredo 2001::/32: refused whatever it embeds
  { form: 'Teredo, client loopback (obfuscated)', address: '2001:0:4136:e378:8000:63bf:80ff:fffe', reason: 'Teredo' },
  { form: 'Teredo, server loopback', address: '2001:0:7f00:1:8000:63bf:3fff:fdd2', reason: 'Teredo' },
  { form: 'Teredo, client cloud metadata (obfuscated)', address: '2001:0:4136:e378::5601:5601', reason: 'Teredo' },
  { form: 'Teredo, public server and client', address: '2001:0:4136:e378:8000:63bf:f7f7:f7f7', reason: 'Teredo' },
];

/** A URL whose host is the address (IPv6 in brackets); null for a zoned address, which a URL cannot carry. */
export function urlOf(address: string, path = '/h'): string | null {
  if (address.includes('%')) return null;
  return address.includes(':') ? `http://[${address}]${path}` : `http://${address}${path}`;
}
