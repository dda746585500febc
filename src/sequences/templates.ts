// What sequences are built from: products, an organization's sequence templates (both added by the
// operator) and the public templates every organization may read (GET /public-templates).
import { sql } from 'kysely';
import type { Db, Tx } from '../../db/database.js';
import type { adminOperations, operations } from '../http/handler.js';
import { keyset, page } from '../http/paging.js';
import { invalid } from '../http/problems.js';
import { isoNN, newId } from '../platform/ids.js';

type Step = { dayOffset: number; subject: string; body: string };
type NewProduct = adminOperations['adminCreateProduct']['requestBody']['content']['application/json'];
type NewSequenceTemplate = adminOperations['adminCreateSequenceTemplate']['requestBody']['content']['application/json'];
type NewPublicTemplate = adminOperations['adminCreatePublicTemplate']['requestBody']['content']['application/json'];
export type PublicTemplateFilter = NonNullable<operations['listPublicTemplates']['parameters']['query']>;

export function toPublicTemplate(r: {
  id: string;
  name: string;
  use_case: string;
  industry: string | null;
  steps: Step[];
  created_at: Date;
}) {
  return {
    id: r.id,
    name: r.name,
    useCase: r.use_case,
    industry: r.industry,
    steps: r.steps.map((s, i) => ({ step: i + 1, dayOffset: s.dayOffset, subject: s.subject, body: s.body })),
    createdAt: isoNN(r.created_at),
  };
}

/** Public templates belong to no organization; anyone may read the active ones. */
export async function listPublicTemplates(db: Db, filter: PublicTemplateFilter) {
  const limit = filter.limit ?? 50;
  if (
    filter.useCase !== undefined &&
    filter.useCaseSlug !== undefined &&
    filter.useCase.toLowerCase() !== filter.useCaseSlug.toLowerCase()
  ) {
    throw invalid('useCase and its alias useCaseSlug name different use cases.', 'useCaseSlug');
  }
  const useCase = filter.useCase ?? filter.useCaseSlug;
  let q = db.selectFrom('public_templates').selectAll().where('active', '=', true);
  if (useCase !== undefined) q = q.where(sql<boolean>`lower(use_case) = lower(${useCase})`);
  if (filter.industry !== undefined) q = q.where(sql<boolean>`lower(industry) = lower(${filter.industry})`);
  if (filter.sequenceStep !== undefined) q = q.where('step_count', '>=', filter.sequenceStep);
  const rows = await keyset(q, { cursor: filter.cursor, limit, createdCol: 'created_at', idCol: 'id' }).execute();
  return page(
    rows,
    limit,
    (r) => ({ at: r.created_at, id: r.id }),
    (r) => toPublicTemplate(r),
  );
}

export async function createProduct(trx: Tx, orgId: string, body: NewProduct) {
  const id = newId('prd');
  await trx
    .insertInto('products')
    .values({ organization_id: orgId, id, name: body.name, description: body.description ?? null })
    .execute();
  return { id, name: body.name };
}

/** An organization's sequence template; 400 when productId names no product of the organization. */
export async function createSequenceTemplate(trx: Tx, orgId: string, body: NewSequenceTemplate) {
  if (body.productId !== undefined && body.productId !== null) {
    const p = await trx
      .selectFrom('products')
      .select('id')
      .where('organization_id', '=', orgId)
      .where('id', '=', body.productId)
      .executeTakeFirst();
    if (!p) throw invalid('productId names no product of this organization.', 'body.productId');
  }
  const id = newId('tpl');
  await trx
    .insertInto('sequence_templates')
    .values({
      organization_id: orgId,
      id,
      name: body.name,
      product_id: body.productId ?? null,
      steps: JSON.stringify(body.steps),
    })
    .execute();
  return {
    id,
    name: body.name,
    steps: body.steps.map((s, i) => ({ step: i + 1, dayOffset: s.dayOffset, subject: s.subject, body: s.body })),
  };
}

export async function createPublicTemplate(db: Db, body: NewPublicTemplate) {
  const id = newId('ptl');
  const row = await db
    .insertInto('public_templates')
    .values({
      id,
      name: body.name,
      use_case: body.useCase,
      industry: body.industry ?? null,
      steps: JSON.stringify(body.steps),
      step_count: body.steps.length,
      active: body.active ?? true,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { ...toPublicTemplate(row), active: row.active };
}
