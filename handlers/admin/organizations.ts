// Operator rows of organizations: creation (with its OWNER) and changes to plan, flags, budgets,
// sending settings and experiments.
import { sql } from 'kysely';
import { withSystem } from '../../db/database.js';
import { recheckOrgHealth } from '../../src/account/org-health.js';
import { organizationBody } from '../../src/account/organizations.js';
import { checkedSending } from '../../src/dispatch/settings.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { notFound } from '../../src/http/problems.js';
import { emit } from '../../src/platform/events.js';
import { newId } from '../../src/platform/ids.js';

const adminCreateOrganization: AdminHandler<'adminCreateOrganization'> = async ({ db, body }) =>
  withSystem(db, async (trx) => {
    const id = newId('org');
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
    return { status: 201 as const, body: await organizationBody(trx, id) };
  });

const adminUpdateOrganization: AdminHandler<'adminUpdateOrganization'> = async ({ db, params, body }) =>
  withSystem(db, async (trx) => {
    const before = await trx
      .selectFrom('organizations')
      .select(['research_ttl_days', 'sending'])
      .where('id', '=', params.orgId)
      .forUpdate()
      .executeTakeFirst();
    if (!before) throw notFound('organization');
    const set: Record<string, unknown> = {};
    if (body.plan !== undefined) set.plan = body.plan;
    if (body.researchBudget !== undefined) set.research_budget = body.researchBudget;
    if (body.draftsPerMonth !== undefined) set.drafts_per_month = body.draftsPerMonth;
    if (body.sending !== undefined) set.sending = JSON.stringify(checkedSending(body.sending, (before as { sending: unknown }).sending));
    if (body.researchTtlDays !== undefined && body.researchTtlDays !== before.research_ttl_days) {
      set.research_ttl_days = body.researchTtlDays;
      await emit(trx, params.orgId, {
        type: 'org.research_ttl_updated',
        resource: { type: 'Organization', id: params.orgId },
        data: { organizationId: params.orgId, previousTtlDays: before.research_ttl_days, ttlDays: body.researchTtlDays },
      });
    }
    if (body.advisoryActions !== undefined) set.advisory_actions = body.advisoryActions;
    if (body.flags !== undefined) set.flags = sql`flags || ${JSON.stringify(body.flags)}::jsonb`;
    if (body.experiments !== undefined) set.experiments = sql`experiments || ${JSON.stringify(body.experiments)}::jsonb`;
    if (Object.keys(set).length > 0) {
      await trx
        .updateTable('organizations')
        .set({ ...set, updated_at: sql`now_ms()` } as never)
        .where('id', '=', params.orgId)
        .execute();
      // Sending settings and the research budget are signals of the organization's health.
      if (body.sending !== undefined || body.researchBudget !== undefined) await recheckOrgHealth(trx, params.orgId);
    }
    return { status: 200 as const, body: await organizationBody(trx, params.orgId) };
  });

export const organizationHandlers: AdminHandlers = { adminCreateOrganization, adminUpdateOrganization };
