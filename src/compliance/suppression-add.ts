// Adding an address to the suppression list: the one insert every path uses (the API, one-click
// unsubscribe, bounces, complaints, reply intents, actions). A live entry of the address is left
// as it is; an expired one is renewed in place. An erased address is never written down in clear.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { normalizeEmail } from '../crm/domains.js';
import type { EmitInput } from '../platform/events.js';
import { newId } from '../platform/ids.js';

export type SuppressionReason = 'MANUAL_BLOCK' | 'UNSUBSCRIBE' | 'HARD_BOUNCE' | 'COMPLAINT';

export interface Suppressed {
  /** The new (or renewed) entry's id. */
  id: string;
  /** Its `suppression.added` event, for the caller to emit with its own events. */
  event: EmitInput;
}

/** Suppresses the address; null when a live entry of it already exists (nothing changed, no event). */
export async function suppressAddress(
  trx: Tx,
  organizationId: string,
  s: { email: string; reason: SuppressionReason; source: string | null; notes?: string | null },
): Promise<Suppressed | null> {
  const email = normalizeEmail(s.email);
  const r = await sql<{ id: string }>`
    INSERT INTO suppression_entries AS e (organization_id, id, level, email, reason, source, notes)
    VALUES (${organizationId}, ${newId('sup')}, 'ADDRESS', ${email}, ${s.reason}, ${s.source}, ${s.notes ?? null})
    ON CONFLICT (organization_id, level, email) WHERE email IS NOT NULL DO UPDATE
      SET reason = EXCLUDED.reason, source = EXCLUDED.source, notes = EXCLUDED.notes, expires_at = NULL, created_at = now_ms()
      WHERE e.expires_at IS NOT NULL AND e.expires_at <= now()
    RETURNING id`.execute(trx);
  const id = r.rows[0]?.id;
  if (!id) return null;
  return {
    id,
    event: {
      type: 'suppression.added',
      resource: { type: 'SuppressionEntry', id },
      data: { email, level: 'ADDRESS', reason: s.reason, source: s.source },
    },
  };
}
