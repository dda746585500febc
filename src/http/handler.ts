// Types shared by every handler: the request context and the typed reply, both derived from the
// operations of the generated OpenAPI types, so a handler cannot answer a shape the spec lacks.
import type { Logger } from 'pino';
import type { Db, Tx } from '../../db/database.js';
import type { operations as adminOperations, paths as adminPaths } from '../../generated/admin.js';
import type { operations, paths } from '../../generated/openapi.js';
import type { Config } from '../platform/config.js';
import type { HTTP_METHODS } from '../platform/openapi-doc.js';
import type { Services } from '../platform/services.js';
import type { JsonText } from './paging.js';

export type OperationId = keyof operations;
export type AdminOperationId = keyof adminOperations;

/** The operation objects that a document's paths serve. */
type PathOperation<P> = { [U in keyof P]: P[U][(typeof HTTP_METHODS)[number] & keyof P[U]] }[keyof P];
/**
 * The operations that a document's paths serve, by operationId: not those of its `webhooks` section
 * (deliverPlatformEvent, which the subscriber's receiver implements, not this service).
 */
type Served<O, P> = { [K in keyof O]: O[K] extends PathOperation<P> ? K : never }[keyof O];

type Empty = Record<string, never>;
type Part<P, W extends string> = P extends { [K in W]?: infer X } ? ([NonNullable<X>] extends [never] ? Empty : NonNullable<X>) : Empty;
type Params<O, W extends string> = O extends { parameters: infer P } ? Part<P, W> : Empty;
type Body<O> = O extends { requestBody: { content: { 'application/json': infer B } } }
  ? B
  : O extends { requestBody?: { content: { 'application/json': infer B } } }
    ? B | undefined
    : undefined;
type Responses<O> = O extends { responses: infer R } ? R : never;
type SuccessStatus<O> = Extract<keyof Responses<O>, 200 | 201 | 202>;
type ResponseBody<O, S> = S extends keyof Responses<O>
  ? Responses<O>[S] extends { content: { 'application/json': infer R } }
    ? R
    : never
  : never;

export type Reply<O> = {
  [S in SuccessStatus<O>]: { status: S; body: ResponseBody<O, S> | JsonText<ResponseBody<O, S>>; headers?: Record<string, string> };
}[SuccessStatus<O>];

export interface AuthInfo {
  keyId: string;
  organizationId: string;
  keyName: string | null;
  scopes: string[];
  userId: string | null;
  userRole: string | null;
  expiresAt: Date | null;
  keyCreatedAt: Date;
  org: { name: string; plan: string; flags: { v1_2_api_send: boolean }; createdAt: Date };
}

export interface BaseContext {
  config: Config;
  services: Services;
  log: Logger;
  requestId: string;
  /** The database as the application role; keyed requests also get `trx`. */
  db: Db;
}

export interface Context<O> extends BaseContext {
  params: Params<O, 'path'>;
  query: Params<O, 'query'>;
  headers: Params<O, 'header'>;
  body: Body<O>;
  auth: AuthInfo;
  /** The request's connection, bound to the key's organization: a transaction for writes, plain statements for reads. */
  trx: Tx;
}

export interface PublicContext<O> extends BaseContext {
  query: Params<O, 'query'>;
}

export interface AdminContext<O> extends BaseContext {
  /**
   * The cross-organization role's connection (outbound_system), for the few operations that span
   * organizations; work on the organization in the path runs with withOrg on `db`.
   */
  systemDb: Db;
  params: Params<O, 'path'>;
  query: Params<O, 'query'>;
  body: Body<O>;
  /** The unread body of an operation whose body is not JSON (a CSV import), with its media type. */
  bodyStream?: AsyncIterable<Uint8Array> | null;
  contentType?: string;
}

export type Handler<K extends OperationId> = (ctx: Context<operations[K]>) => Promise<Reply<operations[K]>>;
/**
 * The handler of an `x-long-running` operation: it gets no request connection (`trx`); it opens
 * its own short transactions bound to `auth.organizationId` (withOrg) around its slow work.
 */
export type LongHandler<K extends OperationId> = (ctx: Omit<Context<operations[K]>, 'trx'>) => Promise<Reply<operations[K]>>;
/**
 * Every public operation's handler. The registry (handlers/index.ts) is typed with it, so an
 * operation of the document without a handler does not compile; a tag's module types its part
 * `satisfies Partial<Handlers>`.
 */
export type Handlers = { [K in Served<operations, paths>]: Handler<K> };
export type PublicHandler<K extends OperationId> = (ctx: PublicContext<operations[K]>) => Promise<Reply<operations[K]>>;
export type AdminHandler<K extends AdminOperationId> = (ctx: AdminContext<adminOperations[K]>) => Promise<Reply<adminOperations[K]>>;
/** Every operator operation's handler, complete like Handlers (handlers/admin/index.ts). */
export type AdminHandlers = { [K in Served<adminOperations, adminPaths>]: AdminHandler<K> };
export type { adminOperations, operations };
