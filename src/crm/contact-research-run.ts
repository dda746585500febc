// POST /contacts/{id}/research: the refusals before a live contact's research run (src/research/).
import { withOrg } from '../../db/database.js';
import { invalid } from '../http/problems.js';
import type { Deps } from '../platform/services.js';
import { researchContact as runContactResearch } from '../research/contact-research.js';
import { liveContact } from './contact-view.js';

/** Researches the contact (synchronous; see src/research/): 404 unknown, 400 no company domain, then the run. */
export async function researchLiveContact(deps: Deps, organizationId: string, id: string) {
  const org = organizationId;
  const row = await withOrg(deps.db, org, (trx) => liveContact(trx, org, id));
  if (row.company_ref === null || (row.company_domain ?? row.company_domain_normalized) === null) {
    throw invalid('The contact has no linked company with a domain to research; link one with PATCH /contacts/{id} (companyId).');
  }
  return runContactResearch(
    deps,
    org,
    { id: row.id, name: row.name, title: row.title, fitScore: row.fit_score, urgencyScore: row.urgency_score },
    { id: row.company_ref, name: row.company_name ?? row.company_domain_normalized ?? row.company_ref },
  );
}
