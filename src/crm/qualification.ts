// The one writer of a contact's qualification status changes: every path that moves
// `contacts.qualification_status` (PATCH /contacts/{id}, lead conversion, a reply that qualifies)
// reports the move here, which emits `contact.stage_changed` {contactId, from, to, source, ...}
// in the caller's transaction. Nothing is emitted when the status did not change.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { type EmitInput, emitMany } from '../platform/events.js';
import { isLiveContact } from './live-contacts.js';

export type QualificationStatus = 'NEW' | 'CONTACTED' | 'QUALIFIED' | 'UNQUALIFIED' | 'NURTURE' | 'CUSTOMER';

/** What moved the status: `api` (PATCH /contacts/{id}), `lead_conversion`, `reply` (an interested or meeting-request reply). */
export type StageChangeSource = 'api' | 'lead_conversion' | 'reply';

export interface StageChange {
  contactId: string;
  from: string;
  to: string;
  /** Extra facts of the cause (leadId, messageId, intent), added to the event's data. */
  extra?: Record<string, unknown>;
}

/** Emits contact.stage_changed for each change whose status really moved; returns how many. */
export async function recordStageChanges(
  trx: Tx,
  organizationId: string,
  source: StageChangeSource,
  changes: StageChange[],
): Promise<number> {
  const events: EmitInput[] = changes
    .filter((c) => c.from !== c.to)
    .map((c) => ({
      type: 'contact.stage_changed',
      resource: { type: 'Contact', id: c.contactId },
      data: { contactId: c.contactId, from: c.from, to: c.to, source, ...(c.extra ?? {}) },
    }));
  await emitMany(trx, organizationId, events);
  return events.length;
}

/**
 * Moves live contacts (neither soft-deleted nor erased) to `to`, except those already in it or in
 * one of `keep` (a conversion never demotes a CUSTOMER), set-based, and emits one
 * contact.stage_changed per contact moved. Returns the moves made.
 */
export async function setQualificationStatus(
  trx: Tx,
  organizationId: string,
  contactIds: string[],
  to: QualificationStatus,
  source: StageChangeSource,
  opts: { keep?: QualificationStatus[]; extra?: Record<string, unknown> } = {},
): Promise<StageChange[]> {
  if (contactIds.length === 0) return [];
  const keep = [to, ...(opts.keep ?? [])];
  const moved = await sql<{ id: string; from: string }>`
    WITH old AS (
      SELECT id, qualification_status FROM contacts
      WHERE organization_id = ${organizationId} AND id = ANY(${contactIds}::text[])
        AND ${isLiveContact()} AND qualification_status <> ALL(${keep}::text[])
      FOR UPDATE
    )
    UPDATE contacts c SET qualification_status = ${to}, updated_at = now_ms()
    FROM old WHERE c.organization_id = ${organizationId} AND c.id = old.id
    RETURNING c.id, old.qualification_status AS "from"`.execute(trx);
  const changes = moved.rows.map((r) => ({ contactId: r.id, from: r.from, to, extra: opts.extra }));
  await recordStageChanges(trx, organizationId, source, changes);
  return changes;
}
