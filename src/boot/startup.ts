// What can go wrong while the service starts, said in one line that names the variable or file to
// fix. The HTTP port is bound (and the inbound SMTP port probed) before Postgres starts, so a port
// in use costs no database start; whatever did start is stopped again by the caller.

import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import pg from 'pg';
import { applyServerTimeouts } from '../http/server-timeouts.js';
import type { Config } from '../platform/config.js';

/** A start failure whose message is the one line the operator reads. */
export class StartError extends Error {}

/** Hono's fetch; `env` carries @hono/node-server's Node request (the app reads its parsed headers). */
type Fetch = (req: Request, env?: unknown) => Response | Promise<Response>;

export interface HttpListener {
  port: number;
  /** Hands requests to the service; until then every request is answered 503 service-unavailable. */
  ready(fetch: Fetch): void;
  close(): Promise<void>;
}

function listenFailure(e: NodeJS.ErrnoException, host: string, port: number, vars: { port: string; host: string }): StartError {
  switch (e.code) {
    case 'EADDRINUSE':
      return new StartError(`${vars.port} ${port} is already in use on ${host}: stop the other process or set ${vars.port} to a free port`);
    case 'EACCES':
      return new StartError(`${vars.port} ${port} on ${host} needs privileges this user lacks: set ${vars.port} to 1024 or higher`);
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new StartError(
        `${vars.host} ${host} is not an address of this machine: set ${vars.host} to one of its addresses (127.0.0.1, or 0.0.0.0 for all)`,
      );
    default:
      return new StartError(`cannot listen on ${vars.host} ${host} ${vars.port} ${port}: ${e.code ?? e.message}`);
  }
}

/** Binds HOST:PORT now; requests wait for `ready` by getting a 503 they may retry shortly. */
export async function bindHttp(config: Config, baseUrl: string): Promise<HttpListener> {
  let handler: Fetch | null = null;
  const starting = () =>
    new Response(
      JSON.stringify({
        type: `${baseUrl}/problems/service-unavailable`,
        title: 'Service unavailable',
        status: 503,
        detail: 'The service is starting.',
      }),
      { status: 503, headers: { 'Content-Type': 'application/problem+json', 'Retry-After': '1' } },
    );
  const server = createAdaptorServer({ fetch: (req: Request, env: unknown) => (handler ? handler(req, env) : starting()) });
  applyServerTimeouts(server as Server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e) =>
      reject(listenFailure(e as NodeJS.ErrnoException, config.host, config.port, { port: 'PORT', host: 'HOST' })),
    );
    server.listen(config.port, config.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    ready(fetch) {
      handler = fetch;
    },
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        // Idle keep-alive sockets would hold the drain open.
        if ('closeIdleConnections' in server) server.closeIdleConnections();
      }),
  };
}

/** Checks that the inbound SMTP listener will be able to bind, before Postgres starts. */
export async function probeInboundPort(config: Config): Promise<void> {
  if (config.inboundSmtpPort === null || config.inboundSmtpPort === 0) return;
  const { inboundSmtpPort: port, inboundSmtpHost: host } = config;
  const probe = net.createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', (e) =>
      reject(listenFailure(e as NodeJS.ErrnoException, host, port, { port: 'INBOUND_SMTP_PORT', host: 'INBOUND_SMTP_HOST' })),
    );
    probe.listen(port, host, () => probe.close(() => resolve()));
  });
}

function where(url: string): string {
  try {
    const u = new URL(url);
    const socket = u.searchParams.get('host');
    return socket ? `socket ${socket}` : `${u.hostname}:${u.port || 5432}`;
  } catch {
    return 'the configured server';
  }
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', 'ENOENT']);

/** A database failure, naming DATABASE_URL (or DATA_DIR for the embedded Postgres). */
export function databaseFailure(e: unknown, config: Config, url: string): StartError {
  const err = e as { code?: string; message?: string; path?: string };
  const message = (err.message ?? String(e)).replace(/\s+/g, ' ').trim();
  if (!config.databaseUrl)
    return new StartError(
      message.startsWith('DATA_DIR') ? message : `DATA_DIR ${config.dataDir}: the embedded Postgres failed: ${message}`,
    );
  const name = (() => {
    try {
      return new URL(url);
    } catch {
      return null;
    }
  })();
  const user = decodeURIComponent(name?.username || process.env.PGUSER || 'postgres');
  const database = decodeURIComponent(name?.pathname.slice(1) || user);
  if (err.code && UNREACHABLE.has(err.code))
    return new StartError(
      `DATABASE_URL: cannot reach Postgres at ${where(url)} (${err.code}): check the host and port, and that Postgres is running`,
    );
  if (/timeout/i.test(message))
    return new StartError(`DATABASE_URL: Postgres at ${where(url)} did not answer in time: check the host and port`);
  switch (err.code) {
    case '28P01':
    case '28000':
      return new StartError(
        `DATABASE_URL: Postgres at ${where(url)} refused user "${user}" (${message}): check the user name and password`,
      );
    case '3D000':
      return new StartError(`DATABASE_URL: database "${database}" does not exist at ${where(url)}: create it or name another`);
    case '42501':
      return new StartError(
        `DATABASE_URL: user "${user}" lacks a privilege the migrations need (${message}): it needs CREATEROLE, to create the roles the service runs as (outbound_app, outbound_worker, outbound_system)`,
      );
    default:
      return new StartError(`DATABASE_URL: ${message}`);
  }
}

/**
 * Connects once before migrating: a wrong or unreachable DATABASE_URL then fails within seconds
 * with a clear line, not after the kernel's TCP timeout inside a migration.
 */
export async function checkDatabase(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 15_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    const r = await client.query<{ v: number }>("SELECT current_setting('server_version_num')::int AS v");
    if (r.rows[0].v < 140000)
      throw Object.assign(new Error(`Postgres ${Math.floor(r.rows[0].v / 10000)} is too old: version 14 or newer is needed`), {
        code: 'VERSION',
      });
  } finally {
    await client.end().catch(() => {});
  }
}

/** A file-system failure under DATA_DIR (not writable, not a directory, disk full). */
export function dataDirFailure(e: unknown, config: Config): StartError | null {
  const err = e as NodeJS.ErrnoException;
  if (!err || typeof err !== 'object' || !['EACCES', 'EPERM', 'EROFS', 'ENOTDIR', 'ENOSPC', 'EEXIST'].includes(err.code ?? '')) return null;
  return new StartError(
    `DATA_DIR ${config.dataDir} is not usable: ${err.code} on ${err.path ?? config.dataDir} (it must be a writable directory)`,
  );
}

/** The one line for any start failure. */
export function startFailureLine(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  return (text || 'unknown error').replace(/\s+/g, ' ').trim();
}
