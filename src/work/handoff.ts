// A sales-development-to-account-executive handoff (POST /actions handoff_to_ae): a package of
// everything the receiving person needs to take the contact over, stored with the handoff, plus an
// action item for that person. The package is personal data: erasure redacts it (src/compliance/erasure.ts).
import type { Tx } from '../../db/database.js';
import { handoffReceiverId } from '../account/people.js';
import { expectedImpactCents, openDealOf } from '../deals/open-deal.js';
import { newId } from '../platform/ids.js';
import { openActionItem } from './action-items.js';

/** The conversation in a package: the contact's latest messages, each text bounded. */
export const CONVERSATION_MAX = 50;
export const MESSAGE_TEXT_MAX = 5000;
/** The action type of a handoff's item: one pending per contact makes a second handoff a no-op. */
export const HANDOFF_ACTION_TYPE = 'handoff';

const iso = (d: Date | null) => (d === null ? null : d.toISOString());

/** What a package holds, read in four indexed queries. */
async function packageOf(trx: Tx, org: string, contactId: string, reason: string | null) {
  const c = await trx
    .selectFrom('contacts as c')
    .leftJoin('companies as co', (j) => j.onRef('co.organization_id', '=', 'c.organization_id').onRef('co.id', '=', 'c.company_id'))
    .select([
      'c.id',
      'c.name',
      'c.email',
      'c.title',
      'c.phone',
      'c.lead_source',
      'c.qualification_status',
      'c.fit_score',
      'c.urgency_score',
      'c.tags',
      'c.owner_user_id',
      'c.research',
      'c.research_updated_at',
      'co.id as company_id',
      'co.name as company_name',
      'co.domain_normalized as company_domain',
      'co.industry',
      'co.company_size',
      'co.headquarters',
      'co.tier',
      'co.research as dossier',
      'co.research_updated_at as dossier_at',
    ])
    .where('c.organization_id', '=', org)
    .where('c.id', '=', contactId)
    .executeTakeFirstOrThrow();
  const messages = await trx
    .selectFrom('messages')
    .select(['id', 'direction', 'channel', 'subject', 'stripped_text', 'body', 'intent', 'automatic', 'created_at'])
    .where('organization_id', '=', org)
    .where('contact_id', '=', contactId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(CONVERSATION_MAX + 1)
    .execute();
  const deal = await openDealOf(trx, org, contactId);
  const text = (m: (typeof messages)[number]) => {
    const t = m.stripped_text ?? m.body;
    return t.length > MESSAGE_TEXT_MAX ? `${t.slice(0, MESSAGE_TEXT_MAX)}…` : t;
  };
  return {
    deal,
    body: {
      version: 1,
      reason,
      contact: {
        id: c.id,
        name: c.name,
        email: c.email,
        title: c.title,
        phone: c.phone,
        leadSource: c.lead_source,
        qualificationStatus: c.qualification_status,
        fitScore: c.fit_score,
        urgencyScore: c.urgency_score,
        tags: c.tags,
        ownerUserId: c.owner_user_id,
        research: c.research,
        researchUpdatedAt: iso(c.research_updated_at),
      },
      company:
        c.company_id === null
          ? null
          : {
              id: c.company_id,
              name: c.company_name,
              domain: c.company_domain,
              industry: c.industry,
              companySize: c.company_size,
              headquarters: c.headquarters,
              tier: c.tier,
              research: c.dossier,
              researchUpdatedAt: iso(c.dossier_at),
            },
      // Oldest first, as a conversation reads.
      conversation: messages
        .slice(0, CONVERSATION_MAX)
        .reverse()
        .map((m) => ({
          id: m.id,
          direction: m.direction,
          channel: m.channel,
          subject: m.subject,
          text: text(m),
          intent: m.intent,
          automatic: m.automatic,
          at: m.created_at.toISOString(),
        })),
      conversationTruncated: messages.length > CONVERSATION_MAX,
      deal:
        deal === null
          ? null
          : {
              id: deal.id,
              name: deal.name,
              valueCents: deal.value_cents,
              probability: deal.probability,
              closeDate: deal.close_date,
              stage: deal.stage_id === null ? null : { id: deal.stage_id, name: deal.stage_name },
              ownerSalesPersonId: deal.owner_sales_person_id,
            },
    },
  };
}

export interface Handoff {
  handoffId: string;
  toUserId: string;
  dealId: string | null;
  actionItemId: string;
}

/**
 * Hands the contact off, in the caller's transaction: the package, the handoff row and the
 * receiving person's action item. The caller emits `handoff.created`.
 */
export async function handOff(
  trx: Tx,
  org: string,
  contact: { id: string; label: string },
  by: { userId: string | null; reason: string | null },
): Promise<Handoff> {
  const { deal, body } = await packageOf(trx, org, contact.id, by.reason);
  const toUserId = await handoffReceiverId(trx, org);
  const handoffId = newId('hnd');
  await trx
    .insertInto('handoffs')
    .values({
      organization_id: org,
      id: handoffId,
      contact_id: contact.id,
      deal_id: deal?.id ?? null,
      from_user_id: by.userId,
      to_user_id: toUserId,
      reason: by.reason,
      package: JSON.stringify({ ...body, createdAt: new Date().toISOString() }),
    })
    .execute();
  const actionItemId = (await openActionItem(trx, org, {
    actionType: HANDOFF_ACTION_TYPE,
    title: `Take over ${contact.label} (handoff)`,
    description: by.reason
      ? `Handed off: ${by.reason}`
      : 'Handed off by sales development; the package holds the contact, company, conversation and open deal.',
    priority: 'high',
    salesPersonId: toUserId,
    aiGenerated: false,
    entityType: 'Contact',
    entityId: contact.id,
    expectedImpactCents: deal ? expectedImpactCents(deal.value_cents, deal.probability) : null,
    sourceKey: `handoff:${handoffId}`,
    details: { handoffId, dealId: deal?.id ?? null },
  }))!;
  return { handoffId, toUserId, dealId: deal?.id ?? null, actionItemId };
}
