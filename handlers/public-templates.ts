import { sql } from 'kysely';
import type { PublicHandler } from '../src/handler.js';
import { isoNN } from '../src/ids.js';
import { keyset, page } from '../src/http/paging.js';
import { invalid } from '../src/http/problems.js';

type Step = { dayOffset: number; subject: string; body: string };

/** Public templates belong to no organization; anyone may read the active ones. */
const listPublicTemplates: PublicHandler<'listPublicTemplates'> = async ({ db, query }) => {
  const limit = query.limit ?? 50;
  if (query.useCase !== undefined && query.useCaseSlug !== undefined && query.useCase.toLowerCase() !== query.useCaseSlug.toLowerCase()) {
    throw invalid('useCase and its alias useCaseSlug name different use cases.', 'useCaseSlug');
  }
  const useCase = query.useCase ?? query.useCaseSlug;
  let q = db.selectFrom('public_templates').selectAll().where('active', '=', true);
  if (useCase !== undefined) q = q.where(sql<boolean>`lower(use_case) = lower(${useCase})`);
  if (query.industry !== undefined) q = q.where(sql<boolean>`lower(industry) = lower(${query.industry})`);
  if (query.sequenceStep !== undefined) q = q.where('step_count', '>=', query.sequenceStep);
  const rows = await keyset(q, { cursor: query.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return {
    status: 200,
    body: page(rows, limit, (r) => ({ at: r.created_at, id: r.id }), (r) => toPublicTemplate(r)),
  };
};

export function toPublicTemplate(r: { id: string; name: string; use_case: string; industry: string | null; steps: unknown; created_at: Date }) {
  return {
    id: r.id, name: r.name, useCase: r.use_case, industry: r.industry,
    steps: (r.steps as Step[]).map((s, i) => ({ step: i + 1, dayOffset: s.dayOffset, subject: s.subject, body: s.body })),
    createdAt: isoNN(r.created_at),
  };
}

export const publicTemplateHandlers = { listPublicTemplates };
