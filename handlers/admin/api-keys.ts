// Operator rows of API keys: issue (the secret shown once, its hash stored) and revoke.
import { sql } from 'kysely';
import { withSystem } from '../../db/database.js';
import { requireOrg } from '../../src/account/organizations.js';
import { hashKey, newApiKey } from '../../src/http/auth.js';
import type { AdminHandler, AdminHandlers } from '../../src/http/handler.js';
import { invalid, notFound } from '../../src/http/problems.js';
import { iso, isoNN, newId } from '../../src/platform/ids.js';
import { ALL_SCOPES } from '../../src/platform/spec.js';

const adminCreateApiKey: AdminHandler<'adminCreateApiKey'> = async ({ db, params, body }) =>
  withSystem(db, async (trx) => {
    await requireOrg(trx, params.orgId);
    if (body.userId !== undefined) {
      const u = await trx
        .selectFrom('users')
        .select(['id', 'status'])
        .where('organization_id', '=', params.orgId)
        .where('id', '=', body.userId)
        .executeTakeFirst();
      if (!u) throw invalid('userId names no sales person of this organization.', 'body.userId');
      if (u.status !== 'active') throw invalid(`userId names a person who is ${u.status}, not an active member.`, 'body.userId');
    }
    const scopes = body.scopes.includes('*') ? [...ALL_SCOPES] : [...new Set(body.scopes as string[])];
    const key = newApiKey();
    const id = newId('key');
    const row = await trx
      .insertInto('api_keys')
      .values({
        organization_id: params.orgId,
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
      status: 201 as const,
      body: {
        id,
        key,
        scopes: scopes as never,
        userId: body.userId ?? null,
        expiresAt: iso(row.expires_at),
        createdAt: isoNN(row.created_at),
      },
    };
  });

const adminRevokeApiKey: AdminHandler<'adminRevokeApiKey'> = async ({ db, params }) =>
  withSystem(db, async (trx) => {
    const r = await trx
      .updateTable('api_keys')
      .set({ revoked_at: sql`coalesce(revoked_at, now_ms())` as never })
      .where('id', '=', params.keyId)
      .returning('id')
      .executeTakeFirst();
    if (!r) throw notFound('API key');
    return { status: 200 as const, body: { id: r.id, revoked: true as const } };
  });

export const apiKeyHandlers: AdminHandlers = { adminCreateApiKey, adminRevokeApiKey };
