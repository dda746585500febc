// Contact lists: the public ContactList shape.
import type { Selectable } from 'kysely';
import type { ContactListsTable } from '../../db/schema.js';
import { iso, isoNN } from '../platform/ids.js';

export type ListRow = Selectable<ContactListsTable>;

/** The public ContactList shape; `userId` falls back to the organization owner for unattributed keys. */
export function toContactList(r: ListRow, ownerId: string) {
  return {
    id: r.id,
    organizationId: r.organization_id,
    userId: r.user_id ?? ownerId,
    name: r.name,
    sourceType: r.source_type,
    description: r.description,
    connectionPoint: r.connection_point,
    goal: r.goal,
    archivedAt: iso(r.archived_at),
    createdAt: isoNN(r.created_at),
    updatedAt: isoNN(r.updated_at),
  };
}
