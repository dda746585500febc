// Inbound bench:
//   1. replies per second through the inbound SMTP listener to classified rows (stored, threaded by
//      In-Reply-To, classified, effects applied), against a bare smtp-server whose onData parses
//      each message with mailparser, fed by the same client over the same connections, in the same
//      run. Target: at least 50% of the bare loop.
//   2. GET /action-items?limit=50 with 100,000 items against GET /contacts?limit=50 with 100,000
//      contacts, same organization, same run. Target: within 1.5x (action items at least two
//      thirds of the contacts page's requests per second).
// The replies go to a service process of this bench on a database of its own, so only its worker
// takes their jobs.
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import { simpleParser } from 'mailparser';
import nodemailer from 'nodemailer';
import pg from 'pg';
import { SMTPServer } from 'smtp-server';
import { ownDatabase, seedActionItems, startOwnService, stopProcess, UNBOUNDED_SENDER } from './own-service.js';
import type { BenchArea, BenchContext, LoadResult } from './types.js';

const REPLIES = Number(process.env.BENCH_INBOUND_REPLIES ?? 5_000);
const CONNECTIONS = 5;
const ITEMS = 100_000;
const PAGE = 50;

/** Reply texts of the kinds a campaign gets back, each quoting the message it answers. */
const REPLY_TEXTS = [
  'Thanks for reaching out, this sounds interesting. Could you send me more details on pricing?',
  'Not interested at the moment, we already use another vendor. Thanks.',
  'Happy to talk. Are you free for a call on Tuesday afternoon?',
  'I forwarded this to our head of operations, she will get back to you.',
];

function replyOf(i: number, contact: string, inReplyTo: string) {
  const text = `${REPLY_TEXTS[i % REPLY_TEXTS.length]}\n\nBest,\nPerson ${i}\n\nOn Mon, 2 Nov 2026 at 09:14, Sam <sam@acme-sender.test> wrote:\n> Hi Person ${i},\n>\n> We help revenue teams book more meetings.\n> Worth a call next week?\n`;
  return {
    from: `Person ${i} <${contact}>`,
    to: 'Sam <sam@acme-sender.test>',
    subject: 'Re: A quick idea for Acme',
    text,
    html: `<div>${text.split('\n\nOn ')[0].replace(/\n/g, '<br>')}</div><blockquote>Hi Person ${i},<br>We help revenue teams book more meetings.</blockquote>`,
    inReplyTo: inReplyTo,
    references: [inReplyTo],
    messageId: `<reply-${i}-${Date.now().toString(36)}@prospect.example>`,
  };
}

const contactOf = (i: number) => `p${i}@co${i % 100}.example.com`;
const sentIdOf = (i: number) => `<sent-${i}@acme-sender.test>`;

/** Sends the replies over CONNECTIONS pooled connections; resolves when the server took them all. */
async function sendAll(port: number): Promise<void> {
  const t = nodemailer.createTransport({
    host: '127.0.0.1',
    port,
    secure: false,
    ignoreTLS: true,
    pool: true,
    maxConnections: CONNECTIONS,
    maxMessages: Infinity,
  });
  let next = 0;
  await Promise.all(
    Array.from({ length: CONNECTIONS * 4 }, async () => {
      while (next < REPLIES) {
        const i = next++;
        await t.sendMail({ ...replyOf(i, contactOf(i), sentIdOf(i)), envelope: { from: contactOf(i), to: ['sam@acme-sender.test'] } });
      }
    }),
  );
  t.close();
}

/** The bare reference: smtp-server, each message parsed by mailparser's simpleParser, counted. */
async function bareSeconds(): Promise<number> {
  let parsed = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    size: 10 * 1024 * 1024,
    onData(stream, _session, cb) {
      simpleParser(stream).then(
        () => {
          parsed += 1;
          cb();
        },
        (e: Error) => cb(e),
      );
    },
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.server.address() as net.AddressInfo).port;
  const t0 = performance.now();
  await sendAll(port);
  const seconds = (performance.now() - t0) / 1000;
  await new Promise<void>((r) => server.close(() => r()));
  if (parsed !== REPLIES) throw new Error(`bare loop parsed ${parsed} of ${REPLIES}`);
  return seconds;
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

/** An organization with REPLIES contacts, each with a sent first step whose Message-ID the reply answers. */
async function seedReplies(pool: pg.Pool, origin: string, adminToken: string): Promise<string> {
  const post = async (p: string, body: unknown) => {
    const r = await fetch(`${origin}/admin/api${p}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!r.ok) throw new Error(`${p}: ${r.status} ${await r.text()}`);
    return r.json() as Promise<{ id: string; owner: { id: string } }>;
  };
  const org = await post('/organizations', { name: 'Inbound bench', plan: 'growth' });
  const client = await pool.connect();
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    await client.query('BEGIN');
    await client.query(
      `INSERT INTO contact_lists (organization_id, id, user_id, name) VALUES ($1, 'lst_inbound_bench', $2, 'Inbound bench')`,
      [org.id, org.owner.id],
    );
    await client.query(
      `
      INSERT INTO contacts (organization_id, id, list_id, owner_user_id, email, email_normalized, name)
      SELECT $1, 'con_' || substr(md5($1 || g), 1, 24), 'lst_inbound_bench', $3, 'p' || g || '@co' || (g % 100) || '.example.com',
             'p' || g || '@co' || (g % 100) || '.example.com', 'Person ' || g
      FROM generate_series(0, $2::int - 1) g`,
      [org.id, REPLIES, org.owner.id],
    );
    await client.query(
      `
      INSERT INTO contact_sequences (organization_id, id, contact_id, template_id, status, steps, current_step)
      SELECT $1, 'seq_' || substr(md5($1 || g), 1, 24), 'con_' || substr(md5($1 || g), 1, 24), 'builtin-first-touch', 'ACTIVE', '[{"dayOffset":0},{"dayOffset":3}]', 1
      FROM generate_series(0, $2::int - 1) g`,
      [org.id, REPLIES],
    );
    await client.query(
      `
      INSERT INTO drafts (organization_id, id, contact_id, sequence_id, step, status, subject, body, sent_at)
      SELECT $1, 'drf_' || substr(md5($1 || g), 1, 24), 'con_' || substr(md5($1 || g), 1, 24), 'seq_' || substr(md5($1 || g), 1, 24), 1, 'APPROVED',
             'A quick idea for Acme', 'Hi', now_ms()
      FROM generate_series(0, $2::int - 1) g`,
      [org.id, REPLIES],
    );
    await client.query(
      `
      INSERT INTO send_records (organization_id, id, contact_id, draft_id, to_email, from_email, subject, status, sent_at, sequence_id, step,
                                mailbox_id, recipient_domain, message_id)
      SELECT $1, 'snd_' || substr(md5($1 || g), 1, 24), 'con_' || substr(md5($1 || g), 1, 24), 'drf_' || substr(md5($1 || g), 1, 24),
             'p' || g || '@co' || (g % 100) || '.example.com', 'sam@acme-sender.test', 'A quick idea for Acme', 'sent', now_ms(),
             'seq_' || substr(md5($1 || g), 1, 24), 1, 'deployment', 'co' || (g % 100) || '.example.com', '<sent-' || g || '@acme-sender.test>'
      FROM generate_series(0, $2::int - 1) g`,
      [org.id, REPLIES],
    );
    await client.query('COMMIT');
    await client.query('ANALYZE contacts, contact_sequences, drafts, send_records');
  } finally {
    client.release();
  }
  return org.id;
}

async function classifiedCount(pool: pg.Pool, orgId: string): Promise<number> {
  const client = await pool.connect();
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    const r = await client.query<{ n: string }>(
      `SELECT count(*) AS n FROM messages WHERE organization_id = $1 AND direction = 'INBOUND' AND status = 'classified'`,
      [orgId],
    );
    return Number(r.rows[0].n);
  } finally {
    client.release();
  }
}

async function replies(ctx: BenchContext): Promise<void> {
  const bare = await bareSeconds();
  const bareRate = REPLIES / bare;
  ctx.report({
    area: 'inbound',
    case: `bare smtp-server + mailparser loop (${REPLIES} replies, ${CONNECTIONS} connections, reference)`,
    figures: { seconds: bare.toFixed(1), 'msg/s': Math.round(bareRate) },
  });

  const url = await ownDatabase(ctx, 'bench_inbound');
  const pool = new pg.Pool({ connectionString: url, max: 3 });
  let child: ChildProcess | null = null;
  try {
    const smtpPort = await freePort();
    // One client on loopback sends every reply: the listener's per-sender bounds must not be what is measured.
    const svc = await startOwnService(ctx, url, { INBOUND_SMTP_PORT: String(smtpPort), ...UNBOUNDED_SENDER });
    child = svc.child;
    const orgId = await seedReplies(pool, svc.origin, ctx.adminToken);
    const t0 = performance.now();
    await sendAll(smtpPort);
    const accepted = (performance.now() - t0) / 1000;
    for (let i = 0; ; i += 1) {
      if ((await classifiedCount(pool, orgId)) >= REPLIES) break;
      if (i > 6000) throw new Error('replies were not all classified within 10 minutes');
      await new Promise((r) => setTimeout(r, 100));
    }
    const seconds = (performance.now() - t0) / 1000;
    const rate = REPLIES / seconds;
    ctx.log(`listener accepted all ${REPLIES} in ${accepted.toFixed(1)} s; all classified after ${seconds.toFixed(1)} s`);
    ctx.report({
      area: 'inbound',
      case: `SMTP listener to classified rows (${REPLIES} replies threaded by In-Reply-To, ${CONNECTIONS} connections)`,
      figures: { seconds: seconds.toFixed(1), 'msg/s': Math.round(rate), 'share of bare': `${Math.round((100 * rate) / bareRate)}%` },
      target: '>= 50% of the bare loop',
      met: rate >= 0.5 * bareRate,
    });
  } finally {
    if (child) await stopProcess(child);
    await pool.end();
  }
}

const figures = (r: LoadResult) => ({
  'req/s': Math.round(r.requestsPerSecond),
  'p50 ms': r.p50Ms,
  'p99 ms': r.p99Ms,
  non2xx: r.non2xx,
  errors: r.errors,
});

async function actionItems(ctx: BenchContext): Promise<void> {
  const { orgId, key, ownerId } = await ctx.newOrg('growth');
  const client = await ctx.pool.connect();
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    await client.query(`INSERT INTO contact_lists (organization_id, id, user_id, name) VALUES ($1, 'lst_items_bench', $2, 'Items bench')`, [
      orgId,
      ownerId,
    ]);
    await client.query(
      `
      INSERT INTO contacts (organization_id, id, list_id, owner_user_id, email, email_normalized, name, created_at, updated_at)
      SELECT $1, 'con_' || substr(md5('i' || g), 1, 24), 'lst_items_bench', $2, 'p' || g || '@co' || (g % 5000) || '.example.com',
             'p' || g || '@co' || (g % 5000) || '.example.com', 'Person ' || g,
             date_trunc('milliseconds', now() - g * interval '1 second'), date_trunc('milliseconds', now() - g * interval '1 second')
      FROM generate_series(1, $3::int) g`,
      [orgId, ownerId, ITEMS],
    );
    await seedActionItems(client, orgId, ownerId, ITEMS, 'i');
    await client.query('ANALYZE contacts, action_items');
  } finally {
    client.release();
  }
  const auth = { authorization: `Bearer ${key}` };
  await ctx.load({ path: `/api/v1/contacts?limit=${PAGE}`, headers: auth, durationSeconds: 3 });
  await ctx.load({ path: `/api/v1/action-items?limit=${PAGE}`, headers: auth, durationSeconds: 3 });
  const contacts = await ctx.load({ path: `/api/v1/contacts?limit=${PAGE}`, headers: auth, durationSeconds: 10 });
  const items = await ctx.load({ path: `/api/v1/action-items?limit=${PAGE}`, headers: auth, durationSeconds: 10 });
  const ratio = contacts.requestsPerSecond / Math.max(1, items.requestsPerSecond);
  ctx.report({
    area: 'inbound',
    case: `GET /contacts?limit=50 (${ITEMS.toLocaleString('en')} contacts, 50 connections, reference)`,
    figures: figures(contacts),
  });
  ctx.report({
    area: 'inbound',
    case: `GET /action-items?limit=50 (${ITEMS.toLocaleString('en')} items, 50 connections)`,
    figures: { ...figures(items), 'contacts / items req/s': ratio.toFixed(2) },
    target: 'within 1.5x of GET /contacts',
    met: ratio <= 1.5 && items.non2xx === 0 && items.errors === 0,
  });
}

const area: BenchArea = {
  name: `inbound: ${REPLIES.toLocaleString('en')} replies through the SMTP listener against a bare smtp-server + mailparser loop; action items list`,
  async run(ctx) {
    await replies(ctx);
    await actionItems(ctx);
  },
};

export default area;
