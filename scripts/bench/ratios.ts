// Bench: the hot reads against their physical references, in one run. One organization
// with 200,000 contacts, 100,000 deals, 100,000 drafts and 100,000 action items (seeded in SQL);
// for GET /me and each list's first page of 50 (contacts, deals, drafts, action items), at 50
// connections: the full pipeline, Postgres alone running the request's statements (pgbench
// -M prepared; for lists also the handler's statement without authentication), and a bare Node
// route serving the same page with the same statements (scripts/bench/references.ts).
// Targets: lists and /me >= 90% of the bare route (the ratio to Postgres printed beside it, each
// ratio the median of 5 rounds); p99 < 4x p50 everywhere.

import crypto from 'node:crypto';
import type { Db } from '../../db/database.js';
import { handlers } from '../../src/boot/runtime.js';
import { installCursorKey } from '../../src/http/paging.js';
import { call, seedActionItems } from './own-service.js';
import { type BareCase, captureRequest, compare, type Statement, startBareRoutes } from './references.js';
import type { BenchArea, BenchContext } from './types.js';

const CONTACTS = 200_000;
const ROWS = 100_000;

async function seed(ctx: BenchContext, orgId: string, ownerId: string, stageIds: string[]): Promise<void> {
  const client = await ctx.pool.connect();
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    await client.query(
      `INSERT INTO contact_lists (organization_id, id, user_id, name, source_type)
      VALUES ($1, 'lst_ratio', $2, 'Ratio bench', 'COLD')`,
      [orgId, ownerId],
    );
    await client.query(
      `
      INSERT INTO contacts (organization_id, id, list_id, owner_user_id, email, email_normalized, name, qualification_status, created_at, updated_at)
      SELECT $1, 'con_' || substr(md5('r' || g), 1, 24), 'lst_ratio', $2, 'p' || g || '@co' || (g % 50000) || '.example.com',
             'p' || g || '@co' || (g % 50000) || '.example.com',
             initcap(substr(md5('f' || (g % 300)), 1, 6)) || ' ' || initcap(substr(md5('l' || (g % 5000)), 1, 8)),
             (ARRAY['NEW', 'CONTACTED', 'QUALIFIED', 'UNQUALIFIED', 'NURTURE', 'CUSTOMER'])[1 + g % 6],
             date_trunc('milliseconds', now() - g * interval '1 second'), date_trunc('milliseconds', now() - g * interval '1 second')
      FROM generate_series(1, $3::int) g`,
      [orgId, ownerId, CONTACTS],
    );
    await client.query(
      `
      INSERT INTO deals (organization_id, id, name, value_cents, probability, close_date, owner_sales_person_id, stage_id, forecast_category, created_at, updated_at)
      SELECT $1, 'deal_ratio' || lpad(g::text, 8, '0'), 'Bench deal ' || g, (g % 1000) * 10000, g % 101, current_date + 30 + (g % 300), $2,
             ($3::text[])[1 + g % 5], 'pipeline',
             date_trunc('milliseconds', now() - g * interval '1 second'), date_trunc('milliseconds', now() - g * interval '1 second')
      FROM generate_series(1, $4::int) g`,
      [orgId, ownerId, stageIds, ROWS],
    );
    await client.query(
      `
      INSERT INTO drafts (organization_id, id, contact_id, step, status, subject, body, created_at, updated_at)
      SELECT $1, 'drf_' || substr(md5('d' || g), 1, 24), 'con_' || substr(md5('r' || g), 1, 24), 1, 'DRAFT_GENERATED',
             'A quick idea for Co ' || g, repeat('Hello there, we help teams like yours send better mail. ', 8),
             date_trunc('milliseconds', now() - g * interval '1 second'), date_trunc('milliseconds', now() - g * interval '1 second')
      FROM generate_series(1, $2::int) g`,
      [orgId, ROWS],
    );
    await seedActionItems(client, orgId, ownerId, ROWS, 'r');
    await client.query('ANALYZE contacts, deals, drafts, action_items');
  } finally {
    client.release();
  }
}

type ListOp = 'listContacts' | 'listDeals' | 'listDrafts' | 'listActionItems';
const LISTS: { op: ListOp; path: string; label: string }[] = [
  { op: 'listContacts', path: '/contacts', label: `GET /contacts?limit=50 (${CONTACTS.toLocaleString('en')} contacts)` },
  { op: 'listDeals', path: '/deals', label: `GET /deals?limit=50 (${ROWS.toLocaleString('en')} deals)` },
  { op: 'listDrafts', path: '/drafts', label: `GET /drafts?limit=50 (${ROWS.toLocaleString('en')} drafts)` },
  { op: 'listActionItems', path: '/action-items', label: `GET /action-items?limit=50 (${ROWS.toLocaleString('en')} items)` },
];

const area: BenchArea = {
  name: 'ratios: hot reads against Postgres alone and a bare Node route',
  async run(ctx) {
    const url = ctx.serviceEnv.DATABASE_URL;
    const { orgId, key, ownerId } = await ctx.newOrg('growth');
    // The first deal opens the board (seeds the default stages) through the API.
    const contact = (await call(ctx.origin, key, 'POST', '/api/v1/contacts', {
      email: 'buyer@ratio.example.com',
      name: 'Ratio Buyer',
    })) as { id: string };
    await call(ctx.origin, key, 'POST', '/api/v1/deals', {
      name: 'Opener',
      valueCents: 100,
      closeDate: '2031-01-31',
      primaryContactId: contact.id,
    });
    const stages = (await call(ctx.origin, key, 'GET', '/api/v1/deal-stages')).data as { id: string; category: string }[];
    const started = Date.now();
    await seed(
      ctx,
      orgId,
      ownerId,
      stages.filter((s) => s.category === 'active').map((s) => s.id),
    );
    ctx.log(`ratios: seeded in ${((Date.now() - started) / 1000).toFixed(1)} s`);

    // The statements of each request, captured from the service's own code path.
    // The handlers page with the deployment's cursor key, which openRuntime installs in the service;
    // capturing only needs one (a first page decodes no cursor).
    installCursorKey(crypto.randomBytes(32));
    const me = await captureRequest(url, key);
    const lists: { path: string; label: string; request: Statement[] }[] = [];
    for (const l of LISTS) {
      const request = await captureRequest(url, key, (conn: Db, auth) =>
        (handlers[l.op] as (c: unknown) => Promise<unknown>)({ trx: conn, auth, query: { limit: 50 } }),
      );
      lists.push({ path: l.path, label: l.label, request });
    }
    const bareCases: BareCase[] = [
      { path: '/me', statements: [] },
      ...lists.map((l) => ({ path: l.path, statements: l.request.slice(1) })),
    ];
    const bare = await startBareRoutes(ctx, bareCases, key);

    await compare(ctx, {
      area: 'ratios',
      label: 'GET /me',
      key,
      path: '/api/v1/me',
      bare,
      barePath: '/bare/me',
      request: me,
      orgId,
      bareTarget: 0.9,
    });
    for (const l of lists) {
      await compare(ctx, {
        area: 'ratios',
        label: l.label,
        key,
        path: `/api/v1${l.path}?limit=50`,
        bare,
        barePath: `/bare${l.path}?limit=50`,
        request: l.request,
        alone: l.request.slice(1),
        orgId,
        bareTarget: 0.9,
      });
    }
  },
};

export default area;
