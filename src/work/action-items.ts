// Opening action items: the one insert every signal goes through (an interested reply, a meeting
// request, an overdue deal next step, an out-of-office return, an advisory action, the operator).
// A signal names itself with `sourceKey`, so the same signal never opens a second item.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { heldOutUnits } from '../analytics/holdout.js';
import { newId } from '../platform/ids.js';

export type ActionItemPriority = 'urgent' | 'high' | 'medium' | 'low';

export interface NewActionItem {
  actionType: string;
  title: string;
  description?: string | null;
  priority: ActionItemPriority;
  salesPersonId: string;
  aiGenerated: boolean;
  entityType?: string | null;
  entityId?: string | null;
  expectedImpactCents?: number | null;
  expiresAt?: Date | string | null;
  /** The signal that opened the item (e.g. `reply:<messageId>`); a second open with the same key opens nothing. */
  sourceKey?: string | null;
  details?: Record<string, unknown> | null;
}

/**
 * Opens a pending item in the caller's transaction; returns its id, or null when its signal already
 * opened one or when the item is AI-generated about a deal held out of the ai_actions experiment
 * (src/analytics/holdout.ts: such a deal gets no AI items, and this is where it is first exposed).
 */
export async function openActionItem(trx: Tx, organizationId: string, item: NewActionItem): Promise<string | null> {
  if (
    item.aiGenerated &&
    item.entityType === 'Deal' &&
    item.entityId &&
    (await heldOutUnits(trx, organizationId, 'ai_actions', [item.entityId])).size > 0
  )
    return null;
  const id = newId('act');
  const r = await sql<{ id: string }>`
    INSERT INTO action_items (organization_id, id, action_type, title, description, priority, sales_person_id, ai_generated,
      entity_type, entity_id, expected_impact_cents, expires_at, source_key, details)
    VALUES (${organizationId}, ${id}, ${item.actionType}, ${item.title}, ${item.description ?? null}, ${item.priority}, ${item.salesPersonId},
      ${item.aiGenerated}, ${item.entityType ?? null}, ${item.entityId ?? null}, ${item.expectedImpactCents ?? null},
      ${item.expiresAt ?? null}::timestamptz, ${item.sourceKey ?? null}, ${item.details ? JSON.stringify(item.details) : null}::jsonb)
    ON CONFLICT (organization_id, source_key) WHERE source_key IS NOT NULL DO NOTHING
    RETURNING id`.execute(trx);
  return r.rows[0]?.id ?? null;
}
