// npm run demo: a first minute with the service. Against a running service (DEMO_URL or --url,
// with ADMIN_TOKEN) or, when none is given, one it starts in this process (embedded Postgres in
// DATA_DIR, as npm start). It creates an organization, an OWNER key attributed to its owner, and
// sample data: lists, companies researched from a bundled sample site (scripts/demo-site, served
// on loopback), contacts, sequences with drafts from the fallback writer, deals on stages and a
// webhook endpoint to a local receiver that verifies every delivery's signature. The owner gets a
// name, a title and a mailbox, so the drafts (the built-in sequence) are signed; the first
// contact's three drafts are printed. It stops at the first failing step with that step's message.

import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { verifySignature } from '../src/webhooks/signing.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const SITE_DIR = path.join(here, 'demo-site');

class StepError extends Error {}

// ---------------------------------------------------------------------------------------------
// The sample site and the webhook receiver (both on loopback)

/** Serves scripts/demo-site/<domain>/ under /sites/<domain>/ (`/about` is about.html). */
async function startSite(port: number): Promise<{ port: number; hits: Map<string, number>; close(): Promise<void> }> {
  const hits = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const m = /^\/sites\/([a-z0-9.-]+)(\/[a-z0-9.-]*)?$/.exec((req.url ?? '').split('?')[0]);
    const domain = m?.[1] ?? '';
    const page = (m?.[2] ?? '/').replace(/^\//, '') || 'index';
    const file = path.join(SITE_DIR, domain, page.includes('.') ? page : `${page}.html`);
    if (!m || !file.startsWith(path.join(SITE_DIR, domain) + path.sep) || !fs.existsSync(file)) {
      res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not found</h1>');
      return;
    }
    hits.set(domain, (hits.get(domain) ?? 0) + 1);
    const text = fs.readFileSync(file, 'utf8').replaceAll('{{base}}', `/sites/${domain}`);
    res.writeHead(200, { 'content-type': file.endsWith('.txt') ? 'text/plain' : 'text/html; charset=utf-8' }).end(text);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return { port: (server.address() as AddressInfo).port, hits, close: () => new Promise((r) => server.close(() => r())) };
}

interface Receiver {
  url: string;
  verified: number;
  rejected: number;
  secret: string | null;
  close(): Promise<void>;
}

/** Receives webhook deliveries and checks each signature over the raw body; prints one line per delivery. */
async function startReceiver(): Promise<Receiver> {
  const rx: Receiver = { url: '', verified: 0, rejected: 0, secret: null, close: async () => {} };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const signature = req.headers['x-outbound-signature'] as string | undefined;
      let event: { id?: string; type?: string } = {};
      try {
        event = JSON.parse(raw.toString('utf8'));
      } catch {
        /* reported as not verified below */
      }
      if (rx.secret !== null && verifySignature(signature, raw, rx.secret)) {
        rx.verified += 1;
        console.log(`  webhook: ${event.type} ${event.id} verified`);
        res.writeHead(200).end();
      } else {
        rx.rejected += 1;
        console.log(`  webhook: ${event.type ?? '?'} ${event.id ?? '?'} NOT verified (bad signature)`);
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  rx.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/outbound`;
  rx.close = () =>
    new Promise((r) => {
      server.close(() => r());
      server.closeAllConnections();
    });
  return rx;
}

// ---------------------------------------------------------------------------------------------
// HTTP against the service

type Json = Record<string, any>;

function client(baseUrl: string, token: string) {
  return async (method: string, urlPath: string, body?: unknown): Promise<Json> => {
    let res: Response;
    try {
      res = await fetch(`${baseUrl}${urlPath}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(150_000),
      });
    } catch (e) {
      throw new StepError(`${method} ${urlPath}: cannot reach ${baseUrl} (${(e as Error).cause ?? (e as Error).message})`);
    }
    const text = await res.text();
    let json: Json = {};
    try {
      json = text ? JSON.parse(text) : {};
    } catch {
      /* not JSON */
    }
    if (!res.ok) throw new StepError(`${method} ${urlPath} answered ${res.status}: ${json.detail ?? json.title ?? text.slice(0, 200)}`);
    return json;
  };
}

async function until<T>(what: string, fn: () => Promise<T | null>, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== null) return v;
    if (Date.now() > end) throw new StepError(`gave up waiting for ${what} after ${timeoutMs / 1000} s (is the worker running?)`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function step<T>(name: string, fn: () => Promise<T>): Promise<T> {
  try {
    const v = await fn();
    console.log(`✓ ${name}`);
    return v;
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    throw new StepError(`${name} failed: ${message}`);
  }
}

// ---------------------------------------------------------------------------------------------
// The sample data

const COMPANIES = [
  {
    domain: 'northwind-robotics.example',
    name: 'Northwind Robotics',
    list: 'Warehouse automation',
    connectionPoint: 'We spoke briefly at the Warehouse Automation Forum in Rotterdam',
  },
  {
    domain: 'bluepeak-analytics.example',
    name: 'BluePeak Analytics',
    list: 'SaaS finance',
    connectionPoint: 'Your team came up at the SaaS Finance Meetup in Amsterdam',
  },
];
const CONTACTS = [
  { name: 'Maria Jansen', title: 'Chief Executive Officer', company: 0 },
  { name: 'Tom Verbeek', title: 'VP Operations', company: 0 },
  { name: 'Lena Fischer', title: 'Head of Deployment', company: 0 },
  { name: 'Daniel Okafor', title: 'Chief Executive Officer', company: 1 },
  { name: 'Priya Raman', title: 'VP Finance', company: 1 },
  { name: 'Sam Whitaker', title: 'Revenue Operations Manager', company: 1 },
];
/** The person the demo's lists belong to: the owner, named, and the mailbox that signs the drafts. */
const SENDER = { name: 'Alex Morgan', title: 'Account Executive', email: 'alex@harborline.example' };
/** The built-in sequence (first touch, follow-up, break-up): what a list without its own template gets. */
const TEMPLATE_ID = 'builtin-sequence';
const STEP_COUNT = 3;
const DEALS = [
  // The first deal is created without a stage: that seeds the default pipeline, which the others name.
  { name: 'Northwind Robotics: pilot, Rotterdam site', valueCents: 4_800_000, contact: 0, stage: undefined, moveTo: 'qualification' },
  { name: 'Northwind Robotics: Chicago expansion', valueCents: 12_000_000, contact: 1, stage: 'discovery', moveTo: 'proposal' },
  { name: 'BluePeak Analytics: annual plan', valueCents: 3_600_000, contact: 3, stage: 'proposal', moveTo: 'negotiation' },
];

async function seed(baseUrl: string, adminToken: string, siteHits: Map<string, number>, rx: Receiver, siteHint: string) {
  const admin = client(`${baseUrl}/admin/api`, adminToken);
  const tag = crypto.randomBytes(3).toString('hex');
  const org = await step('organization created', () =>
    admin('POST', '/organizations', { name: `Harborline (demo ${tag})`, plan: 'growth' }),
  );
  const key = await step('OWNER API key created (attributed to the owner)', () =>
    admin('POST', `/organizations/${org.id}/api-keys`, { name: 'demo', scopes: ['*'], userId: org.owner.id }),
  );
  const api = client(`${baseUrl}/api/v1`, key.key);
  await step('key checked with GET /me', async () => {
    const me = await api('GET', '/me');
    if (me.apiKey?.role !== 'OWNER') throw new StepError(`the key's role is ${me.apiKey?.role}, not OWNER`);
  });

  const hook = await step('webhook endpoint to the local receiver', () =>
    api('POST', '/webhooks', {
      url: rx.url,
      eventTypes: ['company.research_completed', 'deal.created', 'deal.stage_changed'],
      description: 'npm run demo receiver',
    }),
  );
  rx.secret = hook.signingSecret;

  await step(`the owner named ${SENDER.name} (${SENDER.title}), with a mailbox in that name`, async () => {
    await admin('PATCH', `/organizations/${org.id}/users/${org.owner.id}`, { name: SENDER.name, title: SENDER.title });
    await admin('POST', `/organizations/${org.id}/mailboxes`, { email: SENDER.email, name: SENDER.name });
  });
  const lists = await step('2 lists', () =>
    Promise.all(
      COMPANIES.map((c) =>
        api('POST', '/lists', { name: c.list, description: `Demo list: ${c.name}`, connectionPoint: c.connectionPoint }),
      ),
    ),
  );
  const companies = await step('2 companies', () =>
    Promise.all(COMPANIES.map((c) => api('POST', '/companies', { domain: c.domain, name: c.name }))),
  );
  const contacts = await step(`${CONTACTS.length} contacts`, async () => {
    const out: Json[] = [];
    for (const [i, c] of CONTACTS.entries()) {
      const co = COMPANIES[c.company];
      const first = c.name.split(' ')[0].toLowerCase();
      out.push(
        await api('POST', '/contacts', {
          email: `${first}.${i}@${co.domain}`,
          name: c.name,
          title: c.title,
          listId: lists[c.company].id,
          company: { domain: co.domain },
        }),
      );
    }
    return out;
  });
  await step('research of both companies from the sample site', async () => {
    for (const c of companies) {
      const r = await api('POST', `/companies/${c.id}/research`);
      if (!siteHits.get(c.domainNormalized ?? c.domain))
        throw new StepError(`the service did not reach the sample site for ${c.domain}; ${siteHint}`);
      if (r.coverage?.lowConfidence)
        throw new StepError(`research of ${c.domain} found too little (${(r.coverage?.notes ?? []).join('; ')})`);
    }
  });

  const sequenced = contacts.filter((_, i) => i !== 1);
  await step(`${sequenced.length} sequences started on the built-in sequence`, () =>
    Promise.all(sequenced.map((c) => api('POST', '/sequences', { contactId: c.id, templateId: TEMPLATE_ID }))),
  );
  const drafts = await step('drafts written by the fallback provider', () =>
    until('the drafts', async () => {
      const page = await api('GET', '/drafts?limit=100');
      return page.data.length >= sequenced.length * STEP_COUNT ? (page.data as Json[]) : null;
    }),
  );
  // The three drafts of the first contact, as the fallback writer wrote them.
  const first = sequenced[0];
  const mine = drafts.filter((d) => d.contactId === first.id).sort((a, b) => a.step - b.step);
  for (const d of mine) {
    const full = await api('GET', `/drafts/${d.id}?include=evidence`);
    const cited = (full.citations as Json[]).map((c) => `  [cites ${c.sourceUrl}]`).join('\n');
    console.log(`\n  Step ${d.step} to ${first.name}: ${full.subject}\n\n${indent(full.body)}\n${cited}\n`);
  }

  await step(`${DEALS.length} deals on stages`, async () => {
    for (const d of DEALS) {
      const contact = contacts[d.contact];
      const closeDate = new Date(Date.now() + 45 * 86_400_000).toISOString().slice(0, 10);
      const deal = await api('POST', '/deals', {
        name: d.name,
        valueCents: d.valueCents,
        closeDate,
        primaryContactId: contact.id,
        companyId: contact.company?.id,
        stage: d.stage,
      });
      if (d.moveTo) await api('POST', `/deals/${deal.id}/stage`, { stage: d.moveTo, reason: 'Demo: next step agreed' });
    }
  });

  await step('webhook deliveries verified', async () => {
    // One delivery per subscribed event the demo caused: the event log has them all already (an
    // event commits with its change), while deliveries are fanned out by the worker.
    let expected = 0;
    for (const type of hook.eventTypes as string[]) expected += (await api('GET', `/events?type=${type}&limit=100`)).data.length;
    const done = await until('the webhook deliveries', async () => {
      const page = await api('GET', `/webhooks/${hook.id}/deliveries?limit=100`);
      const rows = page.data as Json[];
      if (rows.some((r) => r.status === 'failed'))
        throw new StepError(`a delivery failed: ${rows.find((r) => r.status === 'failed')!.errorMessage}`);
      return rows.length === expected && rows.every((r) => r.status === 'succeeded') && rx.verified >= expected ? rows : null;
    });
    if (rx.rejected > 0) throw new StepError(`${rx.rejected} deliveries did not verify`);
    return done;
  });

  return { org, key: key.key as string, drafts };
}

// ---------------------------------------------------------------------------------------------

const indent = (text: string) =>
  text
    .split('\n')
    .map((l) => (l ? `    ${l}` : ''))
    .join('\n');

function argUrl(): string | null {
  const i = process.argv.indexOf('--url');
  const v = i >= 0 ? process.argv[i + 1] : process.argv.find((a) => a.startsWith('--url='))?.slice(6);
  return (v ?? process.env.DEMO_URL ?? '').replace(/\/+$/, '') || null;
}

async function main(): Promise<number> {
  const external = argUrl();
  const stay = !external && !process.argv.includes('--exit');
  const site = await startSite(external ? Number(process.env.DEMO_SITE_PORT || 4390) : 0).catch((e) => {
    throw new StepError(
      `sample site: cannot listen on 127.0.0.1:${process.env.DEMO_SITE_PORT || 4390} (${(e as Error).message}); set DEMO_SITE_PORT`,
    );
  });
  const rx = await startReceiver();
  const template = `http://127.0.0.1:${site.port}/sites/{domain}`;
  const siteHint = `start the service with RESEARCH_SITE_URL_TEMPLATE=${template} RESEARCH_ALLOWED_TARGETS=127.0.0.1:${site.port} WEBHOOK_ALLOW_PRIVATE_TARGETS=true`;
  let stop = async () => {};
  try {
    let baseUrl: string;
    let adminToken: string;
    if (external) {
      baseUrl = external;
      adminToken = process.env.ADMIN_TOKEN ?? '';
      if (!adminToken) throw new StepError("ADMIN_TOKEN must be set to the service's operator token when DEMO_URL or --url is given");
      console.log(`Demo against ${baseUrl} (sample site on 127.0.0.1:${site.port})`);
    } else {
      // The service in this process, configured to reach the sample site and the local receiver.
      process.env.RESEARCH_SITE_URL_TEMPLATE = template;
      process.env.RESEARCH_ALLOWED_TARGETS = `127.0.0.1:${site.port}`;
      process.env.WEBHOOK_ALLOW_PRIVATE_TARGETS = 'true';
      process.env.LOG_LEVEL ||= 'warn';
      console.log('Starting the service in this process (no DEMO_URL or --url given)…');
      const { boot, openRuntime, resolveAdminToken, runWorker, serveHttp } = await import('../src/boot/runtime.js');
      const booted = await boot();
      const admin = resolveAdminToken(booted.config);
      const config = { ...booted.config, adminToken: admin.token };
      const rt = openRuntime(config, booted.log, booted.url);
      const worker = await runWorker(rt);
      const server = await serveHttp(rt, config.port).catch((e) => {
        throw new StepError(`cannot listen on PORT ${config.port}: ${(e as Error).message}`);
      });
      baseUrl = `http://localhost:${server.port}`;
      adminToken = admin.token;
      stop = async () => {
        await server.close();
        await worker.stop();
        await rt.close();
        await booted.stopDb();
      };
    }
    const { key } = await seed(baseUrl, adminToken, site.hits, rx, siteHint);
    console.log(`
Your API key (OWNER):
  ${key}

Review desk: ${baseUrl}/desk (paste the key above)

Try:
  curl -s -H "Authorization: Bearer ${key}" ${baseUrl}/api/v1/me
  curl -s -H "Authorization: Bearer ${key}" "${baseUrl}/api/v1/contacts?limit=5"
  curl -s -H "Authorization: Bearer ${key}" "${baseUrl}/api/v1/deals?limit=5"
`);
    if (stay) {
      console.log(`The service keeps running at ${baseUrl}; Ctrl-C stops it.`);
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
    }
    return 0;
  } catch (e) {
    console.error(`✗ ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  } finally {
    await stop().catch(() => {});
    await rx.close();
    await site.close();
  }
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(`✗ ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  },
);
