// The reference pages in a real browser: Debian's Chromium, headless, driven by playwright-core,
// opens /docs and /admin/docs from a real service, waits for Swagger UI to render, and checks that
// every operation of each document is listed, that the console shows no error (a CSP violation
// would be one), and that no request left the loopback host. Screenshots go to test-output/.
import fs from 'node:fs';
import path from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ASSET_BASE } from '../src/http/docs.js';
import { PROBLEMS } from '../src/http/problems.js';
import { adminDoc, adminOperations, publicDoc, publicOperations } from '../src/platform/spec.js';
import { raw, startService, type TestService } from './support/harness.js';

const CHROMIUM = '/usr/bin/chromium';
const OUT = path.resolve('test-output');
let svc: TestService;
let browser: Browser;

beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`Chromium is not installed at ${CHROMIUM}: apt-get install -y chromium (.ci/run does it)`);
  fs.mkdirSync(OUT, { recursive: true });
  [svc, browser] = await Promise.all([
    startService(),
    chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] }),
  ]);
});
afterAll(async () => {
  await browser?.close();
  await svc?.close();
});

/** What a page must list: every operation of the document, and its webhooks (the delivery it makes). */
function listed(doc: typeof publicDoc, ops: Map<string, unknown>): string[] {
  const hooks = Object.values((doc as { webhooks?: Record<string, Record<string, { operationId: string }>> }).webhooks ?? {}).flatMap((w) =>
    Object.values(w).map((o) => o.operationId),
  );
  return [...ops.keys(), ...hooks].sort();
}

interface Visit {
  operationIds: string[];
  summaries: string[];
  consoleErrors: string[];
  pageErrors: string[];
  offHost: string[];
  problemLinks: string[];
  /** Requests the page made to the service's API (not the page, its assets or the document). */
  apiCalls: string[];
}

/** Opens a page as a person would and reports what rendered and what happened on the way. */
async function visit(pathname: string, expected: number, screenshot: string, then?: (page: Page) => Promise<void>): Promise<Visit> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const offHost: string[] = [];
  const apiCalls: string[] = [];
  // Every request the page makes is seen here; anything not for the service's loopback host is
  // recorded and refused, so the page cannot reach the network even if it tried.
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.protocol === 'data:' || url.host === new URL(svc.baseUrl).host) {
      if (url.pathname.startsWith('/api/v1/')) apiCalls.push(`${route.request().method()} ${url.pathname}`);
      return route.continue();
    }
    offHost.push(url.href);
    return route.abort();
  });
  const page = await context.newPage();
  const consoleErrors: string[] = [];
  const pageErrors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('requestfailed', (r) => {
    if (!offHost.includes(r.url())) consoleErrors.push(`request failed: ${r.url()}`);
  });
  try {
    const res = await page.goto(`${svc.baseUrl}${pathname}`, { waitUntil: 'load' });
    expect(res?.status()).toBe(200);
    // Rendered when every operation's row is in the DOM.
    await page.waitForFunction((n) => document.querySelectorAll('.opblock-summary-operation-id').length >= n, expected, {
      timeout: 45_000,
    });
    await page.screenshot({ path: path.join(OUT, screenshot), fullPage: false });
    const operationIds = await page.$$eval('.opblock-summary-operation-id', (els) => els.map((e) => e.textContent?.trim() ?? ''));
    const summaries = await page.$$eval('.opblock-summary-description', (els) => els.map((e) => e.textContent?.trim() ?? ''));
    const problemLinks = await page.$$eval('#problem-types a', (els) => els.map((e) => (e as HTMLAnchorElement).href));
    await then?.(page);
    return { operationIds, summaries, consoleErrors, pageErrors, offHost, problemLinks, apiCalls };
  } finally {
    await context.close();
  }
}

function expectComplete(v: Visit, expected: string[]) {
  expect([...v.operationIds].sort()).toEqual(expected);
  expect(v.summaries.every((s) => s.length > 0)).toBe(true);
  expect(v.consoleErrors).toEqual([]);
  expect(v.pageErrors).toEqual([]);
  expect(v.offHost).toEqual([]);
  expect(v.problemLinks.sort()).toEqual(
    Object.keys(PROBLEMS)
      .map((s) => `${svc.baseUrl}/problems/${s}`)
      .sort(),
  );
}

describe('reference pages in Chromium', () => {
  it('/docs lists all 63 public operations and the extensions (and the platform-event webhook) offline, without console errors, links every problem page, and "Try it out" reaches the service', async () => {
    const paths = publicDoc.paths as Record<string, Record<string, { 'x-extension'?: boolean }>>;
    const extensions = [...publicOperations.values()].filter((o) => paths[o.path][o.method]?.['x-extension'] === true);
    expect(publicOperations.size - extensions.length).toBe(63);
    const expected = listed(publicDoc, publicOperations);
    // "Try it out" on the operation that needs no key: the CSP lets the page call its own origin.
    const v = await visit('/docs', expected.length, 'docs.png', async (page) => {
      const op = page.locator('[id$="-listPublicTemplates"]');
      await op.locator('.opblock-summary').first().click();
      await op.locator('.try-out__btn').click();
      await op.locator('.execute').click();
      await op.locator('.live-responses-table .response-col_status', { hasText: '200' }).first().waitFor({ timeout: 20_000 });
    });
    expectComplete(v, expected);
    expect(v.apiCalls).toEqual(['GET /api/v1/public-templates']);
    expect(fs.statSync(path.join(OUT, 'docs.png')).size).toBeGreaterThan(10_000);
  });

  it('/admin/docs lists every operator operation the same way', async () => {
    const expected = listed(adminDoc, adminOperations);
    const v = await visit('/admin/docs', expected.length, 'admin-docs.png');
    expectComplete(v, expected);
    expect(fs.statSync(path.join(OUT, 'admin-docs.png')).size).toBeGreaterThan(10_000);
  });
});

describe('pages and assets over HTTP', () => {
  it('serves the pages with a same-origin CSP and no inline script', async () => {
    for (const p of ['/docs', '/admin/docs']) {
      const r = await raw(svc.baseUrl, 'GET', p);
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^text\/html/);
      const csp = r.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain('unsafe-inline');
      expect(csp).not.toMatch(/https?:/);
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
      expect(r.headers.get('x-frame-options')).toBe('DENY');
      expect(r.headers.get('referrer-policy')).toBe('no-referrer');
      // Scripts only by src, all from this origin.
      expect(r.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
      expect(r.text).not.toMatch(/(src|href)="(https?:)?\/\//);
    }
  });

  it('leads / and /api-docs to the page, and /admin/api-docs to the operator page', async () => {
    for (const [from, to] of [
      ['/', '/docs'],
      ['/api-docs', '/docs'],
      ['/admin/api-docs', '/admin/docs'],
    ]) {
      const r = await fetch(`${svc.baseUrl}${from}`, { redirect: 'manual' });
      expect(r.status).toBe(302);
      expect(r.headers.get('location')).toBe(to);
    }
  });

  it('serves the renderer from node_modules, cacheable for good and gzipped on request', async () => {
    const plain = await fetch(`${svc.baseUrl}${ASSET_BASE}/swagger-ui-bundle.js`, { headers: { 'accept-encoding': 'identity' } });
    expect(plain.status).toBe(200);
    expect(plain.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(plain.headers.get('cache-control')).toContain('immutable');
    const body = await plain.arrayBuffer();
    const disk = fs.readFileSync('node_modules/swagger-ui-dist/swagger-ui-bundle.js');
    expect(Buffer.from(body).equals(disk)).toBe(true);
    // fetch decodes gzip itself; the header says it was compressed on the wire.
    const gz = await fetch(`${svc.baseUrl}${ASSET_BASE}/swagger-ui.css`, { headers: { 'accept-encoding': 'gzip' } });
    expect(gz.headers.get('content-encoding')).toBe('gzip');
    expect(await gz.text()).toBe(fs.readFileSync('node_modules/swagger-ui-dist/swagger-ui.css', 'utf8'));
  });

  it('answers 404 problems for unknown assets, other versions and paths outside the allow-list', async () => {
    for (const p of [
      `${ASSET_BASE}/index.html`,
      `${ASSET_BASE}/package.json`,
      '/docs/assets/0.0.0/swagger-ui.css',
      `${ASSET_BASE}/..%2Fpackage.json`,
    ]) {
      const r = await raw(svc.baseUrl, 'GET', p);
      expect(r.status, p).toBe(404);
      expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(r.body.type).toBe(`${svc.baseUrl}/problems/not-found`);
    }
  });

  it('gives problem pages the same headers', async () => {
    const r = await raw(svc.baseUrl, 'GET', '/problems/rate-limited');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-security-policy')).toContain("default-src 'none'");
  });
});
