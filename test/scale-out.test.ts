// Scale-out on one machine: two API processes (`npm start` with RUN_WORKER=false) and
// two separate workers (`npm run worker`), started at once on one fresh database, each with a data
// directory of its own. Whatever must be shared (the rate limit, idempotency keys, the send caps,
// the analytics cache, the job queue) lives in Postgres, so a request counts, replays, caps and is
// cached the same whichever process serves it, and every job runs once in a worker.

import { type ChildProcess, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySignature } from '../src/webhooks/signing.js';
import { uid } from './crm-support.js';
import { contact, draftingOrg, draftsOf, sequence, settle, template } from './drafting-support.js';
import { ALL_SCOPES, createTestDatabase, type PublicClient, type ServiceClients, serviceClients, waitFor } from './support/harness.js';
import { type Receiver, startReceiver } from './support/receiver.js';
import { type SmtpSink, startSmtpSink } from './support/smtp-sink.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const LIMIT = 60;

interface Proc {
  name: string;
  child: ChildProcess;
  output: string;
  exited: Promise<number | null>;
}
const procs: Proc[] = [];

/** Starts one entry point as `npm start` / `npm run worker` do (node --import tsx), output kept for failures. */
function start(name: string, entry: string, env: Record<string, string>): Proc {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('VITEST') && k !== 'NODE_OPTIONS' && k !== 'DATABASE_URL'),
  );
  const child = spawn(process.execPath, ['--max-semi-space-size=32', '--import', 'tsx', entry], {
    cwd: ROOT,
    env: { ...base, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const p: Proc = { name, child, output: '', exited: new Promise((r) => child.once('exit', (code) => r(code))) };
  child.stdout!.on('data', (b: Buffer) => {
    p.output += b.toString();
  });
  child.stderr!.on('data', (b: Buffer) => {
    p.output += b.toString();
  });
  procs.push(p);
  return p;
}

/** Waits for a line of the process's output; fails with its output if it exits first. */
async function line(p: Proc, pattern: RegExp, timeoutMs = 120_000): Promise<RegExpMatchArray> {
  let gone = false;
  void p.exited.then(() => {
    gone = true;
  });
  return waitFor(
    async () => {
      const m = pattern.exec(p.output);
      if (m) return m;
      if (gone) throw new Error(`${p.name} exited before ${pattern}:\n${p.output}`);
      return null;
    },
    timeoutMs,
    `${p.name} to print ${pattern}:\n${p.output}`,
  );
}

async function stopAll(): Promise<void> {
  await Promise.all(
    procs.map(async (p) => {
      if (p.child.exitCode !== null || p.child.signalCode !== null) return;
      p.child.kill('SIGTERM');
      const t = setTimeout(() => p.child.kill('SIGKILL'), 15_000);
      await p.exited;
      clearTimeout(t);
    }),
  );
}
// Never leave a child behind, whatever ends this process.
process.once('exit', () => {
  for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGKILL');
});

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let sink: SmtpSink;
let dataRoot: string;
let A: ServiceClients;
let B: ServiceClients;
let owner: pg.Client;

beforeAll(async () => {
  db = await createTestDatabase({ empty: true });
  sink = await startSmtpSink();
  dataRoot = fs.mkdtempSync(path.join(ROOT, '.test-data', 'scale-'));
  const adminToken = `adm_${crypto.randomBytes(16).toString('hex')}`;
  const shared = {
    DATABASE_URL: db.url,
    ADMIN_TOKEN: adminToken,
    // Every process must hold the same keys: a webhook secret sealed by one is opened by another.
    WEBHOOK_SECRET_KEY: crypto.randomBytes(32).toString('hex'),
    ERASURE_HASH_SECRET: 'scale-out-erasure-secret-0123456789abcdef',
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    SMTP_URL: sink.url,
    MAIL_FROM: 'Scale Sales <sales@scale-sender.test>',
    RATE_LIMIT_PER_MINUTE: String(LIMIT),
    LOG_LEVEL: process.env.SCALE_LOG_LEVEL ?? 'error',
    PORT: '0',
  };
  const dir = (n: string) => ({ DATA_DIR: path.join(dataRoot, n) });
  // All four at once on an empty database: each migrates on start, as a first deployment would.
  const api = ['api-a', 'api-b'].map((n) => start(n, 'src/boot/main.ts', { ...shared, ...dir(n), RUN_WORKER: 'false' }));
  const workers = ['worker-1', 'worker-2'].map((n) => start(n, 'src/boot/worker-main.ts', { ...shared, ...dir(n) }));
  const ports = await Promise.all(api.map(async (p) => Number((await line(p, /Listening on \S+ port (\d+)/))[1])));
  await Promise.all(workers.map((p) => line(p, /worker running/)));
  [A, B] = ports.map((port) => serviceClients(`http://127.0.0.1:${port}`, adminToken));
  owner = new pg.Client({ connectionString: db.url });
  await owner.connect();
  // Inspection sees every organization (row-level security is forced on the owner too).
  await owner.query(`SELECT set_config('app.system', 'on', false)`);
}, 240_000);

afterAll(async () => {
  await owner?.end().catch(() => {});
  // SCALE_DEBUG=1 (with SCALE_LOG_LEVEL=warn, say) prints what the processes logged.
  if (process.env.SCALE_DEBUG) for (const p of procs) console.log(`--- ${p.name}\n${p.output}`);
  await stopAll();
  await sink?.close();
  await db?.drop();
  if (dataRoot) fs.rmSync(dataRoot, { recursive: true, force: true });
}, 60_000);

/** A fresh organization with a key, and a client of that key on each API process. */
async function orgOnBoth(): Promise<{ orgId: string; a: PublicClient; b: PublicClient }> {
  const { org, key } = await A.orgWithKey(ALL_SCOPES);
  return { orgId: org.id, a: A.api(key), b: B.api(key) };
}

describe('processes', () => {
  it('came up together on one fresh database; the API processes run no worker, the two workers listen for jobs', async () => {
    for (const p of procs.slice(0, 2)) expect(p.output).toMatch(/Worker: not in this process \(RUN_WORKER=false\)/);
    for (const c of [A, B]) expect((await fetch(`${c.baseUrl}/healthz`)).status).toBe(200);
    // graphile-worker holds one LISTEN connection per running worker: two, none in the API processes.
    // A worker opens it in the background after it started (its run() does not wait for it), so
    // it is waited for rather than expected at once.
    const listening = async () =>
      (
        await owner.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND query LIKE 'LISTEN "jobs:insert"%'`)
      ).rows[0].n;
    await waitFor(async () => (await listening()) >= 2, 15_000, 'both workers to LISTEN');
    expect(await listening()).toBe(2);
  });
});

describe('rate limit', () => {
  it('counts requests spread over both API processes together: the 429 arrives at the same total', async () => {
    for (let attempt = 0; ; attempt += 1) {
      const { a, b } = await orgOnBoth();
      const seen: { status: number; remaining: string | null; reset: string | null }[] = [];
      const answer = (r: Awaited<ReturnType<PublicClient['GET']>>) => ({
        status: r.response.status,
        remaining: r.response.headers.get('x-ratelimit-remaining'),
        reset: r.response.headers.get('x-ratelimit-reset'),
      });
      for (let i = 0; i <= LIMIT; i += 1) seen.push(answer(await (i % 2 === 0 ? a : b).GET('/me')));
      // Either process now refuses the key.
      const [ra, rb] = (await Promise.all([a.GET('/me'), b.GET('/me')])).map(answer);
      // A fixed 60-second window may turn over mid-run (the 429s name their window too, so a
      // turn-over anywhere up to the last request shows); then the count restarts, so run once more.
      if (new Set([...seen, ra, rb].map((s) => s.reset)).size > 1 && attempt === 0) continue;
      expect(seen.slice(0, LIMIT).map((s) => s.status)).toEqual(Array(LIMIT).fill(200));
      expect(seen.slice(0, LIMIT).map((s) => Number(s.remaining))).toEqual(Array.from({ length: LIMIT }, (_, i) => LIMIT - 1 - i));
      expect(seen[LIMIT]).toMatchObject({ status: 429, remaining: '0' });
      expect([ra.status, rb.status]).toEqual([429, 429]);
      return;
    }
  });
});

describe('idempotency keys', () => {
  it('the same key sent to both processes at once has one effect and one answer', async () => {
    const { a, b } = await orgOnBoth();
    const headers = { 'Idempotency-Key': uid('scale-') };
    const body = { name: 'Once across nodes', valueCents: 4200 };
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? a : b).POST('/deals', { body, headers })));
    for (const r of answers) expect(r.response.status).toBe(200);
    const ids = new Set(answers.map((r) => r.data!.id));
    expect(ids.size).toBe(1);
    for (const r of answers) expect(r.data).toEqual(answers[0].data);
    expect(answers.filter((r) => r.response.headers.get('idempotent-replayed') !== 'true')).toHaveLength(1);
    expect((await b.GET('/deals')).data!.data.map((d) => d.id)).toEqual([...ids]);
    expect((await a.GET('/events', { params: { query: { type: 'deal.created' } } })).data!.data).toHaveLength(1);
    // The key is bound to its request on both processes.
    const other = await b.POST('/deals', { body: { name: 'Something else' }, headers });
    expect(other.response.status).toBe(422);
  });
});

describe('caps and the send queue', () => {
  it('sends asked of both processes and raced by both workers never exceed the daily cap nor send a step twice', async () => {
    const CAP = 3;
    const s = await draftingOrg(A);
    const viaB = B.api(s.key);
    await A.admin.PATCH('/organizations/{orgId}', {
      params: { path: { orgId: s.org.id } },
      body: { flags: { v1_2_api_send: true }, sending: { deploymentDailyCap: CAP } },
    });
    const tpl = await template(A, s.org.id, [
      { dayOffset: 0, subject: 'Hello {{firstName}}', body: 'Hi {{firstName}}, a short note. Worth a call?' },
    ]);
    const people = [];
    for (let i = 0; i < 6; i += 1) {
      const api = i % 2 === 0 ? s.api : viaB;
      const c = await contact(api, { email: `${uid('p')}@${uid('capped')}.example`, name: 'Dana Whitfield' });
      await sequence(api, c.id, tpl);
      people.push(c);
    }
    await settle(A);
    const drafts = [];
    for (const c of people) {
      const [d] = await draftsOf(s.api, c.id);
      expect((await viaB.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } })).response.status).toBe(200);
      drafts.push(d);
    }
    // Every draft asked to send through both processes at once.
    const answers = await Promise.all(
      drafts.flatMap((d) => [s.api, viaB].map((api) => api.POST('/drafts/{id}/send', { params: { path: { id: d.id } } }))),
    );
    for (const r of answers) expect(r.response.status).toBeLessThan(300);
    await settle(A);
    // settle() does not count jobs due later (a retry's backoff), so wait until every step is decided.
    await waitFor(
      async () =>
        (await owner.query(`SELECT 1 FROM send_queue WHERE organization_id = $1 AND state IN ('queued', 'sending')`, [s.org.id]))
          .rowCount === 0,
      30_000,
      'every queued step to be sent or held',
    );
    const emails = new Set(people.map((c) => c.email.toLowerCase()));
    const delivered = sink.messages.filter((m) => m.to.some((t) => emails.has(t)));
    expect(delivered).toHaveLength(CAP);
    expect(new Set(delivered.flatMap((m) => m.to)).size).toBe(CAP); // no step twice
    const queue = (await A.admin.GET('/send-queue', { params: { query: { organizationId: s.org.id } } })).data!.data;
    expect(queue).toHaveLength(people.length - CAP);
    for (const q of queue) expect(q).toMatchObject({ state: 'deferred', heldBy: 'mailbox_daily_cap' });
    const sent = await owner.query<{ n: number }>(`SELECT count(*)::int AS n FROM send_records WHERE organization_id = $1`, [s.org.id]);
    expect(sent.rows[0].n).toBe(CAP);
  });
  it('a contact in two sequences gets one message a local day, whichever process and worker take the steps', async () => {
    const s = await draftingOrg(A);
    const viaB = B.api(s.key);
    await A.admin.PATCH('/organizations/{orgId}', { params: { path: { orgId: s.org.id } }, body: { flags: { v1_2_api_send: true } } });
    const tpls = [
      await template(A, s.org.id, [
        { dayOffset: 0, subject: 'Hello {{firstName}}', body: 'Hi {{firstName}}, a short note. Worth a call?' },
      ]),
      await template(A, s.org.id, [{ dayOffset: 0, subject: 'Another idea', body: 'Hi {{firstName}}, another note. Worth a call?' }]),
    ];
    const people = [];
    for (let i = 0; i < 4; i += 1) {
      const c = await contact(s.api, { email: `${uid('p')}@${uid('twice')}.example`, name: 'Dana Whitfield' });
      for (const t of tpls) await sequence(i % 2 === 0 ? s.api : viaB, c.id, t);
      people.push(c);
    }
    await settle(A);
    const drafts = [];
    for (const c of people) {
      const ds = await draftsOf(s.api, c.id);
      expect(ds).toHaveLength(2);
      for (const d of ds) expect((await viaB.POST('/drafts/{id}/approve', { params: { path: { id: d.id } } })).response.status).toBe(200);
      drafts.push(...ds);
    }
    // Each contact's two steps asked to send, one through each process, at once.
    const answers = await Promise.all(
      drafts.map((d, i) => (i % 2 === 0 ? s.api : viaB).POST('/drafts/{id}/send', { params: { path: { id: d.id } } })),
    );
    for (const r of answers) expect(r.response.status).toBe(200);
    await settle(A);
    await waitFor(
      async () =>
        (await owner.query(`SELECT 1 FROM send_queue WHERE organization_id = $1 AND state IN ('queued', 'sending')`, [s.org.id]))
          .rowCount === 0,
      30_000,
      'every queued step to be sent or held',
    );
    for (const c of people)
      expect(
        sink.messages.filter((m) => m.to.includes(c.email.toLowerCase())),
        c.email,
      ).toHaveLength(1);
    const queue = (await A.admin.GET('/send-queue', { params: { query: { organizationId: s.org.id } } })).data!.data;
    expect(queue).toHaveLength(people.length);
    for (const q of queue) expect(q).toMatchObject({ state: 'deferred', heldBy: 'contact_daily_limit' });
    expect(new Set(queue.map((q) => q.contactId)).size).toBe(people.length);
  });
});

describe('analytics cache', () => {
  it('an answer computed by one process is served by the other, and expires for both', async () => {
    const { orgId, a, b } = await orgOnBoth();
    const query = { from: '2026-01-01', to: '2026-03-31' };
    const get = async (api: PublicClient) => {
      const r = await api.GET('/analytics/funnel', { params: { query } });
      expect(r.response.status).toBe(200);
      return { cache: r.response.headers.get('x-service-cache'), body: r.data };
    };
    const first = await get(a);
    expect(first.cache).toBe('miss');
    expect(await get(b)).toEqual({ cache: 'hit', body: first.body });
    // Five minutes pass: the entry is stale for every node.
    await owner.query(`UPDATE analytics_cache SET computed_at = computed_at - interval '301 seconds' WHERE organization_id = $1`, [orgId]);
    expect((await get(b)).cache).toBe('miss');
    expect((await get(a)).cache).toBe('hit');
  });
});

describe('job queue', () => {
  let rx: Receiver;
  beforeAll(async () => {
    rx = await startReceiver();
  });
  afterAll(async () => {
    await rx?.close();
  });

  it('jobs enqueued by either API process run once in a worker: each event is delivered once, signed with the secret the other process sealed', async () => {
    const { a, b } = await orgOnBoth();
    const hook = await a.POST('/webhooks', { body: { url: rx.url, eventTypes: ['deal.created'] } });
    expect(hook.response.status).toBe(201);
    const deals = await Promise.all([a, b, a, b].map((api, i) => api.POST('/deals', { body: { name: `Node ${i}` } })));
    for (const d of deals) expect(d.response.status).toBe(200);
    await rx.waitFor(4);
    await settle(A);
    expect(rx.received).toHaveLength(4);
    const ids = rx.received.map((r) => r.body?.id);
    expect(new Set(ids).size).toBe(4);
    const events = (await b.GET('/events', { params: { query: { type: 'deal.created' } } })).data!.data;
    expect(new Set(events.map((e) => e.id))).toEqual(new Set(ids));
    for (const r of rx.received)
      expect(verifySignature(r.headers['x-outbound-signature'] as string, r.raw, hook.data!.signingSecret)).toBe(true);
  });
});
