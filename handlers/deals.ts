// Deals pipeline (tag deals): stages, deals, stage moves through gates, history and activities.
// The rules are in src/deals/ (those of spec/paths/deal*.yaml and spec/DECISIONS.md).
import { logDealActivity } from '../src/deals/activities.js';
import { createDeal } from '../src/deals/create.js';
import { dealHistoryPage } from '../src/deals/history.js';
import { dealsPage, readDeal } from '../src/deals/read.js';
import { moveDealStage, type StageBody } from '../src/deals/stage-move.js';
import { orgStages, toStage } from '../src/deals/stages.js';
import { updateDeal } from '../src/deals/update.js';
import type { AuthInfo, Handler, Handlers } from '../src/http/handler.js';

/** Who a change is attributed to: the key's user, else the key itself. */
const actorOf = (auth: AuthInfo): string => auth.userId ?? auth.keyId;

const includes = (include: string | undefined, token: string): boolean => (include ?? '').split(',').some((t) => t.trim() === token);

const listDealStages: Handler<'listDealStages'> = async ({ trx, auth }) => {
  const stages = await orgStages(trx, auth.organizationId);
  return { status: 200, body: { data: stages.map(toStage) } };
};

const listDeals: Handler<'listDeals'> = async ({ trx, auth, query }) => {
  const { minValueCents, maxValueCents, stageSlug, cursor, limit } = query;
  const withMeddpic = includes(query.include, 'meddpic');
  return {
    status: 200,
    body: await dealsPage(trx, auth.organizationId, { stageSlug, minValueCents, maxValueCents, withMeddpic, cursor, limit }),
  };
};

const getDeal: Handler<'getDeal'> = async ({ trx, auth, params, query }) => {
  const withMeddpic = includes(query.include, 'meddpic');
  return { status: 200, body: await readDeal(trx, auth.organizationId, params.id, withMeddpic) };
};

const createDealHandler: Handler<'createDeal'> = async ({ trx, auth, body }) => ({
  status: 200,
  body: await createDeal(trx, auth.organizationId, body, { keyUserId: auth.userId, by: actorOf(auth) }),
});

const updateDealHandler: Handler<'updateDeal'> = async ({ trx, auth, params, body }) => ({
  status: 200,
  body: await updateDeal(trx, auth.organizationId, params.id, body),
});

const changeDealStage: Handler<'changeDealStage'> = async ({ trx, auth, params, body, services }) => ({
  status: 200,
  body: await moveDealStage(trx, auth.organizationId, params.id, body as StageBody, actorOf(auth), services.clock),
});

const listDealHistory: Handler<'listDealHistory'> = async ({ trx, auth, params, query }) => ({
  status: 200,
  body: await dealHistoryPage(trx, auth.organizationId, params.id, query),
});

const createDealActivity: Handler<'createDealActivity'> = async ({ trx, auth, params, body }) => ({
  status: 201,
  body: await logDealActivity(trx, auth.organizationId, params.id, { ...body, by: actorOf(auth) }),
});

export const dealHandlers = {
  listDealStages,
  listDeals,
  createDeal: createDealHandler,
  getDeal,
  updateDeal: updateDealHandler,
  changeDealStage,
  listDealHistory,
  createDealActivity,
} satisfies Partial<Handlers>;
