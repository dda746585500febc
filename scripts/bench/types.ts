// The interface between `npm run bench` (scripts/bench.ts) and the per-area bench modules
// (scripts/bench/<area>.ts). Each area module default-exports a BenchArea.
import type { ChildProcess } from 'node:child_process';
import type pg from 'pg';

export interface LoadResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  non2xx: number;
}

export interface LoadOptions {
  /** Path with query, relative to the origin, e.g. `/api/v1/contacts?limit=50`. */
  path: string;
  method?: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  headers?: Record<string, string>;
  body?: string;
  /** A request body per request (overrides body), for writes that must differ. */
  makeBody?: () => string;
  connections?: number;
  durationSeconds?: number;
}

export interface BenchContext {
  /** Origin of the service under test (a separate process), e.g. http://127.0.0.1:43123. */
  origin: string;
  adminToken: string;
  /** Owner connection pool of the benchmark database: bulk seeding with SQL (row-level security applies: set app.system). */
  pool: pg.Pool;
  /** Creates an organization through the operator API and mints an all-scope key for it. */
  newOrg(plan?: 'free' | 'starter' | 'growth'): Promise<{ orgId: string; key: string; ownerId: string }>;
  /** autocannon against the service: 50 connections and 10 s unless given. */
  load(opts: LoadOptions): Promise<LoadResult>;
  /** Adds a row to the printed report and the README table. */
  report(row: { area: string; case: string; figures: Record<string, string | number>; target?: string; met?: boolean }): void;
  log(message: string): void;
  /** The environment the service under test runs with (its DATABASE_URL names the bench database). */
  serviceEnv: Record<string, string>;
  /** The service process's id (its CPU time per request is read from /proc). */
  servicePid: number;
  /** Starts a script (with tsx) as a process of its own, stopped when the bench ends. */
  startProcess(script: string, env: Record<string, string>): ChildProcess;
}

export interface BenchArea {
  name: string;
  /** Runs the area; `args` are what followed its name on the command line (see scripts/bench.ts). */
  run(ctx: BenchContext, args: string[]): Promise<void>;
  /** When the area needs arguments it was not given, how to run it (printed; the area is skipped); throws for wrong ones. */
  usage?(args: string[]): string | null;
}
