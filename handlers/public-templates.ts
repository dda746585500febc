import { sql } from 'kysely';
import type { PublicHandler } from '../src/http/handler.js';
import { keyset, page } from '../src/http/paging.js';
import { invalid } from '../src/http/problems.js';
import { toPublicTemplate } from '../src/sequences/templates.js';

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
    body: page(
      rows,
      limit,
      (r) => ({ at: r.created_at, id: r.id }),
      (r) => toPublicTemplate(r),
    ),
  };
};

export const publicTemplateHandlers = { listPublicTemplates };
