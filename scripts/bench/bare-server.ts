// The baseline of the platform bench: a bare Hono route doing the same key lookup (and rate-limit
// count) as the full pipeline, with nothing else: no routing by spec, no validation, no transaction.
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { APP_ROLE, createDb, createPool, roleUrl } from '../../db/database.js';
import { authenticate } from '../../src/http/auth.js';

const db = createDb(createPool(roleUrl(process.env.DATABASE_URL!, APP_ROLE), { max: 20 }));
const app = new Hono();
app.get('/bare/me', async (c) => {
  const { auth } = await authenticate(db, c.req.header('authorization'), 1e9);
  return c.json({ apiKey: { id: auth.keyId, scopes: auth.scopes }, organization: { id: auth.organizationId, name: auth.org.name } });
});
serve({ fetch: app.fetch, port: Number(process.env.PORT), hostname: '127.0.0.1' });
