// Contact lists (src/crm/lists.ts): create, read, soft delete, draft generation and its runs
// (src/drafting/generation-runs.ts).
import { contactList, createContactList, listContactLists, softDeleteList, startDraftGeneration } from '../src/crm/lists.js';
import { generationRun, generationRunsPage } from '../src/drafting/generation-runs.js';
import type { Handler, Handlers } from '../src/http/handler.js';

const createList: Handler<'createList'> = async ({ trx, auth, body }) => ({
  status: 201,
  body: await createContactList(trx, auth.organizationId, auth.userId, body),
});

const listLists: Handler<'listLists'> = async ({ trx, auth, query }) => ({
  status: 200,
  body: await listContactLists(trx, auth.organizationId, query),
});

const getList: Handler<'getList'> = async ({ trx, auth, params }) => ({
  status: 200,
  body: await contactList(trx, auth.organizationId, params.id),
});

/** Soft delete: 409 while own contacts have sequences in flight, unless force=true pauses them (src/crm/lists.ts). */
const deleteList: Handler<'deleteList'> = async ({ trx, auth, params, query }) => ({
  status: 200,
  body: await softDeleteList(trx, auth, params.id, query.force === 'true'),
});

const generateListDrafts: Handler<'generateListDrafts'> = async ({ trx, auth, params, body, config, services }) => ({
  status: 200,
  body: await startDraftGeneration(trx, auth.organizationId, auth.org.plan, params.id, {
    regenerate: body?.regenerate === true,
    secret: config.erasureHashSecret,
    clock: services.clock,
  }),
});

const getListGenerationRun: Handler<'getListGenerationRun'> = async ({ trx, auth, params }) => ({
  status: 200,
  body: await generationRun(trx, auth.organizationId, params.id, params.runId),
});

const listListGenerationRuns: Handler<'listListGenerationRuns'> = async ({ trx, auth, params, query }) => ({
  status: 200,
  body: await generationRunsPage(trx, auth.organizationId, params.id, query),
});

export const listHandlers = {
  createList,
  listLists,
  getList,
  deleteList,
  generateListDrafts,
  getListGenerationRun,
  listListGenerationRuns,
} satisfies Partial<Handlers>;
