// CRM benchmark: an organization with 1,000,000 contacts (seeded in SQL), then
//   GET /contacts?limit=50              the default listing (target >= 2,000 req/s, p99 < 30 ms at 50 connections);
//   GET /contacts?limit=50&cursor=...   page 2,000 of the same listing (target: within 1.5x of page 1);
//   GET /contacts?q=<surname>           substring search, about 200 matches (target p99 < 50 ms, at 10 connections);
//   GET /contacts?q=<common>            substring search matching every row (no target; shows the common-term path);
//   POST /contacts                      a new person per request, filed on the CRM import list.
import crypto from 'node:crypto';
import { cursorCodec } from '../../src/http/paging.js';
import type { BenchArea, BenchContext } from './types.js';

const CONTACTS = 1_000_000;
const BATCH = 200_000;
const SURNAMES = 5_000;
const PAGE = 50;
const DEEP_PAGE = 2_000;

/** The seeded surname of contact g (the SQL below builds the same text). */
const surname = (g: number) =>
  crypto
    .createHash('md5')
    .update(`l${g % SURNAMES}`)
    .digest('hex')
    .slice(0, 8);

async function seed(ctx: BenchContext, orgId: string, ownerId: string): Promise<void> {
  const client = await ctx.pool.connect();
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    await client.query(
      `INSERT INTO contact_lists (organization_id, id, user_id, name, source_type)
      VALUES ($1, 'lst_bench_a', $2, 'Bench A', 'COLD'), ($1, 'lst_bench_b', $2, 'Bench B', 'CONFERENCE')`,
      [orgId, ownerId],
    );
    // Names "Xxxxxx Yyyyyyyy" from 300 first names and 5,000 surnames, unique addresses over
    // 50,000 company domains, statuses mixed, one contact per second going back in time.
    for (let lo = 1; lo <= CONTACTS; lo += BATCH) {
      await client.query(
        `
        INSERT INTO contacts (organization_id, id, list_id, owner_user_id, email, email_normalized, name, qualification_status,
                              created_at, updated_at)
        SELECT $1, 'con_' || substr(md5('c' || g), 1, 24), CASE WHEN g % 10 = 0 THEN 'lst_bench_b' ELSE 'lst_bench_a' END, $2,
               'p' || g || '@co' || (g % 50000) || '.example.com', 'p' || g || '@co' || (g % 50000) || '.example.com',
               initcap(substr(md5('f' || (g % 300)), 1, 6)) || ' ' || initcap(substr(md5('l' || (g % ${SURNAMES})), 1, 8)),
               (ARRAY['NEW', 'CONTACTED', 'QUALIFIED', 'UNQUALIFIED', 'NURTURE', 'CUSTOMER'])[1 + g % 6],
               date_trunc('milliseconds', now() - g * interval '1 second'), date_trunc('milliseconds', now() - g * interval '1 second')
        FROM generate_series($3::int, $4::int) g`,
        [orgId, ownerId, lo, Math.min(lo + BATCH - 1, CONTACTS)],
      );
    }
    await client.query(`SELECT gin_clean_pending_list('contacts_search_trgm_idx')`);
    await client.query('ANALYZE contacts');
  } finally {
    client.release();
  }
}

/** The cursor that opens page `n` of the default listing (the position of the last row of page n-1). */
async function cursorOfPage(ctx: BenchContext, orgId: string, n: number): Promise<string> {
  const client = await ctx.pool.connect();
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    const r = await client.query<{ created_at: Date; id: string }>(
      `
      SELECT created_at, id FROM contacts
      WHERE organization_id = $1 AND deleted_at IS NULL AND erased_at IS NULL
      ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT 1`,
      [orgId, (n - 1) * PAGE - 1],
    );
    return cursorCodec(Buffer.from(ctx.serviceEnv.WEBHOOK_SECRET_KEY, 'hex')).encode(r.rows[0].created_at, r.rows[0].id);
  } finally {
    client.release();
  }
}

const figures = (r: { requestsPerSecond: number; p50Ms: number; p99Ms: number; non2xx: number; errors: number }) => ({
  'req/s': Math.round(r.requestsPerSecond),
  'p50 ms': r.p50Ms,
  'p99 ms': r.p99Ms,
  non2xx: r.non2xx,
  errors: r.errors,
});
const clean = (r: { non2xx: number; errors: number }) => r.non2xx === 0 && r.errors === 0;

const area: BenchArea = {
  name: 'crm',
  async run(ctx) {
    const { orgId, key, ownerId } = await ctx.newOrg('growth');
    const started = Date.now();
    await seed(ctx, orgId, ownerId);
    ctx.log(`crm: seeded ${CONTACTS.toLocaleString('en')} contacts in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    const auth = { authorization: `Bearer ${key}` };
    const size = `${CONTACTS.toLocaleString('en')} contacts, 50 connections`;

    await ctx.load({ path: `/api/v1/contacts?limit=${PAGE}`, headers: auth, durationSeconds: 3 }); // warm-up
    const first = await ctx.load({ path: `/api/v1/contacts?limit=${PAGE}`, headers: auth, durationSeconds: 10 });
    ctx.report({
      area: 'crm',
      case: `GET /contacts?limit=50 (${size})`,
      figures: figures(first),
      target: '>= 2,000 req/s and p99 < 30 ms',
      met: first.requestsPerSecond >= 2000 && first.p99Ms < 30 && clean(first),
    });

    const cursor = await cursorOfPage(ctx, orgId, DEEP_PAGE);
    const deep = await ctx.load({
      path: `/api/v1/contacts?limit=${PAGE}&cursor=${encodeURIComponent(cursor)}`,
      headers: auth,
      durationSeconds: 10,
    });
    const ratio = first.requestsPerSecond / Math.max(1, deep.requestsPerSecond);
    ctx.report({
      area: 'crm',
      case: `GET /contacts?limit=50 page ${DEEP_PAGE.toLocaleString('en')} (${size})`,
      figures: { ...figures(deep), 'page 1 / page 2,000 req/s': ratio.toFixed(2) },
      target: 'within 1.5x of page 1',
      met: ratio <= 1.5 && deep.p50Ms <= Math.max(1, first.p50Ms) * 1.5 && clean(deep),
    });

    // The search target is a latency: measured at 10 connections, where queueing behind the
    // other connections does not dominate; the 50-connection figures are given beside it.
    const term = surname(1234);
    const searchPath = `/api/v1/contacts?limit=${PAGE}&q=${term}`;
    const rare = await ctx.load({ path: searchPath, headers: auth, connections: 10, durationSeconds: 10 });
    ctx.report({
      area: 'crm',
      case: `GET /contacts?q=<surname> (~${CONTACTS / SURNAMES} matches; ${CONTACTS.toLocaleString('en')} contacts, 10 connections)`,
      figures: figures(rare),
      target: 'p99 < 50 ms',
      met: rare.p99Ms < 50 && clean(rare),
    });
    const rare50 = await ctx.load({ path: searchPath, headers: auth, durationSeconds: 10 });
    ctx.report({ area: 'crm', case: `GET /contacts?q=<surname> (${size})`, figures: figures(rare50) });
    const common = await ctx.load({ path: `/api/v1/contacts?limit=${PAGE}&q=example.com`, headers: auth, durationSeconds: 5 });
    ctx.report({ area: 'crm', case: `GET /contacts?q=example.com (every row matches; ${size})`, figures: figures(common) });

    let n = 0;
    const run = crypto.randomBytes(4).toString('hex');
    const create = await ctx.load({
      path: '/api/v1/contacts',
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      makeBody: () => JSON.stringify({ email: `bench${run}.${n++}@new${n % 1000}.example.com`, name: `Bench Person ${n}` }),
      durationSeconds: 10,
    });
    ctx.report({ area: 'crm', case: `POST /contacts (${size})`, figures: figures(create) });
  },
};

export default area;
