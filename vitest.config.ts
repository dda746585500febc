import { configDefaults, defineConfig } from 'vitest/config';

// Two projects: every test file first, then (groupOrder 1, after all of them have finished) the
// event catalogue check, which reads the event types the other files observed.
const CATALOGUE = 'test/catalogue.test.ts';

export default defineConfig({
  test: {
    pool: 'forks',
    maxWorkers: 3,
    // Spawned services inherit it: tests send through loopback SMTP with links on a loopback origin.
    env: { ALLOW_INSECURE_LINKS: 'true' },
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ['default', './test/support/summary-reporter.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'service',
          globalSetup: ['./test/support/global-setup.ts'],
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, CATALOGUE],
        },
      },
      {
        extends: true,
        test: { name: 'catalogue', include: [CATALOGUE], sequence: { groupOrder: 1 } },
      },
    ],
  },
});
