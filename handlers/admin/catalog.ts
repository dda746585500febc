// Operator rows of what sequences are built from: products, an organization's sequence templates
// and the public templates every organization may read.

import { withSystem } from '../../db/database.js';
import { requireOrg } from '../../src/account/organizations.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { invalid } from '../../src/http/problems.js';
import { newId } from '../../src/platform/ids.js';
import { toPublicTemplate } from '../../src/sequences/templates.js';

const adminCreateProduct: AdminHandler<'adminCreateProduct'> = async ({ db, params, body }) =>
  withSystem(db, async (trx) => {
    await requireOrg(trx, params.orgId);
    const id = newId('prd');
    await trx
      .insertInto('products')
      .values({ organization_id: params.orgId, id, name: body.name, description: body.description ?? null })
      .execute();
    return { status: 201 as const, body: { id, name: body.name } };
  });

const adminCreateSequenceTemplate: AdminHandler<'adminCreateSequenceTemplate'> = async ({ db, params, body }) =>
  withSystem(db, async (trx) => {
    await requireOrg(trx, params.orgId);
    if (body.productId !== undefined && body.productId !== null) {
      const p = await trx
        .selectFrom('products')
        .select('id')
        .where('organization_id', '=', params.orgId)
        .where('id', '=', body.productId)
        .executeTakeFirst();
      if (!p) throw invalid('productId names no product of this organization.', 'body.productId');
    }
    const id = newId('tpl');
    await trx
      .insertInto('sequence_templates')
      .values({
        organization_id: params.orgId,
        id,
        name: body.name,
        product_id: body.productId ?? null,
        steps: JSON.stringify(body.steps),
      })
      .execute();
    return {
      status: 201 as const,
      body: {
        id,
        name: body.name,
        steps: body.steps.map((s, i) => ({ step: i + 1, dayOffset: s.dayOffset, subject: s.subject, body: s.body })),
      },
    };
  });

const adminCreatePublicTemplate: AdminHandler<'adminCreatePublicTemplate'> = async ({ db, body }) => {
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
  return { status: 201 as const, body: { ...toPublicTemplate(row), active: row.active } };
};

export const catalogHandlers: AdminHandlers = { adminCreateProduct, adminCreateSequenceTemplate, adminCreatePublicTemplate };
