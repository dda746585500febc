// GDPR erasure (POST /contacts/{id}/erase): every record of the organization with the same whole
// address is redacted in place, in the caller's transaction, so that a failure anywhere leaves
// nothing erased. What stays: ids, the organization, the list, timestamps, revenue figures.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { cancelQueued } from '../dispatch/queue.js';
import { defaultDealName, ERASED_DEAL_NAME } from '../leads/deal-name.js';
import { audit, emit } from '../platform/events.js';
import { newId } from '../platform/ids.js';
import type { Services } from '../platform/services.js';
import { suppressAddress } from './suppression-add.js';
import { erasureHmac } from './suppression-match.js';

export interface ErasureRequest {
  organizationId: string;
  requesterRef: string;
  reason: string;
  keyId: string;
  userId: string;
  secret: string;
  services: Services;
}

/** The placeholder that replaces an erased record's address (never deliverable: .invalid). */
export const erasedAddress = (contactId: string) => `erased+${contactId}@erased.invalid`;

/** A Postgres regular expression matching `address` as a whole address inside free text or JSON. */
export function addressPattern(address: string): string {
  const escaped = address.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return `(^|[^a-z0-9.!#$%&'*+/=?^_\`{|}~-])${escaped}($|[^a-z0-9_-]|\\.($|[^a-z0-9]))`;
}

/**
 * Research dossiers hold company facts from public pages; a person appears there only as the
 * company's own pages name them in a role (a leadership announcement). Erasure replaces the
 * person's full name, wherever it appears in the organization's company dossiers and other
 * contacts' research, with "[erased]". Only a full name (two words or more, five characters or
 * more) is matched: a single first name would strike unrelated text.
 */
async function redactNameInResearch(trx: Tx, org: string, name: string): Promise<void> {
  const full = name.trim().replace(/\s+/g, ' ');
  if (full.length < 5 || !full.includes(' ')) return;
  // The name as it is written inside JSON text, as a case-insensitive regular expression.
  const inJson = JSON.stringify(full)
    .slice(1, -1)
    .replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  for (const table of ['companies', 'contacts'] as const) {
    await sql`
      UPDATE ${sql.table(table)} SET research = regexp_replace(research::text, ${inJson}, '[erased]', 'gi')::jsonb
      WHERE organization_id = ${org} AND research IS NOT NULL AND position(${full.toLowerCase()} in lower(research::text)) > 0`.execute(
      trx,
    );
  }
}

/** Redacts one contact record and everything that holds its person's data, then records it. */
async function eraseRecord(trx: Tx, req: ErasureRequest, contactId: string, address: string, at: Date): Promise<void> {
  const org = req.organizationId;
  const pattern = addressPattern(address);
  const { name } = await trx
    .selectFrom('contacts')
    .select('name')
    .where('organization_id', '=', org)
    .where('id', '=', contactId)
    .executeTakeFirstOrThrow();
  await redactNameInResearch(trx, org, name);
  await trx
    .updateTable('contacts')
    .set({
      email: erasedAddress(contactId),
      email_normalized: erasedAddress(contactId),
      name: '',
      title: null,
      phone: null,
      notes: null,
      lead_source: null,
      research: null,
      research_updated_at: null,
      erased_at: at,
      deleted_at: sql`coalesce(deleted_at, ${at}::timestamptz)`,
      updated_at: at,
    })
    .where('organization_id', '=', org)
    .where('id', '=', contactId)
    .execute();

  // A message keeps its ids, direction, times and classification; its text, raw MIME, addresses and report go.
  const messages = await trx
    .updateTable('messages')
    .set({ body: '', subject: null, from_email: null, to_email: null, stripped_text: null, report: null })
    .where('organization_id', '=', org)
    .where((eb) =>
      eb.or([eb('contact_id', '=', contactId), eb(sql`lower(from_email)`, '=', address), eb(sql`lower(to_email)`, '=', address)]),
    )
    .returning('id')
    .execute();
  if (messages.length > 0) {
    await trx
      .deleteFrom('inbound_raw_messages')
      .where('organization_id', '=', org)
      .where('message_id', '=', sql<string>`ANY(${messages.map((m) => m.id)}::text[])`)
      .execute();
  }
  // A draft's evidence, guardrail report and approval quote its sentences: they go with the text.
  await trx
    .updateTable('drafts')
    .set({ subject: '', body: '', evidence: null, guardrail: null, approval: null, rejection_reason: null, updated_at: at })
    .where('organization_id', '=', org)
    .where('contact_id', '=', contactId)
    .execute();
  await cancelQueued(trx, org, { contactId }, 'contact_removed');
  // Action items about the person keep their kind, owner, state and times; what they say goes.
  await trx
    .updateTable('action_items')
    .set({
      title: 'Action item about an erased contact',
      description: 'The contact was erased; what this item said about them was removed.',
      details: null,
      dismiss_reason: null,
      snooze_reason: null,
      updated_at: at,
    })
    .where('organization_id', '=', org)
    .where('entity_type', '=', 'Contact')
    .where('entity_id', '=', contactId)
    .execute();
  // A handoff package is the person's file: it goes whole. Another contact's package quoting the
  // address (in a message, say) loses the address.
  await trx
    .updateTable('handoffs')
    .set({ package: JSON.stringify({ version: 1, erased: true }), reason: null })
    .where('organization_id', '=', org)
    .where('contact_id', '=', contactId)
    .execute();
  await sql`
    UPDATE handoffs SET package = regexp_replace(package::text, ${pattern}, ${'\\1[erased]\\2'}, 'gi')::jsonb
    WHERE organization_id = ${org} AND contact_id <> ${contactId}
      AND position(${address} in lower(package::text)) > 0 AND lower(package::text) ~ ${pattern}`.execute(trx);
  const sends = await trx
    .updateTable('send_records')
    .set({ to_email: null, subject: null, headers: null })
    .where('organization_id', '=', org)
    .where((eb) => eb.or([eb('contact_id', '=', contactId), eb(sql`lower(to_email)`, '=', address)]))
    .returning('id')
    .execute();
  if (sends.length > 0) {
    await trx
      .deleteFrom('send_bodies')
      .where('organization_id', '=', org)
      .where('send_record_id', '=', sql<string>`ANY(${sends.map((s) => s.id)}::text[])`)
      .execute();
  }
  // A deal keeps its revenue data; only the link to the person goes. Its activities keep their
  // kind and time (the deal's history) but not what was said with or about the person.
  await trx
    .updateTable('deals')
    .set({ primary_contact_id: null, updated_at: at })
    .where('organization_id', '=', org)
    .where('primary_contact_id', '=', contactId)
    .execute();
  const { rows: activities } = await sql<{ id: string }>`
    UPDATE deal_activities SET summary = '', contact_id = nullif(contact_id, ${contactId})
    WHERE organization_id = ${org}
      AND (contact_id = ${contactId} OR (position(${address} in lower(summary)) > 0 AND lower(summary) ~ ${pattern}))
    RETURNING id`.execute(trx);
  // A stored Idempotency-Key response holding the person's data (the contact with its address, an
  // activity just redacted) is forgotten: a retry of that request then runs afresh.
  await sql`
    DELETE FROM idempotency_keys
    WHERE organization_id = ${org} AND response IS NOT NULL
      AND ((position(${address} in lower(response::text)) > 0 AND lower(response::text) ~ ${pattern})
        OR response->>'id' = ANY(${activities.map((a) => a.id)}::text[]))`.execute(trx);

  // Platform events and the audit log keep their rows (type, resource, time) but lose any payload
  // naming the person: a payload about the contact keeps only its id, any other payload that
  // mentions the address becomes empty.
  await sql`
    UPDATE events SET data = CASE
      WHEN (resource_type = 'Contact' AND resource_id = ${contactId}) OR position(${contactId} in data::text) > 0
      THEN jsonb_build_object('contactId', ${contactId}::text) ELSE '{}'::jsonb END
    WHERE organization_id = ${org}
      AND ((resource_type = 'Contact' AND resource_id = ${contactId})
        OR position(${contactId} in data::text) > 0
        OR (position(${address} in lower(data::text)) > 0 AND lower(data::text) ~ ${pattern}))`.execute(trx);
  await sql`
    UPDATE audit_log SET details = '{}'::jsonb
    WHERE organization_id = ${org} AND details <> '{}'::jsonb
      AND ((resource_type = 'Contact' AND resource_id = ${contactId})
        OR position(${contactId} in details::text) > 0
        OR (position(${address} in lower(details::text)) > 0 AND lower(details::text) ~ ${pattern}))`.execute(trx);

  await trx
    .insertInto('erasure_evidence')
    .values({
      organization_id: org,
      id: newId('ers'),
      contact_id: contactId,
      requester_ref: req.requesterRef,
      reason: req.reason,
      erased_by_key_id: req.keyId,
      erased_by_user_id: req.userId,
      erased_at: at,
    })
    .execute();
  await emit(trx, org, { type: 'contact.erased', resource: { type: 'Contact', id: contactId }, data: { contactId } });
}

/**
 * The inbound leads of the address: redacted in place (erased_at set, so they are no longer
 * listed or converted; email becomes `erased+<leadId>@erased.invalid`; name, company, payload, IP
 * hash and qualification snapshot go). Their events keep only {leadId}. A deal opened from one of
 * them under its default name built from the person's name or address is renamed, in the deal and
 * in its events. Returns the erased lead ids.
 */
async function eraseLeads(trx: Tx, org: string, address: string, at: Date): Promise<string[]> {
  const { rows } = await sql<{ id: string; name: string | null; email: string; deal_id: string | null }>`
    UPDATE inbound_leads l SET erased_at = ${at}, updated_at = ${at},
      email = 'erased+' || l.id || '@erased.invalid', email_normalized = 'erased+' || l.id || '@erased.invalid',
      name = NULL, company_name = NULL, payload = '{}'::jsonb, ip_hash = NULL, qual_snapshot = NULL
    FROM (SELECT id, name, email, deal_id FROM inbound_leads
          WHERE organization_id = ${org} AND email_normalized = ${address} AND erased_at IS NULL
          ORDER BY id FOR UPDATE) old
    WHERE l.organization_id = ${org} AND l.id = old.id
    RETURNING l.id, old.name, old.email, old.deal_id`.execute(trx);
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id);
  await sql`
    UPDATE events SET data = jsonb_build_object('leadId', resource_id)
    WHERE organization_id = ${org} AND resource_type = 'InboundLead' AND resource_id = ANY(${ids}::text[])`.execute(trx);
  const personal = rows
    .filter((r) => r.deal_id !== null)
    .flatMap((r) => [
      { dealId: r.deal_id!, name: defaultDealName({ company_name: null, name: r.name, email: r.email }) },
      { dealId: r.deal_id!, name: defaultDealName({ company_name: null, name: null, email: r.email }) },
    ]);
  if (personal.length > 0) {
    const { rows: renamed } = await sql<{ id: string }>`
      UPDATE deals d SET name = ${ERASED_DEAL_NAME}, updated_at = ${at}
      FROM unnest(${personal.map((p) => p.dealId)}::text[], ${personal.map((p) => p.name)}::text[]) AS x(deal_id, name)
      WHERE d.organization_id = ${org} AND d.id = x.deal_id AND d.name = x.name
      RETURNING d.id`.execute(trx);
    if (renamed.length > 0) {
      await sql`
        UPDATE events SET data = data || jsonb_build_object('dealName', ${ERASED_DEAL_NAME}::text)
        WHERE organization_id = ${org} AND resource_type = 'Deal' AND resource_id = ANY(${renamed.map((r) => r.id)}::text[]) AND data ? 'dealName'`.execute(
        trx,
      );
    }
  }
  return ids;
}

/**
 * Erases every not-yet-erased record of the organization holding `address` (normalized; the
 * address of `requestedId`, the record the request named), writes
 * the permanent hash-only suppression entry and removes any entry that stores the address in
 * clear. Returns the erased ids. Throws on any failure: the caller's transaction then rolls back.
 */
export async function eraseAddress(trx: Tx, req: ErasureRequest, requestedId: string, address: string, at: Date): Promise<string[]> {
  const org = req.organizationId;
  // Locked in id order so two concurrent erasures of the same address cannot deadlock.
  const records = await trx
    .selectFrom('contacts')
    .select('id')
    .where('organization_id', '=', org)
    .where('email_normalized', '=', address)
    .where('erased_at', 'is', null)
    .orderBy('id')
    .forUpdate()
    .execute();
  const ids = records.map((r) => r.id);
  for (const [i, id] of ids.entries()) {
    await eraseRecord(trx, req, id, address, at);
    // Fault point for tests: proves that a failure after the first record leaves nothing erased.
    if (i === 0 && req.services.faults.has('erase:after-first-record')) throw new Error('injected fault: erase:after-first-record');
  }

  const erasedLeadIds = await eraseLeads(trx, org, address, at);

  await trx
    .deleteFrom('suppression_entries')
    .where('organization_id', '=', org)
    .where('level', '=', 'ADDRESS')
    .where('email', '=', address)
    .execute();
  await suppressAddress(trx, org, { erasureHmac: erasureHmac(req.secret, address) });

  await audit(trx, org, {
    action: 'contact.erase',
    resource: { type: 'Contact', id: requestedId },
    keyId: req.keyId,
    userId: req.userId,
    details: { erasedContactIds: ids, erasedLeadIds, requesterRef: req.requesterRef },
  });
  return ids;
}
