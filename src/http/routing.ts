// Which operation a request names: openapi-backend's router over one loaded OpenAPI document (it
// only matches; requests are checked by our generated validators, src/http/request.ts), the raw
// path, the path parameters, and the 404 / 405 problems of a request that names none.
import { type Document, type Request as OABRequest, OpenAPIBackend } from 'openapi-backend';
import type { OpenApiDoc, OperationInfo } from '../platform/openapi-doc.js';
import { ProblemError } from './problems.js';

// openapi-backend 5 validates a loaded document against the 3.0 meta-schema and fails on 3.1;
// Redocly lints the document instead, and requests are checked by our generated validators.
class Router extends OpenAPIBackend {
  validateDefinition() {
    return this.definition;
  }
}

function makeRouter(doc: OpenApiDoc, apiRoot: string): Router {
  const r = new Router({
    definition: structuredClone(doc) as Document,
    apiRoot,
    validate: false,
    quick: true,
    ignoreTrailingSlashes: true,
  });
  void r.init();
  // The router rebuilds its operation list with lodash on every match; the document never
  // changes after start, so the list is computed once.
  const ops = r.router.getOperations();
  r.router.getOperations = () => ops;
  return r;
}

/** The path as sent (still percent-encoded), without building a URL object. */
export function rawPathname(url: string): string {
  const start = url.indexOf('/', url.indexOf('://') + 3);
  const q = url.indexOf('?', start);
  return start < 0 ? '/' : url.slice(start, q < 0 ? undefined : q);
}

/** Path parameters by a regex compiled once per operation path template. */
function paramExtractor(ops: Map<string, OperationInfo>, apiRoot: string) {
  const compiled = new Map<string, { re: RegExp; names: string[] }>();
  for (const op of ops.values()) {
    const names = [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
    const pattern = op.path
      .split(/\{[^}]+\}/)
      .map((part) => part.replace(/[.*+?^$()|[\]\\]/g, '\\$&'))
      .join('([^/]+)');
    compiled.set(op.operationId, { re: new RegExp(`^${apiRoot}${pattern}/?$`), names });
  }
  return (op: OperationInfo, pathname: string): Record<string, string> => {
    const c = compiled.get(op.operationId)!;
    const m = c.re.exec(pathname);
    const out: Record<string, string> = {};
    try {
      c.names.forEach((n, i) => {
        out[n] = decodeURIComponent(m?.[i + 1] ?? '');
      });
    } catch {
      throw new ProblemError('not-found', 'The path holds a malformed percent-encoding.');
    }
    return out;
  };
}

/** One API's routing, built once at start: its root, router, operations by id and path parameter reader. */
export interface Api {
  root: string;
  router: Router;
  operations: Map<string, OperationInfo>;
  params: (op: OperationInfo, pathname: string) => Record<string, string>;
}

export function apiRoutes(doc: OpenApiDoc, operations: Map<string, OperationInfo>, root: string): Api {
  return { root, router: makeRouter(doc, root), operations, params: paramExtractor(operations, root) };
}

/** Finds the operation or throws 404 (no such path) / 405 (path without that method). */
export function matchOperation(api: Api, method: string, path: string): OperationInfo {
  const { router, operations: ops } = api;
  const req: OABRequest = { method, path, headers: {} };
  try {
    const m = router.router.matchOperation(req, true);
    return ops.get(m.operationId as string)!;
  } catch (e) {
    if (String((e as Error).message).startsWith('405')) {
      const allowed = ['get', 'post', 'put', 'patch', 'delete']
        .filter((m) => router.router.matchOperation({ ...req, method: m }) !== undefined)
        .map((m) => m.toUpperCase());
      throw new ProblemError(
        'method-not-allowed',
        `${method.toUpperCase()} is not allowed here; allowed: ${allowed.join(', ')}.`,
        {},
        { Allow: allowed.join(', ') },
      );
    }
    throw new ProblemError('not-found', `No route ${method} ${path}.`);
  }
}
