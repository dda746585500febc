// Keyset pagination: pages ordered by (created_at DESC, id DESC); the cursor is the opaque,
// signed position of the last row of the previous page, so paging cost does not grow with depth.
import crypto from 'node:crypto';
import { type SelectQueryBuilder, sql } from 'kysely';
import { ProblemError } from './problems.js';

// Cursors carry an HMAC so a tampered cursor is refused (400) rather than silently misread.
// The key only needs to be stable across the nodes of one deployment: it is derived from a
// constant, as a cursor reveals nothing beyond a row's id and creation time.
const CURSOR_KEY = 'outbound-cursor-v1';

export interface Position {
  at: string;
  id: string;
}

function sign(payload: string): string {
  return crypto.createHmac('sha256', CURSOR_KEY).update(payload).digest('base64url').slice(0, 16);
}

export function encodeCursor(at: Date | string | number, id: string): string {
  const payload = Buffer.from(JSON.stringify([new Date(at).toISOString(), id])).toString('base64url');
  return `${payload}.${sign(payload)}`;
}

export function decodeCursor(cursor: string | undefined | null): Position | null {
  if (cursor === undefined || cursor === null) return null;
  const bad = () => new ProblemError('invalid-cursor', 'The cursor is not one the service issued; pass a nextCursor unchanged.');
  const [payload, mac, ...rest] = cursor.split('.');
  if (!payload || !mac || rest.length > 0) throw bad();
  const expected = sign(payload);
  if (mac.length !== expected.length || !crypto.timingSafeEqual(Buffer.from(mac), Buffer.from(expected))) throw bad();
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
}

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
