// ESLint flat config: typescript-eslint's recommended type-checked rules for the extension,
// its tests and the webview script; and the extension's structure (docs/architecture.md, the
// VS Code client): which folder, and which part of the controller and of the page, may
// import which, and no source file over 800 lines.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** `no-restricted-imports` for `files`: the import paths (gitignore-style patterns) they may not use, and why. */
function mayNotImport(files, why, group) {
  return { files, rules: { 'no-restricted-imports': ['error', { patterns: [{ group, message: why }] }] } };
}

const VSCODE = ['vscode'];
const NODE = ['node:*', 'vscode-jsonrpc', 'vscode-jsonrpc/*'];

/**
 * The controller's parts (src/core/controller/), each with the parts it may import: the
 * lower ones only, so there is no cycle; none imports the controller that composes them.
 */
const CONTROLLER_PARTS = {
  core: [],
  keptNotices: ['core'],
  serverProcess: ['core', 'keptNotices'],
  models: ['core'],
  permissions: ['core'],
  sessions: ['core', 'keptNotices', 'models', 'serverProcess'],
  turn: ['core', 'permissions', 'sessions'],
  undo: ['core', 'sessions'],
};

/** The page's modules (src/webview/), each with the page modules it may import (none imports main). */
const PAGE_MODULES = {
  dom: [],
  announce: [],
  markdownBlocks: [],
  codeBlocks: [],
  messageRenderer: ['codeBlocks', 'markdownBlocks'],
  inlineCode: [],
  commandOutput: ['dom'],
  planView: ['dom', 'messageRenderer'],
  entryViews: ['commandOutput', 'dom', 'inlineCode', 'messageRenderer'],
  transcript: ['announce', 'dom', 'entryViews'],
  metaView: ['dom', 'entryViews', 'planView', 'transcript'],
  history: ['dom'],
  composer: ['dom', 'metaView'],
};

const structure = [
  mayNotImport(['src/common/**/*.ts'], 'src/common is shared by the host and the page: it imports nothing else.', [
    '../*',
    ...VSCODE,
    ...NODE,
  ]),
  mayNotImport(['src/client/**/*.ts'], 'src/client (the protocol client) imports only src/common.', [
    '../core/*',
    '../extension/*',
    '../webview/*',
    ...VSCODE,
  ]),
  mayNotImport(['src/core/*.ts'], 'src/core runs without VS Code and without the page: it imports src/client and src/common.', [
    '../extension/*',
    '../webview/*',
    ...VSCODE,
  ]),
  mayNotImport(['src/webview/**/*.ts'], 'The page imports only src/common and its own modules (it runs in the webview, not the host).', [
    '../core/*',
    '../client/*',
    '../extension/*',
    './main',
    './main.js',
    ...VSCODE,
    ...NODE,
  ]),
  mayNotImport(['src/extension/**/*.ts'], 'The VS Code layer talks to the page by messages, never by importing it.', ['../webview/*']),
  ...Object.entries(CONTROLLER_PARTS).map(([part, allowed]) =>
    mayNotImport(
      [`src/core/controller/${part}.ts`],
      `src/core/controller/${part}.ts may import only ${allowed.length ? allowed.join(', ') : 'no other part'} of the controller's parts (and src/core's modules, src/client, src/common).`,
      [
        ...Object.keys(CONTROLLER_PARTS)
          .filter((other) => other !== part && !allowed.includes(other))
          .map((other) => `./${other}`),
        '../controller',
        '../../extension/*',
        '../../webview/*',
        ...VSCODE,
      ],
    ),
  ),
  ...Object.entries(PAGE_MODULES).map(([module, allowed]) =>
    mayNotImport(
      [`src/webview/${module}.ts`],
      `src/webview/${module}.ts may import only ${allowed.length ? allowed.join(', ') : 'no other module'} of the page's modules (and src/common).`,
      [
        ...Object.keys(PAGE_MODULES)
          .filter((other) => other !== module && !allowed.includes(other))
          .flatMap((other) => [`./${other}`, `./${other}.js`]),
        './main',
        './main.js',
        '../core/*',
        '../client/*',
        '../extension/*',
        ...VSCODE,
        ...NODE,
      ],
    ),
  ),
  { files: ['src/**/*.ts'], rules: { 'max-lines': ['error', { max: 800, skipBlankLines: false, skipComments: false }] } },
  // Every function reads top to bottom: none above complexity 12 (as ruff's C90 for the server).
  { files: ['src/**/*.ts'], rules: { complexity: ['error', 12] } },
  // ACP's types come from the official SDK, a dev dependency the .vsix does not ship: types only.
  {
    files: ['src/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        { paths: [{ name: '@agentclientprotocol/sdk', message: 'Types only (import type): the extension does not ship the SDK.', allowTypeImports: true }] },
      ],
    },
  },
];

export default tseslint.config(
  { ignores: ['out/**', 'node_modules/**', 'test-output/**', '**/*.vsix'] },
  js.configs.recommended,
  {
    files: ['scripts/**/*.js'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: { require: 'readonly', __dirname: 'readonly', process: 'readonly', console: 'readonly' },
    },
  },
  {
    files: ['**/*.ts'],
    extends: [...tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: {
        project: ['./tsconfig.test.json', './tsconfig.webview.json'],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      eqeqeq: ['error', 'always'],
      curly: ['error', 'all'],
      '@typescript-eslint/no-floating-promises': [
        'error',
        { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite'] }] },
      ],
      '@typescript-eslint/consistent-type-imports': ['error', { prefer: 'type-imports', fixStyle: 'inline-type-imports', disallowTypeAnnotations: false }],
    },
  },
  ...structure,
);
