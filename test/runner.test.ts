import { spawnSync } from 'node:child_process';
import { expect, it } from 'vitest';

it('a failing test fails the whole run (embedded Postgres does not turn it green)', () => {
  const r = spawnSync('npx', ['vitest', 'run', '--config', 'test/fixtures/vitest.failing.config.ts'], {
    cwd: new URL('..', import.meta.url).pathname,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, DATABASE_URL: '' },
  });
  expect(r.status).not.toBe(0);
  expect(r.stdout).toMatch(/^0 passed, 1 failed$/m);
});
