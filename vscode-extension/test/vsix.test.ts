/**
 * The packaged .vsix (`npm run package`) is ready for the Marketplace and brings its server:
 * it carries the repository's `parley-code` wheel (the version `parley.__version__` says), a
 * 128×128 PNG icon, a gallery banner, the Marketplace README with its screenshot, the
 * changelog and the licence, the chat view's stylesheets — and no sources, tests or developer
 * README.
 */

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { CHAT_STYLESHEETS } from '../src/core/webviewHtml';
import { REPO } from './harness';

const EXT_ROOT = path.resolve(__dirname, '..', '..');
const VSIX = path.join(EXT_ROOT, 'parley-vscode.vsix');

/** The version the server says it is (server/parley/__init__.py). */
function serverVersion(): string {
  const init = fs.readFileSync(path.join(REPO, 'server', 'parley', '__init__.py'), 'utf8');
  const m = /^__version__ = "([^"]+)"$/m.exec(init);
  assert.ok(m, 'parley.__version__');
  return m[1];
}

/** A PNG's width and height (its IHDR chunk). */
function pngSize(bytes: Buffer): { width: number; height: number } {
  assert.equal(bytes.subarray(1, 4).toString('latin1'), 'PNG');
  assert.equal(bytes.subarray(12, 16).toString('latin1'), 'IHDR');
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

describe('the .vsix', { skip: fs.existsSync(VSIX) ? undefined : 'no parley-vscode.vsix: run `npm run package` first' }, () => {
  let dir = '';
  let names: string[] = [];
  const read = (name: string) => fs.readFileSync(path.join(dir, name));

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'parley-vsix-'));
    // A .vsix is a zip file: Python's zipfile lists and extracts it.
    const script = 'import json, sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); z.extractall(sys.argv[2]); print(json.dumps(z.namelist()))';
    names = JSON.parse(execFileSync('python3', ['-c', script, VSIX, dir], { encoding: 'utf8' })) as string[];
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("carries the server: the repository's parley-code wheel, of the server's version", () => {
    const wheels = names.filter((n) => n.startsWith('extension/bundled/'));
    assert.deepEqual(wheels, [`extension/bundled/parley_code-${serverVersion()}-py3-none-any.whl`]);
    // The wheel is whole: it has the server's entry point and the fake LLM of `parley demo`.
    const listing = execFileSync('python3', ['-c', 'import sys, zipfile; print("\\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))', path.join(dir, wheels[0])], {
      encoding: 'utf8',
    }).split('\n');
    assert.ok(listing.includes('parley/cli.py') && listing.includes('parley/fakellm/demo.py'), listing.slice(0, 20).join('\n'));
  });

  it('has the Marketplace metadata: icon (a 128×128 PNG), gallery banner, licence, categories', () => {
    const pkg = JSON.parse(read('extension/package.json').toString('utf8')) as Record<string, unknown>;
    assert.equal(pkg.icon, 'media/icon.png');
    assert.deepEqual(pngSize(read('extension/media/icon.png')), { width: 128, height: 128 });
    assert.match((pkg.galleryBanner as { color: string }).color, /^#[0-9a-f]{6}$/i);
    assert.ok(['dark', 'light'].includes((pkg.galleryBanner as { theme: string }).theme));
    assert.equal(pkg.license, 'MIT');
    assert.ok(names.includes('extension/LICENSE.txt'));
    assert.ok((pkg.categories as string[]).includes('AI'));
    assert.equal(pkg.version, serverVersion(), 'one version: the extension and the server it bundles');
    const commands = ((pkg.contributes as { commands: { command: string }[] }).commands).map((c) => c.command);
    assert.ok(commands.includes('parley.installServer'));
  });

  it('has the Marketplace README with its screenshot, and the changelog', () => {
    const readme = read('extension/readme.md').toString('utf8');
    assert.match(readme, /Install Parley's server/);
    const images = [...readme.matchAll(/!\[[^\]]*\]\(([^)]+)\)/g)].map((m) => m[1]);
    assert.ok(images.length >= 1, 'a screenshot');
    for (const image of images) {
      assert.ok(names.includes(`extension/${image}`), `${image} is in the .vsix`);
      const size = pngSize(read(`extension/${image}`));
      assert.ok(size.width >= 600, `${image}: ${size.width}×${size.height}`);
      assert.ok(fs.statSync(path.join(dir, 'extension', image)).size < 200 * 1024, `${image} is small`);
    }
    assert.match(read('extension/changelog.md').toString('utf8'), new RegExp(`## ${serverVersion().replace(/\./g, '\\.')}`));
  });

  it("carries the chat view's stylesheets, each as in media/chat/", () => {
    for (const sheet of CHAT_STYLESHEETS) {
      assert.ok(names.includes(`extension/media/chat/${sheet}`), `${sheet} is in the .vsix`);
      assert.deepEqual(read(`extension/media/chat/${sheet}`), fs.readFileSync(path.join(EXT_ROOT, 'media', 'chat', sheet)), sheet);
    }
  });

  it('leaves out sources, tests, scripts and the developer README', () => {
    const stray = names.filter((n) => /^extension\/(src|test|scripts)\//.test(n) || n === 'extension/README.md' || n.endsWith('.map'));
    assert.deepEqual(stray, []);
  });
});
