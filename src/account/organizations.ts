// An organization as the operator sees it, the one check that an organization named in an
// operator path exists, and the operator's changes: creation (with its OWNER) and changes to plan,
// flags, budgets, sending settings, experiments and retention overrides.
import { sql, type UpdateObject } from 'kysely';
import type { Database, Db, Tx } from '../../db/database.js';
import { withOrg } from '../../db/database.js';
import { experimentSettings } from '../analytics/holdout.js';
import { gatesOfSendingChange, reevaluateHeld } from '../dispatch/reevaluate.js';
import { checkedSending, sendingSettings } from '../dispatch/settings.js';
import type { adminOperations } from '../http/handler.js';
import { notFound } from '../http/problems.js';
import type { Clock } from '../platform/clock.js';
import { emit } from '../platform/events.js';
import { isoNN, newId } from '../platform/ids.js';
import { retentionChanges, retentionOverrides } from '../platform/retention.js';
import { healthBody, recheckOrgHealth } from './org-health.js';
import { organizationOwner } from './people.js';

type Organization = adminOperations['adminUpdateOrganization']['responses'][200]['content']['application/json'];
type NewOrganization = adminOperations['adminCreateOrganization']['requestBody']['content']['application/json'];
type OrganizationChanges = adminOperations['adminUpdateOrganization']['requestBody']['content']['application/json'];

/** 404 unless the organization exists; `lock` holds its row to commit (a limit counted per organization). */
export async function requireOrg(trx: Tx, orgId: string, opts: { lock?: boolean } = {}): Promise<void> {
  let q = trx.selectFrom('organizations').select('id').where('id', '=', orgId);
  if (opts.lock) q = q.forUpdate();
  if (!(await q.executeTakeFirst())) throw notFound('organization');
}

/**
 * requireOrg in a short transaction of its own bound to the organization (row-level security shows
 * its row, if it exists), for an operator row whose work runs outside one.
 */
export async function requireOrgExists(db: Db, orgId: string): Promise<void> {
  await withOrg(db, orgId, (trx) => requireOrg(trx, orgId));
}

/** The operator's view of an organization (OperatorOrganization); 404 when there is none. */
export async function organizationBody(trx: Tx, orgId: string): Promise<Organization> {
  const o = await trx.selectFrom('organizations').selectAll().where('id', '=', orgId).executeTakeFirst();
  if (!o) throw notFound('organization');
  const owner = await organizationOwner(trx, orgId);
  return {
    id: o.id,
    name: o.name,
    plan: o.plan as Organization['plan'],
    flags: { v1_2_api_send: o.flags.v1_2_api_send === true },
    researchBudget: o.research_budget,
    researchTtlDays: o.research_ttl_days,
    draftsPerMonth: o.drafts_per_month,
    sending: sendingSettings(o.sending),
    advisoryActions: o.advisory_actions as Organization['advisoryActions'],
    experiments: experimentSettings(o.experiments),
    retention: retentionBody(o.retention),
    owner: { ...owner, role: owner.role as Organization['owner']['role'] },
    health: healthBody(o),
    createdAt: isoNN(o.created_at),
  };
}

/** The organization's retention overrides as the operator reads them (null: the deployment's days). */
function retentionBody(stored: unknown): Organization['retention'] {
  const o = retentionOverrides(stored);
  return {
    eventsDays: o.events ?? null,
    webhookDeliveriesDays: o.webhookDeliveries ?? null,
    sendBodiesDays: o.sendBodies ?? null,
    inboundRawDays: o.inboundRaw ?? null,
  };
}

/**
 * A new organization with its OWNER (who cannot be removed); answers its operator view. The id is
 * chosen first, so the transaction is bound to the new organization like any other work on one.
 */
export async function createOrganization(db: Db, body: NewOrganization): Promise<Organization> {
  const id = newId('org');
  return withOrg(db, id, (trx) => insertOrganization(trx, id, body));
}

async function insertOrganization(trx: Tx, id: string, body: NewOrganization): Promise<Organization> {
  await trx
    .insertInto('organizations')
    .values({ id, name: body.name, plan: body.plan ?? 'starter' })
    .execute();
  const ownerId = newId('usr');
  await trx
    .insertInto('users')
    .values({
      organization_id: id,
      id: ownerId,
      name: `${body.name} Owner`,
      email: `owner+${ownerId}@example.invalid`,
      role: 'OWNER',
    })
    .execute();
  return organizationBody(trx, id);
}

/**
 * Applies the operator's changes (the organization's row locked); a changed research TTL emits
 * org.research_ttl_updated; changed sending settings re-evaluate the steps they held
 * (src/dispatch/reevaluate.ts). 404 when there is no such organization. Answers its operator view.
 */
export async function updateOrganization(trx: Tx, orgId: string, body: OrganizationChanges, clock: Clock): Promise<Organization> {
  const before = await trx
    .selectFrom('organizations')
    .select(['research_ttl_days', 'sending'])
    .where('id', '=', orgId)
    .forUpdate()
    .executeTakeFirst();
  if (!before) throw notFound('organization');
  const set: UpdateObject<Database, 'organizations'> = {};
  if (body.plan !== undefined) set.plan = body.plan;
  if (body.researchBudget !== undefined) set.research_budget = body.researchBudget;
  if (body.draftsPerMonth !== undefined) set.drafts_per_month = body.draftsPerMonth;
  const sending = body.sending === undefined ? undefined : checkedSending(body.sending, before.sending);
  if (sending !== undefined) set.sending = JSON.stringify(sending);
  if (body.researchTtlDays !== undefined && body.researchTtlDays !== before.research_ttl_days) {
    set.research_ttl_days = body.researchTtlDays;
    await emit(trx, orgId, {
      type: 'org.research_ttl_updated',
      resource: { type: 'Organization', id: orgId },
      data: { organizationId: orgId, previousTtlDays: before.research_ttl_days, ttlDays: body.researchTtlDays },
    });
  }
  if (body.advisoryActions !== undefined) set.advisory_actions = body.advisoryActions;
  if (body.flags !== undefined) set.flags = sql<string>`flags || ${JSON.stringify(body.flags)}::jsonb`;
  if (body.experiments !== undefined) set.experiments = sql<string>`experiments || ${JSON.stringify(body.experiments)}::jsonb`;
  // A null clears the kind's override: the deployment's days apply again.
  if (body.retention !== undefined)
    set.retention = sql<string>`jsonb_strip_nulls(retention || ${JSON.stringify(retentionChanges(body.retention))}::jsonb)`;
  if (Object.keys(set).length > 0) {
    await trx
      .updateTable('organizations')
      .set({ ...set, updated_at: sql<Date>`now_ms()` })
      .where('id', '=', orgId)
      .execute();
    // Sending settings and the research budget are signals of the organization's health.
    if (body.sending !== undefined || body.researchBudget !== undefined) await recheckOrgHealth(trx, orgId, clock);
    // Held steps the changed settings may now let go, or hold otherwise, are gated again at once.
    if (sending !== undefined) {
      const codes = gatesOfSendingChange(sendingSettings(before.sending), sendingSettings(sending));
      await reevaluateHeld(trx, { organizationId: orgId, codes });
    }
  }
  return organizationBody(trx, orgId);
}
