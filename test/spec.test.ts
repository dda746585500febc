// Tests of the contract itself: the bundled public and operator documents.
import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PROBLEMS } from '../src/http/problems.js';
import { HTTP_METHODS } from '../src/platform/openapi-doc.js';
import { ALL_SCOPES, adminDoc, EVENT_TYPES, NEVER_EMITTED, publicDoc, publicOperations } from '../src/platform/spec.js';

const require = createRequire(import.meta.url);

// Every operation of the public API's contract (63 operations).
const SPEC_ENDPOINTS = `
GET /me
GET /contacts
POST /contacts
GET /contacts/{id}
PATCH /contacts/{id}
DELETE /contacts/{id}
POST /contacts/{id}/erase
GET /contacts/{id}/research
POST /contacts/{id}/research
POST /contacts/{id}/pause-sequence
GET /companies
POST /companies
GET /companies/{id}
GET /companies/{id}/research
POST /companies/{id}/research
GET /lists
POST /lists
GET /lists/{id}
DELETE /lists/{id}
POST /lists/{id}/generate
GET /drafts
GET /drafts/{id}
POST /drafts/{id}/approve
POST /drafts/{id}/reject
POST /drafts/{id}/send
GET /sequences
POST /sequences
GET /sequences/{id}
GET /deal-stages
GET /deals
POST /deals
GET /deals/{id}
PATCH /deals/{id}
POST /deals/{id}/stage
POST /deals/{id}/activities
GET /deals/{id}/history
GET /leads
POST /leads/{id}/convert
POST /leads/{id}/spam
GET /action-items
GET /action-items/{id}
POST /action-items/{id}/{verb}
POST /actions
GET /messages
GET /suppression
POST /suppression
DELETE /suppression
GET /webhooks
POST /webhooks
GET /webhooks/{id}
PATCH /webhooks/{id}
DELETE /webhooks/{id}
POST /webhooks/{id}/test-deliver
GET /webhooks/{id}/deliveries
GET /webhooks/{id}/deliveries/{deliveryId}
POST /webhooks/{id}/deliveries/{deliveryId}/replay
POST /webhooks/{id}/rotate-secret
GET /webhooks/events
GET /events
GET /usage
GET /analytics/funnel
GET /analytics/lift
GET /public-templates
`
  .trim()
  .split('\n');

// Section 5 rule 5: the scope of each resource group (by tag).
const TAG_SCOPES: Record<string, string[]> = {
  contacts: ['contacts.read', 'contacts.write', 'contacts.erase', 'sequences.write'],
  companies: ['deals.read', 'deals.write'],
  lists: ['lists.read', 'lists.write'],
  drafts: ['drafts.read', 'drafts.write', 'drafts.send'],
  sequences: ['sequences.read', 'sequences.write'],
  deals: ['deals.read', 'deals.write'],
  leads: ['contacts.read', 'contacts.write'],
  'action-items': ['actions.read', 'contacts.write'],
  messages: ['drafts.read'],
  suppression: ['suppression.write'],
  webhooks: ['webhooks.manage'],
  events: ['events.read'],
  usage: ['events.read'],
  analytics: ['analytics.read'],
};

type Op = Record<string, unknown>;
const resolve = (doc: object, v: unknown): Op => {
  let x = v as Op;
  while (x && typeof x.$ref === 'string') {
    x = (x.$ref as string)
      .slice(2)
      .split('/')
      .reduce<unknown>((o, k) => (o as Op)[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc) as Op;
  }
  return x;
};

describe('public OpenAPI document', () => {
  const ops = [...publicOperations.values()];

  it('is OpenAPI 3.1.0, version 1.0.0, served under a concrete URL ending in /api/v1 (no variable)', () => {
    expect(publicDoc.openapi).toBe('3.1.0');
    expect((publicDoc.info as Op).version).toBe('1.0.0');
    expect(publicDoc.servers).toEqual([{ url: 'http://localhost:3000/api/v1', 'x-internal': false, description: expect.any(String) }]);
  });

  it('has exactly the 63 operations of the spec, with unique camelCase operationIds; every other one is marked x-extension', () => {
    const extension = (o: (typeof ops)[number]) =>
      (resolve(publicDoc, publicDoc.paths[o.path] as Op)[o.method] as Op)['x-extension'] === true;
    const product = ops.filter((o) => !extension(o));
    expect(product).toHaveLength(63);
    const ids = ops.map((o) => o.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^[a-z][a-zA-Z0-9]+$/);
    const described = product.map((o) => `${o.method.toUpperCase()} ${o.path}`).sort();
    expect(described).toEqual([...SPEC_ENDPOINTS].sort());
  });

  it('gives every operation one tag, a summary, a description and a scope declaration', () => {
    for (const op of ops) {
      const raw = resolve(publicDoc, publicDoc.paths[op.path] as Op)[op.method] as Op;
      expect(raw.tags, op.operationId).toHaveLength(1);
      expect(typeof raw.summary, op.operationId).toBe('string');
      expect(String(raw.description ?? '').length, op.operationId).toBeGreaterThan(20);
      expect(op.requiredScope, op.operationId).not.toBeNull();
      const scope = op.requiredScope as string;
      if (op.path === '/me') expect(scope).toBe('none');
      else if (op.path === '/actions') expect(scope).toBe('per-action');
      else if (op.path === '/public-templates') {
        expect(scope).toBe('public');
        expect(raw.security).toEqual([]);
      } else {
        expect(ALL_SCOPES as readonly string[]).toContain(scope);
        expect(TAG_SCOPES[op.tag!], op.operationId).toContain(scope);
      }
    }
  });

  it('uses the Problem schema (application/problem+json) for every 4xx and 5xx response', () => {
    for (const op of ops) {
      const raw = resolve(publicDoc, publicDoc.paths[op.path] as Op)[op.method] as Op;
      for (const [status, r] of Object.entries(raw.responses as Op)) {
        if (!/^[45]/.test(status)) continue;
        const res = resolve(publicDoc, r);
        const schema = ((res.content as Op)?.['application/problem+json'] as Op)?.schema as Op;
        expect(schema?.$ref, `${op.operationId} ${status}`).toBe('#/components/schemas/Problem');
      }
      if (op.requiredScope !== 'public') {
        for (const s of ['401', '403', '429', '500']) expect(op.responseStatuses, `${op.operationId} lacks ${s}`).toContain(s);
      }
    }
  });

  it('gives every list operation cursor, limit (1..200, default 50) and the {data, nextCursor} envelope', () => {
    const lists = ops.filter((o) => o.parameters.some((p) => p.name === 'cursor'));
    expect(lists.length).toBeGreaterThanOrEqual(15);
    for (const op of lists) {
      const limit = op.parameters.find((p) => p.name === 'limit' && p.in === 'query');
      expect(limit?.schema, op.operationId).toMatchObject({ minimum: 1, maximum: 200, default: 50 });
      const ok = resolve(publicDoc, ((resolve(publicDoc, publicDoc.paths[op.path] as Op)[op.method] as Op).responses as Op)['200']);
      const schema = resolve(publicDoc, ((ok.content as Op)['application/json'] as Op).schema);
      const variants = (schema.oneOf as Op[] | undefined)?.map((s) => resolve(publicDoc, s)) ?? [schema];
      const pageShape = variants.find((v) => (v.required as string[] | undefined)?.includes('nextCursor'));
      expect(pageShape, op.operationId).toBeDefined();
      expect(pageShape!.required).toEqual(expect.arrayContaining(['data', 'nextCursor']));
      expect(resolve(publicDoc, (pageShape!.properties as Op).data).type).toBe('array');
    }
    // Every GET of a collection named in the spec as cursor-paginated is among them.
    for (const id of [
      'listContacts',
      'listCompanies',
      'listLists',
      'listDrafts',
      'listSequences',
      'listDeals',
      'listDealHistory',
      'listLeads',
      'listActionItems',
      'listMessages',
      'getSuppression',
      'listWebhooks',
      'listWebhookDeliveries',
      'listEvents',
    ]) {
      expect(lists.map((o) => o.operationId)).toContain(id);
    }
  });

  it('declares the response headers of the spec', () => {
    const text = JSON.stringify(publicDoc);
    for (const h of [
      'X-RateLimit-Limit',
      'X-RateLimit-Reset',
      'X-RateLimit-Remaining',
      'Retry-After',
      'X-Service-Existing-List',
      'X-Service-Cache',
      'X-Service-Analytics-Max-Window-Days',
    ]) {
      expect(text).toContain(`"${h}"`);
    }
  });

  it('catalogues the 73 event types (56 emitted, 17 never emitted) and documents signed deliveries', () => {
    expect(EVENT_TYPES).toHaveLength(73);
    expect(NEVER_EMITTED.size).toBe(17);
    const hook = (publicDoc.webhooks as Op).platformEvent as Op;
    const post = hook.post as Op;
    expect(JSON.stringify(post)).toContain('X-Outbound-Signature');
  });

  it('documents exactly the problem slugs the service answers', () => {
    const problem = (publicDoc.components!.schemas as Op).Problem as Op;
    const documented = problem['x-problem-types'] as Record<string, { status: number; title: string; retry: string }>;
    expect(Object.keys(documented).sort()).toEqual(Object.keys(PROBLEMS).sort());
    for (const [slug, p] of Object.entries(PROBLEMS))
      expect(documented[slug], slug).toEqual({ status: p.status, title: p.title, retry: p.retry });
  });

  it('states the address check as a pattern on every email: EmailAddress accepts exactly what the validators accept', () => {
    const { fullFormats } = require('ajv-formats/dist/formats') as { fullFormats: { email: RegExp } };
    const schemas = [publicDoc, adminDoc].map((d) => (d.components!.schemas as Op).EmailAddress as Op);
    for (const email of schemas)
      expect(email).toMatchObject({ type: 'string', format: 'email', maxLength: 320, pattern: expect.any(String) });
    const pattern = new RegExp(schemas[0].pattern as string, 'u');
    const probes = [
      ...fc.sample(fc.emailAddress(), 500),
      ...fc.sample(
        fc.string({ unit: 'binary-ascii', maxLength: 10 }).map((s) => `${s}@example.com`),
        2000,
      ),
      ...fc.sample(
        fc.string({ maxLength: 10 }).map((s) => `a@${s}.com`),
        2000,
      ),
      'a@localhost',
      '"a b"@example.com',
      'a@[127.0.0.1]',
      'é@example.com',
      'a..b@example.com',
      ' a@example.com',
    ];
    for (const p of probes) expect([p, pattern.test(p)]).toEqual([p, fullFormats.email.test(p)]);
    // No email in either document is left with `format: email` alone.
    const loose: string[] = [];
    const walk = (v: unknown, at: string) => {
      if (Array.isArray(v)) {
        for (const [i, x] of v.entries()) walk(x, `${at}/${i}`);
      } else if (v && typeof v === 'object') {
        const o = v as Op;
        if (o.format === 'email' && o.pattern === undefined) loose.push(at);
        for (const [k, x] of Object.entries(o)) walk(x, `${at}/${k}`);
      }
    };
    walk(publicDoc, '#');
    walk(adminDoc, 'admin#');
    expect(loose).toEqual([]);
  });

  it('uses no OpenAPI 3.0 nullable keyword', () => {
    expect(JSON.stringify(publicDoc)).not.toContain('"nullable"');
    expect(JSON.stringify(adminDoc)).not.toContain('"nullable"');
  });
});

describe('operator OpenAPI document', () => {
  it('describes every operator row of the operator API', () => {
    const rows = [
      'post /organizations',
      'patch /organizations/{orgId}',
      'post /organizations/{orgId}/users',
      'post /organizations/{orgId}/api-keys',
      'delete /api-keys/{keyId}',
      'post /organizations/{orgId}/products',
      'post /organizations/{orgId}/sequence-templates',
      'post /public-templates',
      'patch /organizations/{orgId}/lists/{listId}',
      'post /organizations/{orgId}/suppression-domains',
      'post /organizations/{orgId}/inbound-leads',
      'post /organizations/{orgId}/inbound-messages',
      'post /organizations/{orgId}/action-items',
      'get /outbox',
      'get /queue',
      // Rows added with sending and inbound.
      'patch /settings',
      'post /organizations/{orgId}/mailboxes',
      'get /send-queue',
      'post /organizations/{orgId}/lead-forms',
    ];
    // Operator rows beyond the original ones: reading back what the rows above set.
    const ours = ['get /settings', 'get /organizations/{orgId}/mailboxes', 'patch /organizations/{orgId}/mailboxes/{mailboxId}'];
    // Custom rules.
    ours.push(
      'get /organizations/{orgId}/rule-templates',
      'get /organizations/{orgId}/rules',
      'post /organizations/{orgId}/rules',
      'get /organizations/{orgId}/rules/{ruleId}',
      'patch /organizations/{orgId}/rules/{ruleId}',
      'delete /organizations/{orgId}/rules/{ruleId}',
    );
    // Rows added with the event catalogue: the team lifecycle and organization health; contacts and lists.
    ours.push(
      'get /organizations/{orgId}/users',
      'post /organizations/{orgId}/users/{userId}/activate',
      'delete /organizations/{orgId}/users/{userId}',
      'get /organizations/{orgId}/health',
    );
    ours.push('post /organizations/{orgId}/contacts/{contactId}/restore', 'post /organizations/{orgId}/lists/{listId}/import');
    // The sender's signature: a person's name and title.
    ours.push('patch /organizations/{orgId}/users/{userId}');
    // A possibly sent step resolved by the operator.
    ours.push('post /organizations/{orgId}/send-queue/{queueId}/resolve');
    const described: string[] = [];
    for (const [p, item] of Object.entries(adminDoc.paths)) {
      const it2 = resolve(adminDoc, item);
      for (const m of HTTP_METHODS) if (it2[m]) described.push(`${m} ${p}`);
    }
    expect(described.sort()).toEqual([...rows, ...ours].sort());
    expect(adminDoc.openapi).toBe('3.1.0');
  });
});
