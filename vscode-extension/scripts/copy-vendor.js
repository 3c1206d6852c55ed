// Copies the browser builds of markdown-it and highlight.js (with their licences) next to the
// webview script (out/webview/vendor/): the view loads them as local scripts under its CSP.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const destDir = path.join(root, 'out', 'webview', 'vendor');
fs.mkdirSync(destDir, { recursive: true });

/** Copies `file` of package `pkg` to `as`, and the package's LICENSE to `<name>.LICENSE`. */
function vendor(pkg, file, as, name) {
  const pkgDir = path.dirname(require.resolve(`${pkg}/package.json`, { paths: [root] }));
  fs.copyFileSync(path.join(pkgDir, file), path.join(destDir, as));
  const license = path.join(pkgDir, 'LICENSE');
  if (fs.existsSync(license)) {
    fs.copyFileSync(license, path.join(destDir, `${name}.LICENSE`));
  }
}

vendor('markdown-it', 'dist/markdown-it.min.js', 'markdown-it.min.js', 'markdown-it');
// The "common" languages (Python, TypeScript, shell, JSON, … 36 in all), classes only.
vendor('@highlightjs/cdn-assets', 'highlight.min.js', 'highlight.min.js', 'highlight.js');
