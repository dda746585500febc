// The bare Node reference of scripts/bench/references.ts: node:http, pg and JSON.stringify, no
// framework, no routing by spec, no validation. Each path of BARE_CASES runs, on one pooled
// connection (as the service does), the authentication statement with the request's key hash,
// then the case's statements (prepared, as the service prepares them), and answers the last
// statement's rows as the page `{data, nextCursor}` (or, for /me, the key and its organization).
// Like the service, it reads one row past the page to know whether another follows.
import crypto from 'node:crypto';
import http from 'node:http';
import type pg from 'pg';
import { APP_ROLE, createPool, roleUrl } from '../../db/database.js';

interface Case {
  path: string;
  statements: { sql: string; params: string[] }[];
  limit?: number;
}

const cases = new Map<string, Case>((JSON.parse(process.env.BARE_CASES!) as Case[]).map((c) => [`/bare${c.path}`, c]));
const pool: pg.Pool = createPool(roleUrl(process.env.DATABASE_URL!, APP_ROLE), { max: 40, name: 'bench-bare' });
const AUTH = 'select * from authenticate_api_key($1)';
const name = (text: string) => `b${crypto.createHash('sha1').update(text).digest('hex').slice(0, 16)}`;

async function serve(c: Case, authorization: string): Promise<{ status: number; body: string }> {
  const token = /^Bearer\s+(\S+)$/i.exec(authorization)?.[1] ?? '';
  const hash = crypto.createHash('sha256').update(token).digest();
  const client = await pool.connect();
  try {
    const auth = await client.query({ name: name(AUTH), text: AUTH, values: [hash] });
    const k = auth.rows[0];
    if (!k) return { status: 401, body: JSON.stringify({ title: 'Unauthorized' }) };
    if (c.statements.length === 0) {
      return {
        status: 200,
        body: JSON.stringify({
          apiKey: {
            id: k.key_id,
            name: k.key_name,
            scopes: k.scopes,
            userId: k.user_id,
            role: k.user_role,
            expiresAt: k.expires_at,
            createdAt: k.key_created_at,
          },
          organization: { id: k.organization_id, name: k.org_name, plan: k.org_plan, flags: k.org_flags, createdAt: k.org_created_at },
        }),
      };
    }
    let rows: Record<string, unknown>[] = [];
    for (const s of c.statements) rows = (await client.query({ name: name(s.sql), text: s.sql, values: s.params })).rows;
    const limit = c.limit ?? 50;
    const more = rows.length > limit;
    const data = more ? rows.slice(0, limit) : rows;
    const last = data[data.length - 1];
    const nextCursor = more && last ? Buffer.from(JSON.stringify([last.created_ms, last.id])).toString('base64url') : null;
    // Rows that carry their item as JSON text (column `item`) are passed through, as any route
    // running that statement would; other rows are stringified as they come.
    if (typeof last?.item === 'string')
      return { status: 200, body: `{"data":[${data.map((r) => r.item).join(',')}],"nextCursor":${JSON.stringify(nextCursor)}}` };
    return { status: 200, body: JSON.stringify({ data, nextCursor }) };
  } finally {
    client.release();
  }
}

http
  .createServer((req, res) => {
    const q = req.url!.indexOf('?');
    const c = cases.get(q < 0 ? req.url! : req.url!.slice(0, q));
    if (!c) {
      res.writeHead(404).end();
      return;
    }
    serve(c, req.headers.authorization ?? '').then(
      ({ status, body }) => {
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
      },
      (e: Error) => {
        res.writeHead(500).end(e.message);
      },
    );
  })
  .listen(Number(process.env.PORT), '127.0.0.1');
