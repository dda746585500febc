// Custom rules: what a rule may say (checked once, when it is written), the ready-made rules, and
// running the enabled rules of an organization on one event. Running is idempotent per
// (rule, event): the firing mark, the rule.* events and their fan-out commit together.
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { SWEEP_RULES } from '../deals/sweep.js';
import { ProblemError } from '../http/problems.js';
import { QUALIFY_MIN_FIT } from '../leads/scoring.js';
import { type EmitInput, emitMany } from '../platform/events.js';
import { EVENT_TYPES, NEVER_EMITTED } from '../platform/spec.js';
import { type Condition, checkConditions, fieldsRead, matches, valueAt } from './conditions.js';

/** The specific types a call_webhook action may add to rule.triggered. */
export const RULE_EMIT_TYPES = ['rule.hot_reply', 'rule.objection', 'rule.lead_qualified', 'rule.deal_at_risk'] as const;
export type RuleAction = { type: 'call_webhook'; emitType?: (typeof RULE_EMIT_TYPES)[number] };

/** Serialized size of a condition tree, on top of its node and value limits. */
export const MAX_CONDITIONS_BYTES = 16 * 1024;
/** Rules one organization may hold. */
export const MAX_RULES_PER_ORGANIZATION = 100;
/** Confidence at or above which an interested reply is hot (the rules alone give a plain interested reply 0.75). */
export const HOT_REPLY_MIN_CONFIDENCE = 0.7;

export interface RuleInput {
  triggerEventType: string;
  conditions: unknown;
  actions: unknown;
}

const ruleProblem = (slug: 'invalid-rule-trigger' | 'invalid-rule-conditions' | 'invalid-rule-actions', field: string, message: string) =>
  new ProblemError(slug, `${field}: ${message}`, { errors: [{ field, message }] });

/** Refuses a rule that could not run as written: the trigger, the condition tree, the actions. */
export function checkRule(r: RuleInput): void {
  const t = r.triggerEventType;
  if (!EVENT_TYPES.includes(t))
    throw ruleProblem('invalid-rule-trigger', 'body.triggerEventType', `${t} is not a catalogued event type (GET /webhooks/events)`);
  if (t.startsWith('rule.'))
    throw ruleProblem(
      'invalid-rule-trigger',
      'body.triggerEventType',
      'rule.* events never trigger rules (a rule could otherwise trigger itself)',
    );
  if (NEVER_EMITTED.has(t))
    throw ruleProblem('invalid-rule-trigger', 'body.triggerEventType', `${t} is never emitted, so the rule could never run`);
  if (r.conditions !== null) {
    const e = checkConditions(r.conditions, 'body.conditions');
    if (e) throw ruleProblem('invalid-rule-conditions', e.field, e.message);
    if (JSON.stringify(r.conditions).length > MAX_CONDITIONS_BYTES)
      throw ruleProblem('invalid-rule-conditions', 'body.conditions', `must serialize to at most ${MAX_CONDITIONS_BYTES} bytes`);
  }
  const actions = r.actions as RuleAction[];
  const seen = new Set<string>();
  actions.forEach((a, i) => {
    const key = a.emitType ?? '';
    if (seen.has(key))
      throw ruleProblem('invalid-rule-actions', `body.actions[${i}]`, 'repeats another action of the rule (the same type and emitType)');
    seen.add(key);
  });
}

export interface RuleTemplate {
  template: 'hot_reply' | 'objection' | 'lead_qualified' | 'deal_at_risk';
  name: string;
  description: string;
  triggerEventType: string;
  conditions: Condition;
  actions: RuleAction[];
}

const OVERDUE = SWEEP_RULES[0].kind;

/** The ready-made rules, built from the data the triggering events actually carry. */
export const RULE_TEMPLATES: readonly RuleTemplate[] = [
  {
    template: 'hot_reply',
    name: 'Hot reply',
    description: `An authenticated reply classified interested or meeting_request with confidence >= ${HOT_REPLY_MIN_CONFIDENCE} (reply.classified): emits rule.hot_reply.`,
    triggerEventType: 'reply.classified',
    // Mail whose sender could not be shown (src/inbound/authentication.ts) is nobody's signal.
    conditions: {
      all: [
        { field: 'data.intent', in: ['interested', 'meeting_request'] },
        { field: 'data.confidence', gte: HOT_REPLY_MIN_CONFIDENCE },
        { field: 'data.authenticated', equals: true },
      ],
    },
    actions: [{ type: 'call_webhook', emitType: 'rule.hot_reply' }],
  },
  {
    template: 'objection',
    name: 'Objection',
    description: 'An authenticated reply classified not_interested (reply.classified): emits rule.objection.',
    triggerEventType: 'reply.classified',
    conditions: {
      all: [
        { field: 'data.intent', equals: 'not_interested' },
        { field: 'data.authenticated', equals: true },
      ],
    },
    actions: [{ type: 'call_webhook', emitType: 'rule.objection' }],
  },
  {
    template: 'lead_qualified',
    name: 'Lead over the fit threshold',
    description: `An inbound lead whose fit score is at least the qualification threshold ${QUALIFY_MIN_FIT} (inbound.lead_received): emits rule.lead_qualified.`,
    triggerEventType: 'inbound.lead_received',
    conditions: { field: 'data.fitScore', gte: QUALIFY_MIN_FIT },
    actions: [{ type: 'call_webhook', emitType: 'rule.lead_qualified' }],
  },
  {
    template: 'deal_at_risk',
    name: 'Deal at risk',
    description: `An open deal whose close date has passed (${OVERDUE}, emitted by the deal sweep once per close date, at or before deal.slipped, so a slipped deal is caught once and early): emits rule.deal_at_risk.`,
    triggerEventType: OVERDUE,
    conditions: { field: 'data.daysOverdue', gte: 1 },
    actions: [{ type: 'call_webhook', emitType: 'rule.deal_at_risk' }],
  },
];

/**
 * Runs the organization's enabled rules that trigger on one event, in the caller's transaction
 * (bound to the organization). A rule fires at most once per event: the firing mark is inserted
 * ON CONFLICT DO NOTHING, and only a new mark emits. rule.* events are ignored (no loops).
 * Returns the number of rules that fired.
 */
export async function runRules(trx: Tx, organizationId: string, eventId: string): Promise<number> {
  const ev = await trx
    .selectFrom('events')
    .select(['id', 'type', 'data', 'resource_type', 'resource_id'])
    .where('organization_id', '=', organizationId)
    .where('id', '=', eventId)
    .executeTakeFirst();
  if (!ev || ev.type.startsWith('rule.')) return 0;
  const rules = await trx
    .selectFrom('rules')
    .select(['id', 'name', 'conditions', 'actions'])
    .where('organization_id', '=', organizationId)
    .where('trigger_event_type', '=', ev.type)
    .where('enabled', '=', true)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  const firing = rules.filter((r) => matches(r.conditions as Condition | null, ev.data));
  if (firing.length === 0) return 0;
  const { rows: marked } = await sql<{ rule_id: string }>`
    INSERT INTO rule_firings (organization_id, rule_id, event_id)
    SELECT ${organizationId}, r, ${eventId} FROM unnest(${firing.map((r) => r.id)}::text[]) AS r
    ON CONFLICT DO NOTHING
    RETURNING rule_id`.execute(trx);
  const fresh = new Set(marked.map((m) => m.rule_id));
  const events: EmitInput[] = [];
  for (const r of firing.filter((x) => fresh.has(x.id))) {
    const fields = Object.fromEntries(fieldsRead(r.conditions as Condition | null).map((f) => [f, valueAt(ev.data, f) ?? null]));
    const data = { ruleId: r.id, ruleName: r.name, triggerEventId: ev.id, triggerEventType: ev.type, fields };
    // The rule.* events are about what the triggering event was about (its contact, deal, lead).
    const resource = { type: ev.resource_type, id: ev.resource_id };
    const types = [
      'rule.triggered',
      ...new Set((r.actions as RuleAction[]).flatMap((a) => (a.type === 'call_webhook' && a.emitType ? [a.emitType] : []))),
    ];
    for (const type of types) events.push({ type, resource, data });
  }
  await emitMany(trx, organizationId, events);
  return fresh.size;
}
