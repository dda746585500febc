// The background runtime: graphile-worker in the same Postgres. Tasks live one per file in
// src/tasks/; sweeps run from the crontab.
import { Logger, parseCrontab, type Runner, run } from 'graphile-worker';
import type pg from 'pg';
import type { Logger as Pino } from 'pino';
import { createDb, type Db } from '../../db/database.js';
import type { Config } from '../platform/config.js';
import type { Services } from '../platform/services.js';
import { buildTaskList, CRONTAB } from '../tasks/index.js';

export interface WorkerDeps {
  /** outbound_worker's pool: graphile-worker itself and the jobs (each bound to its organization). */
  workerPool: pg.Pool;
  /** outbound_system's connection, for the sweeps across organizations. */
  systemDb: Db;
  config: Config;
  services: Services;
  log: Pino;
  concurrency?: number;
}

export async function startWorker(deps: WorkerDeps): Promise<Runner> {
  const db = createDb(deps.workerPool);
  const logger = new Logger((scope) => (level, message, meta) => {
    const fn = level === 'error' ? 'error' : level === 'warning' ? 'warn' : 'debug';
    deps.log[fn]({ scope: { label: scope.label, taskIdentifier: scope.taskIdentifier, jobId: scope.jobId }, meta }, message);
  });
  return run({
    pgPool: deps.workerPool,
    concurrency: deps.concurrency ?? 16,
    pollInterval: 1000,
    noHandleSignals: true,
    logger,
    taskList: buildTaskList({ db, systemDb: deps.systemDb, config: deps.config, services: deps.services, log: deps.log }),
    parsedCronItems: parseCrontab(CRONTAB),
  });
}
