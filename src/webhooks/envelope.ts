// The event envelope: the body POSTed to webhook endpoints and the item of GET /events.
import { isoNN } from '../platform/ids.js';

export interface EventRow {
  organization_id: string;
  id: string;
  type: string;
  api_version: string;
  data: unknown;
  resource_type: string;
  resource_id: string;
  created_at: Date | string;
}

export function toEnvelope(e: EventRow) {
  return {
    apiVersion: e.api_version,
    id: e.id,
    type: e.type,
    createdAt: isoNN(e.created_at),
    organizationId: e.organization_id,
    data: (e.data ?? {}) as Record<string, unknown>,
    resource: { type: e.resource_type, id: e.resource_id },
  };
}

/** The exact bytes sent (and signed) for an event: the same for every attempt of a delivery. */
export const envelopeBody = (e: EventRow): string => JSON.stringify(toEnvelope(e));
