// Which operation a request names: the path templates of one loaded OpenAPI document, matched
// against the raw path (requests are checked by our generated validators, src/http/request.ts),
// the path parameters, and the 404 / 405 problems of a request that names none.
import type { OperationInfo } from '../platform/openapi-doc.js';
import { ProblemError } from './problems.js';

/** The methods an `Allow` header lists, in this order. */
const ALLOW_ORDER = ['get', 'post', 'put', 'patch', 'delete'];

/** One path template of the document with the operations it serves, by method. */
interface PathRoute {
  template: string;
  re: RegExp;
  names: string[];
  /**
   * Per segment, 1 when literal and 0 when it holds a parameter. Of two templates that match one
   * path (same number of segments), the one whose rank is greater as a string is the more
   * specific: at the first segment where they differ, it has the literal.
   */
  rank: string;
  methods: Map<string, OperationInfo>;
  allow: string;
}

/** The path as sent (still percent-encoded), without building a URL object. */
export function rawPathname(url: string): string {
  const start = url.indexOf('/', url.indexOf('://') + 3);
  const q = url.indexOf('?', start);
  return start < 0 ? '/' : url.slice(start, q < 0 ? undefined : q);
}

function compile(template: string, ops: OperationInfo[]): PathRoute {
  const names = [...template.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
  const pattern = template
    .split(/\{[^}]+\}/)
    .map((part) => part.replace(/[.*+?^$()|[\]\\]/g, '\\$&'))
    .join('([^/]+)');
  const methods = new Map(ops.map((op) => [op.method, op]));
  return {
    template,
    re: new RegExp(`^${pattern}$`),
    names,
    rank: template
      .split('/')
      .map((s) => (s.includes('{') ? '0' : '1'))
      .join(''),
    methods,
    allow: ALLOW_ORDER.filter((m) => methods.has(m))
      .map((m) => m.toUpperCase())
      .join(', '),
  };
}

/** One API's routing, built once at start: its root, its path templates and operations by id. */
export interface Api {
  root: string;
  operations: Map<string, OperationInfo>;
  /** Most specific first, so the first template that matches a path is the one it names. */
  routes: PathRoute[];
  params: (op: OperationInfo, pathname: string) => Record<string, string>;
}

/** The path below the API's root, without trailing slashes; null for a path outside the root. */
function relativePath(root: string, pathname: string): string | null {
  let path: string;
  if (pathname === root) path = '/';
  else if (pathname.startsWith(`${root}/`)) path = pathname.slice(root.length);
  else return null;
  while (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
  return path;
}

export function apiRoutes(operations: Map<string, OperationInfo>, root: string): Api {
  const byPath = new Map<string, OperationInfo[]>();
  for (const op of operations.values()) byPath.set(op.path, [...(byPath.get(op.path) ?? []), op]);
  const routes = [...byPath]
    .map(([template, ops]) => compile(template, ops))
    .sort((a, b) => (a.rank === b.rank ? 0 : a.rank > b.rank ? -1 : 1));
  const byOperation = new Map<string, PathRoute>();
  for (const r of routes) for (const op of r.methods.values()) byOperation.set(op.operationId, r);
  return {
    root,
    operations,
    routes,
    params(op, pathname) {
      const route = byOperation.get(op.operationId)!;
      const m = route.re.exec(relativePath(root, pathname) ?? '');
      const out: Record<string, string> = {};
      try {
        route.names.forEach((n, i) => {
          out[n] = decodeURIComponent(m?.[i + 1] ?? '');
        });
      } catch {
        throw new ProblemError('not-found', 'The path holds a malformed percent-encoding.');
      }
      return out;
    },
  };
}

/**
 * Finds the operation or throws 404 (no such path) / 405 (path without that method). The path is
 * the most specific template that matches it, whatever the method: `/webhooks/events` is never
 * read as `/webhooks/{id}`, so a method the literal path lacks is 405 with that path's `Allow`.
 */
export function matchOperation(api: Api, method: string, pathname: string): OperationInfo {
  const path = relativePath(api.root, pathname);
  const route = path === null ? undefined : api.routes.find((r) => r.re.test(path));
  if (!route) throw new ProblemError('not-found', `No route ${method} ${pathname}.`);
  const op = route.methods.get(method);
  if (op) return op;
  throw new ProblemError(
    'method-not-allowed',
    `${method.toUpperCase()} is not allowed here; allowed: ${route.allow}.`,
    {},
    { Allow: route.allow },
  );
}
