// Keyset pagination: pages ordered by (created_at DESC, id DESC); the cursor is the opaque,
// signed position of the last row of the previous page, so paging cost does not grow with depth.
import crypto from 'node:crypto';
import { type SelectQueryBuilder, sql } from 'kysely';
import { sameSecret } from '../platform/secret-compare.js';
import { ProblemError } from './problems.js';

export interface Position {
  at: string;
  id: string;
}

/** Signs and checks the cursors of one deployment. */
export interface CursorCodec {
  encode(at: Date | string | number, id: string): string;
  /** The position a cursor names; null without one; 400 invalid-cursor for one the deployment did not issue. */
  decode(cursor: string | undefined | null): Position | null;
}

/**
 * Cursors carry an HMAC so a tampered cursor is refused (400) rather than silently misread. Its
 * key is derived (HKDF-SHA256) from the deployment's secret key (src/platform/secret-box.ts), so
 * every node of a deployment accepts the cursors of the others and nobody else can make one.
 */
export function cursorCodec(secretKey: Buffer): CursorCodec {
  const key = Buffer.from(crypto.hkdfSync('sha256', secretKey, Buffer.alloc(0), 'outbound-cursor-v2', 32));
  const sign = (payload: string) => crypto.createHmac('sha256', key).update(payload).digest('base64url').slice(0, 16);
  const bad = () => new ProblemError('invalid-cursor', 'The cursor is not one the service issued; pass a nextCursor unchanged.');
  return {
    encode(at, id) {
      const payload = Buffer.from(JSON.stringify([new Date(at).toISOString(), id])).toString('base64url');
      return `${payload}.${sign(payload)}`;
    },
    decode(cursor) {
      if (cursor === undefined || cursor === null) return null;
      const [payload, mac, ...rest] = cursor.split('.');
      if (!payload || !mac || rest.length > 0 || !sameSecret(mac, sign(payload))) throw bad();
      let parsed: unknown;
      try {
        parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      } catch {
        throw bad();
      }
      if (
        !Array.isArray(parsed) ||
        parsed.length !== 2 ||
        typeof parsed[0] !== 'string' ||
        typeof parsed[1] !== 'string' ||
        Number.isNaN(Date.parse(parsed[0]))
      )
        throw bad();
      return { at: parsed[0], id: parsed[1] };
    },
  };
}

// The codec of the deployment this process serves, installed once by src/boot/runtime.ts from the
// secret key it loads. Held here rather than passed along because every list query pages and a
// process serves one deployment (one secret key).
let installed: CursorCodec | null = null;

/** Installs the cursor key of the deployment, derived from its secret key (openRuntime does, at start). */
export function installCursorKey(secretKey: Buffer): void {
  installed = cursorCodec(secretKey);
}

function codec(): CursorCodec {
  if (installed === null) throw new Error('no cursor key: openRuntime installs it from the secret key before serving');
  return installed;
}

export const encodeCursor = (at: Date | string | number, id: string): string => codec().encode(at, id);
export const decodeCursor = (cursor: string | undefined | null): Position | null => codec().decode(cursor);

/**
 * Applies the cursor and limit to a query whose rows carry `createdCol` and `idCol`; fetches one
 * extra row to know whether another page follows.
 */
export function keyset<DB, TB extends keyof DB, O>(
  qb: SelectQueryBuilder<DB, TB, O>,
  opts: { cursor?: string | null; limit: number; createdCol: string; idCol: string },
): SelectQueryBuilder<DB, TB, O> {
  const pos = decodeCursor(opts.cursor);
  let q = qb;
  if (pos) {
    q = q.where(sql<boolean>`(${sql.ref(opts.createdCol)}, ${sql.ref(opts.idCol)}) < (${pos.at}::timestamptz, ${pos.id})`);
  }
  // The limit is a literal, not a parameter: a prepared statement's generic plan must see it to
  // prefer the ordered index walk over reading and sorting every row.
  return q
    .orderBy(sql.ref(opts.createdCol), 'desc')
    .orderBy(sql.ref(opts.idCol), 'desc')
    .limit(sql.lit(opts.limit + 1));
}

type RowPosition<R> = (r: R) => { at: Date | string | number; id: string };

function cut<R>(rows: R[], limit: number, pos: RowPosition<R>) {
  const more = rows.length > limit;
  const slice = more ? rows.slice(0, limit) : rows;
  const last = slice[slice.length - 1];
  const p = last ? pos(last) : null;
  return { slice, nextCursor: more && p ? encodeCursor(p.at, p.id) : null };
}

/** Cuts the extra row and builds `{data, nextCursor}`. */
export function page<R, T>(rows: R[], limit: number, pos: RowPosition<R>, map: (r: R) => T) {
  const { slice, nextCursor } = cut(rows, limit, pos);
  return { data: slice.map(map), nextCursor };
}

/**
 * A response body already serialized as JSON of shape T; the pipeline sends the text as it is.
 * The busiest list pages are written this way: building fifty item objects only to stringify
 * them costs the API node more than the rest of the request.
 */
export class JsonText<T> {
  declare readonly shape?: T;
  constructor(readonly text: string) {}
  /** Anywhere a body is stringified (an idempotent reply, say), the text stands for itself. */
  toJSON(): unknown {
    return JSON.parse(this.text);
  }
}

/** `page` for items serialized by `item` (which must write exactly what the item's mapping gives). */
export function jsonPage<R, T>(
  rows: R[],
  limit: number,
  pos: RowPosition<R>,
  item: (r: R) => string,
): JsonText<{ data: T[]; nextCursor: string | null }> {
  const { slice, nextCursor } = cut(rows, limit, pos);
  let data = '';
  for (const r of slice) data += data.length === 0 ? item(r) : `,${item(r)}`;
  return new JsonText(`{"data":[${data}],"nextCursor":${nextCursor === null ? 'null' : JSON.stringify(nextCursor)}}`);
}
