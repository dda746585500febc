// The review desk (/desk): a page where a rep reviews, edits, approves, rejects and sends drafts
// through the public API with a key pasted into the page. Its files are plain browser modules and a
// style sheet checked in under src/http/desk/ (no build step), read once at start and served under a
// versioned path with the same page headers as /docs: a Content-Security-Policy allowing only this
// origin, so no inline script and nothing from elsewhere can run, whatever text a draft carries.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Context, Env, Hono } from 'hono';
import { pageHeaders } from './docs.js';
import { ProblemError } from './problems.js';

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'desk');
const TYPES: Record<string, string> = { '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

/** The page's scripts and style sheet, by file name (only these are served). */
const FILES = new Map(
  fs
    .readdirSync(DIR)
    .filter((f) => Object.hasOwn(TYPES, path.extname(f)))
    .map((f) => [f, { body: fs.readFileSync(path.join(DIR, f)), type: TYPES[path.extname(f)] }] as const),
);

/** A change to any file is a new URL, so the files cache for good. */
const VERSION = (() => {
  const h = crypto.createHash('sha256');
  for (const [name, f] of [...FILES].sort(([a], [b]) => a.localeCompare(b))) h.update(name).update(f.body);
  return h.digest('hex').slice(0, 12);
})();
export const DESK_ASSET_BASE = `/desk/assets/${VERSION}`;

const PAGE = fs.readFileSync(path.join(DIR, 'index.html'), 'utf8').replaceAll('{{ASSETS}}', DESK_ASSET_BASE);

function serveAsset(c: Context): Response {
  const f = c.req.param('version') === VERSION ? FILES.get(c.req.param('file') ?? '') : undefined;
  if (!f) throw new ProblemError('not-found', 'No such desk asset.');
  return c.body(new Uint8Array(f.body), 200, {
    'Content-Type': f.type,
    'Cache-Control': 'public, max-age=31536000, immutable',
    'X-Content-Type-Options': 'nosniff',
    'Cross-Origin-Resource-Policy': 'same-origin',
  });
}

/** Mounts /desk and its assets. */
export function mountDesk<E extends Env>(app: Hono<E>): void {
  app.use('/desk', pageHeaders);
  app.get('/desk', (c) => c.html(PAGE, 200, { 'Cache-Control': 'no-cache' }));
  app.get('/desk/assets/:version/:file', serveAsset);
}
