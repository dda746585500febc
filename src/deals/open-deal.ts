// A contact's open deal (the one whose primary contact it is: not closed, not in a terminal
// stage; the most recently updated when several) and the expected revenue impact of a deal.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';

export interface OpenDeal {
  id: string;
  name: string;
  value_cents: number | null;
  probability: number | null;
  close_date: string | null;
  owner_sales_person_id: string;
  stage_id: string | null;
  stage_name: string | null;
}

export async function openDealOf(trx: Tx, organizationId: string, contactId: string): Promise<OpenDeal | null> {
  const r = await sql<OpenDeal>`
    SELECT d.id, d.name, d.value_cents, d.probability, d.close_date, d.owner_sales_person_id, d.stage_id, s.name AS stage_name
    FROM deals d LEFT JOIN deal_stages s ON s.organization_id = d.organization_id AND s.id = d.stage_id
    WHERE d.organization_id = ${organizationId} AND d.primary_contact_id = ${contactId}
      AND d.actual_close_date IS NULL AND s.is_terminal IS NOT TRUE
    ORDER BY d.updated_at DESC, d.id DESC LIMIT 1`.execute(trx);
  return r.rows[0] ?? null;
}

/** Value x probability (in cents, rounded) when both are known; null otherwise. */
export function expectedImpactCents(valueCents: number | null, probability: number | null): number | null {
  return valueCents === null || probability === null ? null : Math.round((valueCents * probability) / 100);
}
