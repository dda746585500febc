// The platform event log as GET /events reads it: newest first, each item the envelope webhooks
// receive (envelope.ts).
import type { Tx } from '../../db/database.js';
import type { operations } from '../http/handler.js';
import { keyset, page } from '../http/paging.js';
import { invalid } from '../http/problems.js';
import { isEventType } from '../platform/spec.js';
import { toEnvelope } from './envelope.js';

type Event = operations['listEvents']['responses'][200]['content']['application/json']['data'][number];
export type EventFilter = NonNullable<operations['listEvents']['parameters']['query']>;

/** Newest first; filters AND-combined, each backed by an index leading with organization_id. */
export async function listEvents(trx: Tx, organizationId: string, filter: EventFilter) {
  const limit = filter.limit ?? 50;
  const types = filter.type !== undefined ? [...new Set(filter.type.split(','))] : undefined;
  const unknown = (types ?? []).filter((t) => !isEventType(t));
  if (unknown.length > 0) throw invalid(`Unknown event type ${unknown.join(', ')}; see GET /webhooks/events.`, 'type');
  const after = filter.createdAfter !== undefined ? new Date(filter.createdAfter) : undefined;
  const before = filter.createdBefore !== undefined ? new Date(filter.createdBefore) : undefined;
  if (after && Number.isNaN(after.getTime())) throw invalid('createdAfter is not a valid date-time.', 'createdAfter');
  if (before && Number.isNaN(before.getTime())) throw invalid('createdBefore is not a valid date-time.', 'createdBefore');
  if (after && before && after.getTime() >= before.getTime())
    throw invalid('createdAfter must be earlier than createdBefore.', 'createdAfter');
  let q = trx.selectFrom('events').selectAll().where('organization_id', '=', organizationId);
  if (types) q = q.where('type', 'in', types);
  if (filter.resourceType !== undefined) q = q.where('resource_type', '=', filter.resourceType);
  if (filter.resourceId !== undefined) q = q.where('resource_id', '=', filter.resourceId);
  if (after) q = q.where('created_at', '>=', after);
  if (before) q = q.where('created_at', '<', before);
  const rows = await keyset(q, { cursor: filter.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return page(
    rows,
    limit,
    (r) => ({ at: r.created_at, id: r.id }),
    (r) => toEnvelope(r) as Event,
  );
}
