// Research runs: who may fetch, once, within the budget, and where the result goes. A run is
// reserved in a short transaction (the budget count queues on an advisory lock per organization),
// the site is crawled with no transaction or connection held, and the dossier, the run's
// outcome and company.research_completed commit together. A second request for a company that is
// being researched waits for that run and answers its result; it fetches nothing and costs nothing.
import { sql } from 'kysely';
import { type Db, type Tx, withOrg } from '../../db/database.js';
import { recheckOrgHealth } from '../account/org-health.js';
import { usagePeriod } from '../account/usage.js';
import { notFound, ProblemError } from '../http/problems.js';
import type { Clock } from '../platform/clock.js';
import type { Config } from '../platform/config.js';
import { emit } from '../platform/events.js';
import { newId } from '../platform/ids.js';
import type { Deps } from '../platform/services.js';
import { crawlSite } from './crawl.js';
import { buildDossier, type Dossier } from './dossier.js';
import { ROBOTS_TOKEN } from './robots.js';

/** How long one crawl may take: well inside the 120 s a client is told to wait. */
export const CRAWL_BUDGET_MS = 45_000;
/**
 * A run still marked running after this long belongs to a process that died: it is abandoned. Its
 * started_at is written from the clock (the budget counts runs by the clock's period), so its age
 * is measured on the clock too.
 */
const STALE_RUN_MS = 60_000;
const POLL_MS = 150;
const DAY_MS = 86_400_000;

export const userAgent = (config: Config) => `${ROBOTS_TOKEN}/1.0 (+${config.publicBaseUrl}/research-bot)`;

/** Whether research written at `updatedAt` is still fresh at `now` (the clock's). */
export const isFresh = (updatedAt: Date, ttlDays: number, now: Date) => updatedAt.getTime() + ttlDays * DAY_MS > now.getTime();

/** A stored dossier this version of the service wrote, or null (legacy or malformed). */
export function storedDossier(research: unknown): Dossier | null {
  const d = research as Partial<Dossier> | null;
  return d && typeof d === 'object' && d.version === 1 && Array.isArray(d.researchSources) && d.coverage ? (d as Dossier) : null;
}

export interface CompanyResearchOutcome {
  runId: string;
  companyId: string;
  dossier: Dossier;
  updatedAt: Date;
  ttlDays: number;
  /** A fresh stored dossier was used; nothing was fetched. */
  reused: boolean;
}

type Reservation =
  | { kind: 'reuse'; outcome: CompanyResearchOutcome }
  | { kind: 'wait'; runId: string }
  | { kind: 'run'; runId: string; company: { name: string | null; domain: string }; ttlDays: number };

async function companyRow(trx: Tx, org: string, companyId: string) {
  return trx
    .selectFrom('companies')
    .select(['id', 'name', 'domain_normalized', 'research', 'research_updated_at'])
    .where('organization_id', '=', org)
    .where('id', '=', companyId)
    .executeTakeFirst();
}

/** Takes the company's one running slot; false when another run holds it. */
async function takeSlot(trx: Tx, org: string, runId: string, companyId: string, contactId: string | null, clock: Clock): Promise<boolean> {
  const r = await sql<{ id: string }>`
    INSERT INTO research_runs (organization_id, id, company_id, contact_id, started_at)
    VALUES (${org}, ${runId}, ${companyId}, ${contactId}, ${clock.now()}::timestamptz)
    ON CONFLICT (organization_id, company_id) WHERE status = 'running' DO NOTHING RETURNING id`.execute(trx);
  return r.rows.length > 0;
}

async function reserve(
  trx: Tx,
  org: string,
  companyId: string,
  reuseFresh: boolean,
  contactId: string | null,
  clock: Clock,
): Promise<Reservation> {
  // The dossier itself is read only when it may be reused.
  const c = await trx
    .selectFrom('companies as c')
    .innerJoin('organizations as o', 'o.id', 'c.organization_id')
    .select(['c.name', 'c.domain_normalized', 'c.research_updated_at', 'o.research_budget', 'o.research_ttl_days'])
    .$if(reuseFresh, (q) => q.select('c.research'))
    .where('c.organization_id', '=', org)
    .where('c.id', '=', companyId)
    .executeTakeFirst();
  if (!c) throw notFound('company');
  const stored = reuseFresh ? storedDossier((c as { research?: unknown }).research) : null;
  if (stored && c.research_updated_at && isFresh(c.research_updated_at, c.research_ttl_days, clock.now())) {
    return {
      kind: 'reuse',
      outcome: {
        runId: stored.runId,
        companyId,
        dossier: stored,
        updatedAt: c.research_updated_at,
        ttlDays: c.research_ttl_days,
        reused: true,
      },
    };
  }
  // At most one running run per company (a partial unique index): a request that finds one waits
  // for it, unless it is left over from a process that died.
  const runId = newId('rrn');
  if (!(await takeSlot(trx, org, runId, companyId, contactId, clock))) {
    const running = await trx
      .selectFrom('research_runs')
      .select(['id', 'started_at'])
      .where('organization_id', '=', org)
      .where('company_id', '=', companyId)
      .where('status', '=', 'running')
      .forUpdate()
      .executeTakeFirst();
    if (running && running.started_at.getTime() >= clock.now().getTime() - STALE_RUN_MS) return { kind: 'wait', runId: running.id };
    if (running) {
      await trx
        .updateTable('research_runs')
        .set({ status: 'abandoned', finished_at: sql<Date>`now_ms()`, error: 'the process running it stopped' })
        .where('organization_id', '=', org)
        .where('id', '=', running.id)
        .execute();
    }
    if (!(await takeSlot(trx, org, runId, companyId, contactId, clock))) {
      throw new ProblemError('internal-error', 'Another research run of this company started at the same moment; retry the request.');
    }
  }
  // The budget is counted with the organization's budget decisions queued on an advisory lock,
  // held from here to COMMIT only: the count sees every run committed before it, and this one.
  await sql`SELECT pg_advisory_xact_lock(hashtextextended('research:' || ${org}, 0))`.execute(trx);
  const now = clock.now();
  const period = usagePeriod(now);
  const used = await trx
    .selectFrom('research_runs')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('organization_id', '=', org)
    .where('started_at', '>=', period.start)
    .executeTakeFirstOrThrow();
  if (Number(used.n) > c.research_budget) {
    const retryAfter = Math.max(1, Math.ceil((period.end.getTime() - now.getTime()) / 1000));
    throw new ProblemError(
      'research-budget-exhausted',
      `The organization's research budget of ${c.research_budget} run(s) for this period is spent; it resets at ${period.end.toISOString()}.`,
      { researchBudget: c.research_budget, used: Number(used.n) - 1, periodEnd: period.end.toISOString() },
      { 'Retry-After': String(retryAfter) },
    );
  }
  // The run that spends the last of the budget makes the organization's health say so.
  if (Number(used.n) >= c.research_budget) await recheckOrgHealth(trx, org, clock);
  return { kind: 'run', runId, company: { name: c.name, domain: c.domain_normalized }, ttlDays: c.research_ttl_days };
}

/** Waits for a running run to end; true when it completed, false when it failed or was abandoned. */
async function awaitRun(db: Db, org: string, runId: string, clock: Clock): Promise<boolean> {
  for (;;) {
    const r = await withOrg(db, org, (trx) =>
      trx
        .selectFrom('research_runs')
        .select(['status', 'started_at'])
        .where('organization_id', '=', org)
        .where('id', '=', runId)
        .executeTakeFirstOrThrow(),
    );
    if (r.status !== 'running') return r.status === 'completed';
    if (r.started_at.getTime() < clock.now().getTime() - STALE_RUN_MS) return false;
    await new Promise((res) => setTimeout(res, POLL_MS));
  }
}

/** The stored result of a run another request made (the dossier names the run that wrote it). */
async function completedOutcome(db: Db, org: string, companyId: string): Promise<CompanyResearchOutcome | null> {
  return withOrg(db, org, async (trx) => {
    const c = await companyRow(trx, org, companyId);
    const o = await trx.selectFrom('organizations').select('research_ttl_days').where('id', '=', org).executeTakeFirstOrThrow();
    const dossier = storedDossier(c?.research);
    if (!c || !dossier || !c.research_updated_at) return null;
    return { runId: dossier.runId, companyId, dossier, updatedAt: c.research_updated_at, ttlDays: o.research_ttl_days, reused: false };
  });
}

/** Crawls, builds the dossier, and commits it with the run's outcome and the event. */
async function run(deps: Deps, org: string, companyId: string, r: Extract<Reservation, { kind: 'run' }>): Promise<CompanyResearchOutcome> {
  const { config } = deps;
  let dossier: Dossier;
  try {
    const crawl = await crawlSite(r.company.domain, {
      siteUrlTemplate: config.researchSiteUrlTemplate,
      userAgent: userAgent(config),
      allowPrivate: config.researchAllowPrivateTargets,
      allowedTargets: config.researchAllowedTargets,
      requestTimeoutMs: config.researchRequestTimeoutMs,
      maxPageBytes: config.researchMaxPageBytes,
      budgetMs: CRAWL_BUDGET_MS,
      lookup: deps.services.lookup,
    });
    dossier = buildDossier(r.runId, r.company, crawl);
  } catch (e) {
    await withOrg(deps.db, org, (trx) =>
      trx
        .updateTable('research_runs')
        .set({ status: 'failed', error: String((e as Error).message).slice(0, 500), finished_at: sql<Date>`now_ms()` })
        .where('organization_id', '=', org)
        .where('id', '=', r.runId)
        .execute(),
    ).catch(() => {});
    throw e;
  }
  const updatedAt = await withOrg(deps.db, org, async (trx) => {
    const row = await trx
      .updateTable('companies')
      .set({
        research: JSON.stringify(dossier),
        research_updated_at: deps.services.clock.now(),
        sources_count: JSON.stringify(dossier.researchSources.length),
        updated_at: sql<Date>`now_ms()`,
      })
      .where('organization_id', '=', org)
      .where('id', '=', companyId)
      .returning('research_updated_at')
      .executeTakeFirstOrThrow();
    await trx
      .updateTable('research_runs')
      .set({
        status: 'completed',
        finished_at: sql<Date>`now_ms()`,
        pages_fetched: dossier.coverage.pagesFetched,
        requests: dossier.coverage.requests,
      })
      .where('organization_id', '=', org)
      .where('id', '=', r.runId)
      .execute();
    await emit(trx, org, {
      type: 'company.research_completed',
      resource: { type: 'Company', id: companyId },
      data: { companyId, hasMinimumCoverage: dossier.coverage.hasMinimumCoverage, lowConfidence: dossier.coverage.lowConfidence },
    });
    return row.research_updated_at!;
  });
  deps.log.info(
    { organizationId: org, companyId, runId: r.runId, pages: dossier.coverage.pagesFetched, durationMs: dossier.coverage.durationMs },
    'research run completed',
  );
  return { runId: r.runId, companyId, dossier, updatedAt, ttlDays: r.ttlDays, reused: false };
}

/**
 * Researches a company: anew, or (reuseFresh) from its stored dossier while that is fresh. Throws
 * 404 for a company of no organization of the key's, 429 when a run is needed and the budget is
 * spent.
 */
export async function researchCompany(
  deps: Deps,
  org: string,
  companyId: string,
  opts: { reuseFresh: boolean; contactId?: string },
): Promise<CompanyResearchOutcome> {
  for (let attempt = 0; ; attempt += 1) {
    const r = await withOrg(deps.db, org, (trx) =>
      reserve(trx, org, companyId, opts.reuseFresh, opts.contactId ?? null, deps.services.clock),
    );
    if (r.kind === 'reuse') return r.outcome;
    if (r.kind === 'run') return run(deps, org, companyId, r);
    // Another request is researching this company: its result is this request's result.
    if (await awaitRun(deps.db, org, r.runId, deps.services.clock)) {
      const outcome = await completedOutcome(deps.db, org, companyId);
      if (outcome) return outcome;
    }
    if (attempt >= 1) throw new ProblemError('internal-error', 'A concurrent research run of this company failed; retry the request.');
  }
}
