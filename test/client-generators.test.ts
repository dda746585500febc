// The documents as API linters and client generators read them: Spectral's OAS and OWASP
// rulesets find no error on an input, swagger-parser validates them, and three independent
// generators write clients from the document the running service serves, which compile under
// `tsc --strict` and drive one flow each against the service (offline: all are dev dependencies).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import SwaggerParser from '@apidevtools/swagger-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type TestService } from './support/harness.js';

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '..');
const bin = (name: string) => path.join(root, 'node_modules/.bin', name);
const out = path.join(root, 'test-output', `client-generators-${process.pid}`);
const DOCS = ['generated/openapi.json', 'generated/admin.openapi.json'];

type Node = Record<string, unknown>;
type SpectralResult = { code: string; severity: number; path: (string | number)[]; message: string };

/** Component schemas reachable from a request parameter or body: what a client sends. */
function inputSchemas(doc: Node): Set<string> {
  const seen = new Set<string>();
  const schemas = (doc.components as { schemas: Record<string, unknown> }).schemas;
  const visit = (n: unknown): void => {
    if (!n || typeof n !== 'object') return;
    if (Array.isArray(n)) {
      for (const x of n) visit(x);
      return;
    }
    for (const [k, v] of Object.entries(n)) {
      if (k === '$ref' && typeof v === 'string' && v.startsWith('#/components/schemas/')) {
        const name = v.split('/')[3];
        if (!seen.has(name)) {
          seen.add(name);
          visit(schemas[name]);
        }
      } else visit(v);
    }
  };
  for (const item of Object.values(doc.paths as Record<string, Node>)) {
    visit(item.parameters);
    for (const op of Object.values(item)) if (op && typeof op === 'object') visit([(op as Node).parameters, (op as Node).requestBody]);
  }
  visit((doc.components as Node).parameters);
  return seen;
}

/** Whether a Spectral finding is on an input: a request parameter or body, or a schema one reaches. */
function onInput(inputs: Set<string>, p: (string | number)[]): boolean {
  if (p[0] === 'paths') return p[3] === 'parameters' || p[3] === 'requestBody' || p[2] === 'parameters';
  if (p[0] !== 'components') return false;
  return p[1] === 'parameters' || p[1] === 'requestBodies' || (p[1] === 'schemas' && inputs.has(String(p[2])));
}

// The flow each generated client drives: GET /me, three contacts paged two by two on nextCursor, a
// deal moved a stage, and a problem read. Each prints its findings as JSON for the test to check.
const FLOWS: Record<string, string> = {
  'hey-api': `
import { changeDealStage, createContact, createDeal, getContact, getMe, listContacts } from './out/sdk.gen';
import { client } from './out/client.gen';
const key = process.env.KEY!;
client.setConfig({ headers: { Authorization: 'Bearer ' + key } });
const me = await getMe({ throwOnError: true });
for (const n of [1, 2, 3]) await createContact({ body: { email: 'hey' + n + '@flow.example' }, throwOnError: true });
const pages: string[][] = [];
let cursor: string | undefined;
do {
  const { data } = await listContacts({ query: { limit: 2, cursor }, throwOnError: true });
  pages.push(data.data.map((c) => c.email));
  cursor = data.nextCursor ?? undefined;
} while (cursor);
const deal = await createDeal({ body: { name: 'Flow deal' }, throwOnError: true });
const moved = await changeDealStage({ path: { id: deal.data.id }, body: { stage: 'qualification' }, throwOnError: true });
const missing = await getContact({ path: { id: 'con_missing' } });
const problem = missing.error as { type?: string } | undefined;
console.log(JSON.stringify({ org: me.data.organization.id, pages, stage: moved.data.stage, problem: [missing.response.status, problem?.type] }));
`,
  'openapi-typescript-codegen': `
import { ApiError, ContactsService, DealsService, MeService, OpenAPI } from './out';
OpenAPI.TOKEN = process.env.KEY!;
const me = await MeService.getMe();
for (const n of [1, 2, 3]) await ContactsService.createContact({ email: 'otc' + n + '@flow.example' });
const pages: string[][] = [];
let cursor: string | undefined;
do {
  const page = await ContactsService.listContacts(cursor, 2);
  pages.push(page.data.map((c) => c.email));
  cursor = page.nextCursor ?? undefined;
} while (cursor);
const deal = await DealsService.createDeal({ name: 'Flow deal' });
const moved = await DealsService.changeDealStage(deal.id, { stage: 'qualification' });
let problem: [number, string | undefined] = [0, undefined];
try {
  await ContactsService.getContact('con_missing');
} catch (e) {
  if (!(e instanceof ApiError)) throw e;
  problem = [e.status, (e.body as { type?: string }).type];
}
console.log(JSON.stringify({ org: me.organization.id, pages, stage: moved.stage, problem }));
`,
  'openapi-zod-client': `
import { isAxiosError } from 'axios';
import { createApiClient } from './out/client';
const api = createApiClient(process.env.BASE!, { axiosConfig: { headers: { Authorization: 'Bearer ' + process.env.KEY } } });
const me = await api.getMe();
for (const n of [1, 2, 3]) await api.createContact({ email: 'zod' + n + '@flow.example' });
const pages: string[][] = [];
let cursor: string | undefined;
do {
  const page = await api.listContacts({ queries: { limit: 2, cursor } });
  pages.push(page.data.map((c) => c.email));
  cursor = page.nextCursor ?? undefined;
} while (cursor);
const deal = await api.createDeal({ name: 'Flow deal' });
const moved = await api.changeDealStage({ stage: 'qualification' }, { params: { id: deal.id } });
let problem: [number, string | undefined] = [0, undefined];
try {
  await api.getContact({ params: { id: 'con_missing' } });
} catch (e) {
  if (!isAxiosError(e) || !e.response) throw e;
  problem = [e.response.status, (e.response.data as { type?: string }).type];
}
console.log(JSON.stringify({ org: me.organization.id, pages, stage: moved.stage, problem }));
`,
};

const TSCONFIG = {
  compilerOptions: {
    strict: true,
    noEmit: true,
    target: 'es2022',
    module: 'esnext',
    moduleResolution: 'bundler',
    lib: ['es2022', 'dom', 'dom.iterable'],
    skipLibCheck: true,
    types: ['node'],
    typeRoots: [path.join(root, 'node_modules/@types')],
  },
  include: ['flow.ts', 'out/**/*.ts'],
};

async function generate(name: string, doc: string, dir: string): Promise<void> {
  const target = path.join(dir, 'out');
  if (name === 'hey-api') await run(bin('openapi-ts'), ['-i', doc, '-o', target, '-c', '@hey-api/client-fetch', '--no-log-file', '-s']);
  else if (name === 'openapi-typescript-codegen')
    await run(process.execPath, [
      path.join(root, 'node_modules/openapi-typescript-codegen/bin/index.js'),
      '-i',
      doc,
      '-o',
      target,
      '-c',
      'fetch',
    ]);
  else {
    fs.mkdirSync(path.join(dir, 'node_modules/@zodios'), { recursive: true });
    fs.mkdirSync(target, { recursive: true });
    // Its client needs @zodios/core and zod 3, which only openapi-zod-client itself depends on.
    const deps = path.join(root, 'node_modules/openapi-zod-client/node_modules');
    fs.symlinkSync(path.join(deps, '@zodios/core'), path.join(dir, 'node_modules/@zodios/core'));
    fs.symlinkSync(path.join(deps, 'zod'), path.join(dir, 'node_modules/zod'));
    await run(bin('openapi-zod-client'), [doc, '-o', path.join(target, 'client.ts')]);
  }
}

let svc: TestService;
let served: string;
beforeAll(async () => {
  svc = await startService({ RATE_LIMIT_PER_MINUTE: '100000' });
  fs.mkdirSync(out, { recursive: true });
  // Generated from the document as the running service serves it, as a new user would.
  served = path.join(out, 'served-openapi.json');
  fs.writeFileSync(served, await (await fetch(`${svc.baseUrl}/api-docs/openapi.json`)).text());
});
afterAll(async () => {
  await svc?.close();
  fs.rmSync(out, { recursive: true, force: true });
});

describe('the documents under API linters and client generators', () => {
  it('has no Spectral error on an input under spectral:oas and the OWASP API ruleset (.spectral.yaml)', async () => {
    const { stdout } = await run(bin('spectral'), ['lint', ...DOCS, '-r', '.spectral.yaml', '-f', 'json', '-q'], {
      cwd: root,
      maxBuffer: 64 << 20,
    }).catch((e: { stdout: string }) => ({ stdout: e.stdout }));
    const results = JSON.parse(stdout) as (SpectralResult & { source: string })[];
    expect(results.length).toBeGreaterThan(0);
    for (const file of DOCS) {
      const doc = JSON.parse(fs.readFileSync(path.join(root, file), 'utf8')) as Node;
      const inputs = inputSchemas(doc);
      const bad = results
        .filter((r) => r.source.endsWith(file) && r.severity === 0 && onInput(inputs, r.path))
        .map((r) => `${r.code} ${r.path.join('/')}`);
      expect(bad, file).toEqual([]);
    }
  }, 90_000);

  it('passes swagger-parser validate, the public document as the service serves it too', async () => {
    for (const file of [...DOCS.map((f) => path.join(root, f)), served])
      await SwaggerParser.validate(JSON.parse(fs.readFileSync(file, 'utf8')));
  });

  it.each(Object.keys(FLOWS))(
    '%s generates a client that compiles under tsc --strict and drives a flow against the service',
    async (name) => {
      const dir = path.join(out, name);
      fs.mkdirSync(dir, { recursive: true });
      await generate(name, served, dir);
      fs.writeFileSync(path.join(dir, 'flow.ts'), `${FLOWS[name].trim()}\nexport {};\n`);
      fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(TSCONFIG, null, 2));
      await run(bin('tsc'), ['-p', dir]).catch((e: { stdout: string }) => expect.fail(`tsc --strict on ${name}:\n${e.stdout}`));

      const { org, key } = await svc.orgWithKey(['contacts.read', 'contacts.write', 'deals.read', 'deals.write']);
      const { stdout } = await run(process.execPath, ['--import', 'tsx', 'flow.ts'], {
        cwd: dir,
        env: { ...process.env, KEY: key, BASE: `${svc.config.publicBaseUrl}/api/v1` },
      });
      const flow = JSON.parse(stdout.trim().split('\n').pop()!) as {
        org: string;
        pages: string[][];
        stage: string;
        problem: [number, string];
      };
      expect(flow.org).toBe(org.id);
      expect(flow.pages.map((p) => p.length)).toEqual([2, 1]);
      expect(flow.pages.flat().sort()).toEqual(
        [1, 2, 3].map((n) => `${name === 'hey-api' ? 'hey' : name === 'openapi-zod-client' ? 'zod' : 'otc'}${n}@flow.example`),
      );
      expect(flow.stage).toBe('qualification');
      expect(flow.problem).toEqual([404, `${svc.config.publicBaseUrl}/problems/not-found`]);
    },
    60_000,
  );
});
