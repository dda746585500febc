// A DNS resolver with one deadline for everything asked through it: the answers a piece of work
// needs (the SPF, DKIM, DMARC and ARC records of one inbound message) share a budget, so a slow or
// silent server costs that work the budget at most, whatever the number of lookups. Built on
// node:dns's Resolver (c-ares, not getaddrinfo), pointed at the configured servers
// (INBOUND_DNS_SERVERS) or, without them, at the system's.
import dns from 'node:dns';

/** Resolves one name and record type the way dns.promises.Resolver#resolve does (mailauth's resolver shape). */
export type ResolveFn = (name: string, rrtype: string) => Promise<unknown>;

export interface BudgetedResolver {
  resolve: ResolveFn;
  /** Whether the deadline passed before the work was done (a lookup was refused or cut short by it). */
  expired(): boolean;
  /** Cancels the lookups still running (they fail with ECANCELLED). */
  cancel(): void;
}

/** A lookup the budget did not allow: the DNS error code c-ares gives a timeout. */
const timeout = (name: string) => Object.assign(new Error(`DNS budget spent before ${name} was answered`), { code: dns.TIMEOUT });

/**
 * A resolver whose lookups all end by `budgetMs` from now: one still running then fails with a
 * timeout, and any started after fails at once. Each lookup waits at most `perTryMs` per try.
 */
export function budgetedResolver(servers: readonly string[] | null, budgetMs: number, perTryMs = 1000): BudgetedResolver {
  const r = new dns.promises.Resolver({ timeout: Math.min(perTryMs, budgetMs), tries: 2 });
  if (servers?.length) r.setServers([...servers]);
  const deadline = Date.now() + budgetMs;
  let expired = false;
  const resolve: ResolveFn = (name, rrtype) => {
    const left = deadline - Date.now();
    if (left <= 0) {
      expired = true;
      return Promise.reject(timeout(name));
    }
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        expired = true;
        reject(timeout(name));
      }, left);
      timer.unref();
    });
    const asked = Promise.resolve().then(() => (r.resolve as (n: string, t: string) => Promise<unknown>).call(r, name, rrtype));
    return Promise.race([asked, late]).finally(() => clearTimeout(timer));
  };
  return { resolve, expired: () => expired, cancel: () => r.cancel() };
}
