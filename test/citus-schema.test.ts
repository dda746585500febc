// The schema can be distributed by organization on Citus. Citus is not installable
// here, so this reads the catalog of the migrated database and applies Citus's rules to every
// table: each one is either distributed by organization_id (its primary key, unique indexes and
// foreign keys include organization_id) or one of the small lookup tables below that Citus would
// replicate to every node as a reference table. Tables added by later migrations are covered
// without being named: only the reference-table allowlist is written down, with its reasons.
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from './support/harness.js';

const DIST = 'organization_id';

/** Reference tables (create_reference_table): small, read before an organization is known or by all. */
const REFERENCE: Record<string, string> = {
  organizations:
    'the tenant directory itself (one row per organization), joined to the key on every authenticated request; distributed tables may reference it',
  api_keys:
    'looked up by key_hash before the organization is known (authentication); distributed, every request would fan out to all shards',
  lead_forms: 'looked up by form_key before the organization is known (public lead capture endpoint)',
  platform_settings: 'one row of deployment-wide settings, no organization',
  public_templates: 'the public template catalogue, belongs to no organization',
};

/** Tables that stay on the coordinator only (never joined with tenant data). */
const COORDINATOR_ONLY: Record<string, string> = {
  kysely_migration: 'migration bookkeeping, read by the migrator on the coordinator only',
  kysely_migration_lock: 'migration lock, coordinator only',
  worker_runners:
    "the worker processes alive (each holds an advisory lock on the coordinator), beside graphile-worker's own tables; no organization",
};

/** Schemas that are not ours. */
const FOREIGN_SCHEMAS: Record<string, string> = {
  graphile_worker:
    "graphile-worker's own job queue schema (its tables, keys and functions are the library's); it runs on the coordinator only and is reached through enqueue_job()",
};

interface Table {
  name: string;
  columns: Map<number, { name: string; type: string; notNull: boolean }>;
}
interface Index {
  table: string;
  name: string;
  primary: boolean;
  keys: number[];
  definition: string;
}
interface ForeignKey {
  table: string;
  name: string;
  refTable: string;
  cols: number[];
  refCols: number[];
  onDelete: string;
  onUpdate: string;
  deleteSetCols: number[] | null;
  definition: string;
}
interface Catalog {
  tables: Map<string, Table>;
  indexes: Index[];
  foreignKeys: ForeignKey[];
}

/** Tables, unique indexes (primary keys included) and foreign keys of the public schema. */
async function readCatalog(client: pg.Client): Promise<Catalog> {
  const t = await client.query<{ name: string; attnum: number; column: string; type: string; notnull: boolean }>(`
    SELECT c.relname AS name, a.attnum, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS notnull
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')`);
  const tables = new Map<string, Table>();
  for (const r of t.rows) {
    const table = tables.get(r.name) ?? { name: r.name, columns: new Map() };
    table.columns.set(r.attnum, { name: r.column, type: r.type, notNull: r.notnull });
    tables.set(r.name, table);
  }
  const i = await client.query<Index>(`
    SELECT t.relname AS table, ic.relname AS name, x.indisprimary AS primary,
           (x.indkey::int2[])[0:x.indnkeyatts - 1]::int[] AS keys, pg_get_indexdef(x.indexrelid) AS definition
    FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid JOIN pg_class ic ON ic.oid = x.indexrelid
    JOIN pg_namespace n ON n.oid = t.relnamespace
    WHERE n.nspname = 'public' AND x.indisunique`);
  const f = await client.query<ForeignKey>(`
    SELECT t.relname AS table, k.conname AS name, r.relname AS "refTable", k.conkey::int[] AS cols, k.confkey::int[] AS "refCols",
           k.confdeltype AS "onDelete", k.confupdtype AS "onUpdate", k.confdelsetcols::int[] AS "deleteSetCols",
           pg_get_constraintdef(k.oid) AS definition
    FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid JOIN pg_class r ON r.oid = k.confrelid
    JOIN pg_namespace n ON n.oid = t.relnamespace
    WHERE n.nspname = 'public' AND k.contype = 'f'`);
  return { tables, indexes: i.rows, foreignKeys: f.rows };
}

const kindOf = (table: string): 'reference' | 'coordinator' | 'distributed' =>
  table in REFERENCE ? 'reference' : table in COORDINATOR_ONLY ? 'coordinator' : 'distributed';
const distAttnum = (c: Catalog, table: string): number | undefined =>
  [...(c.tables.get(table)?.columns ?? new Map()).entries()].find(([, col]) => col.name === DIST)?.[0];
const colNames = (c: Catalog, table: string, attnums: number[]) =>
  attnums.map((a) => (a === 0 ? '(expression)' : (c.tables.get(table)?.columns.get(a)?.name ?? `#${a}`)));

/** Every way the catalog breaks Citus's rules, one line each, naming the table and the index or constraint. */
function violations(c: Catalog): string[] {
  const out: string[] = [];
  for (const table of [...c.tables.keys()].sort()) {
    if (kindOf(table) !== 'distributed') continue;
    const dist = distAttnum(c, table);
    if (dist === undefined) {
      out.push(`${table}: no ${DIST} column and not an allowlisted reference table`);
      continue;
    }
    const col = c.tables.get(table)!.columns.get(dist)!;
    if (!col.notNull) out.push(`${table}.${DIST} is nullable (the distribution column must always be set)`);
    if (col.type !== 'text') out.push(`${table}.${DIST} is ${col.type}, not text (colocated tables need one distribution column type)`);
    const own = c.indexes.filter((x) => x.table === table);
    if (!own.some((x) => x.primary)) out.push(`${table}: no primary key`);
    for (const x of own) {
      if (!x.keys.includes(dist)) {
        out.push(
          `${table}: ${x.primary ? 'primary key' : 'unique index'} ${x.name} on (${colNames(c, table, x.keys).join(', ')}) lacks ${DIST}: ${x.definition}`,
        );
      }
    }
  }
  for (const fk of c.foreignKeys) {
    const from = kindOf(fk.table);
    const to = kindOf(fk.refTable);
    const where = `${fk.table}: foreign key ${fk.name} -> ${fk.refTable} (${fk.definition})`;
    if (from === 'coordinator' || to === 'coordinator') {
      out.push(`${where}: joins a coordinator-only table`);
      continue;
    }
    if (from === 'reference') {
      if (to !== 'reference') out.push(`${where}: a reference table may only reference reference tables`);
      continue;
    }
    const dist = distAttnum(c, fk.table);
    if (dist === undefined) continue; // reported above
    const pos = fk.cols.indexOf(dist);
    if (to === 'distributed') {
      const refDist = distAttnum(c, fk.refTable);
      if (pos < 0 || refDist === undefined || fk.refCols[pos] !== refDist) {
        out.push(`${where}: between distributed tables the key must pair ${DIST} with ${DIST}`);
        continue;
      }
    }
    if (pos >= 0) {
      // Citus refuses actions that would rewrite the distribution column.
      if (
        (fk.onDelete === 'n' || fk.onDelete === 'd') &&
        (!fk.deleteSetCols || fk.deleteSetCols.length === 0 || fk.deleteSetCols.includes(dist))
      ) {
        out.push(`${where}: ON DELETE SET NULL/DEFAULT would change ${DIST}`);
      }
      if (['c', 'n', 'd'].includes(fk.onUpdate)) out.push(`${where}: ON UPDATE CASCADE/SET NULL/DEFAULT would change ${DIST}`);
    }
  }
  return out;
}

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let client: pg.Client;
let catalog: Catalog;

beforeAll(async () => {
  db = await createTestDatabase();
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
  catalog = await readCatalog(client);
});

afterAll(async () => {
  await client?.end();
  await db?.drop();
});

describe('Citus-distributable schema', () => {
  it('every table is distributed by organization or an allowlisted reference table', () => {
    expect(catalog.tables.size).toBeGreaterThan(30);
    expect(violations(catalog)).toEqual([]);
  });

  it('the allowlists name only existing tables, and the tenant data is distributed', () => {
    for (const name of [...Object.keys(REFERENCE), ...Object.keys(COORDINATOR_ONLY)]) expect(catalog.tables.has(name), name).toBe(true);
    const distributed = [...catalog.tables.keys()].filter((t) => kindOf(t) === 'distributed');
    // The bulk of the data is distributed, colocated on one column.
    for (const name of [
      'contacts',
      'companies',
      'events',
      'send_queue',
      'send_records',
      'messages',
      'deals',
      'drafts',
      'users',
      'rate_limits',
      'idempotency_keys',
    ]) {
      expect(distributed, name).toContain(name);
    }
  });

  it('no table of ours lives outside the public schema except the job queue', async () => {
    const r = await client.query<{ schema: string }>(`
      SELECT DISTINCT n.nspname AS schema FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'public') AND n.nspname NOT LIKE 'pg\\_%'`);
    expect(r.rows.map((x) => x.schema).filter((s) => !(s in FOREIGN_SCHEMAS))).toEqual([]);
  });

  it('the checker catches what Citus would refuse', async () => {
    // The rules above are only worth something if they fire: a throwaway table breaking each.
    await client.query('BEGIN');
    try {
      await client.query(`CREATE TABLE citus_probe (organization_id text NOT NULL, id text NOT NULL UNIQUE, contact_id text,
        PRIMARY KEY (organization_id, id),
        FOREIGN KEY (organization_id, contact_id) REFERENCES contacts (organization_id, id) ON DELETE SET NULL)`);
      await client.query(`CREATE TABLE citus_probe_global (id text PRIMARY KEY)`);
      await client.query(`ALTER TABLE public_templates ADD COLUMN probe_org text, ADD COLUMN probe_id text,
        ADD FOREIGN KEY (probe_org, probe_id) REFERENCES contacts (organization_id, id)`);
      const baseline = new Set(violations(catalog));
      const found = violations(await readCatalog(client)).filter((v) => !baseline.has(v));
      expect(found.some((v) => v.startsWith('citus_probe: unique index citus_probe_id_key on (id) lacks organization_id'))).toBe(true);
      expect(found.some((v) => v.startsWith('citus_probe: foreign key') && v.includes('ON DELETE SET NULL'))).toBe(true);
      expect(found.some((v) => v.startsWith('citus_probe_global: no organization_id column'))).toBe(true);
      expect(found.some((v) => v.startsWith('public_templates: foreign key') && v.includes('reference table may only reference'))).toBe(
        true,
      );
      expect(found).toHaveLength(4);
    } finally {
      await client.query('ROLLBACK');
    }
  });
});

/** Every `ON CONFLICT (...)` target in the code names the columns of a unique index of its table. */
describe('ON CONFLICT targets', () => {
  it('each matches a unique index (or primary key) of the inserted table', () => {
    const root = path.resolve(import.meta.dirname, '..');
    const files = ['src', 'handlers'].flatMap((d) =>
      fs
        .readdirSync(path.join(root, d), { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.ts'))
        .map((f) => path.join(root, d, f)),
    );
    const missing: string[] = [];
    let seen = 0;
    for (const file of files) {
      const text = fs.readFileSync(file, 'utf8');
      for (const m of text.matchAll(/INSERT INTO (\w+)(?:(?!INSERT INTO)[\s\S])*?ON CONFLICT \(([^)]*)\)/g)) {
        seen += 1;
        const [, table, target] = m;
        const cols = target
          .split(',')
          .map((c) => c.trim())
          .sort();
        const ok = catalog.indexes.some(
          (x) => x.table === table && colNames(catalog, table, x.keys).slice().sort().join(',') === cols.join(','),
        );
        if (!ok) missing.push(`${path.relative(root, file)}: ${table} (${target})`);
      }
    }
    expect(seen).toBeGreaterThan(10);
    expect(missing).toEqual([]);
  });
});
