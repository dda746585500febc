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
import { sql, type Kysely, type Selectable } from 'kysely';
import type { Database, SuppressionEntriesTable } from '../db/schema.js';
import { domainOfEmail, normalizeEmail, stripPlusTag } from './domains.js';

export type SuppressionRow = Selectable<SuppressionEntriesTable>;

export interface SuppressionMatch {
  suppressed: boolean;
  /** The entry that suppresses the address; null when not suppressed or matched only by hash. */
  entry: SuppressionRow | null;
}

/** A secret usable for erasure hashes: at least 32 characters (HARNESS.md, ERASURE_HASH_SECRET). */
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

/**
 * Whether `email` is suppressed in the organization; one indexed query. `secret` is the
 * deployment's ERASURE_HASH_SECRET (erased addresses cannot be recognised without it).
 */
export async function matchSuppression(
  db: Kysely<Database>, organizationId: string, email: string, secret: string | null,
): Promise<SuppressionMatch> {
  const own = normalizeEmail(email);
  const stripped = stripPlusTag(own);
  const domains = coveringDomains(domainOfEmail(own));
  const key = usableErasureSecret(secret);
  const hmac = key ? erasureHmac(key, own) : null;
  const rows = await db.selectFrom('suppression_entries').selectAll()
    .where('organization_id', '=', organizationId)
    .where((eb) => eb.or([
      eb.and([eb('level', '=', 'ADDRESS'), eb('email', 'in', [...new Set([own, stripped])])]),
      ...(domains.length ? [eb.and([eb('level', '=', 'DOMAIN'), eb('email', 'in', domains)])] : []),
      ...(hmac ? [eb('email_hmac', '=', hmac)] : []),
    ]))
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', sql<Date>`now()`)]))
    .execute();
  const rank = (r: SuppressionRow): number => {
    if (r.level === 'ADDRESS' && r.email === own) return 0;
    if (r.level === 'ADDRESS' && r.email === stripped) return 1;
    if (r.level === 'DOMAIN') return 2 + domains.indexOf(r.email ?? ''); // the closest domain first
    return 100; // hash-only
  };
  const best = rows.sort((a, b) => rank(a) - rank(b))[0];
  if (!best) return { suppressed: false, entry: null };
  return { suppressed: true, entry: best.email_hmac !== null && best.email === null ? null : best };
}
