// A suppression entry as the API shows it (SuppressionEntry).
import type { Selectable } from 'kysely';
import type { SuppressionEntries } from '../../db/schema.js';
import { iso, isoNN } from '../platform/ids.js';

export type SuppressionRow = Selectable<SuppressionEntries>;
type Reason = 'MANUAL_BLOCK' | 'UNSUBSCRIBE' | 'HARD_BOUNCE' | 'COMPLAINT' | 'ERASURE';

/** DOMAIN entries show their domain as `@domain` in `email`; hash-only (erased) entries show "". */
export function toSuppressionEntry(r: SuppressionRow) {
  return {
    id: r.id,
    organizationId: r.organization_id,
    email: r.level === 'DOMAIN' ? `@${r.email}` : (r.email ?? ''),
    reason: r.reason as Reason,
    source: r.source,
    notes: r.notes,
    expiresAt: iso(r.expires_at),
    createdAt: isoNN(r.created_at),
    level: r.level as 'ADDRESS' | 'DOMAIN',
  };
}
