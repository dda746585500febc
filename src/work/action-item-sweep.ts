// Periodic action-item sweep (crontab, every minute), across organizations:
//   expiry     pending items whose expiresAt has passed become `expired` (their snooze fields are
//              cleared; no event), set-based;
//   snooze     pending items whose snoozedUntilAt has passed come back: snoozedUntilAt, snoozedAt and
//              snoozeReason are cleared, so the item is plainly pending (due) again, set-based;
//   returns    contacts back from out of office (out_of_office_until passed within the last
//              RETURN_WINDOW_DAYS) with a sequence in flight get a follow-up item, one per return
//              date (sourceKey `ooo-return:<contactId>:<epoch ms>`), owned by whoever works them.
// Each step runs in batches, each batch one transaction; rows are taken with SKIP LOCKED, so
// overlapping sweeps (or a verb on the same item) never apply one change twice. "Passed" is by the
// clock of src/platform/clock.ts.
import { sql } from 'kysely';
import { type Tx, withSystem } from '../../db/database.js';
import { assigneeFor } from '../account/people.js';
import { isLiveContact } from '../crm/live-contacts.js';
import { expectedImpactCents, openDealOf } from '../deals/open-deal.js';
import type { Clock } from '../platform/clock.js';
import type { SystemDeps } from '../platform/services.js';
import { IN_FLIGHT_SEQUENCE_STATUSES } from '../sequences/lifecycle.js';
import { openActionItem } from './action-items.js';

const BATCH = 5000;
const RETURN_BATCH = 500;
/** A return older than this is no longer news: no follow-up is opened for it. */
export const RETURN_WINDOW_DAYS = 7;
/** A follow-up after an out-of-office return is timely for this long. */
export const RETURN_ITEM_TTL_DAYS = 14;

async function expireBatch(trx: Tx, clock: Clock): Promise<number> {
  const r = await sql`
    UPDATE action_items a SET status = 'expired', snoozed_until_at = NULL, snoozed_at = NULL, snooze_reason = NULL, updated_at = now_ms()
    FROM (SELECT organization_id, id FROM action_items
          WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= ${clock.now()}::timestamptz
          LIMIT ${sql.lit(BATCH)} FOR UPDATE SKIP LOCKED) due
    WHERE a.organization_id = due.organization_id AND a.id = due.id`.execute(trx);
  return Number(r.numAffectedRows ?? 0);
}

async function unsnoozeBatch(trx: Tx, clock: Clock): Promise<number> {
  const r = await sql`
    UPDATE action_items a SET snoozed_until_at = NULL, snoozed_at = NULL, snooze_reason = NULL, updated_at = now_ms()
    FROM (SELECT organization_id, id FROM action_items
          WHERE status = 'pending' AND snoozed_until_at IS NOT NULL AND snoozed_until_at <= ${clock.now()}::timestamptz
          LIMIT ${sql.lit(BATCH)} FOR UPDATE SKIP LOCKED) due
    WHERE a.organization_id = due.organization_id AND a.id = due.id`.execute(trx);
  return Number(r.numAffectedRows ?? 0);
}

interface Returned {
  organization_id: string;
  id: string;
  name: string;
  email: string;
  out_of_office_until: Date;
  source_key: string;
}

/** Opens the follow-up items of one batch of returns; returns how many it opened. */
async function returnsBatch(trx: Tx, clock: Clock): Promise<{ seen: number; opened: number }> {
  const now = clock.now();
  const { rows } = await sql<Returned>`
    SELECT c.organization_id, c.id, c.name, c.email, c.out_of_office_until, k.source_key
    FROM contacts c
    CROSS JOIN LATERAL (SELECT 'ooo-return:' || c.id || ':' || (extract(epoch FROM c.out_of_office_until) * 1000)::int8 AS source_key) k
    WHERE c.out_of_office_until IS NOT NULL AND c.out_of_office_until <= ${now}::timestamptz
      AND c.out_of_office_until > ${now}::timestamptz - ${sql.lit(RETURN_WINDOW_DAYS)} * interval '1 day'
      AND ${isLiveContact('c')}
      AND EXISTS (SELECT 1 FROM contact_sequences s WHERE s.organization_id = c.organization_id AND s.contact_id = c.id
                  AND s.status IN (${sql.join(IN_FLIGHT_SEQUENCE_STATUSES)}))
      AND NOT EXISTS (SELECT 1 FROM action_items a WHERE a.organization_id = c.organization_id AND a.source_key = k.source_key)
    ORDER BY c.out_of_office_until, c.organization_id, c.id
    LIMIT ${sql.lit(RETURN_BATCH)}`.execute(trx);
  let opened = 0;
  for (const c of rows) {
    const deal = await openDealOf(trx, c.organization_id, c.id);
    const label = c.name || c.email;
    const back = c.out_of_office_until.toISOString().slice(0, 10);
    const id = await openActionItem(trx, c.organization_id, {
      actionType: 'follow_up_ooo_return',
      title: `Follow up with ${label}: back from out of office`,
      description: `${label} was out of office until ${back}. Their sequence goes on; a personal note now that they are back is timely.`,
      priority: deal ? 'high' : 'medium',
      salesPersonId: await assigneeFor(trx, c.organization_id, c.id),
      aiGenerated: true,
      entityType: 'Contact',
      entityId: c.id,
      expectedImpactCents: deal ? expectedImpactCents(deal.value_cents, deal.probability) : null,
      expiresAt: new Date(c.out_of_office_until.getTime() + RETURN_ITEM_TTL_DAYS * 86_400_000),
      sourceKey: c.source_key,
      details: { contactId: c.id, outOfOfficeUntil: c.out_of_office_until.toISOString(), dealId: deal?.id ?? null },
    });
    if (id) opened += 1;
  }
  return { seen: rows.length, opened };
}

/** Runs every step of the sweep to completion; returns what it changed. */
export async function runActionItemSweep(deps: SystemDeps): Promise<{ expired: number; unsnoozed: number; returns: number }> {
  const out = { expired: 0, unsnoozed: 0, returns: 0 };
  const { clock } = deps.services;
  for (let n = BATCH; n === BATCH; ) {
    n = await withSystem(deps.systemDb, (trx) => expireBatch(trx, clock));
    out.expired += n;
  }
  for (let n = BATCH; n === BATCH; ) {
    n = await withSystem(deps.systemDb, (trx) => unsnoozeBatch(trx, clock));
    out.unsnoozed += n;
  }
  for (let seen = RETURN_BATCH; seen === RETURN_BATCH; ) {
    const b = await withSystem(deps.systemDb, (trx) => returnsBatch(trx, clock));
    seen = b.seen;
    out.returns += b.opened;
  }
  return out;
}
