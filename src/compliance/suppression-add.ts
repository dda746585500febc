// Adding to the suppression list: the one insert every path uses (the API, one-click unsubscribe,
// bounces, complaints, reply intents, actions, the operator's DOMAIN entries, and erasure's
// hash-only entry). A live entry is left as it is; an expired one is renewed in place. An erased
// address is never written down in clear.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { normalizeEmail } from '../crm/domains.js';
import type { EmitInput } from '../platform/events.js';
import { newId } from '../platform/ids.js';

export type SuppressionReason = 'MANUAL_BLOCK' | 'UNSUBSCRIBE' | 'HARD_BOUNCE' | 'COMPLAINT';

/** One address (normalized here). */
export interface AddressSuppression {
  email: string;
  reason: SuppressionReason;
  source: string | null;
  notes?: string | null;
  /** When the entry stops applying; none (permanent) unless given. */
  expiresAt?: Date | null;
}
/** Every address at a domain and its subdomains (the domain normalized by the caller, normalizeDomain). */
export interface DomainSuppression {
  domain: string;
  reason: SuppressionReason;
  source: string | null;
}
/** An erased address, by its hash alone (erasureHmac); reason ERASURE, never in clear. */
export interface ErasureSuppression {
  erasureHmac: string;
}

export interface Suppressed {
  /** The new (or renewed) entry's id. */
  id: string;
  /** Its `suppression.added` event, for the caller to emit with its own events. */
  event: EmitInput;
}

/**
 * Suppresses the address (or domain); null when a live entry of it already exists (nothing
 * changed, no event). An erased address's hash entry has no event: the erasure announces itself
 * (contact.erased), and its entry shows no address.
 */
export async function suppressAddress(
  trx: Tx,
  organizationId: string,
  s: AddressSuppression | DomainSuppression,
): Promise<Suppressed | null>;
export async function suppressAddress(trx: Tx, organizationId: string, s: ErasureSuppression): Promise<{ id: string } | null>;
export async function suppressAddress(
  trx: Tx,
  organizationId: string,
  s: AddressSuppression | DomainSuppression | ErasureSuppression,
): Promise<Suppressed | { id: string } | null> {
  const email = 'email' in s ? normalizeEmail(s.email) : null;
  const e =
    'erasureHmac' in s
      ? { level: 'ADDRESS', email: null, hmac: s.erasureHmac, reason: 'ERASURE', source: 'erasure', notes: null, expiresAt: null }
      : 'domain' in s
        ? { level: 'DOMAIN', email: s.domain, hmac: null, reason: s.reason, source: s.source, notes: null, expiresAt: null }
        : {
            level: 'ADDRESS',
            email,
            hmac: null,
            reason: s.reason,
            source: s.source,
            notes: s.notes ?? null,
            expiresAt: s.expiresAt ?? null,
          };
  // An entry is the one of its address (or domain) at its level, or the one of its hash.
  const key =
    e.hmac === null
      ? sql`(organization_id, level, email) WHERE email IS NOT NULL`
      : sql`(organization_id, email_hmac) WHERE email_hmac IS NOT NULL`;
  const r = await sql<{ id: string }>`
    INSERT INTO suppression_entries AS e (organization_id, id, level, email, email_hmac, reason, source, notes, expires_at)
    VALUES (${organizationId}, ${newId('sup')}, ${e.level}, ${e.email}, ${e.hmac}, ${e.reason}, ${e.source}, ${e.notes}, ${e.expiresAt}::timestamptz)
    ON CONFLICT ${key} DO UPDATE
      SET reason = EXCLUDED.reason, source = EXCLUDED.source, notes = EXCLUDED.notes, expires_at = EXCLUDED.expires_at, created_at = now_ms()
      WHERE e.expires_at IS NOT NULL AND e.expires_at <= now()
    RETURNING id`.execute(trx);
  const id = r.rows[0]?.id;
  if (!id) return null;
  if ('erasureHmac' in s) return { id };
  const data =
    'domain' in s
      ? { domain: s.domain, level: 'DOMAIN', reason: s.reason }
      : { email, level: 'ADDRESS', reason: s.reason, source: s.source };
  return { id, event: { type: 'suppression.added', resource: { type: 'SuppressionEntry', id }, data } };
}
