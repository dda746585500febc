// The SSRF guard itself (src/net/address.ts) over the shared address table; webhooks and research
// run the same table through their own paths (test/webhooks.test.ts, test/research.test.ts).
import { describe, expect, it } from 'vitest';
import { forbiddenReason, resolveTarget, UnsafeTargetError } from '../src/net/address.js';
import { ADDRESS_CASES, urlOf } from './support/ssrf-addresses.js';

const refused = ADDRESS_CASES.filter((c) => c.reason !== null);
const allowed = ADDRESS_CASES.filter((c) => c.reason === null);

describe('the SSRF guard', () => {
  it('classifies every address of the shared table: IPv4, IPv6, and IPv6 embedding IPv4 (mapped, translated, compatible, NAT64, 6to4, Teredo)', () => {
    for (const c of ADDRESS_CASES) expect.soft(forbiddenReason(c.address), `${c.form} (${c.address})`).toBe(c.reason);
  });

  it('refuses a name when any address it resolves to is refused, naming that address and why, and answers the addresses of a public one', async () => {
    for (const c of refused) {
      const lookup = async () => [
        { address: '93.184.215.14', family: 4 as const },
        { address: c.address, family: (c.address.includes(':') ? 6 : 4) as 4 | 6 },
      ];
      const err = await resolveTarget(new URL('https://site.example/'), false, 2000, { lookup }).catch((e: unknown) => e);
      expect(err, c.form).toBeInstanceOf(UnsafeTargetError);
      expect((err as Error).message, c.form).toBe(`site.example resolves to ${c.address}, which is a ${c.reason} address`);
    }
    for (const c of allowed) {
      const lookup = async () => [{ address: c.address, family: (c.address.includes(':') ? 6 : 4) as 4 | 6 }];
      expect((await resolveTarget(new URL('https://site.example/'), false, 2000, { lookup })).addresses[0].address, c.form).toBe(c.address);
    }
  });

  it('allows every address when private targets are allowed, and an exemption lets exactly its address and port through', async () => {
    for (const c of ADDRESS_CASES) {
      const u = urlOf(c.address, '/');
      if (!u) continue;
      expect((await resolveTarget(new URL(u), true, 2000)).addresses, c.form).toHaveLength(1);
    }
    const lookup = async () => [{ address: '::ffff:0:7f00:1', family: 6 as const }];
    const u = new URL('http://site.example:8080/');
    await expect(resolveTarget(u, false, 2000, { lookup, exempt: new Set(['[::ffff:0:7f00:1]:8080']) })).resolves.toBeTruthy();
    await expect(resolveTarget(u, false, 2000, { lookup, exempt: new Set(['[::ffff:0:7f00:1]:8081']) })).rejects.toBeInstanceOf(
      UnsafeTargetError,
    );
    // The exemption names an address, not what it embeds: 127.0.0.1 does not exempt its IPv6 forms.
    await expect(resolveTarget(u, false, 2000, { lookup, exempt: new Set(['127.0.0.1:8080']) })).rejects.toBeInstanceOf(UnsafeTargetError);
  });
});
