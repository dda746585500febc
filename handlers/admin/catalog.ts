// Operator rows of what sequences are built from: products, an organization's sequence templates
// and the public templates every organization may read (src/sequences/templates.ts).

import { withOrg } from '../../db/database.js';
import { requireOrg } from '../../src/account/organizations.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { createProduct, createPublicTemplate, createSequenceTemplate } from '../../src/sequences/templates.js';

const adminCreateProduct: AdminHandler<'adminCreateProduct'> = async ({ db, params, body }) =>
  withOrg(db, params.orgId, async (trx) => {
    await requireOrg(trx, params.orgId);
    return { status: 201 as const, body: await createProduct(trx, params.orgId, body) };
  });

const adminCreateSequenceTemplate: AdminHandler<'adminCreateSequenceTemplate'> = async ({ db, params, body }) =>
  withOrg(db, params.orgId, async (trx) => {
    await requireOrg(trx, params.orgId);
    return { status: 201 as const, body: await createSequenceTemplate(trx, params.orgId, body) };
  });

const adminCreatePublicTemplate: AdminHandler<'adminCreatePublicTemplate'> = async ({ db, body }) => {
  return { status: 201 as const, body: await createPublicTemplate(db, body) };
};

export const catalogHandlers = {
  adminCreateProduct,
  adminCreateSequenceTemplate,
  adminCreatePublicTemplate,
} satisfies Partial<AdminHandlers>;
