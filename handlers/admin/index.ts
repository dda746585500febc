// The operator API of HARNESS.md. Operator work spans organizations, so it runs with
// row-level security in system mode; the organization is always named in the path.
import { sql } from 'kysely';
import type { AdminHandler, AdminHandlers, adminOperations } from '../../src/handler.js';
import { withSystem, type Tx } from '../../db/database.js';
import { newId, iso, isoNN } from '../../src/ids.js';
import { hashKey, newApiKey } from '../../src/http/auth.js';
import { ProblemError, notFound, invalid } from '../../src/http/problems.js';
import { ALL_SCOPES } from '../../src/spec.js';
import { emit } from '../../src/events.js';
import { toContactList } from '../lists.js';
import { toSuppressionEntry } from '../suppression.js';
import { toPublicTemplate } from '../public-templates.js';
import { normalizeDomain } from '../../src/domains.js';
import { sendingSettings } from '../../src/dispatch/settings.js';
import { checkedSending, sendingHandlers } from './sending.js';
import { leadAdminHandlers } from './leads.js';
import { inboundMessageHandlers } from './inbound-messages.js';
import { adminActionItemHandlers } from './action-items.js';
import { experimentSettings } from '../../src/analytics/holdout.js';
import { teamHandlers } from './team.js';
import { healthBody, recheckOrgHealth } from '../../src/org-health.js';

type Plan = 'free' | 'starter' | 'growth';
type Role = 'REP' | 'MANAGER' | 'ADMIN' | 'OWNER';
type ActionName = adminOperations['adminUpdateOrganization']['responses'][200]['content']['application/json']['advisoryActions'][number];

async function ownerOf(trx: Tx, orgId: string) {
  return trx.selectFrom('users').select(['id', 'name', 'email', 'role']).where('organization_id', '=', orgId)
    .where('role', '=', 'OWNER').where('status', '=', 'active').orderBy('created_at').limit(1).executeTakeFirstOrThrow();
}

async function organizationBody(trx: Tx, orgId: string) {
  const o = await trx.selectFrom('organizations').selectAll().where('id', '=', orgId).executeTakeFirst();
  if (!o) throw notFound('organization');
  const owner = await ownerOf(trx, orgId);
  return {
    id: o.id, name: o.name, plan: o.plan as Plan, flags: { v1_2_api_send: o.flags.v1_2_api_send === true },
    researchBudget: o.research_budget, researchTtlDays: o.research_ttl_days, draftsPerMonth: o.drafts_per_month, sending: sendingSettings(o.sending), advisoryActions: o.advisory_actions as ActionName[], experiments: experimentSettings(o.experiments), owner: { ...owner, role: owner.role as Role }, health: healthBody(o) as never, createdAt: isoNN(o.created_at),
  };
}

async function requireOrg(trx: Tx, orgId: string) {
  const o = await trx.selectFrom('organizations').select('id').where('id', '=', orgId).executeTakeFirst();
  if (!o) throw notFound('organization');
}

const adminCreateOrganization: AdminHandler<'adminCreateOrganization'> = async ({ db, body }) =>
  withSystem(db, async (trx) => {
    const id = newId('org');
    await trx.insertInto('organizations').values({ id, name: body.name, plan: body.plan ?? 'starter' }).execute();
    const ownerId = newId('usr');
    await trx.insertInto('users').values({
      organization_id: id, id: ownerId, name: `${body.name} Owner`, email: `owner+${ownerId}@example.invalid`, role: 'OWNER',
    }).execute();
    return { status: 201 as const, body: await organizationBody(trx, id) };
  });

const adminUpdateOrganization: AdminHandler<'adminUpdateOrganization'> = async ({ db, params, body }) =>
  withSystem(db, async (trx) => {
    const before = await trx.selectFrom('organizations').select(['research_ttl_days', 'sending']).where('id', '=', params.orgId).forUpdate().executeTakeFirst();
    if (!before) throw notFound('organization');
    const set: Record<string, unknown> = {};
    if (body.plan !== undefined) set.plan = body.plan;
    if (body.researchBudget !== undefined) set.research_budget = body.researchBudget;
    if (body.draftsPerMonth !== undefined) set.drafts_per_month = body.draftsPerMonth;
    if (body.sending !== undefined) set.sending = JSON.stringify(checkedSending(body.sending, (before as { sending: unknown }).sending));
    if (body.researchTtlDays !== undefined && body.researchTtlDays !== before.research_ttl_days) {
      set.research_ttl_days = body.researchTtlDays;
      await emit(trx, params.orgId, {
        type: 'org.research_ttl_updated', resource: { type: 'Organization', id: params.orgId },
        data: { organizationId: params.orgId, previousTtlDays: before.research_ttl_days, ttlDays: body.researchTtlDays },
      });
    }
    if (body.advisoryActions !== undefined) set.advisory_actions = body.advisoryActions;
    if (body.flags !== undefined) set.flags = sql`flags || ${JSON.stringify(body.flags)}::jsonb`;
    if (body.experiments !== undefined) set.experiments = sql`experiments || ${JSON.stringify(body.experiments)}::jsonb`;
    if (Object.keys(set).length > 0) {
      await trx.updateTable('organizations').set({ ...set, updated_at: sql`now_ms()` } as never).where('id', '=', params.orgId).execute();
      // Sending settings and the research budget are signals of the organization's health.
      if (body.sending !== undefined || body.researchBudget !== undefined) await recheckOrgHealth(trx, params.orgId);
    }
    return { status: 200 as const, body: await organizationBody(trx, params.orgId) };
  });

const adminCreateApiKey: AdminHandler<'adminCreateApiKey'> = async ({ db, params, body }) =>
  withSystem(db, async (trx) => {
    await requireOrg(trx, params.orgId);
    if (body.userId !== undefined) {
      const u = await trx.selectFrom('users').select(['id', 'status']).where('organization_id', '=', params.orgId).where('id', '=', body.userId).executeTakeFirst();
      if (!u) throw invalid('userId names no sales person of this organization.', 'body.userId');
      if (u.status !== 'active') throw invalid(`userId names a person who is ${u.status}, not an active member.`, 'body.userId');
    }
    const scopes = body.scopes.includes('*') ? [...ALL_SCOPES] : [...new Set(body.scopes as string[])];
    const key = newApiKey();
    const id = newId('key');
    const row = await trx.insertInto('api_keys').values({
      organization_id: params.orgId, id, key_hash: hashKey(key), name: body.name ?? null, scopes,
      user_id: body.userId ?? null, expires_at: body.expiresAt ?? null,
    }).returning(['created_at', 'expires_at']).executeTakeFirstOrThrow();
    return {
      status: 201 as const,
      body: { id, key, scopes: scopes as never, userId: body.userId ?? null, expiresAt: iso(row.expires_at), createdAt: isoNN(row.created_at) },
    };
  });

const adminRevokeApiKey: AdminHandler<'adminRevokeApiKey'> = async ({ db, params }) =>
  withSystem(db, async (trx) => {
    const r = await trx.updateTable('api_keys').set({ revoked_at: sql`coalesce(revoked_at, now_ms())` as never })
      .where('id', '=', params.keyId).returning('id').executeTakeFirst();
    if (!r) throw notFound('API key');
    return { status: 200 as const, body: { id: r.id, revoked: true as const } };
  });

const adminCreateProduct: AdminHandler<'adminCreateProduct'> = async ({ db, params, body }) =>
  withSystem(db, async (trx) => {
    await requireOrg(trx, params.orgId);
    const id = newId('prd');
    await trx.insertInto('products').values({ organization_id: params.orgId, id, name: body.name, description: body.description ?? null }).execute();
    return { status: 201 as const, body: { id, name: body.name } };
  });

const adminCreateSequenceTemplate: AdminHandler<'adminCreateSequenceTemplate'> = async ({ db, params, body }) =>
  withSystem(db, async (trx) => {
    await requireOrg(trx, params.orgId);
    if (body.productId !== undefined && body.productId !== null) {
      const p = await trx.selectFrom('products').select('id').where('organization_id', '=', params.orgId).where('id', '=', body.productId).executeTakeFirst();
      if (!p) throw invalid('productId names no product of this organization.', 'body.productId');
    }
    const id = newId('tpl');
    await trx.insertInto('sequence_templates').values({
      organization_id: params.orgId, id, name: body.name, product_id: body.productId ?? null, steps: JSON.stringify(body.steps),
    }).execute();
    return {
      status: 201 as const,
      body: { id, name: body.name, steps: body.steps.map((s, i) => ({ step: i + 1, dayOffset: s.dayOffset, subject: s.subject, body: s.body })) },
    };
  });

const adminCreatePublicTemplate: AdminHandler<'adminCreatePublicTemplate'> = async ({ db, body }) => {
  const id = newId('ptl');
  const row = await db.insertInto('public_templates').values({
    id, name: body.name, use_case: body.useCase, industry: body.industry ?? null, steps: JSON.stringify(body.steps),
    step_count: body.steps.length, active: body.active ?? true,
  }).returningAll().executeTakeFirstOrThrow();
  return { status: 201 as const, body: { ...toPublicTemplate(row), active: row.active } };
};

const adminUpdateList: AdminHandler<'adminUpdateList'> = async ({ db, params, body }) =>
  withSystem(db, async (trx) => {
    await requireOrg(trx, params.orgId);
    const set: Record<string, unknown> = {};
    if (body.archived !== undefined) set.archived_at = body.archived ? sql`coalesce(archived_at, now_ms())` : null;
    if (body.isTest !== undefined) set.is_test = body.isTest;
    const r = await trx.updateTable('contact_lists').set({ ...set, updated_at: sql`now_ms()` } as never)
      .where('organization_id', '=', params.orgId).where('id', '=', params.listId).where('deleted_at', 'is', null)
      .returningAll().executeTakeFirst();
    if (!r) throw notFound('list');
    const owner = await ownerOf(trx, params.orgId);
    return { status: 200 as const, body: toContactList(r, owner.id) };
  });

const adminCreateSuppressionDomain: AdminHandler<'adminCreateSuppressionDomain'> = async ({ db, params, body }) => {
  const domain = normalizeDomain(body.domain);
  if (!domain) throw invalid('domain is not a valid domain name.', 'body.domain');
  return withSystem(db, async (trx) => {
    await requireOrg(trx, params.orgId);
    const inserted = await trx.insertInto('suppression_entries').values({
      organization_id: params.orgId, id: newId('sup'), level: 'DOMAIN', email: domain, reason: 'MANUAL_BLOCK', source: body.reason ?? null,
    }).onConflict((oc) => oc.doNothing()).returningAll().executeTakeFirst();
    if (inserted) {
      await emit(trx, params.orgId, { type: 'suppression.added', resource: { type: 'SuppressionEntry', id: inserted.id }, data: { domain, level: 'DOMAIN', reason: 'MANUAL_BLOCK' } });
      return { status: 201 as const, body: toSuppressionEntry(inserted) };
    }
    const existing = await trx.selectFrom('suppression_entries').selectAll().where('organization_id', '=', params.orgId)
      .where('level', '=', 'DOMAIN').where('email', '=', domain).executeTakeFirstOrThrow();
    return { status: 201 as const, body: toSuppressionEntry(existing) };
  });
};

const adminGetQueue: AdminHandler<'adminGetQueue'> = async ({ db }) => {
  const r = await sql<{ pending: number; running: number; failed: number }>`select * from job_queue_counts()`.execute(db);
  return { status: 200 as const, body: r.rows[0] ?? { pending: 0, running: 0, failed: 0 } };
};

export const adminHandlers: AdminHandlers = {
  adminCreateOrganization, adminUpdateOrganization, adminCreateApiKey, adminRevokeApiKey,
  adminCreateProduct, adminCreateSequenceTemplate, adminCreatePublicTemplate, adminUpdateList,
  adminCreateSuppressionDomain, adminGetQueue, ...sendingHandlers,
  ...leadAdminHandlers, ...inboundMessageHandlers, ...adminActionItemHandlers,
  ...teamHandlers,
};

export { ProblemError };
