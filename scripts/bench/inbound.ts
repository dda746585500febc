// Inbound bench:
//   1. replies per second through the inbound SMTP listener to classified rows (stored, routed to
//      their contact, authenticated, classified, effects applied), against a bare smtp-server whose
//      onData parses each message with mailparser and authenticates it with mailauth (SPF, DKIM,
//      DMARC), fed by the same client with the same messages over the same connections, in the same
//      run. Every reply is DKIM-signed by its sender's domain and carries no thread headers (a
//      client that keeps none), so the listener authenticates each one by DNS, as the bare loop
//      does; both ask one DNS server on loopback in this process (SPF, DKIM key and DMARC policy of
//      the 100 sender domains). Target: at least 60% of the bare loop.
//   2. GET /action-items?limit=50 with 100,000 items against GET /contacts?limit=50 with 100,000
//      contacts, same organization, same run. Target: within 1.5x (action items at least two
//      thirds of the contacts page's requests per second).
// The replies go to a service process of this bench on a database of its own, so only its worker
// takes their jobs.
import type { ChildProcess } from 'node:child_process';
import dns from 'node:dns';
import net from 'node:net';
import { authenticate } from 'mailauth';
import { simpleParser } from 'mailparser';
import nodemailer from 'nodemailer';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import pg from 'pg';
import { SMTPServer } from 'smtp-server';
import { signingDomain } from '../../test/support/dkim.js';
import { type DnsServer, startDnsServer } from '../../test/support/dns-server.js';
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

function replyOf(i: number, contact: string) {
  const text = `${REPLY_TEXTS[i % REPLY_TEXTS.length]}\n\nBest,\nPerson ${i}\n\nOn Mon, 2 Nov 2026 at 09:14, Sam <sam@acme-sender.test> wrote:\n> Hi Person ${i},\n>\n> We help revenue teams book more meetings.\n> Worth a call next week?\n`;
  return {
    from: `Person ${i} <${contact}>`,
    to: 'Sam <sam@acme-sender.test>',
    subject: 'Re: A quick idea for Acme',
    text,
    html: `<div>${text.split('\n\nOn ')[0].replace(/\n/g, '<br>')}</div><blockquote>Hi Person ${i},<br>We help revenue teams book more meetings.</blockquote>`,
    messageId: `<reply-${i}-${Date.now().toString(36)}@prospect.example>`,
  };
}

const DOMAINS = 100;
const contactOf = (i: number) => `p${i}@co${i % DOMAINS}.example.com`;

/**
 * The loopback DNS server with each sender domain's records (an SPF record for loopback, a DKIM key,
 * a DMARC policy of reject), and every reply written and DKIM-signed by its domain, before any clock runs.
 */
async function signedReplies(): Promise<{ dns: DnsServer; raws: Buffer[] }> {
  const server = await startDnsServer();
  const domains = Array.from({ length: DOMAINS }, (_, k) =>
    signingDomain(server, `co${k}.example.com`, { spf: 'v=spf1 ip4:127.0.0.1 -all' }),
  );
  const raws: Buffer[] = [];
  for (let i = 0; i < REPLIES; i += 1) {
    const raw = await new MailComposer(replyOf(i, contactOf(i))).compile().build();
    raws.push(Buffer.from(await domains[i % DOMAINS].sign(raw.toString('binary')), 'binary'));
  }
  return { dns: server, raws };
}

/** Sends the replies over CONNECTIONS pooled connections; resolves when the server took them all. */
async function sendAll(port: number, raws: Buffer[]): Promise<void> {
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
        await t.sendMail({ raw: raws[i], envelope: { from: contactOf(i), to: ['sam@acme-sender.test'] } });
      }
    }),
  );
  t.close();
}

/**
 * The bare reference: smtp-server; each message parsed by mailparser's simpleParser and
 * authenticated by mailauth (SPF with the session's address, HELO and MAIL FROM; DKIM; DMARC)
 * through the same loopback DNS server; counted when both are done and every one passed DMARC.
 */
async function bareSeconds(raws: Buffer[], dnsServer: DnsServer): Promise<number> {
  let parsed = 0;
  let passed = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    disableReverseLookup: true,
    logger: false,
    size: 10 * 1024 * 1024,
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks);
        const resolver = new dns.promises.Resolver({ timeout: 1000, tries: 2 });
        resolver.setServers([dnsServer.address]);
        Promise.all([
          simpleParser(raw),
          authenticate(raw, {
            ip: session.remoteAddress,
            helo: session.hostNameAppearsAs,
            sender: session.envelope.mailFrom ? session.envelope.mailFrom.address : undefined,
            resolver: resolver.resolve.bind(resolver) as (name: string, rrtype: string) => Promise<string[][] | string[]>,
            disableBimi: true,
          }),
        ]).then(
          ([, auth]) => {
            parsed += 1;
            if (auth.dmarc && auth.dmarc.status?.result === 'pass') passed += 1;
            cb();
          },
          (e: Error) => cb(e),
        );
      });
    },
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.server.address() as net.AddressInfo).port;
  const t0 = performance.now();
  await sendAll(port, raws);
  const seconds = (performance.now() - t0) / 1000;
  await new Promise<void>((r) => server.close(() => r()));
  if (parsed !== REPLIES) throw new Error(`bare loop parsed ${parsed} of ${REPLIES}`);
  if (passed !== REPLIES) throw new Error(`bare loop: ${passed} of ${REPLIES} passed DMARC`);
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

/** The organization's inbound messages classified so far, and of those, authenticated by DMARC. */
async function classifiedCount(pool: pg.Pool, orgId: string): Promise<{ classified: number; dmarc: number }> {
  const client = await pool.connect();
  try {
    await client.query(`select set_config('app.system', 'on', false)`);
    const r = await client.query<{ n: string; dmarc: string }>(
      `SELECT count(*) AS n, count(*) FILTER (WHERE authenticated AND authentication->>'by' = 'dmarc') AS dmarc
       FROM messages WHERE organization_id = $1 AND direction = 'INBOUND' AND status = 'classified'`,
      [orgId],
    );
    return { classified: Number(r.rows[0].n), dmarc: Number(r.rows[0].dmarc) };
  } finally {
    client.release();
  }
}

async function replies(ctx: BenchContext): Promise<void> {
  const { dns: dnsServer, raws } = await signedReplies();
  try {
    await measureReplies(ctx, dnsServer, raws);
  } finally {
    await dnsServer.close();
  }
}

async function measureReplies(ctx: BenchContext, dnsServer: DnsServer, raws: Buffer[]): Promise<void> {
  const bare = await bareSeconds(raws, dnsServer);
  const bareRate = REPLIES / bare;
  ctx.report({
    area: 'inbound',
    case: `bare smtp-server + mailparser + mailauth (SPF, DKIM, DMARC over loopback DNS) loop (${REPLIES} signed replies, ${CONNECTIONS} connections, reference)`,
    figures: { seconds: bare.toFixed(1), 'msg/s': Math.round(bareRate) },
  });

  const url = await ownDatabase(ctx, 'bench_inbound');
  const pool = new pg.Pool({ connectionString: url, max: 3 });
  let child: ChildProcess | null = null;
  try {
    const smtpPort = await freePort();
    // One client on loopback sends every reply: the listener's per-sender bounds must not be what is measured.
    const svc = await startOwnService(ctx, url, {
      INBOUND_SMTP_PORT: String(smtpPort),
      INBOUND_DNS_SERVERS: dnsServer.address,
      ...UNBOUNDED_SENDER,
    });
    child = svc.child;
    const orgId = await seedReplies(pool, svc.origin, ctx.adminToken);
    const t0 = performance.now();
    await sendAll(smtpPort, raws);
    const accepted = (performance.now() - t0) / 1000;
    let counts = { classified: 0, dmarc: 0 };
    for (let i = 0; ; i += 1) {
      counts = await classifiedCount(pool, orgId);
      if (counts.classified >= REPLIES) break;
      if (i > 6000) throw new Error('replies were not all classified within 10 minutes');
      await new Promise((r) => setTimeout(r, 100));
    }
    const seconds = (performance.now() - t0) / 1000;
    const rate = REPLIES / seconds;
    ctx.log(`listener accepted all ${REPLIES} in ${accepted.toFixed(1)} s; all classified after ${seconds.toFixed(1)} s`);
    ctx.report({
      area: 'inbound',
      case: `SMTP listener to classified rows (${REPLIES} signed replies routed by sender, authenticated by DMARC over loopback DNS, ${CONNECTIONS} connections)`,
      figures: {
        seconds: seconds.toFixed(1),
        'msg/s': Math.round(rate),
        'share of bare': `${Math.round((100 * rate) / bareRate)}%`,
        'authenticated by DMARC': counts.dmarc,
      },
      target: '>= 60% of the bare loop',
      met: rate >= 0.6 * bareRate && counts.dmarc === REPLIES,
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
  name: `inbound: ${REPLIES.toLocaleString('en')} signed replies through the SMTP listener against a bare smtp-server + mailparser + mailauth loop (loopback DNS); action items list`,
  async run(ctx) {
    await replies(ctx);
    await actionItems(ctx);
  },
};

export default area;
