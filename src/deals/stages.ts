// The pipeline stages of an organization: the default pipeline (seeded on first use), reading them,
// resolving the stage a request names, and the DealStage shape.
import { type Selectable, sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { DealStages } from '../../db/schema.js';
import type { operations } from '../http/handler.js';
import { invalid, ProblemError } from '../http/problems.js';
import { newId } from '../platform/ids.js';

export type StageRow = Selectable<DealStages>;
export type ForecastCategory = NonNullable<operations['getDeal']['responses'][200]['content']['application/json']['forecastCategory']>;
export type Category = 'active' | 'closed_won' | 'closed_lost';

/** The default pipeline, seeded on the first deal created without a stage. */
export const DEFAULT_STAGES: ReadonlyArray<{
  slug: string;
  name: string;
  category: Category;
  terminal: boolean;
  forecast: ForecastCategory;
}> = [
  { slug: 'prospecting', name: 'Prospecting', category: 'active', terminal: false, forecast: 'pipeline' },
  { slug: 'qualification', name: 'Qualification', category: 'active', terminal: false, forecast: 'pipeline' },
  { slug: 'discovery', name: 'Discovery', category: 'active', terminal: false, forecast: 'pipeline' },
  { slug: 'proposal', name: 'Proposal', category: 'active', terminal: false, forecast: 'best_case' },
  { slug: 'negotiation', name: 'Negotiation', category: 'active', terminal: false, forecast: 'commit' },
  { slug: 'closed_won', name: 'Closed won', category: 'closed_won', terminal: true, forecast: 'closed_won' },
  { slug: 'closed_lost', name: 'Closed lost', category: 'closed_lost', terminal: true, forecast: 'closed_lost' },
];

export async function orgStages(trx: Tx, orgId: string): Promise<StageRow[]> {
  return trx.selectFrom('deal_stages').selectAll().where('organization_id', '=', orgId).orderBy('sort_order').orderBy('id').execute();
}

/**
 * Seeds the default stages when the organization has none. Concurrent first deals race on the
 * unique (organization, slug) index: the loser's INSERT waits for the winner and then does
 * nothing, and the re-read sees the winner's rows.
 */
export async function stagesSeeded(trx: Tx, orgId: string): Promise<StageRow[]> {
  const existing = await orgStages(trx, orgId);
  if (existing.length > 0) return existing;
  await sql`
    INSERT INTO deal_stages (organization_id, id, slug, name, sort_order, category, is_terminal, forecast_category)
    VALUES ${sql.join(DEFAULT_STAGES.map((s, i) => sql`(${orgId}, ${newId('stg')}, ${s.slug}, ${s.name}, ${i + 1}, ${s.category}, ${s.terminal}, ${s.forecast})`))}
    ON CONFLICT DO NOTHING`.execute(trx);
  return orgStages(trx, orgId);
}

/** Finds the stage named by slug and/or id; both given must name the same stage. */
export function resolveStage(stages: StageRow[], slug: string | undefined, id: string | undefined): StageRow {
  const bySlug = slug === undefined ? undefined : stages.find((s) => s.slug === slug);
  const byId = id === undefined ? undefined : stages.find((s) => s.id === id);
  if (slug !== undefined && !bySlug)
    throw new ProblemError('unknown-stage', `No stage with slug "${slug}" in this organization; see GET /deal-stages.`, {
      errors: [{ field: 'body.stage', message: 'is not a stage of the organization' }],
    });
  if (id !== undefined && !byId)
    throw new ProblemError('unknown-stage', `No stage with id "${id}" in this organization; see GET /deal-stages.`, {
      errors: [{ field: 'body.stageId', message: 'is not a stage of the organization' }],
    });
  if (bySlug && byId && bySlug.id !== byId.id) throw invalid('stage and stageId name different stages; send one of them.', 'body.stage');
  const found = bySlug ?? byId;
  if (!found) throw invalid('Name the target stage with stage (slug) or stageId.', 'body.stage');
  return found;
}

export function toStage(s: StageRow) {
  return { id: s.id, slug: s.slug, name: s.name, sortOrder: s.sort_order, category: s.category as Category, isTerminal: s.is_terminal };
}
