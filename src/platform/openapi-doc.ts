// Reading the bundled OpenAPI documents: the operations, their parameters, body and responses.
// Used by the generator (to compile validators) and at runtime (to route and check scopes).

export const DOC_ID = 'openapi.json';
export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace'] as const;

export type OpenApiDoc = {
  openapi: string;
  paths: Record<string, Record<string, unknown>>;
  components?: Record<string, Record<string, unknown>>;
  [k: string]: unknown;
};

type Param = { name: string; in: 'path' | 'query' | 'header' | 'cookie'; required?: boolean; schema?: object };

export interface OperationInfo {
  operationId: string;
  method: string;
  path: string;
  tag: string | null;
  requiredScope: string | null;
  /**
   * `x-long-running: true`: the operation waits on the outside world (a crawl, a model, DNS, a
   * webhook receiver). Its handler runs after the request's connection is released, with no
   * transaction around it, and opens its own short transactions (see src/http/pipeline.ts).
   */
  longRunning: boolean;
  parameters: Param[];
  /** JSON pointers into the document, used as `$ref` targets of the validators. */
  parameterPointers: Record<string, string>;
  bodyPointer: string | null;
  bodyRequired: boolean;
  /** The body is not JSON (e.g. `text/csv`): the handler reads it as a stream (`bodyStream`). */
  streamBody: boolean;
  /** `x-body-limit-bytes`: the operation's own body limit, instead of the general 1 MiB. */
  bodyLimitBytes: number | null;
  responsePointers: Record<string, string>;
  responseStatuses: string[];
  /**
   * Response headers whose schema is a `const`, by status: the pipeline sends them on every
   * response of that status, problems from validation included (e.g. the funnel's
   * X-Service-Analytics-Max-Window-Days on 200 and 400).
   */
  constantHeaders: Record<string, Record<string, string>>;
  paramSchemas(docId: string): Record<string, object>;
}

const esc = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

function resolve(doc: OpenApiDoc, value: unknown, pointer: string): { value: Record<string, unknown>; pointer: string } {
  let v = value as Record<string, unknown>;
  let p = pointer;
  for (let i = 0; i < 10 && v && typeof v.$ref === 'string' && (v.$ref as string).startsWith('#/'); i += 1) {
    p = (v.$ref as string).slice(1);
    v = p
      .split('/')
      .slice(1)
      .reduce<unknown>((o, k) => (o as Record<string, unknown>)?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc) as Record<
      string,
      unknown
    >;
  }
  return { value: v, pointer: p };
}

export function collectOperations(doc: OpenApiDoc): OperationInfo[] {
  const ops: OperationInfo[] = [];
  for (const [p, rawItem] of Object.entries(doc.paths ?? {})) {
    const { value: item, pointer: itemPtr } = resolve(doc, rawItem, `/paths/${esc(p)}`);
    const shared = (item.parameters as unknown[] | undefined) ?? [];
    for (const method of HTTP_METHODS) {
      const op = item[method] as Record<string, unknown> | undefined;
      if (!op) continue;
      const opPtr = `${itemPtr}/${method}`;
      const params = new Map<string, { param: Param; pointer: string }>();
      shared.forEach((raw, i) => {
        const r = resolve(doc, raw, `${itemPtr}/parameters/${i}`);
        params.set(`${r.value.in}:${r.value.name}`, { param: r.value as Param, pointer: r.pointer });
      });
      ((op.parameters as unknown[] | undefined) ?? []).forEach((raw, i) => {
        const r = resolve(doc, raw, `${opPtr}/parameters/${i}`);
        params.set(`${r.value.in}:${r.value.name}`, { param: r.value as Param, pointer: r.pointer });
      });
      let bodyPointer: string | null = null;
      let bodyRequired = false;
      let streamBody = false;
      if (op.requestBody) {
        const rb = resolve(doc, op.requestBody, `${opPtr}/requestBody`);
        bodyRequired = rb.value.required === true;
        const content = rb.value.content as Record<string, { schema?: unknown }> | undefined;
        if (content?.['application/json']?.schema) bodyPointer = `${rb.pointer}/content/application~1json/schema`;
        else streamBody = content !== undefined && Object.keys(content).length > 0;
      }
      const responsePointers: Record<string, string> = {};
      const constantHeaders: Record<string, Record<string, string>> = {};
      const responses = (op.responses as Record<string, unknown>) ?? {};
      for (const [status, raw] of Object.entries(responses)) {
        const r = resolve(doc, raw, `${opPtr}/responses/${status}`);
        for (const [name, h] of Object.entries((r.value?.headers as Record<string, unknown> | undefined) ?? {})) {
          const header = resolve(doc, h, '').value;
          const schema = resolve(doc, header?.schema, '').value;
          if (schema && 'const' in schema) constantHeaders[status] = { ...constantHeaders[status], [name]: String(schema.const) };
        }
        const content = r.value?.content as Record<string, { schema?: unknown }> | undefined;
        for (const ct of ['application/json', 'application/problem+json']) {
          if (content?.[ct]?.schema) {
            responsePointers[status] = `${r.pointer}/content/${esc(ct)}/schema`;
            break;
          }
        }
      }
      const list = [...params.values()];
      const info: OperationInfo = {
        operationId: op.operationId as string,
        method,
        path: p,
        tag: ((op.tags as string[] | undefined) ?? [])[0] ?? null,
        requiredScope: (op['x-required-scope'] as string | undefined) ?? null,
        longRunning: op['x-long-running'] === true,
        parameters: list.map((x) => x.param),
        parameterPointers: Object.fromEntries(list.map((x) => [`${x.param.in}:${x.param.name}`, x.pointer])),
        bodyPointer,
        bodyRequired,
        streamBody,
        bodyLimitBytes: typeof op['x-body-limit-bytes'] === 'number' ? op['x-body-limit-bytes'] : null,
        responsePointers,
        responseStatuses: Object.keys(responses),
        constantHeaders,
        paramSchemas(docId: string) {
          const parts: Record<string, object> = {};
          for (const where of ['path', 'query', 'header'] as const) {
            const ps = list.filter((x) => x.param.in === where);
            if (ps.length === 0) continue;
            // Header names are case-insensitive: they are validated lower-cased.
            const key = (n: string) => (where === 'header' ? n.toLowerCase() : n);
            parts[where] = {
              type: 'object',
              properties: Object.fromEntries(ps.map((x) => [key(x.param.name), { $ref: `${docId}#${x.pointer}/schema` }])),
              required: ps.filter((x) => x.param.required).map((x) => key(x.param.name)),
            };
          }
          return parts;
        },
      };
      ops.push(info);
    }
  }
  return ops;
}
