// One Postgres for the whole run (embedded unless DATABASE_URL is set), with one migrated
// template database that every test file clones.
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { migrate } from '../../db/database.js';
import { startDnsServer } from './dns-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgUrl: string;
    templateDb: string;
  }
}

const TEMPLATE = 'outbound_test_template';

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

export default async function setup(project: TestProject) {
  // Where each test file's harness records the event types its database saw, for the catalogue
  // check (test/catalogue.test.ts) that runs after every other file; the workers inherit it.
  const fs = await import('node:fs');
  const observed = `${process.cwd()}/.test-data/observed-${process.pid}`;
  fs.mkdirSync(observed, { recursive: true });
  process.env.OBSERVED_EVENTS_DIR = observed;
  // Nothing a test does asks the system's resolver (nothing reaches the internet): every service
  // and spawned process asks this loopback server, which holds no records (NXDOMAIN), unless a
  // test gives its service a DNS server of its own.
  const dns = await startDnsServer();
  process.env.INBOUND_DNS_SERVERS = dns.address;
  let url = process.env.DATABASE_URL;
  let stop = async () => {};
  if (!url) {
    const { startEmbedded } = await import('../../db/embedded.js');
    const dir = `${process.cwd()}/.test-data/pg-${process.pid}`;
    const db = await startEmbedded(dir, () => {}, true);
    url = db.url;
    stop = async () => {
      await db.stop();
      const fs = await import('node:fs');
      fs.rmSync(dir, { recursive: true, force: true });
    };
  }
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${TEMPLATE} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${TEMPLATE}`);
  await admin.end();
  await migrate(withDatabase(url, TEMPLATE));
  project.provide('pgUrl', url);
  project.provide('templateDb', TEMPLATE);
  return async () => {
    await dns.close();
    await stop();
    fs.rmSync(observed, { recursive: true, force: true });
  };
}
