// Bounded memory for every request body, against the service as its own process (`npm start`'s
// entry point on a database of its own): a body streamed without a length (chunked) to any route
// that reads one is counted while it arrives and refused at the route's limit, long before the
// client has sent it all, and the process's resident memory hardly moves. And what the service
// reads from outside without a length is bounded the same way: research pages (decompressed) and
// webhook receivers' answers (the model client's answers: test/llm.test.ts; inbound mail:
// test/inbound.test.ts).

import { type ChildProcess, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSigner } from '../src/mail/tokens.js';
import { closeAgents, type FetchPolicy, guardedGet, runAgents } from '../src/research/fetch.js';
import { postWebhook } from '../src/webhooks/http.js';
import { createTestDatabase, waitFor } from './support/harness.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const MiB = 1024 * 1024;
/** What each attempt streams at most: far more than any limit. */
const STREAM_BYTES = 400 * MiB;

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let child: ChildProcess;
let output = '';
let base: string;
let dataDir: string;
const adminToken = `adm_${crypto.randomBytes(16).toString('hex')}`;
const secretKey = crypto.randomBytes(32);

beforeAll(async () => {
  db = await createTestDatabase();
  dataDir = fs.mkdtempSync(path.join(ROOT, '.test-data', 'bodies-'));
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('VITEST') && k !== 'NODE_OPTIONS' && k !== 'DATABASE_URL'),
  );
  child = spawn(process.execPath, ['--max-semi-space-size=32', '--import', 'tsx', 'src/boot/main.ts'], {
    cwd: ROOT,
    env: {
      ...env,
      DATABASE_URL: db.url,
      ADMIN_TOKEN: adminToken,
      WEBHOOK_SECRET_KEY: secretKey.toString('hex'),
      DATA_DIR: dataDir,
      RUN_WORKER: 'false',
      PORT: '0',
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (b: Buffer) => {
    output += b.toString();
  });
  child.stderr!.on('data', (b: Buffer) => {
    output += b.toString();
  });
  const port = await waitFor(
    () => {
      if (child.exitCode !== null) throw new Error(`the service exited:\n${output}`);
      return /Listening on \S+ port (\d+)/.exec(output)?.[1];
    },
    120_000,
    'the service to listen',
  );
  base = `http://127.0.0.1:${port}`;
}, 180_000);

afterAll(async () => {
  if (child && child.exitCode === null) {
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await gone;
    clearTimeout(t);
  }
  await db?.drop();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
}, 60_000);

/** The child's resident memory in bytes (VmRSS of /proc/<pid>/status). */
function rss(): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1];
  return Number(kb) * 1024;
}

async function call(method: string, p: string, body: unknown, auth?: string) {
  const r = await fetch(`${base}${p}`, {
    method,
    headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json().catch(() => null)) as Record<string, unknown> };
}

interface Streamed {
  status: number;
  contentType: string | undefined;
  text: string;
  /** Bytes the client had handed to its socket when the answer's head arrived. */
  writtenAtAnswer: number;
}

/**
 * Streams up to STREAM_BYTES of `chunk` repeated, chunked (no Content-Length), honouring back
 * pressure, and stops as soon as the answer arrives.
 */
function stream(method: string, p: string, headers: Record<string, string>, first: Buffer, chunk: Buffer): Promise<Streamed> {
  return new Promise((resolve, reject) => {
    let written = 0;
    let answered = false;
    const req = http.request(`${base}${p}`, { method, headers: { ...headers, 'transfer-encoding': 'chunked' } });
    req.on('response', (res) => {
      answered = true;
      const writtenAtAnswer = written;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        text += d;
      });
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'], text, writtenAtAnswer });
      });
      res.on('error', reject);
    });
    // The service may close the connection after answering, while this side still writes.
    req.on('error', (e) => {
      if (!answered) reject(e);
    });
    const pump = () => {
      while (!answered && written < STREAM_BYTES) {
        const part = written === 0 ? first : chunk;
        written += part.length;
        if (!req.write(part)) {
          req.once('drain', pump);
          return;
        }
      }
      if (!answered) req.end();
    };
    pump();
  });
}

describe('request bodies streamed without a length', () => {
  it('are refused with 413 at the limit of each route, before the client sent more than a few MiB, and the memory stays flat', async () => {
    const org = await call('POST', '/admin/api/organizations', { name: 'Bodies' }, adminToken);
    expect(org.status).toBe(201);
    const orgId = org.body.id as string;
    const key = (await call('POST', `/admin/api/organizations/${orgId}/api-keys`, { scopes: ['*'] }, adminToken)).body.key as string;
    const list = await call('POST', '/api/v1/lists', { name: 'Streamed' }, key);
    expect(list.status).toBe(201);
    const form = await call('POST', `/admin/api/organizations/${orgId}/lead-forms`, { name: 'site' }, adminToken);
    expect(form.status).toBe(201);
    const unsubscribe = createSigner(secretKey).sign('unsubscribe', { o: orgId, r: `snd_${crypto.randomBytes(12).toString('hex')}` });
    // Every kind of body once at its ordinary size first, so what is measured is not code loading.
    expect((await call('POST', '/api/v1/lists', { name: 'Warm' }, key)).status).toBe(201);
    expect((await call('POST', `/capture/${form.body.formKey}`, { email: 'warm@example.com' })).status).toBe(201);
    const warmCsv = await fetch(`${base}/admin/api/organizations/${orgId}/lists/${list.body.id}/import`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'text/csv' },
      body: 'email\nwarm@example.com\n',
    });
    expect(warmCsv.status).toBe(200);
    const warmUnsubscribe = await fetch(`${base}/unsubscribe/${unsubscribe}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'List-Unsubscribe=One-Click',
    });
    expect(warmUnsubscribe.status).toBe(200);

    const json = { 'content-type': 'application/json' };
    const filler = Buffer.alloc(64 * 1024, 'a');
    const openString = Buffer.from('{"name":"');
    const cases: {
      what: string;
      method: string;
      path: string;
      headers: Record<string, string>;
      first: Buffer;
      chunk: Buffer;
      limit: number;
      problem: boolean;
    }[] = [
      {
        what: 'public API JSON',
        method: 'POST',
        path: '/api/v1/lists',
        headers: { ...json, authorization: `Bearer ${key}` },
        first: openString,
        chunk: filler,
        limit: MiB,
        problem: true,
      },
      {
        what: 'operator API JSON',
        method: 'POST',
        path: '/admin/api/organizations',
        headers: { ...json, authorization: `Bearer ${adminToken}` },
        first: openString,
        chunk: filler,
        limit: MiB,
        problem: true,
      },
      {
        what: 'CSV import',
        method: 'POST',
        path: `/admin/api/organizations/${orgId}/lists/${list.body.id}/import`,
        headers: { 'content-type': 'text/csv', authorization: `Bearer ${adminToken}` },
        first: Buffer.from('email\n'),
        chunk: Buffer.alloc(64 * 1024, '\n'),
        limit: 64 * MiB,
        problem: true,
      },
      {
        what: 'lead capture',
        method: 'POST',
        path: `/capture/${form.body.formKey}`,
        headers: json,
        first: Buffer.from('{"email":"'),
        chunk: filler,
        limit: 32 * 1024,
        problem: true,
      },
      {
        what: 'one-click unsubscribe',
        method: 'POST',
        path: `/unsubscribe/${unsubscribe}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        first: Buffer.from('List-Unsubscribe='),
        chunk: filler,
        limit: 64 * 1024,
        problem: false,
      },
    ];
    const before = rss();
    const seen: Record<string, { status: number; sentMiB: number; grownMiB: number }> = {};
    for (const c of cases) {
      const r = await stream(c.method, c.path, c.headers, c.first, c.chunk);
      seen[c.what] = { status: r.status, sentMiB: Math.round(r.writtenAtAnswer / MiB), grownMiB: Math.round((rss() - before) / MiB) };
      if (c.problem && r.status === 413) {
        expect(r.contentType, c.what).toMatch(/^application\/problem\+json/);
        expect(JSON.parse(r.text), c.what).toMatchObject({ status: 413, type: expect.stringMatching(/\/problems\/payload-too-large$/) });
      }
    }
    console.log(`bodies streamed chunked (status, MiB sent before the answer, RSS growth in MiB): ${JSON.stringify(seen)}`);
    for (const c of cases) {
      const s = seen[c.what];
      const all = JSON.stringify(seen);
      expect(s.status, `${c.what}: ${all}`).toBe(413);
      // The limit, and what the sockets between the two processes buffer besides.
      expect(s.sentMiB * MiB, `${c.what}: ${all}`).toBeLessThan(c.limit + 24 * MiB);
      expect(s.grownMiB * MiB, `${c.what}: ${all}`).toBeLessThan(50 * 1000 * 1000);
    }
    // The service still answers, and nothing was created from a refused body.
    const lists = await call('GET', '/api/v1/lists?limit=100', undefined, key);
    expect(lists.status).toBe(200);
    expect((lists.body.data as { name: string }[]).map((l) => l.name).sort()).toEqual(['Streamed', 'Warm']);
  }, 240_000);
});

/** A loopback server answering every request with `head` then `chunk` without end (until the client goes); the bytes it got written, per request. */
async function endless(head: Record<string, string>, chunk: Buffer, status = 200) {
  const written: number[] = [];
  const closedAt: number[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    const i = written.push(0) - 1;
    res.writeHead(status, head);
    res.on('error', () => {});
    res.on('close', () => {
      closedAt[i] = Date.now();
    });
    const pump = () => {
      while (!res.destroyed && written[i] < 2048 * MiB) {
        written[i] += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    written,
    closedAt,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    },
  };
}

describe('what the service reads from outside', () => {
  it('reads a research page streamed without end (plain or gzip) only up to RESEARCH_MAX_PAGE_BYTES, decompressed, then drops the connection', async () => {
    const cap = 2 * MiB;
    const plain = await endless({ 'content-type': 'text/html' }, Buffer.alloc(64 * 1024, 'a'));
    // A gzip body some 64 KiB long that inflates to 64 MiB, sent again and again: a decompression bomb.
    const bomb = zlib.gzipSync(Buffer.alloc(64 * MiB, 0), { level: 9 });
    const gzip = await endless({ 'content-type': 'text/html', 'content-encoding': 'gzip' }, bomb.subarray(0, bomb.length - 8));
    const agents = runAgents(2);
    try {
      for (const site of [plain, gzip]) {
        const policy: FetchPolicy = {
          userAgent: 'test',
          allowPrivate: true,
          guard: {},
          timeoutMs: 20_000,
          maxBytes: cap,
          maxRedirects: 0,
          deadline: Date.now() + 30_000,
          agents,
        };
        const started = Date.now();
        const r = await guardedGet(site.url, policy, { accept: 'text/html' });
        expect(r).toMatchObject({ ok: false, reason: 'too-large' });
        expect(Date.now() - started).toBeLessThan(10_000);
        await waitFor(() => site.closedAt[0], 5000, 'the site to see its connection closed');
        expect(site.written[0]).toBeLessThan(cap + 24 * MiB);
      }
    } finally {
      closeAgents(agents);
      await plain.close();
      await gzip.close();
    }
  });

  it("takes a webhook receiver's verdict from its status line and drops an answer that never ends, by the delivery timeout", async () => {
    const receiver = await endless({ 'content-type': 'text/plain' }, Buffer.alloc(64 * 1024, 'a'));
    try {
      const started = Date.now();
      const r = await postWebhook({ url: receiver.url, body: '{}', headers: {}, timeoutMs: 1500, allowPrivate: true });
      expect(r).toMatchObject({ outcome: 'success', httpStatus: 200 });
      expect(Date.now() - started).toBeLessThan(1500);
      await waitFor(() => receiver.closedAt[0], 10_000, 'the receiver to see its connection closed');
      expect(receiver.closedAt[0] - started).toBeLessThan(5000);
    } finally {
      await receiver.close();
    }
  });
});
