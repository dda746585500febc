// The architecture rules CI holds the code to (npm run lint): no import cycles; only the
// composition root (src/boot) imports the handlers, whose registries (handlers/index.ts,
// handlers/admin/index.ts) are the only handler modules that import other handler modules;
// db/ imports nothing above it.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      severity: 'error',
      comment: 'A cycle ties two modules into one: move what both need into a third, or turn one import around.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'handlers-only-from-the-composition-root',
      severity: 'error',
      comment: 'Handlers are the outermost layer: domain code, tests and scripts reach them through src/boot.',
      from: { path: '^(src|db|scripts|test|clients)/', pathNot: '^src/boot/' },
      to: { path: '^handlers/' },
    },
    {
      name: 'handlers-do-not-import-handlers',
      severity: 'error',
      comment: 'What two handlers share is domain code: it lives in src/, not in a handler module.',
      from: { path: '^handlers/', pathNot: '^handlers/(admin/)?index\\.ts$' },
      to: { path: '^handlers/' },
    },
    {
      name: 'db-imports-nothing-above-it',
      severity: 'error',
      comment: 'db/ is the bottom layer: the connection, migrations and table types.',
      from: { path: '^db/' },
      to: { path: '^(src|handlers|scripts|test|generated)/' },
    },
    {
      name: 'generated-is-generated',
      severity: 'error',
      comment: 'generated/ is output of npm run generate and depends on nothing of ours.',
      from: { path: '^generated/' },
      to: { path: '^(src|handlers|db)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)node_modules/|^\\.test-data/|^\\.data/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
    skipAnalysisNotInRules: true,
  },
};
