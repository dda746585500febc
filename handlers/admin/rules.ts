// Operator rows of custom rules: create (whole, or from a ready-made template), read, change,
// delete, and the templates. The checks and writes are src/rules/stored-rules.ts.
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { createRule, deleteRule, getRule, listRules, ruleTemplates, updateRule } from '../../src/rules/stored-rules.js';

const adminCreateRule: AdminHandler<'adminCreateRule'> = async ({ db, params, body }) => ({
  status: 201 as const,
  body: await createRule(db, params.orgId, body),
});

const adminListRules: AdminHandler<'adminListRules'> = async ({ db, params }) => ({
  status: 200 as const,
  body: { data: await listRules(db, params.orgId) },
});

const adminGetRule: AdminHandler<'adminGetRule'> = async ({ db, params }) => ({
  status: 200 as const,
  body: await getRule(db, params.orgId, params.ruleId),
});

const adminUpdateRule: AdminHandler<'adminUpdateRule'> = async ({ db, params, body }) => ({
  status: 200 as const,
  body: await updateRule(db, params.orgId, params.ruleId, body),
});

const adminDeleteRule: AdminHandler<'adminDeleteRule'> = async ({ db, params }) => ({
  status: 200 as const,
  body: { id: await deleteRule(db, params.orgId, params.ruleId), deleted: true as const },
});

const adminListRuleTemplates: AdminHandler<'adminListRuleTemplates'> = async ({ db, params }) => ({
  status: 200 as const,
  body: { data: await ruleTemplates(db, params.orgId) },
});

export const ruleHandlers = {
  adminCreateRule,
  adminListRules,
  adminGetRule,
  adminUpdateRule,
  adminDeleteRule,
  adminListRuleTemplates,
} satisfies Partial<AdminHandlers>;
