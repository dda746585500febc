// Every emitted type is emitted: the catalogue's emitted types (EventType without x-never-emitted)
// held against the types the whole suite actually observed in its event logs. Each test file's
// harness records, as it closes, the distinct types of its database (test/support/harness.ts);
// this file runs after all of them (vitest.config.ts: project `catalogue`, groupOrder 1). It only
// judges a complete run: run alone or with a subset of files, it is skipped.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { EVENT_TYPES, NEVER_EMITTED } from '../src/platform/spec.js';

const root = new URL('..', import.meta.url).pathname;
const dir = process.env.OBSERVED_EVENTS_DIR;

interface Observed {
  file: string;
  types: string[];
}

function testFiles(d: string): string[] {
  return fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(d, e.name);
    if (e.isDirectory()) return e.name === 'fixtures' || e.name === 'support' ? [] : testFiles(p);
    return e.name.endsWith('.test.ts') ? [p] : [];
  });
}

/** The files that start a service (and so have an event log), and those of them the run recorded. */
const self = new URL(import.meta.url).pathname;
const serviceFiles = testFiles(path.join(root, 'test')).filter(
  (f) => path.resolve(f) !== path.resolve(self) && fs.readFileSync(f, 'utf8').includes('startService('),
);
const observed: Observed[] =
  dir && fs.existsSync(dir)
    ? fs
        .readdirSync(dir)
        .filter((f) => f.endsWith('.json'))
        .map((f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as Observed)
    : [];
const recorded = new Set(observed.map((o) => path.resolve(o.file)));
const unrecorded = serviceFiles.filter((f) => !recorded.has(path.resolve(f)));

if (unrecorded.length > 0 && observed.length > 0) {
  // A partial run (some files not run, or one that failed before its service started): say which.
  console.warn(`event catalogue check skipped: no event log recorded for ${unrecorded.map((f) => path.relative(root, f)).join(', ')}`);
}

describe('event catalogue', () => {
  const emitted = EVENT_TYPES.filter((t) => !NEVER_EMITTED.has(t));

  it('lists 56 emitted types', () => {
    expect(emitted).toHaveLength(56);
  });

  it.skipIf(unrecorded.length > 0)('every emitted type was observed in the event log of some test', () => {
    const seen = new Set(observed.flatMap((o) => o.types));
    const missing = emitted.filter((t) => !seen.has(t));
    expect(missing, `emitted types that no test produced: ${missing.join(', ')}`).toEqual([]);
    // and nothing outside the catalogue, nor a type it says is never emitted, was logged
    expect([...seen].filter((t) => !emitted.includes(t))).toEqual([]);
  });
});
