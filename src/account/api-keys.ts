// API keys of an organization, as the operator issues and revokes them: the secret is shown once,
// only its hash is stored (src/http/auth.ts reads it).
import { sql } from 'kysely';
import { type Db, type Tx, withOrg, withSystem } from '../../db/database.js';
import { hashKey, newApiKey } from '../http/auth.js';
import type { adminOperations } from '../http/handler.js';
import { invalid, notFound } from '../http/problems.js';
import { iso, isoNN, newId } from '../platform/ids.js';
import { ALL_SCOPES } from '../platform/spec.js';

type NewApiKey = adminOperations['adminCreateApiKey']['requestBody']['content']['application/json'];

/** Issues a key (scope `*` is every scope); 400 when userId names no active person of the organization. */
export async function createApiKey(trx: Tx, orgId: string, body: NewApiKey) {
  if (body.userId !== undefined) {
    const u = await trx
      .selectFrom('users')
      .select(['id', 'status'])
      .where('organization_id', '=', orgId)
      .where('id', '=', body.userId)
      .executeTakeFirst();
    if (!u) throw invalid('userId names no sales person of this organization.', 'body.userId');
    if (u.status !== 'active') throw invalid(`userId names a person who is ${u.status}, not an active member.`, 'body.userId');
  }
  const scopes = body.scopes.includes('*') ? [...ALL_SCOPES] : [...new Set(body.scopes)];
  const key = newApiKey();
  const id = newId('key');
  const row = await trx
    .insertInto('api_keys')
    .values({
      organization_id: orgId,
      id,
      key_hash: hashKey(key),
      name: body.name ?? null,
      scopes,
      user_id: body.userId ?? null,
      expires_at: body.expiresAt ?? null,
    })
    .returning(['created_at', 'expires_at'])
    .executeTakeFirstOrThrow();
  return {
    id,
    key,
    scopes,
    userId: body.userId ?? null,
    expiresAt: iso(row.expires_at),
    createdAt: isoNN(row.created_at),
  };
}

/** Revokes a key (a revoked one stays revoked as it was); 404 when there is none. */
export async function revokeApiKey(db: Db, systemDb: Db, keyId: string) {
  // The path names no organization: the key's is looked up on the cross-organization role, and the
  // change is made bound to it, on the API's role.
  const key = await withSystem(systemDb, (trx) =>
    trx.selectFrom('api_keys').select('organization_id').where('id', '=', keyId).executeTakeFirst(),
  );
  if (!key) throw notFound('API key');
  const r = await withOrg(db, key.organization_id, (trx) =>
    trx
      .updateTable('api_keys')
      .set({ revoked_at: sql<Date>`coalesce(revoked_at, now_ms())` })
      .where('organization_id', '=', key.organization_id)
      .where('id', '=', keyId)
      .returning('id')
      .executeTakeFirst(),
  );
  if (!r) throw notFound('API key');
  return { id: r.id, revoked: true as const };
}
