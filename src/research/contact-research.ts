// Contact research: the company dossier (reused while fresh, else researched anew within the
// budget), then the assessment of the person, stored on the contact with research.completed.
import { withOrg } from '../../db/database.js';
import { isLiveContact } from '../crm/live-contacts.js';
import { notFound } from '../http/problems.js';
import { emit } from '../platform/events.js';
import { newId } from '../platform/ids.js';
import type { Deps } from '../platform/services.js';
import { assessContact, type ContactRecord } from './assess.js';
import { researchCompany } from './runs.js';

export interface ContactResearchResult {
  jobId: string;
  contactId: string;
  status: 'completed';
  contactAssessment: Record<string, unknown>;
  signalReasons: string[];
}

export async function researchContact(
  deps: Deps,
  org: string,
  contact: ContactRecord,
  company: { id: string; name: string },
): Promise<ContactResearchResult> {
  const outcome = await researchCompany(deps, org, company.id, { reuseFresh: true, contactId: contact.id });
  const research = assessContact(
    contact,
    { id: company.id, name: company.name, researchUpdatedAt: outcome.updatedAt.toISOString() },
    outcome.dossier,
  );
  const jobId = newId('rsc');
  const stored = {
    version: 1,
    runId: jobId,
    companyId: company.id,
    companyRunId: outcome.runId,
    companyResearchUpdatedAt: outcome.updatedAt.toISOString(),
    ...research,
  };
  await withOrg(deps.db, org, async (trx) => {
    // A contact deleted or erased while the run was out fetching gets nothing stored.
    const row = await trx
      .updateTable('contacts')
      .set({ research: JSON.stringify(stored), research_updated_at: deps.services.clock.now() })
      .where('organization_id', '=', org)
      .where('id', '=', contact.id)
      .where(isLiveContact())
      .returning('id')
      .executeTakeFirst();
    if (!row) throw notFound('contact');
    await emit(trx, org, {
      type: 'research.completed',
      resource: { type: 'Contact', id: contact.id },
      data: {
        contactId: contact.id,
        companyId: company.id,
        hasMinimumCoverage: outcome.dossier.coverage.hasMinimumCoverage,
        lowConfidence: outcome.dossier.coverage.lowConfidence,
        companyResearchReused: outcome.reused,
      },
    });
  });
  return {
    jobId,
    contactId: contact.id,
    status: 'completed',
    contactAssessment: research.contactAssessment,
    signalReasons: research.signalReasons,
  };
}
