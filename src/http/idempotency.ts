// Idempotency-Key handling, inside the request's transaction. The first request with a key
// inserts its row; a concurrent duplicate waits on the unique key and then replays the stored
// response. Keys are kept at least 24 hours (the idempotency sweep removes older ones).
import crypto from 'node:crypto';
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { ProblemError } from './problems.js';

export interface StoredReply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.keys(v as object)
        .sort()
        .map((k) => [k, canonical((v as Record<string, unknown>)[k])]),
    );
  }
  return v;
}

/** The request a key stands for: its body, and its path parameters when the operation has any. */
export const requestHash = (body: unknown, params: Record<string, string> = {}): string => {
  const request = Object.keys(params).length === 0 ? (body ?? null) : { params, body: body ?? null };
  return crypto
    .createHash('sha256')
    .update(JSON.stringify(canonical(request)))
    .digest('hex');
};

/**
 * Runs `run` once per (organization, operation, key). A replay answers the first response; when
 * the first answer was 201 and the operation also documents 200, the replay answers 200 (a
 * replay creates nothing).
 */
export async function idempotent(
  trx: Tx,
  organizationId: string,
  operationId: string,
  key: string,
  request: { params: Record<string, string>; body: unknown },
  replayAs200: boolean,
  run: () => Promise<StoredReply>,
): Promise<StoredReply & { replayed: boolean }> {
  const hash = requestHash(request.body, request.params);
  const inserted = await sql<{ key: string }>`
    INSERT INTO idempotency_keys (organization_id, operation_id, key, request_hash)
    VALUES (${organizationId}, ${operationId}, ${key}, ${hash})
    ON CONFLICT DO NOTHING RETURNING key`.execute(trx);
  if (inserted.rows.length === 0) {
    const prior = await trx
      .selectFrom('idempotency_keys')
      .select(['request_hash', 'status', 'response'])
      .where('organization_id', '=', organizationId)
      .where('operation_id', '=', operationId)
      .where('key', '=', key)
      .executeTakeFirst();
    if (!prior || prior.status === null) throw new ProblemError('idempotency-key-in-use');
    if (prior.request_hash !== hash) {
      throw new ProblemError('idempotency-key-reused', 'This Idempotency-Key was used with a different request body or path.');
    }
    const status = prior.status === 201 && replayAs200 ? 200 : prior.status;
    return { status, body: prior.response, replayed: true };
  }
  const reply = await run();
  await trx
    .updateTable('idempotency_keys')
    .set({ status: reply.status, response: JSON.stringify(reply.body) })
    .where('organization_id', '=', organizationId)
    .where('operation_id', '=', operationId)
    .where('key', '=', key)
    .execute();
  return { ...reply, replayed: false };
}
