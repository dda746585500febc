// The platform event log (tag events): GET /events. (GET /usage, of the same tag, is not here.)
import type { Handler, operations } from '../src/http/handler.js';
import { keyset, page } from '../src/http/paging.js';
import { invalid } from '../src/http/problems.js';
import { isEventType } from '../src/platform/spec.js';
import { toEnvelope } from '../src/webhooks/envelope.js';

type Event = operations['listEvents']['responses'][200]['content']['application/json']['data'][number];

/** Newest first; filters AND-combined, each backed by an index leading with organization_id. */
const listEvents: Handler<'listEvents'> = async ({ trx, auth, query }) => {
  const limit = query.limit ?? 50;
  const types = query.type !== undefined ? [...new Set(query.type.split(','))] : undefined;
  const unknown = (types ?? []).filter((t) => !isEventType(t));
  if (unknown.length > 0) throw invalid(`Unknown event type ${unknown.join(', ')}; see GET /webhooks/events.`, 'type');
  const after = query.createdAfter !== undefined ? new Date(query.createdAfter) : undefined;
  const before = query.createdBefore !== undefined ? new Date(query.createdBefore) : undefined;
  if (after && Number.isNaN(after.getTime())) throw invalid('createdAfter is not a valid date-time.', 'createdAfter');
  if (before && Number.isNaN(before.getTime())) throw invalid('createdBefore is not a valid date-time.', 'createdBefore');
  if (after && before && after.getTime() >= before.getTime())
    throw invalid('createdAfter must be earlier than createdBefore.', 'createdAfter');
  let q = trx.selectFrom('events').selectAll().where('organization_id', '=', auth.organizationId);
  if (types) q = q.where('type', 'in', types);
  if (query.resourceType !== undefined) q = q.where('resource_type', '=', query.resourceType);
  if (query.resourceId !== undefined) q = q.where('resource_id', '=', query.resourceId);
  if (after) q = q.where('created_at', '>=', after);
  if (before) q = q.where('created_at', '<', before);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return {
    status: 200,
    body: page(
      rows,
      limit,
      (r) => ({ at: r.created_at, id: r.id }),
      (r) => toEnvelope(r) as Event,
    ),
  };
};

export const eventHandlers = { listEvents };
