// A deal's stage history: the row every stage change writes (the opening one included) and the
// keyset list of GET /deals/{id}/history.
import { type Selectable, sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { DealStageHistory } from '../../db/schema.js';
import { keyset, page } from '../http/paging.js';
import { isoNN, newId } from '../platform/ids.js';
import { requireDeal } from './read.js';
import type { StageRow } from './stages.js';

type HistoryRow = Selectable<DealStageHistory>;

/**
 * Writes a stage-history row. Its createdAt is kept strictly after the deal's previous row so
 * "newest first" is exact even when two moves land in the same millisecond.
 */
export async function insertHistory(
  trx: Tx,
  orgId: string,
  row: {
    dealId: string;
    from: StageRow | null;
    to: StageRow;
    reason: string | null;
    by: string;
    chips?: string[];
  },
): Promise<void> {
  await trx
    .insertInto('deal_stage_history')
    .values({
      organization_id: orgId,
      id: newId('dsh'),
      deal_id: row.dealId,
      from_stage_id: row.from?.id ?? null,
      from_stage_name: row.from?.name ?? null,
      to_stage_id: row.to.id,
      to_stage_name: row.to.name,
      reason: row.reason,
      transitioned_by: row.by,
      reason_chips: row.chips ?? [],
      created_at: sql<Date>`GREATEST(now_ms(), (SELECT max(h.created_at) + interval '1 millisecond' FROM deal_stage_history h
      WHERE h.organization_id = ${orgId} AND h.deal_id = ${row.dealId}))`,
    })
    .execute();
}

function toHistory(h: HistoryRow) {
  return {
    id: h.id,
    dealId: h.deal_id,
    fromStageId: h.from_stage_id,
    fromStageName: h.from_stage_name,
    toStageId: h.to_stage_id,
    toStageName: h.to_stage_name,
    reason: h.reason,
    transitionedBy: h.transitioned_by,
    createdAt: isoNN(h.created_at),
  };
}

/** A page of the deal's history, newest first; 404 for an unknown deal. */
export async function dealHistoryPage(trx: Tx, org: string, dealId: string, opts: { cursor?: string; limit?: number }) {
  await requireDeal(trx, org, dealId);
  const limit = opts.limit ?? 50;
  const q = trx.selectFrom('deal_stage_history').selectAll().where('organization_id', '=', org).where('deal_id', '=', dealId);
  const rows = await keyset(q, { cursor: opts.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return page(rows, limit, (r) => ({ at: r.created_at, id: r.id }), toHistory);
}
