// Requests generated from an OpenAPI document for the property-based test (test/fuzz.test.ts):
// values valid under a schema (types, enums, formats, bounds, patterns), values at its bounds, and
// hostile ones (control and non-ASCII characters, lone surrogates, huge numbers, wrong types,
// unknown fields, odd encodings and media types), assembled into whole requests of one operation.
import fc from 'fast-check';
import type { OpenApiDoc, OperationInfo } from '../../src/platform/openapi-doc.js';

export type Schema = Record<string, any>;

/** One generated request of an operation, before the base URL and credentials are added. */
export interface GenRequest {
  method: string;
  /** The path below the API root, each parameter already percent-encoded (or deliberately mis-encoded). */
  path: string;
  /** The query string without `?`, already encoded. */
  query: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
  /** Which credentials to send: the valid ones or a wrong form (see `authHeader`). */
  auth: AuthVariant;
}

export type AuthVariant = 'valid' | 'none' | 'unknown' | 'malformed' | 'basic' | 'non-ascii' | 'lower-case-scheme';

/** Strings no field should ever make the service fail on. */
export const HOSTILE_STRINGS: readonly string[] = [
  '',
  ' ',
  '\t\n\r',
  '\u0000',
  'a\u0000b',
  '\u0001\u0002\u0003\u0007\u0008\u000b\u000c\u001b\u001f\u007f',
  '\u0085\u00a0\u1680\u2028\u2029\u3000',
  '\u0090',
  '\u200b\u200e\u202e\ufeff',
  '\ud800',
  'a\udfffb',
  '\udbff\udfff\ud800',
  '😀👩‍👩‍👧‍👦🏳️‍🌈',
  'é'.repeat(300),
  'Ω≈ç√∫˜µ≤≥÷ 田中さん ضصث',
  'x'.repeat(20_000),
  "' OR 1=1 --",
  '%s%n%x%d',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a template injection probe, sent as it is.
  '${7*7}{{7*7}}<%= 7*7 %>',
  '<script>alert(1)</script>',
  '../../../../etc/passwd',
  'NaN',
  '-0',
  '1e400',
  'Infinity',
  'null',
  'true',
  '[]',
  '{}',
  '2016-12-31T23:59:60Z',
  '2023-02-29',
  '0000-00-00T00:00:00Z',
  '+275760-09-13T00:00:00.000Z',
  '9999-12-31T23:59:59.999Z',
  '0001-01-01T00:00:00Z',
  '2024-01-01T00:00:00+99:99',
  'a@b',
  '@',
  'a@@example.com',
  '"a b"@example.com',
  'a@[127.0.0.1]',
  'a@localhost',
  'ä@üñí.example',
  `a@${'b'.repeat(300)}.com`,
  `${'a'.repeat(65)}@example.com`,
  'a@-b.example',
  'http://',
  'javascript:alert(1)',
  'http://[::1]/',
  'http://169.254.169.254/latest/meta-data/',
  'http://[',
  'smtp://[',
  // Cursor-shaped: a payload and a signature of the right length in other characters.
  `x.${'é'.repeat(16)}`,
  `x.${'a'.repeat(16)}`,
  'a.b.c',
  'smtps://user:p@ss@host:99999',
  `https://example.com/${'a'.repeat(3000)}`,
];

/** An array nested `depth` deep, around `inner`. */
function nested(depth: number, inner: unknown): unknown {
  let v = inner;
  for (let i = 0; i < depth; i += 1) v = [v];
  return v;
}

/** Values of the wrong JSON type for whatever they replace (deep nesting included). */
const WRONG_TYPES: readonly unknown[] = [
  null,
  true,
  false,
  0,
  -1,
  1.5,
  '',
  'x',
  [],
  [null],
  {},
  { $ne: null },
  nested(5, []),
  nested(2000, 'deep'),
  { a: { b: { c: nested(1000, { d: 1 }) } } },
];

const HUGE_NUMBERS: readonly number[] = [
  Number.MAX_VALUE,
  -Number.MAX_VALUE,
  Number.MAX_SAFE_INTEGER + 2,
  -(2 ** 63),
  2 ** 63,
  2 ** 31,
  -(2 ** 31) - 1,
  2 ** 32,
  5e-324,
  -0,
  0.1,
];

/** Percent-encodings a decoder may trip on, sent as they are in the path and the query. */
export const RAW_ENCODINGS: readonly string[] = [
  '%FF',
  '%C0%AF',
  '%C0%80',
  '%ED%A0%80',
  '%ED%BF%BF',
  '%F4%90%80%80',
  '%E0%80',
  '%C2%90',
  '%C2%A0',
  '%00',
  'a%00b',
  '%0D%0ASet-Cookie:%20x=y',
  '%',
  '%Z',
  '%ZZ',
  '%25',
  '%2525',
  '%2F',
  '%5C',
  '%EF%BB%BF',
  '%EF%BF%BE',
  '%F0%9F%98%80',
  `${'%41'.repeat(1500)}`,
  '+',
  '%2B',
];

const isType = (s: Schema, t: string) => s.type === t || (Array.isArray(s.type) && s.type.includes(t));

/** Schema-driven arbitraries over one document; `overrides` replaces the valid values of named properties. */
export class SchemaArbitraries {
  constructor(
    private readonly doc: OpenApiDoc,
    private readonly overrides: Record<string, fc.Arbitrary<unknown>> = {},
    private readonly hostileOverrides: Record<string, fc.Arbitrary<unknown>> = {},
  ) {}

  resolve(schema: Schema | undefined): Schema {
    let s = schema ?? {};
    for (let i = 0; i < 20 && typeof s.$ref === 'string'; i += 1) {
      s = (s.$ref as string)
        .slice(2)
        .split('/')
        .reduce<Schema>((o, k) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], this.doc as Schema);
    }
    return s ?? {};
  }

  /** The schema's properties and required names, merged over allOf. */
  private objectParts(s: Schema): { props: Record<string, Schema>; required: string[] } {
    const props: Record<string, Schema> = { ...(s.properties ?? {}) };
    const required: string[] = [...(s.required ?? [])];
    for (const part of (s.allOf ?? []) as Schema[]) {
      const p = this.objectParts(this.resolve(part));
      // A part may name a property only to require it (`days: {}`): the first full schema stays.
      for (const [k, v] of Object.entries(p.props)) if (!props[k] || Object.keys(props[k]).length === 0) props[k] = v;
      required.push(...p.required);
    }
    return { props, required: [...new Set(required)] };
  }

  private isObject(s: Schema): boolean {
    return isType(s, 'object') || (!s.type && (s.properties !== undefined || s.allOf !== undefined));
  }

  /** Values valid under the schema (as far as its keywords go: `not` and `if` are not honoured). */
  valid(schema: Schema | undefined, depth = 0, name?: string): fc.Arbitrary<unknown> {
    if (name !== undefined && this.overrides[name]) return this.overrides[name];
    const s = this.resolve(schema);
    if ('const' in s) return fc.constant(s.const);
    if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as unknown[]));
    const alternatives = (s.oneOf ?? s.anyOf) as Schema[] | undefined;
    if (alternatives)
      return fc.oneof(...alternatives.map((a) => this.valid({ ...s, oneOf: undefined, anyOf: undefined, ...this.resolve(a) }, depth + 1)));
    if (Array.isArray(s.type)) return fc.oneof(...s.type.map((t: string) => this.valid({ ...s, type: t }, depth + 1, name)));
    if (this.isObject(s)) return this.validObject(s, depth);
    switch (s.type) {
      case 'string':
        return this.validString(s);
      case 'integer':
        return this.validNumber(s, true);
      case 'number':
        return this.validNumber(s, false);
      case 'boolean':
        return fc.boolean();
      case 'null':
        return fc.constant(null);
      case 'array':
        return this.validArray(s, depth);
      default:
        return fc.jsonValue({ maxDepth: 2 });
    }
  }

  private validObject(s: Schema, depth: number): fc.Arbitrary<unknown> {
    const { props, required } = this.objectParts(s);
    const names = Object.keys(props);
    if (names.length === 0) {
      if (s.additionalProperties && typeof s.additionalProperties === 'object' && depth < 4)
        return fc.dictionary(fc.string({ minLength: 1, maxLength: 12 }), this.valid(s.additionalProperties, depth + 1), { maxKeys: 3 });
      return fc.constant({});
    }
    // Deep optional parts are left out past a few levels, so recursive schemas end.
    const keep = depth > 3 ? names.filter((n) => required.includes(n)) : names;
    const model = Object.fromEntries(keep.map((n) => [n, this.valid(props[n], depth + 1, n)]));
    const chosen = fc.record(model, { requiredKeys: required.filter((n) => keep.includes(n)) });
    const rules = this.conditionalRequirements(s);
    if (rules.length === 0) return chosen;
    // `if {k: const c} then required [x] else not required [x]`: x is added or dropped to match.
    return fc.tuple(chosen, fc.record(model)).map(([o, all]) => {
      const out: Record<string, unknown> = { ...o };
      for (const r of rules) {
        const holds = out[r.key] === r.value;
        for (const x of holds ? r.required : r.otherwise) if (!(x in out) && x in all) out[x] = all[x];
        if (!holds) for (const x of r.forbidden) delete out[x];
      }
      return out;
    });
  }

  /** The `if`/`then`/`else` rules of an object schema's allOf that tie one field's value to another's presence. */
  private conditionalRequirements(s: Schema) {
    const rules: { key: string; value: unknown; required: string[]; otherwise: string[]; forbidden: string[] }[] = [];
    for (const part of [s, ...((s.allOf ?? []) as Schema[]).map((p) => this.resolve(p))]) {
      const cond = part.if?.properties as Record<string, Schema> | undefined;
      if (!cond) continue;
      const [key, c] = Object.entries(cond)[0] ?? [];
      if (key === undefined || !('const' in c)) continue;
      rules.push({
        key,
        value: c.const,
        required: part.then?.required ?? [],
        otherwise: part.else?.required ?? [],
        forbidden: part.else?.not?.required ?? [],
      });
    }
    return rules;
  }

  private validArray(s: Schema, depth: number): fc.Arbitrary<unknown> {
    const minLength = s.minItems ?? 0;
    const maxLength = Math.min(s.maxItems ?? minLength + 3, minLength + 3);
    const items = this.valid(s.items, depth + 1);
    return s.uniqueItems
      ? fc.uniqueArray(items, { minLength, maxLength, selector: (v) => JSON.stringify(v) })
      : fc.array(items, { minLength, maxLength });
  }

  private validNumber(s: Schema, integer: boolean): fc.Arbitrary<number> {
    const lo = s.minimum ?? (s.exclusiveMinimum !== undefined ? s.exclusiveMinimum + (integer ? 1 : 1e-6) : undefined);
    const hi = s.maximum ?? (s.exclusiveMaximum !== undefined ? s.exclusiveMaximum - (integer ? 1 : 1e-6) : undefined);
    const min = lo ?? (integer ? -(2 ** 31) : -1e9);
    const max = hi ?? (integer ? 2 ** 31 - 1 : 1e9);
    const bounds = [min, max, lo === undefined ? undefined : lo, hi].filter((x): x is number => x !== undefined);
    const any = integer
      ? fc.integer({ min: Math.ceil(min), max: Math.floor(max) })
      : fc.double({ min, max, noNaN: true, noDefaultInfinity: true });
    return fc.oneof(
      { weight: 4, arbitrary: any },
      { weight: 1, arbitrary: fc.constantFrom(...bounds.map((b) => (integer ? Math.round(b) : b))) },
    );
  }

  private validString(s: Schema): fc.Arbitrary<string> {
    const minLength = s.minLength ?? 0;
    const maxLength = s.maxLength ?? 5000;
    const fits = (v: string) => [...v].length >= minLength && [...v].length <= maxLength;
    let base: fc.Arbitrary<string>;
    switch (s.format) {
      case 'email':
        base = fc.emailAddress();
        break;
      case 'date-time':
        base = fc.oneof(
          {
            weight: 5,
            arbitrary: fc
              .date({ min: new Date('1990-01-01'), max: new Date('2090-01-01'), noInvalidDate: true })
              .map((d) => d.toISOString()),
          },
          {
            weight: 1,
            arbitrary: fc.constantFrom(
              '0001-01-01T00:00:00Z',
              '9999-12-31T23:59:59Z',
              '2024-02-29T12:00:00+14:00',
              '2016-12-31T23:59:60Z',
              '1970-01-01T00:00:00.000001Z',
            ),
          },
        );
        break;
      case 'date':
        base = fc.oneof(
          {
            weight: 5,
            arbitrary: fc
              .date({ min: new Date('1990-01-01'), max: new Date('2090-01-01'), noInvalidDate: true })
              .map((d) => d.toISOString().slice(0, 10)),
          },
          { weight: 1, arbitrary: fc.constantFrom('0001-01-01', '9999-12-31', '2024-02-29') },
        );
        break;
      case 'uri':
        base = fc.webUrl({ validSchemes: ['http', 'https'] });
        break;
      default:
        if (typeof s.pattern === 'string') {
          try {
            base = fc.stringMatching(new RegExp(s.pattern));
          } catch {
            // A pattern fast-check cannot generate from (a lookahead): strings filtered by it.
            const re = new RegExp(s.pattern);
            base = fc.string({ minLength: Math.max(minLength, 1), maxLength: Math.min(maxLength, 40) }).filter((v) => re.test(v));
          }
        } else {
          const cap = Math.min(maxLength, minLength + 40);
          base = fc.oneof(
            { weight: 4, arbitrary: fc.string({ minLength, maxLength: cap }).filter((v) => !v.includes('\u0000')) },
            { weight: 2, arbitrary: fc.string({ minLength, maxLength: cap, unit: 'grapheme' }) },
            // The bounds exactly, in ASCII and in characters of two UTF-16 units.
            { weight: 1, arbitrary: fc.constantFrom('a'.repeat(Math.max(minLength, 1)), 'z'.repeat(Math.min(maxLength, 5000))) },
            { weight: 1, arbitrary: fc.constant('😀'.repeat(Math.min(maxLength, 2000))) },
          );
        }
    }
    return base.filter(fits);
  }

  /** A value that breaks the schema (or stresses it): wrong types, out-of-range, hostile characters. */
  hostile(schema: Schema | undefined, depth = 0, name?: string): fc.Arbitrary<unknown> {
    const s = this.resolve(schema);
    const alts: fc.Arbitrary<unknown>[] = [fc.constantFrom(...WRONG_TYPES), fc.constantFrom(...HOSTILE_STRINGS)];
    // Values aimed at what the named field means (a cursor's signature, say), as often as the rest.
    if (name !== undefined && this.hostileOverrides[name]) alts.push(this.hostileOverrides[name], this.hostileOverrides[name]);
    if (isType(s, 'string')) {
      const near: string[] = [];
      if (s.maxLength !== undefined) near.push('a'.repeat(s.maxLength + 1), 'é'.repeat(s.maxLength), '😀'.repeat(s.maxLength));
      if (Array.isArray(s.enum))
        for (const e of s.enum as unknown[])
          if (typeof e === 'string') near.push(e.toUpperCase(), ` ${e}`, `${e}\u0000`, `${e.slice(0, -1)}`);
      if (near.length) alts.push(fc.constantFrom(...near));
    }
    if (isType(s, 'integer') || isType(s, 'number')) {
      const near = [...HUGE_NUMBERS];
      if (s.minimum !== undefined) near.push(s.minimum - 1, s.minimum - 0.5);
      if (s.maximum !== undefined) near.push(s.maximum + 1, s.maximum + 0.5);
      alts.push(fc.constantFrom(...near), fc.constantFrom('1', '0x10', '1e3'));
    }
    if (isType(s, 'array') && depth < 3) {
      const item = this.valid(s.items, depth + 1);
      alts.push(
        fc.array(this.hostile(s.items, depth + 1), { minLength: 1, maxLength: 3 }),
        fc.array(item, { minLength: (s.maxItems ?? 200) + 1, maxLength: (s.maxItems ?? 200) + 1 }),
        item.map((v) => [v, v]),
      );
    }
    if (this.isObject(s) && depth < 3) alts.push(this.mutantObject(s, depth + 1));
    return fc.oneof(...alts);
  }

  /** A valid object with one property made hostile, or with an unknown property added. */
  mutantObject(schema: Schema | undefined, depth = 0): fc.Arbitrary<unknown> {
    const s = this.resolve(schema);
    const { props } = this.objectParts(s);
    const names = Object.keys(props);
    const base = this.valid(s, depth) as fc.Arbitrary<Record<string, unknown>>;
    const unknownField = fc
      .tuple(base, fc.constantFrom('unknownField', '__proto__', 'constructor', 'id', 'organizationId', 'é'), fc.jsonValue({ maxDepth: 1 }))
      .map(([o, k, v]) => {
        const copy: Record<string, unknown> = { ...o };
        Object.defineProperty(copy, k, { value: v, enumerable: true, writable: true, configurable: true });
        return copy;
      });
    if (names.length === 0) return unknownField;
    const oneBad = fc
      .constantFrom(...names)
      .chain((n) => fc.tuple(base, fc.constant(n), this.hostile(props[n], depth + 1, n)))
      .map(([o, n, v]) => ({ ...o, [n]: v }));
    const missing = fc
      .tuple(base, fc.constantFrom(...names))
      .map(([o, n]) => Object.fromEntries(Object.entries(o).filter(([k]) => k !== n)));
    return fc.oneof({ weight: 5, arbitrary: oneBad }, { weight: 1, arbitrary: unknownField }, { weight: 1, arbitrary: missing });
  }
}

/** JSON bodies and the raw texts a parser may trip on. */
const RAW_BODIES: readonly (string | Uint8Array)[] = [
  '',
  ' \n',
  'null',
  '[]',
  '"text"',
  '12',
  '{',
  '{"a":',
  '{}}',
  "{'a':1}",
  '\ufeff{}',
  '{"a":1,"a":2}',
  '{"__proto__":{"polluted":true}}',
  '{"x":1e999999}',
  `{"x":${'9'.repeat(400)}}`,
  `${'['.repeat(50_000)}${']'.repeat(50_000)}`,
  `${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}`,
  `${'['.repeat(10_000)}"\\u0000"${']'.repeat(10_000)}`,
  `{"a":"\\ud800"}`,
  '{"a":"\\u0000"}',
  '{"a":"\\x00"}',
  new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc0, 0xaf, 0xed, 0xa0, 0x80, 0x22, 0x7d]),
  new Uint8Array([0xff, 0xfe, 0x7b, 0x00, 0x7d, 0x00]),
];

/** Content-Types sent with JSON bodies: the accepted ones and others. */
export const CONTENT_TYPES: readonly (string | null)[] = [
  'application/json',
  'application/json; charset=utf-8',
  'application/merge-patch+json',
  'text/plain',
  null,
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/xml',
  'text/csv',
  'application/json; charset=latin1',
  'APPLICATION/JSON',
  'a/b/c',
  ';;;',
  'é/é',
];

export interface RequestGenOptions {
  /** Ids for a path parameter of this operation: ones that exist, and ones that do not (or in another organization). */
  pathValues(op: OperationInfo, name: string): { existing: string[]; missing: string[] };
  /** Values for a parameter or body property that the schema alone cannot make useful (bounded inputs). */
  overrides?: Record<string, fc.Arbitrary<unknown>>;
  /**
   * How often (against 24 for a valid request) the credentials are the hostile part; 4 unless set.
   * The operator API answers every wrong token after a fixed delay, so it is given fewer.
   */
  wrongCredentialsWeight?: number;
  /** Hostile values aimed at what a named parameter or body property means, added to the generic ones. */
  hostile?: Record<string, fc.Arbitrary<unknown>>;
  /** Bodies of an operation whose body is not JSON (text/csv): valid ones and hostile ones. */
  streamBody?: { valid: fc.Arbitrary<Body>; hostile: fc.Arbitrary<Body> };
}

/**
 * Percent-encodes a string as UTF-8; a lone surrogate (which encodeURIComponent refuses) is written
 * as the three bytes a careless encoder would send for it (invalid UTF-8, e.g. `%ED%A0%80`).
 */
export function pctEncode(s: string): string {
  let out = '';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (c >= 0xd800 && c <= 0xdfff) {
      out += [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join('');
    } else out += encodeURIComponent(ch);
  }
  return out;
}

/**
 * A value for the path or the query, encoded and cut to 2,000 characters: Node's HTTP parser
 * answers 431 itself to a request head over 16 KiB, before the service sees it (the cut may end
 * inside a percent-encoding, which is one more malformed one).
 */
const enc = (v: unknown): string => pctEncode(typeof v === 'string' ? v : JSON.stringify(v)).slice(0, 2000);

type Body = { text?: string | Uint8Array; contentType: string | null };
type Part = 'path' | 'query' | 'headers' | 'body' | 'auth';

/**
 * Every request shape of one operation: a valid request (valid credentials, existing or unknown
 * ids, valid parameters and body), or one with exactly one part made hostile (a path parameter, a
 * query parameter, a header, the body or its media type, the credentials), so that each hostile
 * value meets the code behind the checks of the other parts.
 */
export function requestArbitrary(doc: OpenApiDoc, op: OperationInfo, opts: RequestGenOptions): fc.Arbitrary<GenRequest> {
  const schemas = new SchemaArbitraries(doc, opts.overrides, opts.hostile);
  const paramSchema = (name: string, where: string) => op.parameters.find((p) => p.name === name && p.in === where)?.schema as Schema;

  // Path: existing or unknown ids; hostile: one parameter a hostile string or a raw encoding.
  const pathNames = [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
  const fill = (values: string[]) => {
    let i = 0;
    return op.path.replace(/\{[^}]+\}/g, () => values[i++]);
  };
  const pathValid = fc.tuple(
    ...pathNames.map((name) => {
      const { existing, missing } = opts.pathValues(op, name);
      return fc
        .oneof(...(existing.length ? [{ weight: 3, arbitrary: fc.constantFrom(...existing) }] : []), {
          weight: 1,
          arbitrary: fc.constantFrom(...missing),
        })
        .map(enc);
    }),
  );
  const hostileSegment = fc.oneof(
    fc
      .constantFrom(...HOSTILE_STRINGS, ...WRONG_TYPES.map((v) => JSON.stringify(v)))
      // An empty segment or a dot segment names another path (the URL parser removes them).
      .filter((v) => v !== '' && v !== '.' && v !== '..')
      .map(enc),
    fc.constantFrom(...RAW_ENCODINGS),
  );
  const pathHostile = pathNames.length
    ? fc.tuple(pathValid, fc.nat({ max: pathNames.length - 1 }), hostileSegment).map(([v, i, h]) => v.map((x, j) => (j === i ? h : x)))
    : pathValid;

  // Query: each parameter left out or valid (bounds included); hostile: one of them hostile or
  // mis-encoded, or an unknown or repeated parameter.
  const queryParams = op.parameters.filter((p) => p.in === 'query');
  const queryValid = fc.tuple(
    ...queryParams.map((p) => {
      const valid = schemas.valid(paramSchema(p.name, 'query'), 0, p.name).map((v) => `${p.name}=${enc(v)}`);
      return p.required ? valid : fc.oneof(fc.constant(null), valid);
    }),
  );
  const oneHostileParam = queryParams.length
    ? fc.constantFrom(...queryParams).chain((p) =>
        fc.oneof(
          schemas.hostile(paramSchema(p.name, 'query'), 0, p.name).map((v) => [p.name, `${p.name}=${enc(v)}`] as const),
          fc.constantFrom(...RAW_ENCODINGS).map((v) => [p.name, `${p.name}=${v}`] as const),
          fc.constant([p.name, `${p.name}=1&${p.name}=2`] as const),
        ),
      )
    : fc.constant(['', ''] as const);
  const queryHostile = fc.oneof(
    {
      weight: 4,
      arbitrary: fc
        .tuple(queryValid, oneHostileParam)
        .map(([parts, [name, bad]]) => [...parts.filter((x) => x !== null && !x.startsWith(`${name}=`)), bad]),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(queryValid, fc.constantFrom('unknown=1', '%FF=%FF', '=', '&&&', 'a[b]=c', '__proto__=x'))
        .map(([parts, extra]) => [...parts, extra]),
    },
  );
  const joinQuery = (parts: (string | null)[]) => parts.filter((x): x is string => x !== null && x !== '').join('&');

  // Header parameters (Idempotency-Key): absent or one of a few, so that repeats happen; hostile:
  // odd values of it, or of X-Request-Id and Accept.
  const headerParams = op.parameters.filter((p) => p.in === 'header');
  const headersValid = fc.tuple(
    ...headerParams.map((p) =>
      fc.oneof(
        fc.constant(null),
        fc.constantFrom('k1', 'k2', 'retry-1').map((v) => [p.name.toLowerCase(), v] as const),
      ),
    ),
  );
  const headersHostile = fc.oneof(
    ...(headerParams.length
      ? [
          fc
            .tuple(
              fc.constantFrom(...headerParams),
              fc.constantFrom('x'.repeat(256), 'x'.repeat(5000), 'é', ' padded ', '"quoted"', '\t', 'a, b'),
            )
            .map(([p, v]) => [[p.name.toLowerCase(), v] as const]),
        ]
      : []),
    fc.constantFrom('x'.repeat(65), 'é', '../x', ' ').map((v) => [['x-request-id', v] as const]),
    fc.constantFrom('text/html', '*/*', 'application/xml').map((v) => [['accept', v] as const]),
  );

  // Body: valid JSON; hostile: one field hostile, an unknown field, another JSON type, raw text
  // a parser may trip on, another media type, none at all.
  let bodyValid: fc.Arbitrary<Body>;
  let bodyHostile: fc.Arbitrary<Body>;
  if (op.streamBody && opts.streamBody) {
    bodyValid = opts.streamBody.valid;
    bodyHostile = opts.streamBody.hostile;
  } else if (op.bodyPointer) {
    const bodySchema = { $ref: `#${op.bodyPointer}` };
    const valid = schemas.valid(bodySchema);
    bodyValid = valid.map((v) => ({ text: JSON.stringify(v), contentType: 'application/json' }));
    bodyHostile = fc.oneof(
      { weight: 8, arbitrary: schemas.mutantObject(bodySchema).map((v) => ({ text: JSON.stringify(v), contentType: 'application/json' })) },
      { weight: 1, arbitrary: fc.constantFrom(...WRONG_TYPES).map((v) => ({ text: JSON.stringify(v), contentType: 'application/json' })) },
      { weight: 2, arbitrary: fc.constantFrom(...RAW_BODIES).map((text) => ({ text, contentType: 'application/json' })) },
      {
        weight: 2,
        arbitrary: fc.tuple(valid, fc.constantFrom(...CONTENT_TYPES)).map(([v, contentType]) => ({ text: JSON.stringify(v), contentType })),
      },
      { weight: 1, arbitrary: fc.constant({ contentType: null }) },
    );
  } else if (op.method !== 'get') {
    // An operation without a body: none; hostile: `{}` or a small stray one.
    bodyValid = fc.constant({ contentType: null });
    bodyHostile = fc.constantFrom('{}', '{"a":1}', '[]', 'x', '{', '\u0000').map((text) => ({ text, contentType: 'application/json' }));
  } else {
    bodyValid = fc.constant({ contentType: null });
    bodyHostile = bodyValid;
  }

  const authHostile = fc.constantFrom<AuthVariant>('none', 'unknown', 'malformed', 'basic', 'non-ascii', 'lower-case-scheme');
  const targets: { weight: number; arbitrary: fc.Arbitrary<Part | null> }[] = [
    { weight: 24, arbitrary: fc.constant(null) },
    { weight: opts.wrongCredentialsWeight ?? 4, arbitrary: fc.constant('auth') },
    { weight: 4, arbitrary: fc.constant('headers') },
  ];
  if (pathNames.length) targets.push({ weight: 12, arbitrary: fc.constant('path') });
  if (queryParams.length) targets.push({ weight: 16, arbitrary: fc.constant('query') });
  if (op.method !== 'get') targets.push({ weight: op.bodyPointer || op.streamBody ? 24 : 4, arbitrary: fc.constant('body') });

  return fc
    .record({
      target: fc.oneof(...targets),
      pathValid,
      pathHostile,
      queryValid,
      queryHostile,
      headersValid,
      headersHostile,
      bodyValid,
      bodyHostile,
      authHostile,
    })
    .map((r) => {
      const t = r.target;
      const headers: Record<string, string> = {};
      for (const h of t === 'headers' ? [...r.headersValid, ...r.headersHostile] : r.headersValid) if (h) headers[h[0]] = h[1];
      const b = t === 'body' ? r.bodyHostile : r.bodyValid;
      if (b.contentType !== null) headers['content-type'] = b.contentType;
      return {
        method: op.method.toUpperCase(),
        path: fill(t === 'path' ? r.pathHostile : r.pathValid),
        query: joinQuery(t === 'query' ? r.queryHostile : r.queryValid),
        headers,
        body: b.text,
        auth: t === 'auth' ? r.authHostile : 'valid',
      };
    });
}

/** The Authorization header of a credential variant, given the valid token. */
export function authHeader(variant: AuthVariant, token: string, keyFormat: 'api-key' | 'operator'): string | undefined {
  switch (variant) {
    case 'valid':
      return `Bearer ${token}`;
    case 'none':
      return undefined;
    case 'unknown':
      return keyFormat === 'api-key' ? `Bearer obk_live_${'0'.repeat(32)}` : `Bearer ${'a'.repeat(token.length)}`;
    case 'malformed':
      return `Bearer ${token}x`;
    case 'basic':
      return `Basic ${Buffer.from(`x:${token}`).toString('base64')}`;
    case 'non-ascii':
      // Latin-1 characters (a header carries no others), as many as the token has.
      return `Bearer ${'é'.repeat(token.length)}`;
    case 'lower-case-scheme':
      return `bearer  ${token} `;
  }
}

/** Runs of one repeated piece (a long generated value) shortened to `<piece>×N`, for messages. */
export function abbreviate(s: string): string {
  return s.replace(/([\s\S]{1,12}?)\1{15,}/g, (m, unit: string) => `‹${unit}›×${m.length / unit.length}`);
}

/** A request as a curl command line (long repeated runs written as `‹piece›×N`), for the failure message. */
export function describeRequest(url: string, req: GenRequest, headers: Record<string, string>): string {
  const q = (s: string) => `'${abbreviate(s).replace(/'/g, `'\\''`)}'`;
  const parts = [`curl -X ${req.method} ${q(url)}`];
  for (const [k, v] of Object.entries(headers)) parts.push(`-H ${q(`${k}: ${v}`)}`);
  if (req.body !== undefined) {
    const text = typeof req.body === 'string' ? req.body : `<bytes ${Buffer.from(req.body).toString('hex')}>`;
    const short = abbreviate(text);
    parts.push(`--data-raw ${q(short.length > 2000 ? `${short.slice(0, 2000)}…(${text.length} characters)` : text)}`);
  }
  return parts.join(' ');
}
