import type { Handler, Handlers } from '../src/http/handler.js';
import { iso, isoNN } from '../src/platform/ids.js';

// The key lookup already read the organization: no query is needed.
const getMe: Handler<'getMe'> = async ({ auth }) => {
  const org = { id: auth.organizationId, ...auth.org };
  return {
    status: 200,
    body: {
      apiKey: {
        id: auth.keyId,
        name: auth.keyName,
        scopes: auth.scopes,
        userId: auth.userId,
        role: auth.userRole as 'REP' | 'MANAGER' | 'ADMIN' | 'OWNER' | null,
        expiresAt: iso(auth.expiresAt),
        createdAt: isoNN(auth.keyCreatedAt),
      },
      organization: {
        id: org.id,
        name: org.name,
        plan: org.plan as 'free' | 'starter' | 'growth',
        flags: { v1_2_api_send: org.flags.v1_2_api_send === true },
        createdAt: isoNN(org.createdAt),
      },
    },
  };
};

export const meHandlers = { getMe } satisfies Partial<Handlers>;
