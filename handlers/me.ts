import type { Handler } from '../src/handler.js';
import { isoNN, iso } from '../src/ids.js';

const getMe: Handler<'getMe'> = async ({ auth, trx }) => {
  const org = await trx.selectFrom('organizations').select(['id', 'name', 'plan', 'flags', 'created_at'])
    .where('id', '=', auth.organizationId).executeTakeFirstOrThrow();
  return {
    status: 200,
    body: {
      apiKey: {
        id: auth.keyId, name: auth.keyName, scopes: auth.scopes, userId: auth.userId,
        role: auth.userRole as 'REP' | 'MANAGER' | 'ADMIN' | 'OWNER' | null,
        expiresAt: iso(auth.expiresAt), createdAt: isoNN(auth.keyCreatedAt),
      },
      organization: {
        id: org.id, name: org.name, plan: org.plan as 'free' | 'starter' | 'growth',
        flags: { v1_2_api_send: org.flags.v1_2_api_send === true }, createdAt: isoNN(org.created_at),
      },
    },
  };
};

export const meHandlers = { getMe };
