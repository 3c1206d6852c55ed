// Copies the browser build of markdown-it next to the webview script (out/webview/vendor/).
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const src = require.resolve('markdown-it/dist/markdown-it.min.js', { paths: [root] });
const destDir = path.join(root, 'out', 'webview', 'vendor');
fs.mkdirSync(destDir, { recursive: true });
fs.copyFileSync(src, path.join(destDir, 'markdown-it.min.js'));
const license = path.join(path.dirname(src), '..', 'LICENSE');
if (fs.existsSync(license)) {
  fs.copyFileSync(license, path.join(destDir, 'markdown-it.LICENSE'));
}
