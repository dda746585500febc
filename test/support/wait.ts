// The one wait of the test suite: polls until a condition holds, or fails naming what it waited for.

/** Waits until fn returns a truthy value (every intervalMs), and returns it; throws after timeoutMs. */
export async function waitFor<T>(
  fn: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  timeoutMs = 15_000,
  what = 'condition',
  intervalMs = 50,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
