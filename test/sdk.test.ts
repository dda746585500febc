// The TypeScript client SDK (clients/typescript) against a real service: a realistic flow made only
// with the SDK (a list, contacts, a deal, a webhook endpoint on a loopback receiver), the real
// signed delivery verified with the SDK's verifier, and the verifier's refusals (tampered body,
// stale or future timestamp, wrong secret, malformed header) and its rotation support.
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkWebhookSignature,
  createOutboundClient,
  idempotencyKey,
  type OutboundClient,
  parseWebhook,
  verifyWebhook,
  WebhookVerificationError,
  wasReplayed,
} from '../clients/typescript/src/index.js';
import { publicOperations } from '../src/platform/spec.js';
import { signatureHeader } from '../src/webhooks/signing.js';
import { checkResponse, startService, type TestService } from './support/harness.js';
import { type Received, type Receiver, startReceiver } from './support/receiver.js';

let svc: TestService;
let rx: Receiver;
beforeAll(async () => {
  [svc, rx] = await Promise.all([startService({ RATE_LIMIT_PER_MINUTE: '100000' }), startReceiver()]);
  await svc.startWorker();
});
afterAll(async () => {
  await rx?.close();
  await svc?.close();
});

/** An SDK client whose every answer is also checked against the spec, as the harness clients are. */
function sdk(apiKey: string, seen: Request[] = []): OutboundClient {
  const client = createOutboundClient({
    baseUrl: svc.baseUrl,
    apiKey,
    fetch: (req) => {
      seen.push(req.clone());
      return fetch(req);
    },
  });
  client.use({
    async onResponse({ request, response, schemaPath }) {
      await checkResponse(publicOperations, request.method, schemaPath, response);
      return undefined;
    },
  });
  return client;
}

const uid = () => crypto.randomBytes(4).toString('hex');

describe('a realistic flow with the SDK', () => {
  let delivery: Received;
  let secret: string;
  let dealId: string;
  let orgId: string;

  it('creates a list idempotently, contacts on it, a webhook endpoint and a deal; receives the signed delivery', async () => {
    const org = await svc.newOrg();
    orgId = org.id;
    const seen: Request[] = [];
    const api = sdk(await org.key(), seen);

    const me = await api.GET('/me');
    expect(me.response.status).toBe(200);
    expect(me.data!.organization.id).toBe(org.id);
    expect(seen[0].headers.get('authorization')).toMatch(/^Bearer obk_live_[0-9a-f]{32}$/);
    expect(new URL(seen[0].url).pathname).toBe('/api/v1/me');

    // A retried create with the same Idempotency-Key replays the first answer: one list, not two.
    const key = idempotencyKey();
    const first = await api.POST('/lists', { params: { header: key }, body: { name: `Expo ${uid()}`, sourceType: 'CONFERENCE' } });
    expect(first.response.status).toBe(201);
    expect(wasReplayed(first.response)).toBe(false);
    const again = await api.POST('/lists', { params: { header: key }, body: { name: first.data!.name, sourceType: 'CONFERENCE' } });
    expect(wasReplayed(again.response)).toBe(true);
    expect(again.data!.id).toBe(first.data!.id);
    expect(seen.at(-1)!.headers.get('idempotency-key')).toBe(key['Idempotency-Key']);
    const listId = first.data!.id;

    const domain = `acme-${uid()}.example.com`;
    const contacts = [];
    for (const name of ['Ada Lovelace', 'Grace Hopper']) {
      const r = await api.POST('/contacts', {
        body: { email: `${name.split(' ')[0].toLowerCase()}.${uid()}@${domain}`, name, listId, company: { name: 'Acme', domain } },
      });
      expect(r.response.status).toBe(201);
      expect(r.data!.list?.id).toBe(listId);
      contacts.push(r.data!);
    }
    const onList = await api.GET('/contacts', { params: { query: { listId, limit: 10 } } });
    expect(onList.data!.data.map((c) => c.id).sort()).toEqual(contacts.map((c) => c.id).sort());

    const hook = await api.POST('/webhooks', { body: { url: rx.url, eventTypes: ['deal.created'], description: 'SDK test receiver' } });
    expect(hook.response.status).toBe(201);
    secret = hook.data!.signingSecret;

    const deal = await api.POST('/deals', {
      body: { name: 'Acme platform', valueCents: 250000, primaryContactId: contacts[0].id, companyId: contacts[0].company!.id },
    });
    expect(deal.response.status).toBe(200);
    dealId = deal.data!.id;

    [delivery] = await rx.waitFor(1, (r) => r.body?.data?.dealId === dealId);
    expect(delivery.headers['content-type']).toBe('application/json');
  });

  it('verifies the real delivery with the SDK verifier and parses its event', () => {
    const header = delivery.headers['x-outbound-signature'];
    expect(verifyWebhook({ rawBody: delivery.raw, header, secret })).toBe(true);
    // The body as a string verifies the same as the bytes.
    expect(verifyWebhook({ rawBody: delivery.raw.toString('utf8'), header, secret })).toBe(true);
    const event = parseWebhook({ rawBody: delivery.raw, header, secret });
    expect(event).toMatchObject({
      type: 'deal.created',
      organizationId: orgId,
      resource: { id: dealId },
      data: { dealId, dealName: 'Acme platform' },
    });
    expect(event.id).toMatch(/^evt_/);
  });

  it('rejects a tampered body, a re-serialized body and a wrong secret', () => {
    const header = delivery.headers['x-outbound-signature'];
    const tampered = Buffer.from(delivery.raw);
    const at = tampered.indexOf('Acme platform');
    tampered[at] = 'a'.charCodeAt(0);
    expect(checkWebhookSignature({ rawBody: tampered, header, secret })).toMatchObject({ valid: false, reason: 'signature-mismatch' });
    expect(verifyWebhook({ rawBody: JSON.stringify(delivery.body, null, 1), header, secret })).toBe(false);
    expect(verifyWebhook({ rawBody: delivery.raw, header, secret: `whs_${'0'.repeat(32)}` })).toBe(false);
    expect(() => parseWebhook({ rawBody: tampered, header, secret })).toThrow(WebhookVerificationError);
  });

  it('rejects a stale (or future) timestamp beyond the tolerance, and accepts within it', () => {
    const header = String(delivery.headers['x-outbound-signature']);
    const t = Number(/t=(\d+)/.exec(header)![1]);
    const at = (s: number) => new Date((t + s) * 1000);
    expect(checkWebhookSignature({ rawBody: delivery.raw, header, secret, now: at(301) })).toMatchObject({
      valid: false,
      reason: 'stale-timestamp',
    });
    expect(checkWebhookSignature({ rawBody: delivery.raw, header, secret, now: at(-301) })).toMatchObject({
      valid: false,
      reason: 'stale-timestamp',
    });
    expect(verifyWebhook({ rawBody: delivery.raw, header, secret, now: at(299) })).toBe(true);
    expect(verifyWebhook({ rawBody: delivery.raw, header, secret, now: at(30), toleranceSeconds: 10 })).toBe(false);
    expect(verifyWebhook({ rawBody: delivery.raw, header, secret, now: (t + 5) * 1000, toleranceSeconds: 10 })).toBe(true);
  });

  it('refuses a now or a tolerance that is not a finite number (NaN, Infinity) instead of skipping the freshness check', () => {
    const header = String(delivery.headers['x-outbound-signature']);
    const check = (o: { now?: number | Date; toleranceSeconds?: number }) => () =>
      checkWebhookSignature({ rawBody: delivery.raw, header, secret, ...o });
    for (const now of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, new Date(Number.NaN)]) {
      expect(check({ now }), String(now)).toThrow(RangeError);
      expect(() => verifyWebhook({ rawBody: delivery.raw, header, secret, now }), String(now)).toThrow(RangeError);
    }
    for (const toleranceSeconds of [Number.NaN, Number.POSITIVE_INFINITY, -1]) {
      expect(check({ toleranceSeconds }), String(toleranceSeconds)).toThrow(RangeError);
      expect(() => parseWebhook({ rawBody: delivery.raw, header, secret, toleranceSeconds }), String(toleranceSeconds)).toThrow(RangeError);
    }
  });

  it('refuses missing and malformed headers', () => {
    const check = (header: string | undefined) => checkWebhookSignature({ rawBody: delivery.raw, header, secret });
    expect(check(undefined)).toEqual({ valid: false, reason: 'missing-header' });
    for (const h of ['garbage', 't=,v1=ab', `v1=${'a'.repeat(64)}`, `t=1,t=2,v1=${'a'.repeat(64)}`, `t=${Math.floor(Date.now() / 1000)}`]) {
      expect(check(h), h).toEqual({ valid: false, reason: 'malformed-header' });
    }
  });
});

describe('secret rotation', () => {
  it('accepts a delivery signed with the old secret while the receiver holds both, and after rotation only the new one verifies new deliveries', async () => {
    const org = await svc.newOrg();
    const api = sdk(await org.key(['webhooks.manage', 'deals.write']));
    const own = await startReceiver();
    try {
      const hook = await api.POST('/webhooks', { body: { url: own.url, eventTypes: ['deal.created'] } });
      const oldSecret = hook.data!.signingSecret;
      const rotated = await api.POST('/webhooks/{id}/rotate-secret', { params: { path: { id: hook.data!.id } } });
      expect(rotated.data!.secretRotated).toBe(true);
      const newSecret = rotated.data!.signingSecret;
      const deal = await api.POST('/deals', { body: { name: 'After rotation' } });
      const [d] = await own.waitFor(1, (r) => r.body?.data?.dealId === deal.data!.id);
      const header = d.headers['x-outbound-signature'];
      expect(verifyWebhook({ rawBody: d.raw, header, secret: oldSecret })).toBe(false);
      expect(verifyWebhook({ rawBody: d.raw, header, secret: newSecret })).toBe(true);
      expect(verifyWebhook({ rawBody: d.raw, header, secret: [newSecret, oldSecret] })).toBe(true);
      // A delivery made just before the rotation (signed with the old secret, as the service signs).
      const before = signatureHeader(oldSecret, d.raw);
      expect(verifyWebhook({ rawBody: d.raw, header: before, secret: [newSecret, oldSecret] })).toBe(true);
      // A header carrying several v1 signatures verifies when any of them does.
      const both = `${signatureHeader(newSecret, d.raw)},v1=${signatureHeader(oldSecret, d.raw).split('v1=')[1]}`;
      expect(verifyWebhook({ rawBody: d.raw, header: both, secret: oldSecret })).toBe(true);
      expect(verifyWebhook({ rawBody: d.raw, header: both, secret: `whs_${'1'.repeat(32)}` })).toBe(false);
    } finally {
      await own.close();
    }
  });
});

describe('client behaviour', () => {
  it('returns problems as typed errors and accepts a base URL with or without /api/v1', async () => {
    const { key } = await svc.orgWithKey(['contacts.read']);
    for (const baseUrl of [svc.baseUrl, `${svc.baseUrl}/`, `${svc.baseUrl}/api/v1`]) {
      const api = createOutboundClient({ baseUrl, apiKey: key });
      const r = await api.GET('/contacts/{id}', { params: { path: { id: 'con_missing' } } });
      expect(r.response.status).toBe(404);
      expect(r.error).toMatchObject({ status: 404, type: `${svc.baseUrl}/problems/not-found` });
    }
    const denied = await createOutboundClient({ baseUrl: svc.baseUrl, apiKey: key }).POST('/lists', { body: { name: 'x' } });
    expect(denied.response.status).toBe(403);
    expect(denied.error!.detail).toContain('lists.write');
  });

  it('types and calls the extension operations: editing, regenerating and deciding drafts in bulk', async () => {
    const org = await svc.newOrg();
    const api = sdk(await org.key());
    const missing = uid();
    const edit = await api.PATCH('/drafts/{id}', { params: { path: { id: `drf_${missing}` } }, body: { subject: 'New subject' } });
    expect(edit.response.status).toBe(404);
    const regen = await api.POST('/drafts/{id}/regenerate', {
      params: { path: { id: `drf_${missing}` } },
      body: { instructions: 'Shorter.' },
    });
    expect(regen.response.status).toBe(404);
    const batch = await api.POST('/drafts/batch/approve', {
      params: { header: idempotencyKey() },
      body: { items: [{ id: `drf_${missing}`, acknowledgeFlags: true }] },
    });
    expect(batch.data).toMatchObject({ succeeded: 0, failed: 1, results: [{ id: `drf_${missing}`, status: 404, result: null }] });
    const rejected = await api.POST('/drafts/batch/reject', { body: { items: [{ id: `drf_${missing}`, reason: 'Off topic.' }] } });
    expect(rejected.data!.failed).toBe(1);
    const page = await api.GET('/drafts', { params: { query: { listId: `lst_${missing}`, flagged: 'true' } } });
    expect(page.data!.data).toEqual([]);
  });

  it('refuses unusable arguments up front', () => {
    expect(() => createOutboundClient({ baseUrl: svc.baseUrl, apiKey: '' })).toThrow(TypeError);
    expect(() => createOutboundClient({ baseUrl: svc.baseUrl, apiKey: 'obk_live_x\r\nX-Evil: 1' })).toThrow(TypeError);
    expect(() => createOutboundClient({ baseUrl: 'not a url', apiKey: 'obk_live_x' })).toThrow();
    expect(() => idempotencyKey('')).toThrow(RangeError);
    expect(() => idempotencyKey('k'.repeat(256))).toThrow(RangeError);
    expect(() => verifyWebhook({ rawBody: '{}', header: 't=1,v1=00', secret: '' })).toThrow(TypeError);
    expect(() => verifyWebhook({ rawBody: '{}', header: 't=1,v1=00', secret: 'whs_x', toleranceSeconds: -1 })).toThrow(RangeError);
  });
});

describe('the package', () => {
  it('builds with its own tsconfig (declarations included) and its built entry point works under plain Node', () => {
    const out = path.resolve('test-output/sdk-dist');
    fs.rmSync(out, { recursive: true, force: true });
    execFileSync(path.resolve('node_modules/.bin/tsc'), ['-p', 'clients/typescript/tsconfig.json', '--outDir', out], { stdio: 'pipe' });
    for (const f of ['index.js', 'index.d.ts', 'openapi.d.ts']) expect(fs.existsSync(path.join(out, f)), f).toBe(true);
    const pkg = JSON.parse(fs.readFileSync('clients/typescript/package.json', 'utf8'));
    expect(pkg.exports['.']).toEqual({ types: './dist/index.d.ts', default: './dist/index.js' });
    expect(pkg.dependencies['openapi-fetch']).toBe(JSON.parse(fs.readFileSync('package.json', 'utf8')).devDependencies['openapi-fetch']);
    const secret = `whs_${'ab'.repeat(16)}`;
    const body = '{"id":"evt_1"}';
    const script = `import { createOutboundClient, verifyWebhook } from ${JSON.stringify(path.join(out, 'index.js'))};
const c = createOutboundClient({ baseUrl: 'http://127.0.0.1:1', apiKey: 'obk_live_x' });
console.log(typeof c.GET, verifyWebhook({ rawBody: ${JSON.stringify(body)}, header: process.argv[1], secret: ${JSON.stringify(secret)} }));`;
    const printed = execFileSync(process.execPath, ['--input-type=module', '-e', script, signatureHeader(secret, body)], {
      encoding: 'utf8',
    });
    expect(printed.trim()).toBe('function true');
  });
});
