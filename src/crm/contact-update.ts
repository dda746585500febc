// PATCH /contacts/{id}: the fields a live contact's owner may change, and the stage change it records.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { Handler } from '../http/handler.js';
import { invalid, notFound } from '../http/problems.js';
import { isLiveContact } from './live-contacts.js';
import { recordStageChanges } from './qualification.js';

const PATCHABLE = {
  name: 'name',
  title: 'title',
  phone: 'phone',
  notes: 'notes',
  leadSource: 'lead_source',
  companyId: 'company_id',
  qualificationStatus: 'qualification_status',
  fitScore: 'fit_score',
  urgencyScore: 'urgency_score',
} as const;

type ContactChange = Parameters<Handler<'updateContact'>>[0]['body'];

/** Applies the fields that differ from the stored ones; `updated` says whether any did. 404 unless live. */
export async function changeContact(trx: Tx, organizationId: string, id: string, body: ContactChange) {
  const org = organizationId;
  const current = await trx
    .selectFrom('contacts')
    .selectAll()
    .where('organization_id', '=', org)
    .where('id', '=', id)
    .where(isLiveContact())
    .forUpdate()
    .executeTakeFirst();
  if (!current) throw notFound('contact');
  if (body.companyId !== undefined && body.companyId !== null) {
    const co = await trx
      .selectFrom('companies')
      .select('id')
      .where('organization_id', '=', org)
      .where('id', '=', body.companyId)
      .executeTakeFirst();
    if (!co) throw invalid('companyId names no company of this organization.', 'body.companyId');
  }
  const changes: Record<string, unknown> = {};
  for (const [key, column] of Object.entries(PATCHABLE)) {
    const value = (body as Record<string, unknown>)[key];
    if (value !== undefined && value !== current[column]) changes[column] = value;
  }
  const updated = Object.keys(changes).length > 0;
  if (updated) {
    await trx
      .updateTable('contacts')
      .set({ ...changes, updated_at: sql<Date>`now_ms()` })
      .where('organization_id', '=', org)
      .where('id', '=', id)
      .execute();
    if (changes.qualification_status !== undefined) {
      await recordStageChanges(trx, org, 'api', [
        { contactId: id, from: current.qualification_status, to: changes.qualification_status as string },
      ]);
    }
  }
  return { id, updated };
}
