/**
 * The extension with no server anywhere (no setting, no workspace .venv, no `parley` on the
 * PATH), activated against the stand-in `vscode`: the chat says so with one button, "Install
 * Parley's server"; pressed with no Python 3.11+ to be found, a message says what to install;
 * and a server recorded in the extension's storage is the one started (no PATH needed), which
 * then answers a prompt from the fake LLM. (The install itself, for real with the bundled
 * wheel: serverInstall.test.ts.)
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import type { ViewState } from '../src/common/view';
import { FakeLLM, PARLEY, serverEnv, serverUnavailable, tempDirs, until } from './harness';
import { StubMemento, StubUri, type StubWebviewView, VscodeStub } from './vscodeStub';
import { foldViewMessages } from './viewModel';

const EXT_ROOT = path.resolve(__dirname, '..', '..');
const pkg = JSON.parse(fs.readFileSync(path.join(EXT_ROOT, 'package.json'), 'utf8')) as { main: string };

interface ExtensionModule {
  activate(context: unknown): void;
  deactivate(): Promise<void>;
}

type Entry = ViewState['entries'][number];

function notices(view: StubWebviewView): Extract<Entry, { kind: 'notice' }>[] {
  return foldViewMessages(view.posted).entries.filter((e): e is Extract<Entry, { kind: 'notice' }> => e.kind === 'notice');
}

describe("no server anywhere: the chat's Install button, and the storage's server", () => {
  const stub = new VscodeStub();
  const dirs = tempDirs();
  const storage = path.join(dirs.home, 'global-storage');
  const emptyDir = path.join(dirs.home, 'empty-bin');
  const originalPath = process.env.PATH;
  let ext: ExtensionModule;
  let fake: FakeLLM | undefined;
  let skip: string | undefined;
  const context = {
    subscriptions: [] as { dispose(): unknown }[],
    extensionUri: StubUri.file(EXT_ROOT),
    extensionPath: EXT_ROOT,
    globalStorageUri: StubUri.file(storage),
    extension: { packageJSON: pkg },
    workspaceState: new StubMemento(),
    globalState: new StubMemento(),
  };

  before(async () => {
    fs.mkdirSync(emptyDir);
    stub.install();
    stub.workspaceRoot = dirs.workspace;
    skip = await serverUnavailable();
    if (!skip) {
      fake = await FakeLLM.start();
      stub.settings = { 'parley.serverEnv': serverEnv(fake, dirs.home) };
    }
    // No `parley` (nor Python) on the PATH the extension host sees.
    process.env.PATH = emptyDir;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    ext = require(path.join(EXT_ROOT, pkg.main)) as ExtensionModule;
    ext.activate(context);
  });

  after(async () => {
    process.env.PATH = originalPath;
    await ext.deactivate();
    for (const d of context.subscriptions) {
      d.dispose();
    }
    await fake?.stop();
    dirs.cleanup();
  });

  it('offers one button, and without a Python 3.11+ says what to install', async () => {
    const view = stub.showView('parley.chatView');
    view.receive({ type: 'ready' });
    const notice = await until(() => notices(view).find((n) => n.action), 'the notice with its button');
    assert.match(notice.text, /Parley's server is not installed/);
    assert.match(notice.text, /uv tool install parley-code/);
    assert.deepEqual(notice.action, { label: "Install Parley's server", message: { type: 'installServer' } });
    assert.ok(!stub.log.some((l) => l.startsWith('Starting the Parley server')), stub.log.join('\n'));

    view.receive(notice.action.message);
    const error = await until(() => stub.messages.find((m) => m.level === 'error'), 'the error message');
    assert.match(error.text, /needs Python 3\.11 or newer/);
    assert.match(error.text, /python3: not found/);
    assert.ok(!fs.existsSync(path.join(storage, 'server', 'server.json')), 'nothing recorded');
    assert.equal(notices(view).length, 1, 'the notice, once');
  });

  it("tries the Python extension's interpreter first, in a trusted workspace only", async () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const setup = require(path.join(EXT_ROOT, 'out', 'src', 'extension', 'serverSetup.js')) as {
      pythonCandidates(log: (line: string) => void): Promise<string[]>;
    };
    const asked: string[] = [];
    const environments = {
      getActiveEnvironmentPath: () => ({ path: '/envs/py312' }),
      resolveEnvironment: (env: { path: string }) => {
        asked.push(env.path);
        return Promise.resolve({ executable: { uri: StubUri.file('/envs/py312/bin/python') } });
      },
    };
    const extensions = stub.exports.extensions as { getExtension: (id: string) => unknown };
    const before = extensions.getExtension;
    extensions.getExtension = (id) => (id === 'ms-python.python' ? { isActive: true, exports: { environments } } : undefined);
    try {
      assert.deepEqual(await setup.pythonCandidates(() => undefined), ['/envs/py312/bin/python', 'python3', 'python']);
      assert.deepEqual(asked, ['/envs/py312']);
      stub.trusted = false; // its interpreter may be the workspace's own .venv
      assert.deepEqual(await setup.pythonCandidates(() => undefined), ['python3', 'python']);
    } finally {
      stub.trusted = true;
      extensions.getExtension = before;
    }
  });

  it('starts the server recorded in its storage, which answers', async (t) => {
    if (skip) {
      return t.skip(skip);
    }
    // As an install leaves it (the project's parley stands in for the venv's: same program).
    fs.mkdirSync(path.join(storage, 'server'), { recursive: true });
    const record = { venv: path.dirname(path.dirname(PARLEY)), command: PARLEY, version: '0', python: 'python3' };
    fs.writeFileSync(path.join(storage, 'server', 'server.json'), JSON.stringify(record));
    const view = stub.showView('parley.chatView');
    await fake!.script([{ text: 'Installed and answering.' }]);
    view.receive({ type: 'send', text: 'Are you there?' });
    await until(() => foldViewMessages(view.posted).entries.find((e) => e.kind === 'agent' && e.text === 'Installed and answering.'), 'the answer', 30000);
    assert.ok(stub.log.some((l) => l.startsWith(`Starting the Parley server: ${PARLEY} serve`)), stub.log.join('\n'));
  });
});
