// Import directions (DESIGN.md section 2): data flows identity -> discovery -> routing -> balance -> proxy.
// Each folder may import only the folders upstream of it; app.ts and cli/ are the composition root.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const folders = [
  'shared',
  'config',
  'identity',
  'discovery',
  'routing',
  'balance',
  'tracing',
  'proxy',
  'admin',
  'injector',
  'gateway',
];

/** The folders each folder may import; every other folder is forbidden. */
const allowed = {
  shared: [],
  config: ['shared'],
  identity: ['shared', 'config'],
  discovery: ['shared', 'config', 'identity'],
  routing: ['shared', 'config', 'discovery'],
  balance: ['shared', 'config'],
  tracing: ['shared', 'config'],
  proxy: ['shared', 'config', 'discovery', 'routing', 'balance'],
  admin: ['shared', 'config'],
  injector: ['shared', 'config'],
  // North-south: built from the same parts as the sidecar; nothing imports it.
  gateway: ['shared', 'config', 'discovery', 'routing', 'balance', 'proxy'],
};

const patternFor = (folder) => [`**/${folder}/**`, `**/${folder}/*`, `../${folder}`, `../../${folder}`];

const directionRules = folders.map((folder) => {
  const forbidden = folders.filter((f) => f !== folder && !allowed[folder].includes(f));
  const patterns = [
    { group: ['**/app.ts', '**/cli/**', '**/main.ts'], message: 'Only the composition root wires modules.' },
    ...forbidden.map((f) => ({
      group: patternFor(f),
      message: `src/${folder}/ must not import src/${f}/ (DESIGN.md section 2).`,
    })),
  ];
  if (folder !== 'tracing') {
    patterns.push({
      group: [
        '@opentelemetry/sdk-*',
        '@opentelemetry/exporter-*',
        '@opentelemetry/resources',
        '@opentelemetry/propagator-*',
        '@opentelemetry/core',
      ],
      message: 'Only src/tracing/ imports the OpenTelemetry SDK.',
    });
  }
  if (folder !== 'discovery') {
    patterns.push({
      group: ['@kubernetes/client-node', '@kubernetes/client-node/*'],
      message: 'Only src/discovery/kube/ imports @kubernetes/client-node.',
    });
  }
  return { files: [`src/${folder}/**/*.ts`], rules: { 'no-restricted-imports': ['error', { patterns }] } };
});

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'coverage/', '.outrigger/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['test', 'describe', 'it', 'suite'] },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  ...directionRules,
  {
    // Within discovery, only the kube/ adapter may touch client-node.
    files: ['src/discovery/**/*.ts'],
    ignores: ['src/discovery/kube/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['@kubernetes/client-node', '@kubernetes/client-node/*'],
              message: 'Only src/discovery/kube/ imports @kubernetes/client-node.',
            },
            {
              group: [
                '**/routing/**',
                '**/balance/**',
                '**/proxy/**',
                '**/tracing/**',
                '**/admin/**',
                '**/injector/**',
                '**/gateway/**',
                '**/app.ts',
                '**/cli/**',
              ],
              message: 'src/discovery/ is upstream of these (DESIGN.md section 2).',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: { process: 'readonly', console: 'readonly' },
    },
  },
);
