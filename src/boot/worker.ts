// The background runtime: graphile-worker in the same Postgres. Tasks live one per file in
// src/tasks/; sweeps run from the crontab.
import { EventEmitter } from 'node:events';
import { Logger, parseCrontab, type Runner, run, type WorkerEvents } from 'graphile-worker';
import type pg from 'pg';
import type { Logger as Pino } from 'pino';
import { createDb, type Db } from '../../db/database.js';
import { holdLiveness } from '../dispatch/liveness.js';
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
  // The runner is known alive (src/dispatch/liveness.ts) before it takes a job, and its pool ids
  // are recorded as they are made, so the recovery sweep can unlock its jobs once it is dead.
  const liveness = await holdLiveness(deps.workerPool, (e) =>
    deps.log.error({ err: e }, 'the worker lost its liveness lock: others take it for dead and take up its jobs; restart it'),
  );
  const events: WorkerEvents = new EventEmitter();
  const pools: Promise<void>[] = [];
  events.on('pool:create', ({ workerPool }) => {
    pools.push(liveness.addPool(workerPool.id).catch((e) => deps.log.warn({ err: e }, 'worker pool not registered')));
  });
  const taskDeps = { db, systemDb: deps.systemDb, config: deps.config, services: deps.services, log: deps.log };
  let runner: Runner;
  try {
    runner = await run({
      pgPool: deps.workerPool,
      concurrency: deps.concurrency ?? 16,
      pollInterval: 1000,
      noHandleSignals: true,
      logger,
      events,
      taskList: buildTaskList(taskDeps, liveness.id),
      parsedCronItems: parseCrontab(CRONTAB),
    });
  } catch (e) {
    await liveness.close();
    throw e;
  }
  await Promise.all(pools);
  const stop = runner.stop.bind(runner);
  runner.stop = async () => {
    try {
      await stop();
    } finally {
      await liveness.close();
    }
  };
  return runner;
}
