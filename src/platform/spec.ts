// The bundled OpenAPI documents, loaded once: the operations table that routes and authorizes
// requests, and the event catalogue (the single list used by GET /webhooks/events, subscription
// validation and the dispatcher).
import { createRequire } from 'node:module';
import type { components as adminComponents } from '../../generated/admin.js';
import { collectOperations, type OpenApiDoc, type OperationInfo } from './openapi-doc.js';

const require = createRequire(import.meta.url);
export const publicDoc = require('../../generated/openapi.json') as OpenApiDoc;
export const adminDoc = require('../../generated/admin.openapi.json') as OpenApiDoc;

export const publicOperations: Map<string, OperationInfo> = new Map(collectOperations(publicDoc).map((o) => [o.operationId, o]));
export const adminOperations: Map<string, OperationInfo> = new Map(collectOperations(adminDoc).map((o) => [o.operationId, o]));

const eventTypeSchema = (publicDoc.components!.schemas as Record<string, Record<string, unknown>>).EventType;
export const EVENT_TYPES: readonly string[] = eventTypeSchema.enum as string[];
export const NEVER_EMITTED: ReadonlySet<string> = new Set(eventTypeSchema['x-never-emitted'] as string[]);
export const EVENT_API_VERSION = eventTypeSchema['x-envelope-version'] as string;
const groups = eventTypeSchema['x-event-groups'] as Record<string, string[]>;
export const EVENT_GROUP: ReadonlyMap<string, string> = new Map(
  Object.entries(groups).flatMap(([group, types]) => types.map((t) => [t, group] as [string, string])),
);
export const isEventType = (t: string): boolean => EVENT_TYPES.includes(t);

/** A key scope of the operator document's enum (`*` grants every scope). */
export type KeyScope = adminComponents['schemas']['AdminApiKeyScope'];
/** The 17 scope names: the operator document's key-scope enum without its `*` wildcard. */
const scopeSchema = (adminDoc.components!.schemas as Record<string, { enum: KeyScope[] }>).AdminApiKeyScope;
export const ALL_SCOPES: readonly KeyScope[] = scopeSchema.enum.filter((s) => s !== '*');

/** The scope each action of POST /actions needs: the operation's `x-action-scopes` map, read from the document. */
const dispatchOp = (publicDoc.paths['/actions'] as Record<string, Record<string, unknown>>).post;
export const ACTION_SCOPES: Readonly<Record<string, string>> = dispatchOp['x-action-scopes'] as Record<string, string>;
