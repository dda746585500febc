// The one suppression matching rule, used by every path that asks "may this address be
// contacted?" (GET /suppression?email=, draft approval and sending, actions). An address is
// suppressed by:
//   1. its own ADDRESS entry;
//   2. the ADDRESS entry of its plus-tag-stripped form (`ada+news@x.com` is covered by `ada@x.com`);
//   3. a DOMAIN entry for its domain or a parent domain (`@x.com` covers `ada@eu.x.com`);
//   4. the hash-only entry of an erased address: HMAC-SHA256(ERASURE_HASH_SECRET, stripped form).
// Expired entries (expiresAt in the past) do not count. The first match in that order is the
// answer's entry; a hash-only match has no entry to show (the address is not stored).
import crypto from 'node:crypto';
import { type Kysely, type Selectable, sql } from 'kysely';
import type { Database } from '../../db/database.js';
import type { SuppressionEntries } from '../../db/schema.js';
import { domainOfEmail, normalizeEmail, stripPlusTag } from '../crm/domains.js';

export type SuppressionRow = Selectable<SuppressionEntries>;

export interface SuppressionMatch {
  suppressed: boolean;
  /** The entry that suppresses the address; null when not suppressed or matched only by hash. */
  entry: SuppressionRow | null;
}

/** A secret usable for erasure hashes: at least 32 characters (ERASURE_HASH_SECRET, docs/configuration.md). */
export function usableErasureSecret(secret: string | null | undefined): string | null {
  return secret && secret.length >= 32 ? secret : null;
}

/** The stored hash of an erased address: hex HMAC-SHA256 over its normalized, plus-tag-stripped form. */
export function erasureHmac(secret: string, email: string): string {
  return crypto.createHmac('sha256', secret).update(stripPlusTag(email)).digest('hex');
}

/** The domain and its parents down to two labels: `a.b.x.com` -> [a.b.x.com, b.x.com, x.com]. */
export function coveringDomains(domain: string): string[] {
  const labels = domain.split('.').filter(Boolean);
  const out: string[] = [];
  for (let i = 0; i + 2 <= labels.length; i += 1) out.push(labels.slice(i).join('.'));
  return out;
}

/** What may suppress an address: its own and plus-tag-stripped forms, covering domains, its erasure hash. */
function keysOf(email: string, secret: string | null) {
  const own = normalizeEmail(email);
  const key = usableErasureSecret(secret);
  return { own, stripped: stripPlusTag(own), domains: coveringDomains(domainOfEmail(own)), hmac: key ? erasureHmac(key, own) : null };
}
type Keys = ReturnType<typeof keysOf>;

/** The organization's live suppression entries that may match any of the addresses; one indexed query. */
async function candidateEntries(db: Kysely<Database>, organizationId: string, keys: Keys[]): Promise<SuppressionRow[]> {
  const addresses = [...new Set(keys.flatMap((k) => [k.own, k.stripped]))];
  const domains = [...new Set(keys.flatMap((k) => k.domains))];
  const hmacs = [...new Set(keys.flatMap((k) => (k.hmac ? [k.hmac] : [])))];
  if (addresses.length === 0) return [];
  return db
    .selectFrom('suppression_entries')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where((eb) =>
      eb.or([
        eb.and([eb('level', '=', 'ADDRESS'), eb('email', 'in', addresses)]),
        ...(domains.length ? [eb.and([eb('level', '=', 'DOMAIN'), eb('email', 'in', domains)])] : []),
        ...(hmacs.length ? [eb('email_hmac', 'in', hmacs)] : []),
      ]),
    )
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', sql<Date>`now()`)]))
    .execute();
}

/** The entries among `rows` that suppress the address of `k`, the one to show first. */
function matching(k: Keys, rows: SuppressionRow[]): SuppressionRow[] {
  const rank = (r: SuppressionRow): number => {
    if (r.level === 'ADDRESS' && r.email === k.own) return 0;
    if (r.level === 'ADDRESS' && r.email === k.stripped) return 1;
    if (r.level === 'DOMAIN' && k.domains.includes(r.email ?? '')) return 2 + k.domains.indexOf(r.email ?? ''); // the closest domain first
    if (k.hmac !== null && r.email_hmac === k.hmac) return 100; // hash-only
    return -1;
  };
  return rows
    .map((r) => [rank(r), r] as const)
    .filter(([n]) => n >= 0)
    .sort((a, b) => a[0] - b[0])
    .map(([, r]) => r);
}

/**
 * Whether `email` is suppressed in the organization; one indexed query. `secret` is the
 * deployment's ERASURE_HASH_SECRET (erased addresses cannot be recognised without it).
 */
export async function matchSuppression(
  db: Kysely<Database>,
  organizationId: string,
  email: string,
  secret: string | null,
): Promise<SuppressionMatch> {
  const k = keysOf(email, secret);
  const best = matching(k, await candidateEntries(db, organizationId, [k]))[0];
  if (!best) return { suppressed: false, entry: null };
  return { suppressed: true, entry: best.email_hmac !== null && best.email === null ? null : best };
}

/** The addresses among `emails` (normalized) that are suppressed, by the same rule; one query for all. */
export async function suppressedAmong(
  db: Kysely<Database>,
  organizationId: string,
  emails: string[],
  secret: string | null,
): Promise<Set<string>> {
  const keys = emails.map((e) => keysOf(e, secret));
  const rows = await candidateEntries(db, organizationId, keys);
  return new Set(keys.filter((k) => matching(k, rows).length > 0).map((k) => k.own));
}
