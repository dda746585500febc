// Lead capture over real HTTP: the public form endpoint (JSON, form-encoded, multipart and
// text/plain bodies, CORS, honeypot, per-IP rate limit, size limits, dedupe) and the operator rows
// that create forms and capture leads through the same path.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withSystem } from '../db/database.js';
import { isAddress } from '../src/leads/endpoint.js';
import { fitOf, intentOf, parseCompanySize } from '../src/leads/scoring.js';
import { clientIp, rateKeyOf } from '../src/net/client-ip.js';
import { eventsOf, uid } from './crm-support.js';
import { backdate, businessEmail, leadRow, leadRows, mkForm, mkLead } from './lead-support.js';
import { ALL_SCOPES, startService, type TestService } from './support/harness.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: Record<string, unknown> | undefined;
}

/** POSTs to a capture URL with a raw body; no API key. */
async function submit(
  url: string,
  body: string | FormData | undefined,
  headers: Record<string, string> = {},
  method = 'POST',
): Promise<Answer> {
  const res = await fetch(url, { method, body, headers });
  const text = await res.text();
  let json: Record<string, unknown> | undefined;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, body: json };
}
const json = (url: string, fields: unknown, headers: Record<string, string> = {}) =>
  submit(url, JSON.stringify(fields), { 'content-type': 'application/json', ...headers });
const form = (url: string, fields: Record<string, string> | string, headers: Record<string, string> = {}) =>
  submit(url, typeof fields === 'string' ? fields : new URLSearchParams(fields).toString(), {
    'content-type': 'application/x-www-form-urlencoded',
    ...headers,
  });

async function setup(formName = 'website-demo') {
  const org = await svc.newOrg();
  const f = await mkForm(svc, org.id, formName);
  return { org, form: f, url: f.captureUrl };
}

function expectProblem(a: Answer, status: number, slug: string) {
  expect(a.status, a.text).toBe(status);
  expect(a.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(a.body).toMatchObject({ type: `${svc.baseUrl}/problems/${slug}`, status });
  expect(a.headers.get('access-control-allow-origin')).toBe('*');
}

function expectReceived(a: Answer) {
  expect(a.status, a.text).toBe(201);
  expect(a.body).toEqual({ status: 'received' });
  expect(a.headers.get('access-control-allow-origin')).toBe('*');
  expect(a.headers.get('x-request-id')).toBeTruthy();
}

describe('POST /admin/api/organizations/{orgId}/lead-forms', () => {
  it('creates a form with a random key and its capture URL; 404 for an unknown organization; 400 for a bad body', async () => {
    const org = await svc.newOrg();
    const a = await mkForm(svc, org.id, 'pricing-page');
    const b = await mkForm(svc, org.id, 'pricing-page');
    expect(a.formKey).toMatch(/^lf_[A-Za-z0-9_-]{32}$/);
    expect(b.formKey).not.toBe(a.formKey);
    expect(a.captureUrl).toBe(`${svc.baseUrl}/capture/${a.formKey}`);
    const row = await withSystem(svc.ownerDb, (trx) =>
      trx.selectFrom('lead_forms').selectAll().where('id', '=', a.id).executeTakeFirstOrThrow(),
    );
    expect(row).toMatchObject({ organization_id: org.id, name: 'pricing-page', form_key: a.formKey });

    const unknown = await svc.admin.POST('/organizations/{orgId}/lead-forms', {
      params: { path: { orgId: 'org_nope' } },
      body: { name: 'x' },
    });
    expect(unknown.response.status).toBe(404);
    for (const body of [{}, { name: '' }, { name: 'x'.repeat(101) }, { name: 'x', extra: 1 }]) {
      const r = await svc.admin.POST('/organizations/{orgId}/lead-forms', { params: { path: { orgId: org.id } }, body: body as never });
      expect(r.response.status, JSON.stringify(body)).toBe(400);
    }
  });
});

describe('POST /capture/{formKey}', () => {
  it('captures a JSON submission: 201 {status: received}, the lead with its scores, snapshot, payload and hashed IP, one event', async () => {
    const { org, form: f, url } = await setup('website-demo');
    const email = businessEmail('ada');
    const fields = {
      email: `  ${email.toUpperCase()} `,
      name: 'Ada Lovelace',
      company: 'Analytical Engines',
      title: 'VP of Sales',
      companySize: '51-200',
      message: 'Could we get a demo and pricing next week?',
      utm_campaign: 'spring',
    };
    const a = await json(url, fields, { origin: 'https://www.customer-site.example' });
    expectReceived(a);
    expect(a.headers.get('cache-control')).toBe('no-store');

    const [lead] = await leadRows(svc, org.id);
    expect(lead).toMatchObject({
      form_id: f.id,
      email: email.toUpperCase(),
      email_normalized: email,
      name: 'Ada Lovelace',
      company_name: 'Analytical Engines',
      source: 'website-demo',
      status: 'NEW',
      fit_score: 85,
      intent_confidence: 0.9,
      submissions: 1,
      contact_id: null,
      deal_id: null,
    });
    // The raw fields are the payload; the IP is stored only as its keyed hash.
    expect(lead.payload).toEqual(fields);
    expect(lead.ip_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(lead.ip_hash).toBe(svc.rt.services.ipHash('127.0.0.1'));
    expect(JSON.stringify(lead)).not.toContain('127.0.0.1');
    expect(lead.qual_snapshot).toMatchObject({
      version: 1,
      via: 'form',
      submissions: 1,
      fit: {
        score: 85,
        source: 'computed',
        points: { base: 20, businessDomain: 30, seniority: 25, companySize: 10 },
        inputs: { seniority: 'vp', companySize: 51, businessDomain: true },
      },
      intent: { score: 0.9, source: 'computed', rule: 'buying_urgent' },
    });

    const events = await eventsOf(svc, org.id, 'inbound.lead_received');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      resource_type: 'InboundLead',
      resource_id: lead.id,
      data: { leadId: lead.id, formId: f.id, source: 'website-demo', status: 'NEW', fitScore: 85, intentConfidence: 0.9 },
    });
    expect(JSON.stringify(events[0].data)).not.toContain(email);

    // Listed by the public API without the payload, hash or snapshot.
    const key = await org.key(['contacts.read']);
    const list = await svc.api(key).GET('/leads');
    expect(list.data!.data).toEqual([
      expect.objectContaining({ id: lead.id, email: email.toUpperCase(), status: 'NEW', fitScore: 85, intentConfidence: 0.9 }),
    ]);
  });

  it('captures a form-encoded submission from an HTML form (first and last name, repeated fields) and answers a browser with a page', async () => {
    const { org, url } = await setup();
    const email = `${uid('bo')}@gmail.com`;
    const a = await form(url, `email=${encodeURIComponent(email)}&firstName=Bo&lastName=Ek&interest=crm&interest=api&_gotcha=`, {
      accept: 'text/html,application/xhtml+xml,*/*;q=0.8',
    });
    expect(a.status, a.text).toBe(201);
    expect(a.headers.get('content-type')).toMatch(/^text\/html/);
    expect(a.text).toContain('Thank you');
    expect(a.headers.get('access-control-allow-origin')).toBe('*');
    const [lead] = await leadRows(svc, org.id);
    // A free mail address, no title, no message: fit 20, neutral intent.
    expect(lead).toMatchObject({ email, name: 'Bo Ek', company_name: null, fit_score: 20, intent_confidence: 0.5 });
    expect(lead.payload).toEqual({ email, firstName: 'Bo', lastName: 'Ek', interest: 'crm, api' });
  });

  it('captures multipart/form-data and JSON sent as text/plain (a fetch without preflight)', async () => {
    const { org, url } = await setup();
    const fd = new FormData();
    const first = businessEmail('mp');
    fd.set('email', first);
    fd.set('name', 'Multi Part');
    fd.set('attachment', new Blob(['%PDF-1.4 ...'], { type: 'application/pdf' }), 'deck.pdf');
    expectReceived(await submit(url, fd));
    const second = businessEmail('tp');
    expectReceived(
      await submit(url, JSON.stringify({ email: second, message: 'Interested in learning more' }), {
        'content-type': 'text/plain;charset=UTF-8',
      }),
    );
    const rows = await leadRows(svc, org.id);
    expect(rows.map((r) => r.email).sort()).toEqual([first, second].sort());
    // Uploaded files are not part of a lead.
    expect(rows.find((r) => r.email === first)!.payload).toEqual({ email: first, name: 'Multi Part' });
    expect(rows.find((r) => r.email === second)!.intent_confidence).toBe(0.6);
  });

  it('answers the CORS preflight for any origin, also for a key it does not know', async () => {
    const { url } = await setup();
    for (const target of [url, `${svc.baseUrl}/capture/lf_${'x'.repeat(32)}`]) {
      const res = await fetch(target, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://anywhere.example',
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type',
        },
      });
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(res.headers.get('access-control-allow-methods')).toContain('POST');
      expect(res.headers.get('access-control-allow-headers')).toBe('content-type');
      expect(Number(res.headers.get('access-control-max-age'))).toBeGreaterThan(0);
    }
  });

  it('answers a filled honeypot exactly like a success but stores nothing and emits nothing', async () => {
    const { org, url } = await setup();
    const real = await json(url, { email: businessEmail(), name: 'Real Person' });
    const trapped = await json(url, { email: businessEmail(), name: 'Bot', _gotcha: 'http://spam.example' });
    expectReceived(trapped);
    expect(trapped.body).toEqual(real.body);
    // Even with an invalid address: the bot learns nothing.
    expectReceived(await form(url, { email: 'not-an-address', _gotcha: 'x' }));
    const rows = await leadRows(svc, org.id);
    expect(rows.map((r) => r.name)).toEqual(['Real Person']);
    expect(await eventsOf(svc, org.id, 'inbound.lead_received')).toHaveLength(1);
  });

  it('limits submissions per source address to 20 per 10 minutes with 429 and Retry-After; other organizations are not affected', async () => {
    const { org, url } = await setup();
    const other = await setup();
    for (let i = 0; i < 20; i += 1) {
      // X-Forwarded-For is not trusted without TRUST_PROXY: changing it does not help.
      expectReceived(await json(url, { email: businessEmail() }, { 'x-forwarded-for': `203.0.113.${i}` }));
    }
    const refused = await json(url, { email: businessEmail() }, { 'x-forwarded-for': '198.51.100.7' });
    expectProblem(refused, 429, 'capture-rate-limited');
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(600);
    // A refused honeypot submission is still refused (it is counted before the body is read).
    expectProblem(await json(url, { email: businessEmail(), _gotcha: 'x' }), 429, 'capture-rate-limited');
    expect(await leadRows(svc, org.id)).toHaveLength(20);
    expectReceived(await json(other.url, { email: businessEmail() }));

    // Only the keyed hash of the address is stored.
    const windows = await withSystem(svc.ownerDb, (trx) =>
      trx.selectFrom('lead_capture_windows').selectAll().where('organization_id', '=', org.id).execute(),
    );
    expect(windows).toHaveLength(1);
    expect(windows[0]).toMatchObject({ ip_hash: svc.rt.services.ipHash('127.0.0.1'), count: 22 });
    expect(windows[0].ip_hash).not.toContain('127.0.0.1');
  });

  it('refuses oversized bodies (413), too many or too long fields (400), other media types (415) and malformed bodies (400); nothing stored', async () => {
    const { org, url } = await setup();
    const email = businessEmail();
    expectProblem(await json(url, { email, message: 'x'.repeat(40 * 1024) }), 413, 'payload-too-large');
    expectProblem(await json(url, { email, message: 'x'.repeat(5001) }), 400, 'validation-failed');
    expectProblem(await json(url, { email, name: 'n'.repeat(201) }), 400, 'validation-failed');
    expectProblem(await json(url, { email, [`k${'x'.repeat(100)}`]: 'v' }), 400, 'validation-failed');
    expectProblem(
      await json(url, Object.fromEntries([['email', email], ...Array.from({ length: 50 }, (_, i) => [`f${i}`, 'v'])])),
      400,
      'validation-failed',
    );
    expectProblem(await json(url, { email, nested: { a: 1 } }), 400, 'validation-failed');
    expectProblem(await json(url, [email]), 400, 'validation-failed');
    expectProblem(await json(url, { email, message: 'nul \u0000 here' }), 400, 'validation-failed');
    expectProblem(await submit(url, '{"email": ', { 'content-type': 'application/json' }), 400, 'malformed-json');
    // A lone surrogate cannot be stored as JSON text by Postgres: refused, not a 500.
    expectProblem(
      await submit(url, `{"email": "${email}", "message": "\\ud800"}`, { 'content-type': 'application/json' }),
      400,
      'validation-failed',
    );
    expectProblem(
      await submit(url, `<lead><email>${email}</email></lead>`, { 'content-type': 'application/xml' }),
      415,
      'unsupported-media-type',
    );
    expectProblem(await submit(url, '--b\r\nbroken', { 'content-type': 'multipart/form-data; boundary=zzz' }), 400, 'validation-failed');
    expect(await leadRows(svc, org.id)).toHaveLength(0);
    expect(await eventsOf(svc, org.id, 'inbound.lead_received')).toHaveLength(0);
  });

  it('answers 400 validation-failed naming email for a missing or invalid address', async () => {
    const { org, url } = await setup();
    for (const fields of [
      {},
      { name: 'No Address' },
      { email: '' },
      { email: 'not-an-address' },
      { email: 'a@b' },
      { email: 'two words@x.example.com' },
      { email: 42 },
      { email: `${'x'.repeat(65)}@x.example.com` },
    ]) {
      const a = await json(url, fields);
      expectProblem(a, 400, 'validation-failed');
      expect((a.body!.errors as Array<{ field: string }>)[0].field, JSON.stringify(fields)).toBe('email');
    }
    expectProblem(await submit(url, '', { 'content-type': 'application/json' }), 400, 'validation-failed');
    expectProblem(await submit(url, undefined), 400, 'validation-failed');
    // A browser gets the refusal as a page.
    const page = await form(url, { email: 'nope' }, { accept: 'text/html' });
    expect(page.status).toBe(400);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.text).toContain('email');
    expect(await leadRows(svc, org.id)).toHaveLength(0);
  });

  it('answers 404 for an unknown or malformed form key and 405 for another method', async () => {
    const { org } = await setup();
    const body = { email: businessEmail() };
    expectProblem(await json(`${svc.baseUrl}/capture/lf_${'A'.repeat(32)}`, body), 404, 'not-found');
    expectProblem(await json(`${svc.baseUrl}/capture/not-a-key`, body), 404, 'not-found');
    expectProblem(await json(`${svc.baseUrl}/capture/${'%00'.repeat(3)}`, body), 404, 'not-found');
    const get = await submit(`${svc.baseUrl}/capture/lf_${'A'.repeat(32)}`, undefined, {}, 'GET');
    expectProblem(get, 405, 'method-not-allowed');
    expect(get.headers.get('allow')).toBe('POST, OPTIONS');
    expect(await leadRows(svc, org.id)).toHaveLength(0);
  });

  it('lands a repeat of the address within 7 days on the open lead: submissions + 1, payload merged, scores raised, no second event', async () => {
    const { org, url } = await setup();
    const email = businessEmail('rep');
    expectReceived(await json(url, { email, company: 'First Co', message: 'hello', page: 'pricing' }));
    const [first] = await leadRows(svc, org.id);
    expect(first.fit_score).toBe(50);
    expectReceived(await form(url, { email: email.toUpperCase(), name: 'Later Name', company: 'Second Co', title: 'CEO', page: 'demo' }));
    const rows = await leadRows(svc, org.id);
    expect(rows).toHaveLength(1);
    const lead = rows[0];
    expect(lead).toMatchObject({
      id: first.id,
      submissions: 2,
      name: 'Later Name',
      company_name: 'First Co',
      fit_score: 80,
      intent_confidence: 0.5,
    });
    expect(lead.email).toBe(email);
    expect(lead.captured_at).toEqual(first.captured_at);
    expect(lead.last_submitted_at.getTime()).toBeGreaterThanOrEqual(first.last_submitted_at.getTime());
    expect(lead.payload).toEqual({
      email: email.toUpperCase(),
      company: 'Second Co',
      message: 'hello',
      page: 'demo',
      name: 'Later Name',
      title: 'CEO',
    });
    expect(lead.qual_snapshot).toMatchObject({ submissions: 2, lastSubmission: { via: 'form', fit: { score: 80 } } });
    expect(await eventsOf(svc, org.id, 'inbound.lead_received')).toHaveLength(1);

    // A lead marked spam stays spam when the address comes back.
    const spamKey = await org.key(ALL_SCOPES);
    expect((await svc.api(spamKey).POST('/leads/{id}/spam', { params: { path: { id: lead.id } } })).response.status).toBe(200);
    expectReceived(await json(url, { email }));
    expect(await leadRow(svc, org.id, lead.id)).toMatchObject({ status: 'SPAM', submissions: 3 });

    // Past the window the address makes a new lead (and a second event).
    await backdate(svc, org.id, lead.id, 7 * 24 * 60 + 1);
    expectReceived(await json(url, { email }));
    expect(await leadRows(svc, org.id)).toHaveLength(2);
    expect(await eventsOf(svc, org.id, 'inbound.lead_received')).toHaveLength(2);
  });

  it('makes one lead of simultaneous submissions of one address', async () => {
    const { org, url } = await setup();
    const email = businessEmail('burst');
    const answers = await Promise.all(Array.from({ length: 6 }, () => json(url, { email })));
    for (const a of answers) expectReceived(a);
    const rows = await leadRows(svc, org.id);
    expect(rows).toHaveLength(1);
    expect(rows[0].submissions).toBe(6);
    expect(await eventsOf(svc, org.id, 'inbound.lead_received')).toHaveLength(1);
  });
});

describe('behind a trusted proxy (TRUST_PROXY=true)', () => {
  let proxied: TestService;
  beforeAll(async () => {
    proxied = await startService({ TRUST_PROXY: 'true', LEAD_CAPTURE_RATE_LIMIT: '2' });
  });
  afterAll(async () => {
    await proxied?.close();
  });

  it('counts and hashes the last X-Forwarded-For address, so clients behind the proxy have their own windows', async () => {
    const org = await proxied.newOrg();
    const f = await mkForm(proxied, org.id);
    const send = (xff: string) =>
      fetch(f.captureUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': xff },
        body: JSON.stringify({ email: businessEmail() }),
      });
    // The first entries are the client's to forge; the proxy appended the last one.
    expect((await send('1.1.1.1, 198.51.100.1')).status).toBe(201);
    expect((await send('9.9.9.9, 198.51.100.1')).status).toBe(201);
    const third = await send('198.51.100.1');
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toMatch(/^\d+$/);
    expect((await send('198.51.100.2')).status).toBe(201);
    const rows = await leadRows(proxied, org.id);
    expect(rows.map((r) => r.ip_hash).sort()).toEqual(
      [
        proxied.rt.services.ipHash('198.51.100.1'),
        proxied.rt.services.ipHash('198.51.100.1'),
        proxied.rt.services.ipHash('198.51.100.2'),
      ].sort(),
    );
  });
});

describe('POST /admin/api/organizations/{orgId}/inbound-leads', () => {
  it('captures through the same path: scores given or computed, one event, dedupe with form submissions; 404 unknown organization; 400 oversized payload', async () => {
    const org = await svc.newOrg();
    const email = businessEmail('op');
    const id = await mkLead(svc, org.id, {
      email,
      fitScore: 85,
      payload: { form: 'demo-request', message: 'We would like a demo next week' },
    });
    expect(await leadRow(svc, org.id, id)).toMatchObject({
      email,
      source: 'website',
      status: 'NEW',
      fit_score: 85,
      intent_confidence: 0.9,
      ip_hash: null,
      form_id: null,
      payload: { form: 'demo-request', message: 'We would like a demo next week' },
      qual_snapshot: { via: 'operator', fit: { score: 85, source: 'given' }, intent: { score: 0.9, source: 'computed' } },
    });
    const given = await mkLead(svc, org.id, { intentConfidence: 0.2, payload: {} });
    expect(await leadRow(svc, org.id, given)).toMatchObject({ fit_score: 50, intent_confidence: 0.2 });

    // The same address through a form lands on the operator's lead.
    const f = await mkForm(svc, org.id);
    expectReceived(await json(f.captureUrl, { email }));
    expect(await leadRow(svc, org.id, id)).toMatchObject({ submissions: 2 });
    // And the operator row answers the existing lead's id for a repeat.
    expect(await mkLead(svc, org.id, { email: email.toUpperCase() })).toBe(id);
    expect((await eventsOf(svc, org.id, 'inbound.lead_received')).map((e) => e.resource_id).sort()).toEqual([id, given].sort());

    const unknown = await svc.admin.POST('/organizations/{orgId}/inbound-leads', {
      params: { path: { orgId: 'org_nope' } },
      body: { email: businessEmail() },
    });
    expect(unknown.response.status).toBe(404);
    const big = await svc.admin.POST('/organizations/{orgId}/inbound-leads', {
      params: { path: { orgId: org.id } },
      body: { email: businessEmail(), payload: { blob: 'x'.repeat(40_000) } },
    });
    expect(big.response.status).toBe(400);
    for (const body of [
      {},
      { email: 'nope' },
      { email: businessEmail(), fitScore: 101 },
      { email: businessEmail(), intentConfidence: 2 },
      { email: businessEmail(), extra: 1 },
    ]) {
      const r = await svc.admin.POST('/organizations/{orgId}/inbound-leads', { params: { path: { orgId: org.id } }, body: body as never });
      expect(r.response.status, JSON.stringify(body)).toBe(400);
    }
    expect(await leadRows(svc, org.id)).toHaveLength(2);
  });
});

describe('scoring and addresses (pure rules)', () => {
  it('scores fit from the domain, the seniority of the title and the company size', () => {
    expect(fitOf({ email: 'a@gmail.com', title: null, companySize: null, message: null }).score).toBe(20);
    expect(fitOf({ email: 'a@acme.example.com', title: null, companySize: null, message: null }).score).toBe(50);
    expect(fitOf({ email: 'a@acme.example.com', title: 'Engineering Manager', companySize: null, message: null }).score).toBe(60);
    expect(fitOf({ email: 'a@acme.example.com', title: 'Chief Revenue Officer', companySize: 5000, message: null }).score).toBe(100);
    expect(fitOf({ email: 'a@mailinator.com', title: 'Director of IT', companySize: 10, message: null }).score).toBe(45);
    expect(parseCompanySize('1,000+')).toBe(1000);
    expect(parseCompanySize('11-50')).toBe(11);
    expect(parseCompanySize('many')).toBeNull();
  });

  it('reads intent from the message: not buying, buying (urgent), interest, neutral', () => {
    expect(intentOf('I would like to apply for the job of engineer, see my resume').score).toBe(0.1);
    expect(intentOf('We offer SEO services and backlinks').score).toBe(0.1);
    expect(intentOf('Can we see a demo?').score).toBe(0.8);
    expect(intentOf('Pricing for 50 seats, we need it this week').score).toBe(0.9);
    expect(intentOf('We are evaluating tools').score).toBe(0.6);
    expect(intentOf('Hello there').score).toBe(0.5);
    expect(intentOf(null)).toMatchObject({ score: 0.5, rule: 'none' });
  });

  it('takes the client address from the socket unless a trusted proxy names it, and counts IPv6 by /64', () => {
    expect(clientIp('10.0.0.1', '1.2.3.4', false)).toBe('10.0.0.1');
    expect(clientIp('10.0.0.1', '1.2.3.4, 5.6.7.8', true)).toBe('5.6.7.8');
    expect(clientIp('10.0.0.1', '[2001:db8::1]:443', true)).toBe('2001:db8::1');
    expect(clientIp('10.0.0.1', 'garbage', true)).toBe('10.0.0.1');
    expect(rateKeyOf('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(rateKeyOf('2001:db8:1:2:aaaa::1')).toBe(rateKeyOf('2001:db8:1:2:bbbb:cccc:dddd:eeee'));
    expect(rateKeyOf('2001:db8:1:2::1')).not.toBe(rateKeyOf('2001:db8:1:3::1'));
    expect(isAddress('ada@acme.example.com')).toBe(true);
    expect(isAddress('ada+tag@münchen.de')).toBe(true);
    expect(isAddress('ada@localhost')).toBe(false);
    expect(isAddress('ada@acme.example.com/path')).toBe(false);
  });
});
