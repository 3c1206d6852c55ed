/**
 * The server the extension brings: which `parley` it runs (the setting, a trusted workspace's
 * .venv, the PATH, its own storage), and the install into its storage done for real — a
 * Python found by running it, a virtualenv, the wheel the .vsix bundles (bundled/, made by
 * `npm run package`) pip-installed, `parley --version` checked — plus what a user sees when no
 * Python fits or a step fails (the last good install stays the one used).
 *
 * The install test runs `pip install --no-deps` (the dependencies from the registry take about
 * a minute on this machine) and lends the wheel's dependencies from the project's virtualenv on
 * PYTHONPATH (without pip and without parley itself); PARLEY_INSTALL_DEPS=1 installs them too.
 */

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';

import {
  NoPythonError,
  bundledWheel,
  findPython,
  installServer,
  installedServer,
  isSupportedPython,
  parseServerVersion,
  wheelVersion,
} from '../src/core/serverInstall';
import { findOnPath, locateServer, venvExecutable } from '../src/core/serverLocation';
import { fileIdentity } from '../src/core/workspaceServerApproval';
import { lendDependencies } from './lentDependencies';

const EXT_ROOT = path.resolve(__dirname, '..', '..');
const BUNDLED = path.join(EXT_ROOT, 'bundled');

const base = fs.mkdtempSync(path.join(os.tmpdir(), 'parley-install-test-'));
after(() => fs.rmSync(base, { recursive: true, force: true }));

/** An executable script at `file` (made with its folders). */
function script(file: string, body: string): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return file;
}

/** A seeded stream of strings built from the characters that matter to the parsers. */
function* strings(seed: number, count: number): Generator<string> {
  const alphabet = ['parley', ' ', '(', ')', 'parley-code', '0', '1', '3', '.', '11', '-', '\n', 'py3', '_', 'whl', 'é', '\u0000', 'a'];
  let x = seed;
  for (let i = 0; i < count; i++) {
    let s = '';
    const n = (x = (x * 1103515245 + 12345) % 2 ** 31) % 9;
    for (let j = 0; j < n; j++) {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      s += alphabet[x % alphabet.length];
    }
    yield s;
  }
}

describe('the parsers of what Python, pip and parley print', () => {
  it('reads `parley --version` and wheel names, and nothing else', () => {
    assert.equal(parseServerVersion('parley 0.1.0 (parley-code)\n'), '0.1.0');
    assert.equal(parseServerVersion('warning: x\nparley 1.2.3rc1 (parley-code)'), '1.2.3rc1');
    assert.equal(parseServerVersion('parley 0.1.0'), undefined); // another distribution's parley
    assert.equal(parseServerVersion('Traceback …\nModuleNotFoundError: attrs'), undefined);
    assert.equal(wheelVersion('parley_code-0.1.0-py3-none-any.whl'), '0.1.0');
    assert.equal(wheelVersion('parley-0.1.0-py3-none-any.whl'), undefined);
    assert.equal(wheelVersion('parley_code-0.1.0.tar.gz'), undefined);
  });

  it('property: a version read back is one that was written, and fuzz never throws', () => {
    for (const s of strings(29, 3000)) {
      const version = parseServerVersion(s);
      assert.ok(version === undefined || s.includes(`parley ${version} (parley-code)`), s);
      assert.ok(version === undefined || !/\s/.test(version), s);
      const fromWheel = wheelVersion(s);
      assert.ok(fromWheel === undefined || s === `parley_code-${fromWheel}-py3-none-any.whl`, s);
      assert.equal(typeof isSupportedPython(s), 'boolean');
    }
    for (let major = 0; major < 5; major++) {
      for (let minor = 0; minor < 20; minor++) {
        assert.equal(isSupportedPython(`${major}.${minor}.7`), major > 3 || (major === 3 && minor >= 11), `${major}.${minor}`);
      }
    }
    assert.equal(isSupportedPython('3.11.0+'), false);
    assert.equal(isSupportedPython(''), false);
  });
});

describe('which parley the extension runs', () => {
  const root = path.join(base, 'locate');
  const workspace = path.join(root, 'workspace');
  const workspaceParley = script(venvExecutable(path.join(workspace, '.venv'), 'parley'), 'exit 0');
  const storageParley = script(path.join(root, 'storage', 'venv-x', 'bin', 'parley'), 'exit 0');
  const pathDir = path.join(root, 'path');
  const onPath = script(path.join(pathDir, 'parley'), 'exit 0');
  const emptyDir = path.join(root, 'empty');
  fs.mkdirSync(emptyDir, { recursive: true });
  const where = (o: Partial<Parameters<typeof locateServer>[0]>) =>
    locateServer({ configured: 'parley', workspaceRoot: workspace, trusted: true, storageCommand: storageParley, pathEnv: pathDir, ...o });

  it('the setting first (with ${workspaceFolder}), then a trusted workspace\'s approved .venv, the PATH, the storage', async () => {
    assert.deepEqual(where({ configured: '${workspaceFolder}/bin/p' }), { command: `${workspace}/bin/p`, source: 'setting' });
    const approved = { [workspaceParley]: (await fileIdentity(workspaceParley))! };
    assert.deepEqual(where({ approved }), { command: workspaceParley, source: 'workspace' });
    // Not approved (workspaceServerApproval.test.ts has the cases): the next source, the .venv's named.
    assert.deepEqual(where({}), { command: onPath, source: 'path', passedOver: { file: workspaceParley, state: 'unapproved' } });
    assert.deepEqual(where({ workspaceRoot: emptyDir }), { command: onPath, source: 'path' });
    assert.deepEqual(where({ workspaceRoot: emptyDir, pathEnv: emptyDir }), { command: storageParley, source: 'storage' });
    assert.deepEqual(where({ workspaceRoot: emptyDir, pathEnv: emptyDir, storageCommand: undefined }), { command: 'parley', source: 'missing' });
  });

  it("never the .venv of an untrusted workspace; the extension's own storage still", () => {
    assert.deepEqual(where({ trusted: false, pathEnv: emptyDir }), { command: storageParley, source: 'storage' });
    assert.deepEqual(where({ trusted: false, pathEnv: emptyDir, storageCommand: undefined }).source, 'missing');
  });

  it('skips what is not an executable file, and empty PATH entries', () => {
    const notExecutable = path.join(root, 'plain', 'parley');
    fs.mkdirSync(path.dirname(notExecutable), { recursive: true });
    fs.writeFileSync(notExecutable, '');
    fs.mkdirSync(path.join(root, 'dir', 'parley'), { recursive: true });
    const pathEnv = ['', path.dirname(notExecutable), path.join(root, 'dir'), pathDir].join(path.delimiter);
    assert.equal(findOnPath('parley', pathEnv), onPath);
    assert.equal(findOnPath('parley', ''), undefined);
    assert.equal(findOnPath('parley', undefined), undefined);
  });
});

describe('finding a Python for the install', () => {
  it('says which Pythons were tried and why none fits', async () => {
    const old = script(path.join(base, 'pythons', 'python3.9'), 'echo 3.9.18; echo /usr/bin/python3.9');
    const noVenv = script(path.join(base, 'pythons', 'python-novenv'), "echo \"ModuleNotFoundError: No module named 'ensurepip'\" >&2; exit 1");
    const log: string[] = [];
    await assert.rejects(findPython(['no-such-python-here', old, noVenv], (l) => log.push(l)), (err: Error) => {
      assert.ok(err instanceof NoPythonError);
      assert.match(err.message, /needs Python 3\.11 or newer/);
      assert.match(err.message, /no-such-python-here: not found/);
      assert.match(err.message, /python3\.9: Python 3\.9\.18/);
      assert.match(err.message, /python-novenv: no venv module \(ModuleNotFoundError: No module named 'ensurepip'\)/);
      assert.match(err.message, /python3-venv/);
      return true;
    });
    assert.deepEqual(log, []);
  });

  it('takes the first one that is 3.11 or newer, by its real path', async () => {
    const found = await findPython(['no-such-python-here', 'python3'], () => undefined);
    assert.ok(isSupportedPython(found.version), found.version);
    assert.ok(path.isAbsolute(found.executable), found.executable);
  });
});

describe('installing the bundled server into the storage, for real', () => {
  const wheelThere = fs.existsSync(BUNDLED) && fs.readdirSync(BUNDLED).some((f) => wheelVersion(f));
  const skip = wheelThere ? undefined : 'no wheel in bundled/: run `npm run package` first';
  const storage = path.join(base, 'storage');
  const full = process.env.PARLEY_INSTALL_DEPS === '1';

  it('makes a virtualenv, installs the wheel, checks `parley --version` and records it', { skip }, async () => {
    const wheel = bundledWheel(BUNDLED);
    const env: Record<string, string> = full ? {} : { PYTHONPATH: lendDependencies(path.join(base, 'deps')) };
    const log: string[] = [];
    const installed = await installServer({
      storageDir: storage,
      wheel,
      pythonCandidates: ['python3'],
      log: (l) => log.push(l),
      pipArgs: full ? [] : ['--no-deps'],
      env,
    });
    assert.equal(installed.version, wheelVersion(path.basename(wheel)));
    assert.equal(path.dirname(installed.venv), storage);
    assert.equal(installed.command, venvExecutable(installed.venv, 'parley'));
    assert.deepEqual(installedServer(storage), installed);
    assert.ok(log.some((l) => l.includes('-m venv')) && log.some((l) => l.includes('pip install')), log.join('\n'));
    // The venv's own parley, from the wheel (not the repository's), says its version.
    const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', env: { ...process.env, ...env } });
    assert.equal(run(installed.command, ['--version']).trim(), `parley ${installed.version} (parley-code)`);
    const module = run(venvExecutable(installed.venv, 'python'), ['-c', 'import parley; print(parley.__file__)']).trim();
    assert.ok(module.startsWith(installed.venv + path.sep), module);
  });

  it('a failed install leaves the last good one in use, and nothing of its own behind', { skip }, async () => {
    const before = installedServer(storage);
    assert.ok(before, 'the install above');
    // A Python that passes the probe but cannot make a virtualenv.
    const broken = script(path.join(base, 'pythons', 'python-broken'), 'case "$1" in -c) echo 3.12.1; echo "$0";; *) echo "venv: disk full" >&2; exit 3;; esac');
    await assert.rejects(
      installServer({ storageDir: storage, wheel: bundledWheel(BUNDLED), pythonCandidates: [broken], log: () => undefined }),
      /Installing Parley's server failed: making the virtualenv \(exit code 3\)\.\nvenv: disk full/,
    );
    assert.deepEqual(installedServer(storage), before);
    assert.deepEqual(
      fs.readdirSync(storage).sort(),
      [path.basename(before.venv), 'server.json'].sort(),
    );
  });
});
