// The arithmetic of analytics answers: rates in percent, and the 95% interval of a difference of
// two proportions by Newcombe's hybrid score method (Newcombe 1998, method 10), which stays inside
// [-1, 1] and behaves at 0 and n successes where the textbook Wald interval does not.

/** The two-sided 95% normal quantile. */
export const Z95 = 1.959963984540054;

/** Rounded to one decimal place. */
export const round1 = (v: number): number => Math.round(v * 10) / 10;

/** 100 x num / den rounded to one decimal, or null when the denominator is 0 (never 0 for "unknown"). */
export function pct(num: number, den: number): number | null {
  return den === 0 ? null : round1((100 * num) / den);
}

/** Wilson score interval of x successes in n trials (n > 0), as proportions; exactly 0 at x = 0 and 1 at x = n. */
export function wilson(x: number, n: number, z = Z95): { low: number; high: number } {
  const p = x / n;
  const z2 = z * z;
  const centre = p + z2 / (2 * n);
  const spread = z * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n));
  const denom = 1 + z2 / n;
  return { low: x === 0 ? 0 : (centre - spread) / denom, high: x === n ? 1 : (centre + spread) / denom };
}

/**
 * The difference d = x1/n1 - x2/n2 and its 95% interval by the hybrid score method:
 * L = d - sqrt((p1-l1)^2 + (u2-p2)^2), U = d + sqrt((u1-p1)^2 + (p2-l2)^2), with (l, u) each
 * arm's Wilson limits. Null when either arm is empty.
 */
export function newcombeDifference(x1: number, n1: number, x2: number, n2: number): { d: number; low: number; high: number } | null {
  if (n1 <= 0 || n2 <= 0) return null;
  const p1 = x1 / n1;
  const p2 = x2 / n2;
  const a = wilson(x1, n1);
  const b = wilson(x2, n2);
  const d = p1 - p2;
  return {
    d,
    low: d - Math.sqrt((p1 - a.low) ** 2 + (b.high - p2) ** 2),
    high: d + Math.sqrt((a.high - p1) ** 2 + (p2 - b.low) ** 2),
  };
}
