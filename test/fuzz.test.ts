// Property-based fuzzing of every operation of both documents (the public API and the operator
// API): requests generated from the served OpenAPI documents (src/platform/spec.ts) with valid,
// boundary and hostile values (test/support/openapi-arbitrary.ts), sent with valid credentials (a
// key with every scope of a fresh organization, the operator token) and sometimes wrong ones, on
// ids that exist and ids that do not. Every answer must be below 500 and valid against the
// operation's documented statuses and schemas (checkResponse).
//
// Reproducible: the seed is fixed (FUZZ_SEED overrides it) and each operation runs FUZZ_RUNS
// requests (default below) from a seed derived from it and the operationId; a failure prints the
// seed, the operation and the failing request as a curl command line. The ids of the fixtures
// differ from run to run, the choices among them do not.
//
// Bounded, not excluded: operations whose side effects reach outside are pointed at loopback
// servers that answer at once: research (a site server answering 404 to every page), webhook URLs
// (a receiver answering 200; test-deliver within WEBHOOK_TIMEOUT_MS=1000), mailbox SMTP URLs (a
// closed loopback port, refused at once; the deployment transport is the capture one). No worker
// runs during the fuzzing, so jobs the requests enqueue (drafts, deliveries, classification) are
// not run: this test is about the answers. Operations that destroy fixtures (DELETE, erase,
// revoke, remove) run after all others, so the others meet existing ids.
//
// Not generated: bodies over 1 MiB (413 is documented only on operations that take a body) and
// request heads over Node's 16 KiB limit (Node's HTTP parser answers 431 before the service sees
// the request).
import crypto from 'node:crypto';
import net from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { OpenApiDoc, OperationInfo } from '../src/platform/openapi-doc.js';
import { adminDoc, adminOperations, publicDoc, publicOperations } from '../src/platform/spec.js';
import { uniqueEmail } from './crm-support.js';
import { ALL_SCOPES, checkResponse, startService, type TestService, waitFor } from './support/harness.js';
import { authHeader, describeRequest, type GenRequest, requestArbitrary } from './support/openapi-arbitrary.js';
import { type Receiver, startReceiver } from './support/receiver.js';
import { type SiteServer, startSiteServer } from './support/site-server.js';

const SEED = Number(process.env.FUZZ_SEED ?? 240_024);
const RUNS = Number(process.env.FUZZ_RUNS ?? 30);

let svc: TestService;
let site: SiteServer;
let receiver: Receiver;
let closedPort: number;
let publicKey: string;
let adminToken: string;
/** Ids by `<first path segment>:<parameter name>`: existing ones, and ones that exist nowhere or in another organization. */
const ids: Record<string, { existing: string[]; missing: string[] }> = {};
/** Ids of the public organization by kind, for body fields that name a record. */
const refs: Record<string, string[]> = {};

async function json(method: string, url: string, token: string, body?: unknown): Promise<Record<string, any>> {
  const res = await fetch(`${svc.baseUrl}${url}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`fixture ${method} ${url}: ${res.status} ${text}`);
  return JSON.parse(text);
}
const pub = (method: string, url: string, body?: unknown) => json(method, `/api/v1${url}`, publicKey, body);
const adm = (method: string, url: string, body?: unknown) => json(method, `/admin/api${url}`, adminToken, body);

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as net.AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

/** Records of every kind in two organizations: P (the public key's) and A (the operator's fuzzing). */
async function fixtures() {
  const org = await svc.newOrg({ plan: 'growth' });
  publicKey = await org.key(ALL_SCOPES, { userId: org.ownerId });
  const P = org.id;
  const product = await adm('POST', `/organizations/${P}/products`, { name: 'Rocket fuel' });
  const step = { dayOffset: 0, subject: 'Hello {{firstName}}', body: 'Hi {{firstName}}, a short note about rockets. Worth a call?' };
  const template = await adm('POST', `/organizations/${P}/sequence-templates`, { name: 'Intro', steps: [step, { ...step, dayOffset: 3 }] });
  const list = await pub('POST', '/lists', { name: 'Fuzz list' });
  const list2 = await pub('POST', '/lists', { name: 'Fuzz list 2' });
  const company = await pub('POST', '/companies', { domain: `acme-${crypto.randomBytes(3).toString('hex')}.example`, name: 'Acme' });
  const contacts: Record<string, any>[] = [];
  for (let i = 0; i < 4; i += 1)
    contacts.push(await pub('POST', '/contacts', { email: uniqueEmail(), name: `Dana ${i}`, listId: i < 2 ? list.id : list2.id }));
  await pub('PATCH', `/contacts/${contacts[0].id}`, { companyId: company.id });
  const webhook = await pub('POST', '/webhooks', {
    url: receiver.url,
    eventTypes: ['deal.created', 'draft.created', 'inbound.lead_received', 'sequence.started'],
  });
  const sequence = await pub('POST', '/sequences', { contactId: contacts[0].id, templateId: template.id });
  const deal = await pub('POST', '/deals', {
    name: 'Acme deal',
    primaryContactId: contacts[1].id,
    companyId: company.id,
    valueCents: 100_000,
  });
  const leads = [];
  for (let i = 0; i < 3; i += 1)
    leads.push(await adm('POST', `/organizations/${P}/inbound-leads`, { email: uniqueEmail(), name: 'Riley', source: 'website' }));
  const items = [];
  for (const priority of ['urgent', 'low'])
    items.push(
      await adm('POST', `/organizations/${P}/action-items`, {
        actionType: 'follow_up',
        title: 'Call Dana',
        salesPersonId: org.ownerId,
        priority,
      }),
    );
  await adm('POST', `/organizations/${P}/inbound-messages`, {
    fromEmail: contacts[2].email,
    subject: 'Re: rockets',
    body: 'Interested, call me.',
  });
  await pub('POST', '/suppression', { email: 'blocked@example.com', reason: 'asked' });

  // The worker writes the drafts and the webhook deliveries, then stops: the fuzzing runs no jobs.
  const worker = await svc.startWorker();
  const drafts = await waitFor(
    async () => {
      const r = await pub('GET', `/drafts?contactId=${contacts[0].id}`);
      return r.data.length > 0 ? r.data : null;
    },
    30_000,
    'drafts of the fixture sequence',
  );
  const deliveries = await waitFor(
    async () => {
      const r = await pub('GET', `/webhooks/${webhook.id}/deliveries`);
      return r.data.length > 0 ? r.data : null;
    },
    30_000,
    'a webhook delivery',
  );
  await worker.stop();

  // The operator's organization A: its own users, key, list, contacts (one deleted), rule, mailbox.
  const a = await svc.newOrg();
  const A = a.id;
  const user = await a.user('REP');
  const user2 = await a.user('MANAGER');
  const aKey = await a.keyWithId(ALL_SCOPES);
  const aApi = (method: string, url: string, body?: unknown) => json(method, `/api/v1${url}`, aKey.key, body);
  const aList = await aApi('POST', '/lists', { name: 'A list' });
  const aContact = await aApi('POST', '/contacts', { email: uniqueEmail(), name: 'Ada', listId: aList.id });
  const aDeleted = await aApi('POST', '/contacts', { email: uniqueEmail(), name: 'Gone' });
  await aApi('DELETE', `/contacts/${aDeleted.id}`);
  const rule = await adm('POST', `/organizations/${A}/rules`, { template: 'hot_reply' });
  const mailbox = await adm('POST', `/organizations/${A}/mailboxes`, { email: uniqueEmail('mbx') });
  const stages = (await pub('GET', '/deal-stages')).data as { id: string; slug: string }[];
  // Research on record (the site answers 404 to every page), so its GETs find one.
  await pub('POST', `/companies/${company.id}/research`);
  await pub('POST', `/contacts/${contacts[0].id}/research`);

  const unknown = ['con_00000000000000000000000000', 'x', '0', 'a'.repeat(64)];
  const foreign = [aContact.id, aList.id, A];
  const add = (key: string, existing: string[]) => {
    ids[key] = { existing, missing: [...unknown, ...foreign] };
  };
  add(
    'contacts:id',
    contacts.map((c) => c.id),
  );
  add('companies:id', [company.id]);
  add('lists:id', [list.id, list2.id]);
  add(
    'drafts:id',
    drafts.map((d: { id: string }) => d.id),
  );
  add('sequences:id', [sequence.id]);
  add('deals:id', [deal.id]);
  add(
    'leads:id',
    leads.map((l) => l.id),
  );
  add(
    'action-items:id',
    items.map((i) => i.id),
  );
  ids['action-items:verb'] = { existing: ['complete', 'reopen', 'dismiss', 'snooze'], missing: ['Complete', 'delete'] };
  add('webhooks:id', [webhook.id]);
  add(
    'webhooks:deliveryId',
    deliveries.map((d: { id: string }) => d.id),
  );
  add('organizations:orgId', [A]);
  add('organizations:listId', [aList.id]);
  add('organizations:contactId', [aDeleted.id, aContact.id]);
  add('organizations:userId', [user.id, user2.id, a.ownerId]);
  add('organizations:ruleId', [rule.id]);
  add('organizations:mailboxId', [mailbox.id]);
  add('api-keys:keyId', [aKey.id]);

  Object.assign(refs, {
    contact: contacts.map((c) => c.id),
    company: [company.id],
    list: [list.id, list2.id],
    template: [template.id],
    product: [product.id],
    user: [org.ownerId, a.ownerId, user.id, user2.id],
    domain: [company.domain],
    stage: stages.map((s) => s.id),
    stageSlug: stages.map((s) => s.slug),
    draft: drafts.map((d: { id: string }) => d.id),
    lead: leads.map((l) => l.id),
  });
}

/** Valid values for body fields and parameters that name records or reach outside (bounded inputs). */
function overrides(op: OperationInfo): Record<string, fc.Arbitrary<unknown>> {
  const some = (kind: string) =>
    fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...refs[kind]) }, { weight: 1, arbitrary: fc.constantFrom('nope_0', 'x') });
  const local = `http://127.0.0.1:${receiver.port}`;
  return {
    contactId: some('contact'),
    primaryContactId: some('contact'),
    companyId: some('company'),
    listId: some('list'),
    templateId: some('template'),
    productId: some('product'),
    salesPersonId: some('user'),
    ownerSalesPersonId: some('user'),
    userId: some('user'),
    stageId: some('stage'),
    stage: some('stageSlug'),
    draftId: some('draft'),
    leadId: some('lead'),
    entityId: fc.constantFrom(...refs.contact, ...refs.company, 'x'),
    url: fc.constantFrom(`${local}/hook`, `${local}/other?q=1`, `http://localhost:${receiver.port}/x`, 'https://127.0.0.1:1/closed'),
    smtpUrl: fc.constantFrom(`smtp://127.0.0.1:${closedPort}`, `smtps://user:pass@127.0.0.1:${closedPort}`),
    email: fc.oneof(
      fc.emailAddress(),
      fc.constant(null).map(() => uniqueEmail()),
    ),
    domain: fc.oneof(
      fc.domain(),
      fc.constantFrom(
        ...refs.domain,
        'gmail.com',
        'https://www.Example.org/about?x=1',
        'xn--bcher-kva.example',
        'bücher.example',
        '127.0.0.1',
        'localhost',
      ),
    ),
    // The funnel's window: dates close together, so that some windows are within its limit.
    ...(op.operationId === 'getFunnelAnalytics'
      ? {
          from: fc
            .date({ min: new Date('2025-01-01'), max: new Date('2026-12-31'), noInvalidDate: true })
            .map((d) => d.toISOString().slice(0, 10)),
          to: fc
            .date({ min: new Date('2025-06-01'), max: new Date('2027-06-30'), noInvalidDate: true })
            .map((d) => d.toISOString().slice(0, 10)),
        }
      : {}),
  };
}

/** Hostile values aimed at what a field means. */
function hostile(): Record<string, fc.Arbitrary<unknown>> {
  const payload = Buffer.from(JSON.stringify(['2024-01-01T00:00:00.000Z', 'x'])).toString('base64url');
  return {
    // A cursor is `<payload>.<16-character signature>`: right shapes with wrong bytes.
    cursor: fc.constantFrom(
      `${payload}.${'A'.repeat(16)}`,
      `${payload}.${'é'.repeat(16)}`,
      `x.${'é'.repeat(16)}`,
      `x.${'😀'.repeat(8)}`,
      `${payload}.`,
      `.${'A'.repeat(16)}`,
      `${payload}.${'A'.repeat(16)}.x`,
      `${'é'.repeat(40)}.${'A'.repeat(16)}`,
    ),
    // URLs a parser may refuse or misread.
    url: fc.constantFrom(
      'http://[',
      'http://[::ffff:0:7f00:1]/',
      'http://0x7f.1/',
      'http://%zz/',
      'http://a b/',
      'https://:80/',
      'http://x:99999/',
    ),
    smtpUrl: fc.constantFrom('smtp://[', 'smtp://', 'smtps://user:p@ss@host:99999', 'smtp://:0', 'smtp://%zz'),
  };
}

/** Existing and unknown ids for a path parameter. */
function pathValues(op: OperationInfo, name: string) {
  return ids[`${op.path.split('/')[1]}:${name}`] ?? { existing: [], missing: ['x', 'unknown_0'] };
}

/** Operations that destroy the fixtures other operations use run last. */
const DESTRUCTIVE = new Set([
  'deleteContact',
  'eraseContact',
  'deleteList',
  'deleteWebhook',
  'removeSuppression',
  'adminRevokeApiKey',
  'adminRemoveUser',
  'adminDeleteRule',
]);
const phase = (op: OperationInfo) => (DESTRUCTIVE.has(op.operationId) ? 2 : op.method === 'get' ? 0 : 1);
const ordered = (ops: Map<string, OperationInfo>) => [...ops.values()].sort((a, b) => phase(a) - phase(b));

function seedOf(operationId: string): number {
  return SEED ^ crypto.createHash('sha256').update(operationId).digest().readInt32BE(0);
}

/** Sends one generated request; answers the response (its body read) and the request as curl. */
async function send(api: 'public' | 'admin', req: GenRequest) {
  const root = api === 'public' ? '/api/v1' : '/admin/api';
  const url = `${svc.baseUrl}${root}${req.path}${req.query ? `?${req.query}` : ''}`;
  const headers: Record<string, string> = { ...req.headers };
  const auth = authHeader(req.auth, api === 'public' ? publicKey : adminToken, api === 'public' ? 'api-key' : 'operator');
  if (auth !== undefined) headers.authorization = auth;
  const curl = describeRequest(url, req, headers);
  const body = typeof req.body === 'string' || req.body === undefined ? req.body : Buffer.from(req.body);
  try {
    const res = await fetch(url, { method: req.method, headers, body, redirect: 'manual', signal: AbortSignal.timeout(20_000) });
    return { res, curl };
  } catch (e) {
    throw new Error(`no answer (${(e as Error).message}: ${String((e as Error).cause ?? '')})\nrequest: ${curl}`);
  }
}

async function fuzz(api: 'public' | 'admin', doc: OpenApiDoc, ops: Map<string, OperationInfo>, op: OperationInfo): Promise<void> {
  const arb = requestArbitrary(doc, op, {
    pathValues,
    overrides: overrides(op),
    hostile: hostile(),
    // A wrong operator token is answered after a fixed delay (src/http/auth-throttle.ts): fewer of them.
    wrongCredentialsWeight: api === 'admin' ? 1 : 4,
    streamBody: csvBodies(),
  });
  const seed = seedOf(op.operationId);
  const statuses: Record<number, number> = {};
  const result = await fc.check(
    fc.asyncProperty(arb, async (req) => {
      const { res, curl } = await send(api, req);
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      if (process.env.FUZZ_TRACE === op.operationId)
        console.log(res.status, (await res.clone().text()).slice(0, 300), '\n ', curl.slice(0, 600));
      try {
        if (res.status >= 500) throw new Error(`${op.operationId} answered ${res.status}: ${await res.clone().text()}`);
        await checkResponse(ops, req.method, op.path, res);
      } catch (e) {
        throw new Error(`${(e as Error).message}\nrequest: ${curl}`);
      }
      await res.arrayBuffer().catch(() => undefined);
    }),
    { seed, numRuns: RUNS, endOnFailure: process.env.FUZZ_SHRINK !== '1' },
  );
  if (process.env.FUZZ_STATS) console.log(`${op.operationId} ${JSON.stringify(statuses)}`);
  if (result.failed) {
    const error = result.errorInstance instanceof Error ? result.errorInstance.message : String(result.errorInstance);
    throw new Error(
      `fuzzing ${op.operationId} failed after ${result.numRuns} requests (FUZZ_SEED=${SEED}, operation seed ${seed}, path ${result.counterexamplePath}; ` +
        `reproduce: FUZZ_SEED=${SEED} npx vitest run test/fuzz.test.ts -t '${op.operationId}')\n${error}`,
    );
  }
}

/** Bodies of the CSV import: valid CSVs; hostile: odd rows and bytes, other media types, none. */
function csvBodies() {
  const header = 'email,name,title\n';
  const cell = (v: string) => `"${v.replace(/"/g, '""')}"`;
  return {
    valid: fc
      .array(
        fc.tuple(
          fc.oneof(fc.emailAddress(), fc.constantFrom('bad', '', 'é@é')),
          fc.string({ maxLength: 20 }),
          fc.string({ maxLength: 20 }),
        ),
        { maxLength: 5 },
      )
      .map((rows) => ({ text: header + rows.map((r) => r.map(cell).join(',')).join('\n'), contentType: 'text/csv' })),
    hostile: fc.oneof(
      fc
        .constantFrom<string | Uint8Array>(
          '',
          '\n',
          'email\n"unterminated',
          'a,b\n1,2,3,4',
          '\u0000,\u0000',
          `${header}${'x,'.repeat(5000)}`,
          new Uint8Array([0xff, 0xfe, 0x00, 0x65]),
        )
        .map((text) => ({ text, contentType: 'text/csv' })),
      fc
        .constantFrom('application/json', 'text/plain', 'text/csv; charset=latin1', 'multipart/form-data; boundary=x')
        .map((contentType) => ({ text: `${header}a@example.com,A,B`, contentType })),
      fc.constant({ contentType: null }),
    ),
  };
}

beforeAll(async () => {
  site = await startSiteServer();
  receiver = await startReceiver();
  closedPort = await freePort();
  svc = await startService({
    RATE_LIMIT_PER_MINUTE: '10000000',
    RESEARCH_SITE_URL_TEMPLATE: site.template,
    RESEARCH_ALLOW_PRIVATE_TARGETS: 'false',
    RESEARCH_ALLOWED_TARGETS: `127.0.0.1:${site.port}`,
    RESEARCH_REQUEST_TIMEOUT_MS: '1000',
    WEBHOOK_TIMEOUT_MS: '1000',
    SMTP_TIMEOUT_MS: '1000',
  });
  adminToken = svc.config.adminToken!;
  await fixtures();
}, 120_000);

afterAll(async () => {
  await svc?.close();
  await site?.close();
  await receiver?.close();
});

describe('fuzzing the public API from its document: no 5xx, every answer documented', () => {
  for (const op of ordered(publicOperations)) {
    it(op.operationId, () => fuzz('public', publicDoc, publicOperations, op), 60_000);
  }
});

describe('fuzzing the operator API from its document: no 5xx, every answer documented', () => {
  for (const op of ordered(adminOperations)) {
    it(op.operationId, () => fuzz('admin', adminDoc, adminOperations, op), 60_000);
  }
});
