// A keyed read in one round trip fewer: the authentication travels with the handler's first
// statement (db/pipelined.ts: BEGIN; authenticate_request; COMMIT; the read; one Sync). The
// authentication raises on an unknown key, an exceeded limit or a missing scope, so nothing after
// it runs; its COMMIT releases the key's counter row before the read, so reads of one key do not
// wait for each other. The handler starts with what the key authenticated to last time (auth.ts's
// bounded memory of key hashes); a fresh answer that differs refuses the first read's result
// (StaleHead) and the handler runs again with the fresh answer. Whatever the memory cannot vouch
// for (a key it does not hold, a scope it refuses, input that fails validation) takes the
// ordinary path, which authenticates first, so 401, 429 and 403 keep their priority over 400.
import { sql } from 'kysely';
import { type Db, deferHead, flushHead } from '../../db/database.js';
import { DeferredHead, StaleHead } from '../../db/pipelined.js';
import type { OperationInfo } from '../platform/openapi-doc.js';
import {
  type AuthRow,
  enforceRate,
  forget,
  fromRow,
  hashKey,
  keyOf,
  rateHeaders,
  recalled,
  remember,
  sameAuth,
  scopeAllows,
} from './auth.js';
import type { AuthInfo } from './handler.js';
import { ProblemError } from './problems.js';
import { type C, header, parseRequest } from './request.js';

const AUTHENTICATE = 'select * from authenticate_request($1, $2, $3)';

type Parsed = Awaited<ReturnType<typeof parseRequest>>;

/** The scope the database checks: none for operations that need no scope or check it per action. */
const sqlScope = (scope: string | null) => (scope === 'none' || scope === 'per-action' ? null : scope);

/**
 * Runs a keyed GET with its authentication deferred to its first read, or answers null when the
 * request must take the ordinary path (authentication first). `run` is the handler on `conn`.
 */
export async function deferredRead<R>(
  c: C,
  op: OperationInfo,
  params: Record<string, string>,
  conn: Db,
  limit: number,
  run: (auth: AuthInfo, req: Parsed) => Promise<R>,
): Promise<{ reply: R; headers: Record<string, string> } | null> {
  let token: string;
  try {
    token = keyOf(header(c, 'authorization'));
  } catch {
    return null;
  }
  const hash = hashKey(token);
  const hashHex = hash.toString('hex');
  const known = recalled(hashHex);
  if (!known || op.requiredScope === null || !scopeAllows(known, op.requiredScope)) return null;
  let req: Parsed;
  try {
    req = await parseRequest(c, op, params);
  } catch {
    return null;
  }
  const head = new DeferredHead(
    [{ text: AUTHENTICATE, values: [hash, sqlScope(op.requiredScope), limit], name: 'authenticate_request' }],
    (rs) => sameAuth(fromRow(rs[0].rows[0] as AuthRow, limit).auth, known),
  );
  await deferHead(conn, head);
  let first: { reply: R } | { error: unknown };
  try {
    first = { reply: await run(known, req) };
  } catch (error) {
    first = { error };
  }
  // A head that went with the first read needs no further statement (a failed one: the flush
  // below makes the connection forget it, so the clean-up can run).
  if (!head.sent) await flushHead(conn);
  const outcome = await head.outcome;
  if (outcome.error) {
    await flushHead(conn);
    // The raise rolled the binding back to the connection's previous one: unbind before the
    // connection goes back to the pool (and end the transaction the raise aborted).
    await sql.raw(`ROLLBACK; SELECT set_config('app.org_id', '', false)`).execute(conn);
    refuse(c, outcome.error, known, hashHex, limit, op);
  }
  const fresh = fromRow(outcome.results[0].rows[0] as AuthRow, limit);
  c.set('organizationId', fresh.auth.organizationId);
  const headers = rateHeaders(fresh.rate);
  c.set('extraHeaders', headers);
  if (sameAuth(fresh.auth, known) && !('error' in first && first.error instanceof StaleHead)) {
    if ('error' in first) throw first.error;
    return { reply: first.reply, headers };
  }
  // What the handler started with is out of date: it runs again with the fresh answer (its first
  // read's result was refused, so nothing of that run was given out).
  remember(hashHex, fresh.auth);
  return { reply: await run(fresh.auth, req), headers };
}

/** The refusal a raise of authenticate_request stands for (any other error as it is). */
function refuse(
  c: C,
  error: Error & { code?: string; detail?: string },
  known: AuthInfo,
  hashHex: string,
  limit: number,
  op: OperationInfo,
): never {
  if (error.code === 'OB401') {
    forget(hashHex);
    throw new ProblemError('unauthorized', 'The API key is unknown, expired or revoked.');
  }
  c.set('organizationId', known.organizationId);
  if (error.code === 'OB429') {
    const { count, reset } = JSON.parse(error.detail ?? '{}') as { count: number; reset: number };
    const rate = { limit, count, remaining: Math.max(0, limit - count), reset: Number(reset) };
    c.set('extraHeaders', rateHeaders(rate));
    enforceRate(rate);
  }
  if (error.code === 'OB403') {
    forget(hashHex);
    throw new ProblemError(
      'insufficient-scope',
      `This operation requires the scope ${op.requiredScope}, which the API key lacks (missing: ${op.requiredScope}).`,
    );
  }
  throw error;
}
