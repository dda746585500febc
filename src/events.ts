// The one event emitter. Every handler emits through it inside its own transaction: the event
// row and the fan-out job commit with the change, or not at all.
import { sql } from 'kysely';
import type { Tx } from '../db/database.js';
import { newId } from './ids.js';
import { EVENT_API_VERSION, NEVER_EMITTED, isEventType } from './spec.js';

export interface EmitInput {
  type: string;
  resource: { type: string; id: string };
  data: Record<string, unknown>;
}

export async function emit(trx: Tx, organizationId: string, e: EmitInput): Promise<string> {
  if (!isEventType(e.type) || NEVER_EMITTED.has(e.type)) throw new Error(`emit: ${e.type} is not an emitted event type`);
  const id = newId('evt');
  // One round trip: the event row, and a fan-out job only when some active endpoint of the
  // organization subscribes to the type (most events have no subscriber).
  await sql`
    WITH ev AS (
      INSERT INTO events (organization_id, id, type, api_version, data, resource_type, resource_id)
      VALUES (${organizationId}, ${id}, ${e.type}, ${EVENT_API_VERSION}, ${JSON.stringify(e.data)}::jsonb, ${e.resource.type}, ${e.resource.id})
      RETURNING id
    )
    SELECT enqueue_job('fanout_event', json_build_object('organizationId', ${organizationId}::text, 'eventId', ev.id))
    FROM ev
    WHERE EXISTS (
      SELECT 1 FROM webhook_endpoints w
      WHERE w.organization_id = ${organizationId} AND w.status = 'active' AND ${e.type} = ANY (w.event_types)
    )`.execute(trx);
  return id;
}

/** The audit trail for changes that emit no event (list deletion, erasure). */
export async function audit(
  trx: Tx, organizationId: string,
  a: { action: string; resource: { type: string; id: string }; keyId?: string | null; userId?: string | null; details?: Record<string, unknown> },
): Promise<void> {
  await trx.insertInto('audit_log').values({
    organization_id: organizationId, id: newId('aud'), actor_key_id: a.keyId ?? null, actor_user_id: a.userId ?? null,
    action: a.action, resource_type: a.resource.type, resource_id: a.resource.id, details: JSON.stringify(a.details ?? {}),
  }).execute();
}
