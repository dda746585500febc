// The reference pages a person reads: /docs (public API) and /admin/docs (operator API), rendered
// in the browser by Swagger UI served from node_modules (swagger-ui-dist), so the pages work fully
// offline: no CDN, no fonts or badges from elsewhere (validatorUrl is off), and a Content-Security-
// Policy that allows only this origin. Each page also lists the problem types with links to their
// pages. `/` and `/api-docs` lead to /docs.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import zlib from 'node:zlib';
import type { Context, Env, Hono, MiddlewareHandler } from 'hono';
import { PROBLEMS, ProblemError } from './problems.js';

const require = createRequire(import.meta.url);
const uiDir = path.dirname(require.resolve('swagger-ui-dist/package.json'));
const uiVersion = (require('swagger-ui-dist/package.json') as { version: string }).version;

/**
 * Only this origin: scripts and styles are files (no inline code), images may be data: URIs
 * (Swagger UI's icons), fetches go to this origin (the document, and "Try it out").
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE_HEADERS: Record<string, string> = {
  'Content-Security-Policy': DOCS_CSP,
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Permissions-Policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
};

/** Security headers for the pages a person opens (docs, problem pages). */
export const pageHeaders: MiddlewareHandler = async (c, next) => {
  await next();
  for (const [k, v] of Object.entries(PAGE_HEADERS)) c.header(k, v);
};

// Renders the document named by the container's data-spec-url. The served document names
// PUBLIC_BASE_URL as its server, which may be a proxy's address; the page points it at the origin
// that served it, so "Try it out" stays on this origin (the CSP allows nothing else).
const INIT_JS = `'use strict';
(function () {
  var el = document.getElementById('swagger-ui');
  fetch(el.dataset.specUrl, { headers: { accept: 'application/json' } })
    .then(function (r) { if (!r.ok) throw new Error('the document answered ' + r.status); return r.json(); })
    .then(function (spec) {
      var s = spec.servers && spec.servers[0];
      if (s) s.url = location.origin + new URL(s.url).pathname;
      window.ui = SwaggerUIBundle({
        spec: spec, domNode: el, deepLinking: true, displayOperationId: true, docExpansion: 'list',
        defaultModelsExpandDepth: 0, filter: true, validatorUrl: null, queryConfigEnabled: false,
        presets: [SwaggerUIBundle.presets.apis], layout: 'BaseLayout',
      });
    })
    .catch(function (e) { el.textContent = 'The API description could not be loaded: ' + e.message; });
})();
`;

const DOCS_CSS = `body { margin: 0; font-family: sans-serif; color: #3b4151; }
.docs-nav { display: flex; flex-wrap: wrap; gap: 1.2em; align-items: baseline; padding: 0.8em 1.5em; background: #1b1b1b; }
.docs-nav strong { color: #fff; font-size: 1.1em; }
.docs-nav a { color: #9fd3ff; text-decoration: none; }
.docs-nav a:hover, .docs-nav a[aria-current] { text-decoration: underline; }
.problem-types { max-width: 1460px; margin: 0 auto 3em; padding: 0 20px; }
.problem-types table { border-collapse: collapse; width: 100%; font-size: 14px; }
.problem-types th, .problem-types td { text-align: left; padding: 0.35em 0.6em; border-bottom: 1px solid #e3e3e3; vertical-align: top; }
`;

interface Asset {
  body: Buffer;
  gzip?: Buffer;
  type: string;
}

/** Files served from swagger-ui-dist (read on first request, kept in memory) and the page's own. */
const UI_FILES: Record<string, string> = {
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-bundle.js.map': 'application/json',
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui.css.map': 'application/json',
  'favicon-32x32.png': 'image/png',
  'favicon-16x16.png': 'image/png',
};
const OWN_FILES: Record<string, Asset> = {
  'docs.js': { body: Buffer.from(INIT_JS), type: 'text/javascript; charset=utf-8' },
  'docs.css': { body: Buffer.from(DOCS_CSS), type: 'text/css; charset=utf-8' },
};

/** Part of every asset URL: a new renderer version or page script is a new URL, so assets cache for good. */
const ASSET_VERSION = `${uiVersion}-${crypto.createHash('sha256').update(INIT_JS).update(DOCS_CSS).digest('hex').slice(0, 8)}`;
export const ASSET_BASE = `/docs/assets/${ASSET_VERSION}`;

const loaded = new Map<string, Asset>();
function asset(name: string): Asset | null {
  if (Object.hasOwn(OWN_FILES, name)) return OWN_FILES[name];
  if (!Object.hasOwn(UI_FILES, name)) return null;
  let a = loaded.get(name);
  if (!a) {
    const body = fs.readFileSync(path.join(uiDir, name));
    a = { body, type: UI_FILES[name] };
    loaded.set(name, a);
  }
  return a;
}

function serveAsset(c: Context): Response {
  const a = c.req.param('version') === ASSET_VERSION ? asset(c.req.param('file') ?? '') : null;
  if (!a) throw new ProblemError('not-found', 'No such documentation asset.');
  const headers: Record<string, string> = {
    'Content-Type': a.type,
    'Cache-Control': 'public, max-age=31536000, immutable',
    Vary: 'Accept-Encoding',
    'X-Content-Type-Options': 'nosniff',
    'Cross-Origin-Resource-Policy': 'same-origin',
  };
  // The bundle is 1.7 MB and compresses about fourfold; it is compressed once, on first demand.
  if (!a.type.startsWith('image/') && /\bgzip\b/.test(c.req.header('accept-encoding') ?? '')) {
    a.gzip ??= zlib.gzipSync(a.body, { level: 9 });
    return c.body(new Uint8Array(a.gzip), 200, { ...headers, 'Content-Encoding': 'gzip' });
  }
  return c.body(new Uint8Array(a.body), 200, headers);
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
/** Catalogue text marks code with backticks. */
const md = (s: string) => esc(s).replace(/`([^`]+)`/g, '<code>$1</code>');

function problemTable(): string {
  const rows = Object.entries(PROBLEMS).map(
    ([slug, p]) =>
      `<tr><td><a href="/problems/${esc(slug)}">${esc(slug)}</a></td><td>${p.status}</td><td>${esc(p.title)}</td><td>${md(p.meaning)}</td></tr>`,
  );
  return `<section class="problem-types" id="problem-types"><h2>Problem types</h2>
<p>Every error answers <code>application/problem+json</code> (RFC 7807) whose <code>type</code> is the URL of one of
these pages; each says what the problem means and whether repeating the request can succeed.</p>
<table><thead><tr><th>Type</th><th>Status</th><th>Title</th><th>Meaning</th></tr></thead><tbody>
${rows.join('\n')}
</tbody></table></section>`;
}

function page(kind: 'public' | 'admin'): string {
  const title = kind === 'public' ? 'Outbound API reference' : 'Outbound operator API reference';
  const specUrl = kind === 'public' ? '/api-docs/openapi.json' : '/admin/api-docs/openapi.json';
  const current = (k: string) => (k === kind ? ' aria-current="page"' : '');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<link rel="icon" type="image/png" href="${ASSET_BASE}/favicon-32x32.png">
<link rel="stylesheet" href="${ASSET_BASE}/swagger-ui.css"><link rel="stylesheet" href="${ASSET_BASE}/docs.css">
</head><body>
<nav class="docs-nav" aria-label="Documentation"><strong>Outbound</strong>
<a href="/docs"${current('public')}>Public API</a><a href="/admin/docs"${current('admin')}>Operator API</a>
<a href="${specUrl}">OpenAPI document (JSON)</a><a href="#problem-types">Problem types</a></nav>
<main id="swagger-ui" data-spec-url="${specUrl}"><noscript>This page renders the API description with JavaScript; the document itself is at
<a href="${specUrl}">${specUrl}</a>.</noscript></main>
${problemTable()}
<script src="${ASSET_BASE}/swagger-ui-bundle.js"></script><script src="${ASSET_BASE}/docs.js"></script>
</body></html>
`;
}

/** Mounts the pages and their assets; call before the problem-page route so it gets the headers too. */
export function mountDocs<E extends Env>(app: Hono<E>): void {
  const pages = { public: page('public'), admin: page('admin') };
  app.use('/docs', pageHeaders);
  app.use('/admin/docs', pageHeaders);
  app.use('/problems/:slug', pageHeaders);
  app.get('/docs', (c) => c.html(pages.public, 200, { 'Cache-Control': 'no-cache' }));
  app.get('/admin/docs', (c) => c.html(pages.admin, 200, { 'Cache-Control': 'no-cache' }));
  app.get('/docs/assets/:version/:file', serveAsset);
  app.get('/', (c) => c.redirect('/docs', 302));
  app.get('/api-docs', (c) => c.redirect('/docs', 302));
  app.get('/admin/api-docs', (c) => c.redirect('/admin/docs', 302));
}
