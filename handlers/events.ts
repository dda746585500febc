// The platform event log (tag events): GET /events, read by src/webhooks/event-log.ts. (GET /usage,
// of the same tag, is not here.)
import type { Handler, Handlers } from '../src/http/handler.js';
import { listEvents as readEvents } from '../src/webhooks/event-log.js';

const listEvents: Handler<'listEvents'> = async ({ trx, auth, query }) => {
  return { status: 200, body: await readEvents(trx, auth.organizationId, query) };
};

export const eventHandlers = { listEvents } satisfies Partial<Handlers>;
