// Import directions (docs/design.md): data flows token -> kube -> discovery -> routing -> balance -> proxy.
// Each folder may import only the folders upstream of it. compose/ (one composition per command) and
// cli/ are the composition root; nothing in src/ imports test/ (fakes never ship in the image).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** The folders each folder may import; every other folder is forbidden. */
const allowed = {
  shared: [],
  config: ['shared'],
  // The pod's projected service-account token.
  token: ['shared', 'config'],
  // The Kubernetes API client every tenant shares: connections, transport, typed calls.
  kube: ['shared', 'config', 'token'],
  discovery: ['shared', 'config', 'token', 'kube'],
  routing: ['shared', 'config', 'discovery', 'routes'],
  balance: ['shared', 'config'],
  tracing: ['shared', 'config'],
  proxy: ['shared', 'config', 'discovery', 'routing', 'routes', 'balance'],
  admin: ['shared', 'config'],
  injector: ['shared', 'config'],
  // Gateway API objects and the HTTPRoute table (matching, filters, weights): a pure model that the
  // gateway applies north-south and the sidecar to the app's calls (GAMMA).
  routes: ['shared'],
  // North-south: the same discovery, routing, balancing and proxy hops as a sidecar's egress.
  gateway: ['shared', 'config', 'kube', 'discovery', 'routing', 'routes', 'balance', 'proxy'],
  // Workload certificates and mTLS. The mesh listener is built on the proxy's hardened server and
  // answers with its one status table; the proxy never imports mesh/ (compose/ hands it the TLS).
  mesh: ['shared', 'config', 'proxy'],
  // The process itself: returning memory after a burst.
  runtime: ['shared'],
};
const domains = Object.keys(allowed);
// The composition root: wires every domain folder, and is imported only by cli/.
allowed.compose = domains;

// Each rule has glob patterns for static imports (no-restricted-imports) and a regular expression for
// import() (no-restricted-syntax; the composition loads most modules on use). \x2F is '/': a selector's
// regular expression cannot contain a slash.
const folderRule = (folders, message) => ({
  group: folders.flatMap((f) => [`**/${f}/**`, `**/${f}/*`, `../${f}`, `../../${f}`]),
  dynamic: `(^|\\x2F)(${folders.join('|')})\\x2F`,
  message,
});

const testImports = folderRule(
  ['test'],
  'src/ must not import test/: test-only code never ships in the image.',
);
const clientNode = {
  group: ['@kubernetes/client-node', '@kubernetes/client-node/*'],
  dynamic: '^@kubernetes\\x2Fclient-node',
  message: 'Only src/kube/ imports @kubernetes/client-node.',
};
const otelSdk = {
  group: [
    '@opentelemetry/sdk-*',
    '@opentelemetry/exporter-*',
    '@opentelemetry/resources',
    '@opentelemetry/propagator-*',
    '@opentelemetry/core',
  ],
  dynamic: '^@opentelemetry\\x2F(sdk-|exporter-|resources|propagator-|core)',
  message: 'Only src/tracing/ imports the OpenTelemetry SDK.',
};

/**
 * import() of a package: in the bundle that ships (scripts/bundle.ts) a CommonJS package loaded so
 * has a default export only, and its named exports come back undefined. Import it statically in a
 * module of ours that is itself loaded on use.
 */
const packageOnUse = {
  group: [],
  dynamic: '^(?!node:)[^.]',
  message:
    'Import packages statically (from a module loaded on use): the bundle gives a package loaded by import() only a default export.',
};

/** Everywhere in src/ but its one importer: see src/shared/node-http.ts. */
const nodeHttp = ['node:http', 'http'].map((name) => ({
  name,
  allowTypeImports: true,
  message:
    "Import node:http values from src/shared/node-http.ts (an ESM import loads Node's bundled undici).",
}));

/** The imports forbidden in src/<folder>/ ('root' is src/*.ts and src/cli/). */
function forbiddenFor(folder, { kube = false } = {}) {
  const rules = [testImports, packageOnUse];
  if (folder !== 'root') {
    const root = folderRule(
      folder === 'compose' ? ['cli'] : ['compose', 'cli'],
      'Only the composition root wires modules.',
    );
    rules.push({
      ...root,
      group: [...root.group, '**/main.ts'],
      dynamic: `${root.dynamic}|(^|\\x2F)main[.]ts$`,
    });
    for (const f of domains.filter((f) => f !== folder && !allowed[folder].includes(f)))
      rules.push(folderRule([f], `src/${folder}/ must not import src/${f}/ (docs/design.md).`));
  }
  if (folder !== 'tracing') rules.push(otelSdk);
  if (!kube) rules.push(clientNode);
  return rules;
}

const restrict = (files, rules, ignores = []) => ({
  files,
  ignores,
  rules: {
    '@typescript-eslint/no-restricted-imports': [
      'error',
      {
        paths: nodeHttp,
        patterns: rules.filter(({ group }) => group.length).map(({ group, message }) => ({ group, message })),
      },
    ],
    'no-restricted-syntax': [
      'error',
      ...rules.map(({ dynamic, message }) => ({
        selector: `ImportExpression > Literal[value=/${dynamic}/]`,
        message,
      })),
    ],
  },
});

const directionRules = [
  restrict(['src/*.ts', 'src/cli/**/*.ts'], forbiddenFor('root')),
  ...Object.keys(allowed).map((folder) =>
    restrict([`src/${folder}/**/*.ts`], forbiddenFor(folder, { kube: folder === 'kube' })),
  ),
];

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
    files: ['**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: { process: 'readonly', console: 'readonly' },
    },
  },
);
