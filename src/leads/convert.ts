// Conversion of an inbound lead into a contact (and a deal): POST /leads/{id}/convert and the
// periodic sweep (src/leads/sweep.ts) both come here, in a transaction bound to the
// organization.
//
// The contact is filed exactly as POST /contacts without listId files it (an existing live contact
// of the address is reused; otherwise a new one on the organization's `CRM import` list), with the
// company of the lead's email domain when that is not a free or disposable mail provider (found or
// created by normalized domain, as POST /companies does). The deal opens on the organization's
// first stage (default stages seeded on first use, as POST /deals does) with the contact as
// primary contact and the contact's company, emitting `deal.created`. The contact becomes QUALIFIED
// (unless it is a CUSTOMER), emitting `contact.stage_changed` when that moves it.
//
// Concurrency: the address is locked first (the order contact creation, capture and erasure
// use), then the lead row; a second conversion waits, then finds the lead CONVERTED and answers
// the first result.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { organizationOwnerId } from '../account/people.js';
import { fileContact } from '../crm/contact-filing.js';
import { lockAddress } from '../crm/contact-locks.js';
import { domainOfEmail, isFreemailDomain, normalizeDomain } from '../crm/domains.js';
import { setQualificationStatus } from '../crm/qualification.js';
import { initialStage, insertDeal } from '../deals/create.js';
import { notFound, ProblemError } from '../http/problems.js';
import { defaultDealName } from './deal-name.js';
import { leadFacts } from './scoring.js';

export interface ConvertOptions {
  /** False: a contact only, no deal. Default true. */
  createDeal?: boolean;
  dealName?: string;
  /** The key's user (contact and deal owner); null: the contact has no owner and the deal goes to the organization's OWNER. */
  userId: string | null;
  /** Who the deal's first history row is attributed to. */
  by: string;
  via: 'api' | 'sweep';
}

export interface ConversionResult {
  leadId: string;
  status: 'CONVERTED';
  contactId: string;
  dealId: string | null;
  alreadyConverted: boolean;
}

/** The company input for the contact: the email's domain unless it is a free or disposable mail provider. */
function companyOf(email: string, companyName: string | null): { domain: string; name?: string } | null {
  const domain = normalizeDomain(domainOfEmail(email));
  if (domain === null || isFreemailDomain(domain)) return null;
  return companyName === null ? { domain } : { domain, name: companyName };
}

/** Converts a NEW or QUALIFIED lead; 404 unknown or erased, 409 lead-is-spam; a CONVERTED lead answers its earlier result. */
export async function convertLead(trx: Tx, organizationId: string, leadId: string, opts: ConvertOptions): Promise<ConversionResult> {
  const org = organizationId;
  const peek = await trx
    .selectFrom('inbound_leads')
    .select('email_normalized')
    .where('organization_id', '=', org)
    .where('id', '=', leadId)
    .where('erased_at', 'is', null)
    .executeTakeFirst();
  if (!peek) throw notFound('lead');
  await lockAddress(trx, org, peek.email_normalized);
  const lead = await trx
    .selectFrom('inbound_leads')
    .selectAll()
    .where('organization_id', '=', org)
    .where('id', '=', leadId)
    .where('erased_at', 'is', null)
    .forUpdate()
    .executeTakeFirst();
  if (!lead) throw notFound('lead');
  if (lead.status === 'CONVERTED') {
    return { leadId, status: 'CONVERTED', contactId: lead.contact_id!, dealId: lead.deal_id, alreadyConverted: true };
  }
  if (lead.status === 'SPAM') throw new ProblemError('lead-is-spam', 'The lead is marked as spam and cannot be converted.');

  const facts = leadFacts(lead.email, lead.payload as Record<string, unknown>);
  const filed = await fileContact(trx, org, {
    email: lead.email,
    name: lead.name ?? '',
    title: facts.title,
    company: companyOf(lead.email, lead.company_name),
    fitScore: lead.fit_score,
    leadSource: lead.source ?? 'inbound lead',
    userId: opts.userId,
  });
  // A converted lead is a qualified prospect (contact.stage_changed); a customer stays a customer.
  await setQualificationStatus(trx, org, [filed.id], 'QUALIFIED', 'lead_conversion', { keep: ['CUSTOMER'], extra: { leadId } });

  let dealId: string | null = null;
  if (opts.createDeal !== false) {
    const contact = await trx
      .selectFrom('contacts')
      .select('company_id')
      .where('organization_id', '=', org)
      .where('id', '=', filed.id)
      .executeTakeFirstOrThrow();
    dealId = await insertDeal(trx, org, {
      name: opts.dealName ?? defaultDealName(lead),
      stage: await initialStage(trx, org, undefined, undefined),
      ownerId: opts.userId ?? (await organizationOwnerId(trx, org)),
      primaryContactId: filed.id,
      companyId: contact.company_id,
      by: opts.by,
    });
  }

  const conversion = {
    via: opts.via,
    at: new Date().toISOString(),
    contact: filed.outcome === 'created' ? 'created' : 'reused',
    dealCreated: dealId !== null,
  };
  await sql`
    UPDATE inbound_leads SET status = 'CONVERTED', converted_at = now_ms(), updated_at = now_ms(),
      contact_id = ${filed.id}, deal_id = ${dealId},
      qual_snapshot = coalesce(qual_snapshot, '{}'::jsonb) || jsonb_build_object('conversion', ${JSON.stringify(conversion)}::jsonb)
    WHERE organization_id = ${org} AND id = ${leadId}`.execute(trx);
  return { leadId, status: 'CONVERTED', contactId: filed.id, dealId, alreadyConverted: false };
}
