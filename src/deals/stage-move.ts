// POST /deals/{id}/stage: moving a deal through the stage gates. Rules are those of
// spec/paths/deal*.yaml and spec/DECISIONS.md.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { ProblemError } from '../http/problems.js';
import type { Clock } from '../platform/clock.js';
import { emit } from '../platform/events.js';
import { insertHistory } from './history.js';
import { DEAL_RESOURCE, type DealRow, lockDeal } from './read.js';
import { orgStages, resolveStage, type StageRow } from './stages.js';

interface GateResult {
  gate: string;
  mode: 'block' | 'warn';
  detail: string;
}

/**
 * The gates a move fails, in evaluation order (see changeDealStage in the spec). Blocking gates
 * are all overridable; moving to closed_lost meets every blocking gate (a deal can always be
 * marked lost with a reason).
 */
export function failedGates(
  deal: Pick<DealRow, 'value_cents' | 'primary_contact_id' | 'close_date'>,
  from: StageRow | null,
  to: StageRow,
  stages: StageRow[],
): GateResult[] {
  const failed: GateResult[] = [];
  const won = to.category === 'closed_won';
  if ((to.forecast_category === 'commit' || won) && deal.value_cents === null) {
    failed.push({
      gate: 'value-required',
      mode: 'block',
      detail: `Moving to "${to.name}" needs the deal's valueCents; set it with PATCH /deals/{id} or send an overrideReason.`,
    });
  }
  const proposal = stages.find((s) => s.slug === 'proposal');
  const late = won || (to.category === 'active' && proposal !== undefined && to.sort_order >= proposal.sort_order);
  if (late) {
    const missing = [deal.primary_contact_id === null && 'primaryContactId', deal.close_date === null && 'closeDate'].filter(Boolean);
    if (missing.length > 0) {
      failed.push({
        gate: 'qualification-required',
        mode: 'block',
        detail: `Moving to "${to.name}" needs ${missing.join(' and ')} on the deal; set with PATCH /deals/{id} or send an overrideReason.`,
      });
    }
  }
  const fromOrder = from?.sort_order ?? Number.NEGATIVE_INFINITY;
  if (to.sort_order > fromOrder) {
    const crossed = stages.filter((s) => s.category === 'active' && s.sort_order > fromOrder && s.sort_order <= to.sort_order).length;
    if (crossed > 2) failed.push({ gate: 'skip-stages', mode: 'warn', detail: `The move skips ${crossed - 1} active stages.` });
  }
  return failed;
}

export type StageBody = { stage?: string; stageId?: string; reason?: string; overrideReason?: string; reasonChips?: string[] };

/**
 * Moves the locked deal to the stage the body names; `by` is who the history row is attributed to.
 * A closing move sets actualCloseDate to the clock's today (UTC).
 */
export async function moveDealStage(trx: Tx, org: string, dealId: string, body: StageBody, by: string, clock: Clock) {
  const deal = await lockDeal(trx, org, dealId);
  const stages = await orgStages(trx, org);
  const to = resolveStage(stages, body.stage, body.stageId);
  const from = stages.find((s) => s.id === deal.stage_id) ?? null;
  const reason = body.reason?.trim() || null;
  const overrideReason = body.overrideReason?.trim() || null;

  if (from?.id === to.id) {
    throw new ProblemError('stage-transition-not-allowed', `The deal is already in stage "${to.name}".`);
  }
  if (from?.is_terminal && reason === null) {
    throw new ProblemError('stage-transition-not-allowed', `The deal is closed ("${from.name}"); reopening it needs a reason.`);
  }
  if (to.category === 'closed_lost' && reason === null) {
    throw new ProblemError('reason-required', 'Marking a deal lost needs a reason (stored as lossReason).', {
      errors: [{ field: 'body.reason', message: 'is required to move to a closed_lost stage' }],
    });
  }

  const failed = to.category === 'closed_lost' ? [] : failedGates(deal, from, to, stages);
  const blocking = failed.filter((g) => g.mode === 'block');
  if (blocking.length > 0 && overrideReason === null) {
    const g = blocking[0];
    throw new ProblemError('stage-gate-blocked', g.detail, { gate: g.gate, gateMode: 'block', needsOverride: true });
  }
  const recordedReason = blocking.length > 0 ? `override: ${overrideReason}${reason ? `; ${reason}` : ''}` : reason;

  const closed = to.category === 'closed_won' || to.category === 'closed_lost';
  const forecast = closed ? to.category : (to.forecast_category ?? deal.forecast_category);
  await trx
    .updateTable('deals')
    .set({
      stage_id: to.id,
      forecast_category: forecast,
      actual_close_date: closed ? clock.today() : null,
      loss_reason: to.category === 'closed_lost' ? reason : null,
      updated_at: sql`now_ms()`,
    })
    .where('organization_id', '=', org)
    .where('id', '=', deal.id)
    .execute();
  await insertHistory(trx, org, { dealId: deal.id, from, to, reason: recordedReason, by, chips: body.reasonChips });

  const resource = { type: DEAL_RESOURCE, id: deal.id };
  await emit(trx, org, {
    type: 'deal.stage_changed',
    resource,
    data: {
      dealId: deal.id,
      dealName: deal.name,
      fromStageId: from?.id ?? null,
      fromStage: from?.slug ?? null,
      toStageId: to.id,
      stage: to.slug,
    },
  });
  if (to.category === 'closed_won') {
    await emit(trx, org, { type: 'deal.won', resource, data: { dealId: deal.id, dealName: deal.name, valueCents: deal.value_cents } });
  } else if (to.category === 'closed_lost') {
    await emit(trx, org, { type: 'deal.lost', resource, data: { dealId: deal.id, dealName: deal.name, lossReason: reason } });
  }
  const warnings = failed.filter((g) => g.mode === 'warn').map((g) => g.gate);
  return { dealId: deal.id, stage: to.slug, stageId: to.id, warnings };
}
