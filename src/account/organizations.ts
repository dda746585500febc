// An organization as the operator sees it, and the one check that an organization named in an
// operator path exists.
import type { Db, Tx } from '../../db/database.js';
import { withSystem } from '../../db/database.js';
import { experimentSettings } from '../analytics/holdout.js';
import { sendingSettings } from '../dispatch/settings.js';
import type { adminOperations } from '../http/handler.js';
import { notFound } from '../http/problems.js';
import { isoNN } from '../platform/ids.js';
import { healthBody } from './org-health.js';
import { organizationOwner } from './people.js';

type Organization = adminOperations['adminUpdateOrganization']['responses'][200]['content']['application/json'];

/** 404 unless the organization exists; `lock` holds its row to commit (a limit counted per organization). */
export async function requireOrg(trx: Tx, orgId: string, opts: { lock?: boolean } = {}): Promise<void> {
  let q = trx.selectFrom('organizations').select('id').where('id', '=', orgId);
  if (opts.lock) q = q.forUpdate();
  if (!(await q.executeTakeFirst())) throw notFound('organization');
}

/** requireOrg in a short system transaction of its own, for an operator row whose work runs outside one. */
export async function requireOrgExists(db: Db, orgId: string): Promise<void> {
  await withSystem(db, (trx) => requireOrg(trx, orgId));
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
    owner: { ...owner, role: owner.role as Organization['owner']['role'] },
    health: healthBody(o) as never,
    createdAt: isoNN(o.created_at),
  };
}
