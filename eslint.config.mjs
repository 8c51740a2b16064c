// One lint config for the whole tree: typescript-eslint's strict type-aware rules (as the TypeScript
// MCP SDK uses), formatting left to prettier. Each rule turned down below says why.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/dist/**', '**/dist-sea/**', '**/node_modules/**', '.punk/**', 'examples/files/**', 'charts/**'] },
  js.configs.recommended,
  {
    files: ['**/*.ts', '**/*.tsx'],
    extends: [...tseslint.configs.strictTypeChecked],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // node:test's test() and describe() return promises the runner itself awaits.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            {
              from: 'package',
              package: 'node:test',
              name: ['test', 'describe', 'it', 'suite', 'before', 'after', 'beforeEach', 'afterEach'],
            },
          ],
        },
      ],
      // Numbers and booleans read naturally in messages; objects and nullish values still need a decision.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      // `() => void x()` shorthands are the callback idiom of the SDKs and node:events.
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true }],
      // Structural typing is how MCP messages and library objects are passed: the rule flags every such value.
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
      // `!` follows a check the compiler cannot follow (Map.get after has, a regex's groups, an index in range).
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Values parsed from the wire, manifests and the environment are checked at run time although their
      // static type says they cannot be missing: those checks are the edge's defence, not dead code.
      '@typescript-eslint/no-unnecessary-condition': 'off',
      // Implementations of async contracts (the in-process bus, transports) need not await anything.
      '@typescript-eslint/require-await': 'off',
      // Punk serves and bridges both protocol eras, so it calls on purpose SDK APIs deprecated as of
      // 2026-07-28 (the low-level Server, logging levels, roots) and OpenTelemetry's stable-era attribute names.
      '@typescript-eslint/no-deprecated': 'off',
      // Its fixes change inferred types that tsc then rejects (contextually typed literals, client-node's caches).
      '@typescript-eslint/no-unnecessary-type-assertion': 'off',
      '@typescript-eslint/restrict-plus-operands': ['error', { allowNumberAndString: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // Tests read parsed JSON bodies as `any` and assert on them: that is the test's own check.
    files: ['**/test/**/*.ts', 'e2e/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      // `new Promise((resolve) => server.close(() => resolve()))` and destructured fixtures are the tests' idiom.
      '@typescript-eslint/no-confusing-void-expression': 'off',
      '@typescript-eslint/no-meaningless-void-operator': 'off',
      '@typescript-eslint/unbound-method': 'off',
      '@typescript-eslint/no-unnecessary-type-conversion': 'off',
      '@typescript-eslint/no-base-to-string': 'off',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  {
    // @kubernetes/client-node's model classes are plain data sent as JSON: spreading them is how children are built.
    files: ['operator/**/*.ts'],
    rules: { '@typescript-eslint/no-misused-spread': 'off' },
  },
  { files: ['**/*.mjs', '**/*.js'], languageOptions: { globals: globals.node } },
  prettier,
);
