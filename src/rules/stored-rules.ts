// The stored custom rules of an organization, as the operator rows see them: create (whole, or
// from a ready-made template), read, change, delete, and the templates. Every write checks the
// rule as it will stand (checkRule), so a rule that could not run is refused here and never fails
// in its job.
import { sql, type UpdateObject } from 'kysely';
import { type Database, type Db, type Tx, withOrg } from '../../db/database.js';
import { requireOrg } from '../account/organizations.js';
import type { adminOperations } from '../http/handler.js';
import { invalid, notFound, ProblemError } from '../http/problems.js';
import { isoNN, newId } from '../platform/ids.js';
import { checkRule, MAX_RULES_PER_ORGANIZATION, RULE_TEMPLATES, type RuleAction } from './rules.js';

type AdminRule = adminOperations['adminGetRule']['responses'][200]['content']['application/json'];
export type NewRuleBody = adminOperations['adminCreateRule']['requestBody']['content']['application/json'];
export type RuleChangesBody = adminOperations['adminUpdateRule']['requestBody']['content']['application/json'];

function toRule(r: {
  id: string;
  name: string;
  trigger_event_type: string;
  conditions: unknown;
  actions: unknown;
  enabled: boolean;
  template: string | null;
  created_at: Date;
  updated_at: Date;
}): AdminRule {
  return {
    id: r.id,
    name: r.name,
    triggerEventType: r.trigger_event_type,
    conditions: r.conditions as AdminRule['conditions'],
    actions: r.actions as AdminRule['actions'],
    enabled: r.enabled,
    template: r.template,
    createdAt: isoNN(r.created_at),
    updatedAt: isoNN(r.updated_at),
  };
}

async function ruleRow(trx: Tx, orgId: string, ruleId: string, lock = false) {
  let q = trx.selectFrom('rules').selectAll().where('organization_id', '=', orgId).where('id', '=', ruleId);
  if (lock) q = q.forUpdate();
  const r = await q.executeTakeFirst();
  if (!r) throw notFound('rule');
  return r;
}

export async function createRule(db: Db, orgId: string, body: NewRuleBody): Promise<AdminRule> {
  let rule: { name: string; triggerEventType: string; conditions: unknown; actions: RuleAction[]; template: string | null };
  if (body.template !== undefined) {
    for (const f of ['triggerEventType', 'conditions', 'actions'] as const) {
      if (body[f] !== undefined) throw invalid(`${f} cannot be given with template: a template brings its own.`, `body.${f}`);
    }
    const t = RULE_TEMPLATES.find((x) => x.template === body.template)!;
    rule = {
      name: body.name ?? t.name,
      triggerEventType: t.triggerEventType,
      conditions: t.conditions,
      actions: t.actions,
      template: t.template,
    };
  } else {
    for (const f of ['name', 'triggerEventType', 'actions'] as const) {
      if (body[f] === undefined) throw invalid(`${f} is required (or name a template).`, `body.${f}`);
    }
    rule = {
      name: body.name!,
      triggerEventType: body.triggerEventType!,
      conditions: body.conditions ?? null,
      actions: body.actions as RuleAction[],
      template: null,
    };
  }
  checkRule(rule);
  return withOrg(db, orgId, async (trx) => {
    // The organization row is locked so two creations cannot both pass the limit.
    await requireOrg(trx, orgId, { lock: true });
    const { n } = await trx
      .selectFrom('rules')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('organization_id', '=', orgId)
      .executeTakeFirstOrThrow();
    if (Number(n) >= MAX_RULES_PER_ORGANIZATION)
      throw new ProblemError('rule-limit-reached', `The organization already has ${MAX_RULES_PER_ORGANIZATION} rules.`);
    const row = await trx
      .insertInto('rules')
      .values({
        organization_id: orgId,
        id: newId('rul'),
        name: rule.name,
        trigger_event_type: rule.triggerEventType,
        conditions: rule.conditions === null ? null : JSON.stringify(rule.conditions),
        actions: JSON.stringify(rule.actions),
        template: rule.template,
        enabled: body.enabled ?? true,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return toRule(row);
  });
}

/** The organization's rules, oldest first; 404 for an unknown organization. */
export const listRules = (db: Db, orgId: string): Promise<AdminRule[]> =>
  withOrg(db, orgId, async (trx) => {
    await requireOrg(trx, orgId);
    const rows = await trx
      .selectFrom('rules')
      .selectAll()
      .where('organization_id', '=', orgId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(toRule);
  });

export const getRule = (db: Db, orgId: string, ruleId: string): Promise<AdminRule> =>
  withOrg(db, orgId, async (trx) => toRule(await ruleRow(trx, orgId, ruleId)));

export const updateRule = (db: Db, orgId: string, ruleId: string, body: RuleChangesBody): Promise<AdminRule> =>
  withOrg(db, orgId, async (trx) => {
    const before = await ruleRow(trx, orgId, ruleId, true);
    const after = {
      triggerEventType: body.triggerEventType ?? before.trigger_event_type,
      conditions: body.conditions !== undefined ? body.conditions : before.conditions,
      actions: (body.actions ?? before.actions) as RuleAction[],
    };
    checkRule(after);
    const set: UpdateObject<Database, 'rules'> = {};
    if (body.name !== undefined) set.name = body.name;
    if (body.enabled !== undefined) set.enabled = body.enabled;
    if (body.triggerEventType !== undefined) set.trigger_event_type = body.triggerEventType;
    if (body.conditions !== undefined) set.conditions = body.conditions === null ? null : JSON.stringify(body.conditions);
    if (body.actions !== undefined) set.actions = JSON.stringify(body.actions);
    const row = await trx
      .updateTable('rules')
      .set({ ...set, updated_at: sql<Date>`now_ms()` })
      .where('organization_id', '=', orgId)
      .where('id', '=', ruleId)
      .returningAll()
      .executeTakeFirstOrThrow();
    return toRule(row);
  });

/** Deletes the rule; returns its id, or 404. */
export const deleteRule = (db: Db, orgId: string, ruleId: string): Promise<string> =>
  withOrg(db, orgId, async (trx) => {
    const r = await trx
      .deleteFrom('rules')
      .where('organization_id', '=', orgId)
      .where('id', '=', ruleId)
      .returning('id')
      .executeTakeFirst();
    if (!r) throw notFound('rule');
    return r.id;
  });

/** The ready-made rules (the organization must exist). */
export const ruleTemplates = (db: Db, orgId: string) =>
  withOrg(db, orgId, async (trx) => {
    await requireOrg(trx, orgId);
    // openapi-typescript types the property-less AdminRuleConditions object as Record<string, never>.
    return RULE_TEMPLATES.map((t) => ({ ...t, conditions: t.conditions as never, actions: [...t.actions] }));
  });
