// The fast epoch-milliseconds formatter of src/platform/ids.ts writes exactly what Date.toISOString does.
import { describe, expect, it } from 'vitest';
import { msIso, msJson } from '../src/platform/ids.js';

describe('msIso / msJson', () => {
  it('match Date.toISOString over the whole range, day boundaries and the fallbacks included', () => {
    const samples: number[] = [
      0, 1, 86_399_999, 86_400_000, 951_782_400_000 /* 2000-02-29 */, 253_402_300_799_999, 253_402_300_800_000, -1, -86_400_001, 1.5,
      951_782_400_000.5,
    ];
    let seed = 42;
    const rand = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    for (let i = 0; i < 20_000; i += 1) samples.push(Math.floor(rand() * 4_102_444_800_000)); // 1970..2100
    for (let i = 0; i < 2_000; i += 1) samples.push(1_764_000_000_000 + Math.floor(rand() * 3 * 86_400_000)); // runs within a few days
    for (const ms of samples) {
      expect(msIso(ms)).toBe(new Date(ms).toISOString());
      expect(msJson(ms)).toBe(JSON.stringify(new Date(ms).toISOString()));
    }
    expect(msIso(null)).toBeNull();
    expect(msJson(null)).toBe('null');
    expect(() => msIso(Number.NaN)).toThrow(RangeError);
  });
});
