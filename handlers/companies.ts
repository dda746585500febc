// Companies (src/crm/companies.ts): identity by normalized domain; research (src/research/).
import { companyById, companyPage, companyResearch, findOrCreateCompany, toCompany } from '../src/crm/companies.js';
import type { Handler, Handlers, LongHandler } from '../src/http/handler.js';
import { isoNN } from '../src/platform/ids.js';
import { researchCompany as runCompanyResearch } from '../src/research/runs.js';

const createCompany: Handler<'createCompany'> = async ({ trx, auth, body }) => {
  const { row, created } = await findOrCreateCompany(trx, auth.organizationId, body.domain, body.name, 'body.domain');
  return created ? { status: 201, body: toCompany(row) } : { status: 200, body: toCompany(row) };
};

const listCompanies: Handler<'listCompanies'> = async ({ trx, auth, query }) => ({
  status: 200,
  body: await companyPage(trx, auth.organizationId, query),
});

const getCompany: Handler<'getCompany'> = async ({ trx, auth, params }) => ({
  status: 200,
  body: toCompany(await companyById(trx, auth.organizationId, params.id)),
});

/** Cached research; 404 until research has been computed (researchUpdatedAt null). */
const getCompanyResearch: Handler<'getCompanyResearch'> = async ({ trx, auth, params, services }) => ({
  status: 200,
  body: await companyResearch(trx, auth.organizationId, params.id, services.clock),
});

/** Researches the company's site anew (synchronous; see src/research/). */
const researchCompany: LongHandler<'researchCompany'> = async ({ config, db, log, services, auth, params }) => {
  const o = await runCompanyResearch({ config, db, log, services }, auth.organizationId, params.id, { reuseFresh: false });
  const d = o.dossier;
  return {
    status: 200,
    body: {
      jobId: o.runId,
      companyId: o.companyId,
      status: 'completed',
      summary: d.summary,
      facts: d.facts,
      researchSources: d.researchSources,
      recentNews: d.recentNews,
      painPoints: d.painPoints,
      coverage: d.coverage,
      updatedAt: isoNN(o.updatedAt),
    },
  };
};

export const companyHandlers = {
  createCompany,
  listCompanies,
  getCompany,
  getCompanyResearch,
  researchCompany,
} satisfies Partial<Handlers>;
