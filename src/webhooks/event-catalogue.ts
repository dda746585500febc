// The event-type catalogue (GET /webhooks/events): every catalogued type with its group and
// whether the service emits it, sorted by type.
import { EVENT_API_VERSION, EVENT_GROUP, EVENT_TYPES, NEVER_EMITTED } from '../platform/spec.js';
import type { EventType } from './endpoints.js';

const CATALOGUE = EVENT_TYPES.map((type) => ({
  type: type as EventType,
  group: EVENT_GROUP.get(type) ?? 'Other',
  emitted: !NEVER_EMITTED.has(type),
})).sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0));

export const eventCatalogue = () => ({ apiVersion: EVENT_API_VERSION as '2026-07-21', data: CATALOGUE });
