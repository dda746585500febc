// The Kysely table types (db/schema.ts), generated from the migrated schema: a throwaway embedded
// Postgres in a temporary directory gets every migration (db/database.ts migrate), kysely-codegen
// introspects it, and the result is formatted by Biome like the rest of the code. Part of
// `npm run generate`; CI regenerates and fails when the committed file differs.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ColumnTypeNode, type DatabaseMetadata, IdentifierNode, PostgresDialect, serializeFromMetadata } from 'kysely-codegen';
import pg from 'pg';
import { migrate } from '../db/database.js';
import { startEmbedded } from '../db/embedded.js';

const FILE = 'db/schema.ts';
const HEADER = `// Written by \`npm run generate\` (scripts/db-types.ts) from the schema that db/migrations build.
// Do not edit by hand: change a migration (or a JSON shape in scripts/db-types.ts) and regenerate.
`;

/**
 * The types follow how db/database.ts configures the pg driver: int8 and numeric are parsed to
 * Number, date is kept as its YYYY-MM-DD text, timestamps come back as Date (kysely-codegen's own).
 */
const TYPE_MAPPING = { int8: 'number' };

/**
 * A jsonb column reads as the parsed JSON (kysely-codegen's JsonValue) and is written as JSON text
 * (JSON.stringify) or an SQL expression, as the code does throughout: pg would send a JavaScript
 * array as a Postgres array literal, not as JSON.
 */
function postgresDialect(): PostgresDialect {
  const dialect = new PostgresDialect({ dateParser: 'string', numericParser: 'number' });
  const text = new IdentifierNode('string');
  dialect.adapter.definitions.Json = new ColumnTypeNode(new IdentifierNode('JsonValue'), text, text);
  return dialect;
}

/**
 * The jsonb columns read with a shape rather than as any JSON value: only the code writes them,
 * always in this shape, and the code reads their fields. Written like every jsonb column (JSON text);
 * nullability and the database default come from the schema.
 */
const JSON_SHAPES: Record<string, { shape: string; why: string }> = {
  'organizations.flags': {
    shape: '{ v1_2_api_send: boolean }',
    why: 'defaults to {"v1_2_api_send": false}; the operator API only merges in a new value of that flag',
  },
  'sequence_templates.steps': {
    shape: '{ dayOffset: number; subject: string; body: string }[]',
    why: "the validated steps of the operator's template, in order (numbered from 1 when read)",
  },
  'public_templates.steps': {
    shape: '{ dayOffset: number; subject: string; body: string }[]',
    why: 'the validated steps of a public template, in order (numbered from 1 when read)',
  },
  'contact_sequences.steps': {
    shape: '{ step: number; dayOffset: number; subject: string; body: string }[]',
    why: "the template's numbered steps, copied when the sequence is created; drafting and sending read them",
  },
};

/**
 * kysely-codegen column overrides for JSON_SHAPES, each checked against the introspected column;
 * the reason becomes the column's doc comment.
 */
function shapeOverrides(metadata: DatabaseMetadata): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, { shape, why }] of Object.entries(JSON_SHAPES)) {
    const [tableName, columnName] = key.split('.');
    const column = metadata.tables.find((t) => t.name === tableName && !t.isView)?.columns.find((c) => c.name === columnName);
    if (column?.dataType !== 'jsonb' || column.isArray) throw new Error(`JSON_SHAPES: ${key} is not a jsonb column`);
    column.comment = `JSON shape (scripts/db-types.ts): ${why}.`;
    const type = `ColumnType<${shape}, string, string>${column.isNullable ? ' | null' : ''}`;
    out[key] = column.hasDefaultValue ? `Generated<${type}>` : type;
  }
  return out;
}

/**
 * Postgres reports every column of a view as nullable. A column of a simple view over one table
 * (updatable, so a plain reference to a base column of the same name) is as nullable as that base
 * column: those view columns get the base column's nullability.
 */
async function withViewNullability(client: pg.Client, metadata: DatabaseMetadata): Promise<void> {
  const { rows } = await client.query<{ view: string; column: string; nullable: string }>(`
    SELECT v.table_name AS view, v.column_name AS column, b.is_nullable AS nullable
    FROM information_schema.columns v
    JOIN information_schema.view_column_usage u
      ON u.view_schema = v.table_schema AND u.view_name = v.table_name AND u.column_name = v.column_name
    JOIN information_schema.columns b
      ON b.table_schema = u.table_schema AND b.table_name = u.table_name AND b.column_name = u.column_name
    WHERE v.table_schema = 'public' AND v.is_updatable = 'YES'
      AND (SELECT count(*) FROM information_schema.view_table_usage t
           WHERE t.view_schema = v.table_schema AND t.view_name = v.table_name) = 1`);
  const nullable = new Map(rows.map((r) => [`${r.view}.${r.column}`, r.nullable === 'YES']));
  for (const table of metadata.tables) {
    if (!table.isView) continue;
    for (const column of table.columns) {
      const n = nullable.get(`${table.name}.${column.name}`);
      if (n !== undefined) column.isNullable = n;
    }
  }
}

/**
 * Waits until every other session has left: graphile-worker's migration pool is ended without being
 * awaited, and a client still closing when Postgres shuts down raises an unhandled pool error.
 */
async function untilAlone(client: pg.Client): Promise<void> {
  for (let i = 0; i < 100; i += 1) {
    const { rows } = await client.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`,
    );
    if (rows[0].n === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

function format(root: string, text: string): string {
  return execFileSync(path.join(root, 'node_modules/.bin/biome'), ['format', `--stdin-file-path=${FILE}`], {
    cwd: root,
    input: text,
    encoding: 'utf8',
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

/** The table types of the migrated schema at `url`, as TypeScript. */
async function tableTypes(url: string): Promise<string> {
  const dialect = postgresDialect();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // kysely-codegen introspects through its own Kysely (its CommonJS build, not ours).
    const db = await dialect.introspector.connect({ connectionString: url, dialect });
    let metadata: DatabaseMetadata;
    try {
      metadata = await dialect.introspector.introspect({ db, includePattern: 'public.*' });
    } finally {
      await db.destroy();
    }
    await withViewNullability(client, metadata);
    await untilAlone(client);
    return serializeFromMetadata({
      metadata,
      dialect,
      typeMapping: TYPE_MAPPING,
      overrides: { columns: shapeOverrides(metadata) },
      skipAutogeneratedFileComment: true,
    });
  } finally {
    await client.end();
  }
}

/** Writes db/schema.ts from the schema the migrations build, in a Postgres of its own. */
export async function generateDbTypes(root: string): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'outbound-db-types-'));
  try {
    const server = await startEmbedded(dir, () => {}, true);
    try {
      await migrate(server.url);
      const code = await tableTypes(server.url);
      fs.writeFileSync(path.join(root, FILE), format(root, HEADER + code));
    } finally {
      await server.stop();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
