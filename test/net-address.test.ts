// The SSRF guard itself (src/net/address.ts) over the shared address table; webhooks and research
// run the same table through their own paths (test/webhooks.test.ts, test/research.test.ts).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { forbiddenReason, resolveTarget, UnsafeTargetError } from '../src/net/address.js';
import { ADDRESS_CASES, urlOf } from './support/ssrf-addresses.js';

const refused = ADDRESS_CASES.filter((c) => c.reason !== null);
const allowed = ADDRESS_CASES.filter((c) => c.reason === null);

describe('the SSRF guard', () => {
  it('classifies every address of the shared table: IPv4, IPv6, and IPv6 embedding IPv4 (mapped, translated, compatible, NAT64, 6to4, Teredo)', () => {
    for (const c of ADDRESS_CASES) expect.soft(forbiddenReason(c.address), `${c.form} (${c.address})`).toBe(c.reason);
  });

  it('judges an IPv4 address the same in every mapped and NAT64 spelling, refuses the other embeddings of any IPv4, and reads every spelling of an IPv6 address alike', () => {
    const hex = (v4: string) => {
      const [a, b, c, d] = v4.split('.').map(Number);
      return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
    };
    fc.assert(
      fc.property(fc.ipV4(), (v4) => {
        const verdict = forbiddenReason(v4);
        for (const form of [`::ffff:${v4}`, `::ffff:${hex(v4)}`, `0:0:0:0:0:FFFF:${v4}`, `64:ff9b::${v4}`, `64:ff9b:0:0:0:0:${hex(v4)}`])
          expect(forbiddenReason(form), form).toBe(verdict);
        for (const form of [`::ffff:0:${v4}`, `::${hex(v4)}`, `64:ff9b:1::${v4}`, `2002:${hex(v4)}::1`, `2001:0:${hex(v4)}::1`])
          expect(forbiddenReason(form), form).not.toBeNull();
      }),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 8, maxLength: 8 }), (groups) => {
        const full = groups.map((g) => g.toString(16)).join(':');
        const verdict = forbiddenReason(full);
        expect(verdict).not.toBe('not an IP address');
        const padded = groups.map((g) => g.toString(16).padStart(4, '0').toUpperCase()).join(':');
        const compressed = new URL(`http://[${full}]/`).hostname.slice(1, -1);
        for (const form of [padded, compressed, `${full}%eth0`]) expect(forbiddenReason(form), form).toBe(verdict);
      }),
      { numRuns: 500 },
    );
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
