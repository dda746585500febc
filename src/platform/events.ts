// The one event emitter. Every handler emits through it inside its own transaction: the event
// row and the fan-out job commit with the change, or not at all.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { newId } from './ids.js';
import { EVENT_API_VERSION, isEventType, NEVER_EMITTED } from './spec.js';

export interface EmitInput {
  type: string;
  resource: { type: string; id: string };
  data: Record<string, unknown>;
}

export async function emit(trx: Tx, organizationId: string, e: EmitInput): Promise<string> {
  return (await emitMany(trx, organizationId, [e]))[0];
}

/**
 * Emits several events in one round trip (batch work such as draft generation): the event rows,
 * one fan-out job per event whose type some active endpoint of the organization subscribes to,
 * and one run_rules job per event whose type an enabled custom rule of the organization triggers on.
 * Returns the event ids in order.
 */
export async function emitMany(trx: Tx, organizationId: string, events: EmitInput[]): Promise<string[]> {
  if (events.length === 0) return [];
  for (const e of events) {
    if (!isEventType(e.type) || NEVER_EMITTED.has(e.type)) throw new Error(`emit: ${e.type} is not an emitted event type`);
  }
  const ids = events.map(() => newId('evt'));
  // Most events have no subscriber and trigger no rule: the fan-out job is added only where an
  // active endpoint subscribes to the type, the run_rules job only where an enabled rule of the
  // organization triggers on it (never for rule.* events: rules do not trigger rules). Both jobs
  // run after this transaction commits.
  await sql`
    WITH base AS MATERIALIZED (
      -- After every event of the organization this transaction can see (one index probe): two
      -- emits of one transaction, or of two requests one after the other, within one millisecond
      -- would otherwise tie on time, and the log would show them in the random order of their ids.
      SELECT GREATEST(t.now, (SELECT max(created_at) + interval '1 millisecond' FROM events
                              WHERE organization_id = ${organizationId} AND created_at >= t.now)) AS at
      FROM (SELECT now_ms() AS now) t
    ), ev AS (
      INSERT INTO events (organization_id, id, type, api_version, data, resource_type, resource_id, created_at)
      -- A millisecond apart, so the log (newest first, by time) keeps the order they were emitted in.
      SELECT ${organizationId}, e.id, e.type, ${EVENT_API_VERSION}, e.data, e.resource_type, e.resource_id, base.at + (e.n - 1) * interval '1 millisecond'
      FROM unnest(${ids}::text[], ${events.map((e) => e.type)}::text[], ${events.map((e) => JSON.stringify(e.data))}::jsonb[],
                  ${events.map((e) => e.resource.type)}::text[], ${events.map((e) => e.resource.id)}::text[])
           WITH ORDINALITY AS e(id, type, data, resource_type, resource_id, n), base
      ORDER BY e.n
      RETURNING id, type
    )
    SELECT enqueue_job('fanout_event', json_build_object('organizationId', ${organizationId}::text, 'eventId', ev.id))
    FROM ev
    WHERE EXISTS (
      SELECT 1 FROM webhook_endpoints w
      WHERE w.organization_id = ${organizationId} AND w.status = 'active' AND ev.type = ANY (w.event_types)
    )
    UNION ALL
    SELECT enqueue_job('run_rules', json_build_object('organizationId', ${organizationId}::text, 'eventId', ev.id))
    FROM ev
    WHERE ev.type NOT LIKE 'rule.%' AND EXISTS (
      SELECT 1 FROM rules r
      WHERE r.organization_id = ${organizationId} AND r.trigger_event_type = ev.type AND r.enabled
    )`.execute(trx);
  return ids;
}

/** The audit trail for changes that emit no event (list deletion, erasure). */
export async function audit(
  trx: Tx,
  organizationId: string,
  a: {
    action: string;
    resource: { type: string; id: string };
    keyId?: string | null;
    userId?: string | null;
    details?: Record<string, unknown>;
  },
): Promise<void> {
  await trx
    .insertInto('audit_log')
    .values({
      organization_id: organizationId,
      id: newId('aud'),
      actor_key_id: a.keyId ?? null,
      actor_user_id: a.userId ?? null,
      action: a.action,
      resource_type: a.resource.type,
      resource_id: a.resource.id,
      details: JSON.stringify(a.details ?? {}),
    })
    .execute();
}
