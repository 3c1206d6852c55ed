/**
 * A trusted workspace whose `.venv/bin/parley` the user never approved (one a sandboxed
 * command could have written: docs/security.md, "The server the editor starts"), with the
 * extension activated against the stand-in `vscode`: the chat runs the `parley` on the PATH,
 * not the workspace's (which leaves a mark when it runs), says so in the log, and asks in a
 * notice with two buttons. "Use the workspace's server" keeps that file's identity in the
 * extension's globalState and restarts with it; the file replaced by a copy of itself (a new
 * inode) is not run again, and is asked about again.
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

type Notice = Extract<ViewState['entries'][number], { kind: 'notice' }>;

function questions(view: StubWebviewView): Notice[] {
  return foldViewMessages(view.posted).entries.filter((e): e is Notice => e.kind === 'notice' && !!e.choices);
}

function script(file: string, body: string): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return file;
}

describe("a workspace's own parley runs only once the user approved that file", () => {
  const stub = new VscodeStub();
  const dirs = tempDirs();
  const mark = path.join(dirs.home, 'workspace-parley-ran');
  const planted = path.join(dirs.workspace, '.venv', 'bin', 'parley');
  const pathDir = path.join(dirs.home, 'bin');
  const onPath = path.join(pathDir, 'parley');
  const originalPath = process.env.PATH;
  let ext: ExtensionModule;
  let fake: FakeLLM | undefined;
  let skip: string | undefined;
  let view: StubWebviewView;
  const context = {
    subscriptions: [] as { dispose(): unknown }[],
    extensionUri: StubUri.file(EXT_ROOT),
    extensionPath: EXT_ROOT,
    globalStorageUri: StubUri.file(path.join(dirs.home, 'global-storage')),
    extension: { packageJSON: pkg },
    workspaceState: new StubMemento(),
    globalState: new StubMemento(),
  };

  before(async () => {
    skip = await serverUnavailable();
    if (skip) {
      return;
    }
    // Both are the project's parley; the workspace's leaves a mark when it is run.
    script(planted, `: > '${mark}'\nexec '${PARLEY}' "$@"`);
    script(onPath, `exec '${PARLEY}' "$@"`);
    stub.install();
    stub.workspaceRoot = dirs.workspace;
    fake = await FakeLLM.start();
    stub.settings = { 'parley.serverEnv': serverEnv(fake, dirs.home) };
    process.env.PATH = pathDir;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    ext = require(path.join(EXT_ROOT, pkg.main)) as ExtensionModule;
    ext.activate(context);
  });

  after(async () => {
    process.env.PATH = originalPath;
    await ext?.deactivate();
    for (const d of context.subscriptions) {
      d.dispose();
    }
    await fake?.stop();
    dirs.cleanup();
  });

  it('not approved: the PATH one runs and answers, the log says why, the chat asks', async (t) => {
    if (skip) {
      return t.skip(skip);
    }
    view = stub.showView('parley.chatView');
    view.receive({ type: 'ready' });
    const question = await until(() => questions(view)[0], 'the question about the workspace server', 30000);
    assert.match(question.text, new RegExp(`This workspace has its own Parley server, ${planted}, which has not been approved`));
    assert.match(question.text, new RegExp(`Parley runs ${onPath} \\(from the path\\) instead\\.`));
    assert.deepEqual(question.choices, [
      { label: "Use the workspace's server", message: { type: 'useWorkspaceServer', file: planted } },
      { label: 'Use the installed one', message: { type: 'useInstalledServer', file: planted } },
    ]);
    await fake!.script([{ text: 'From the PATH.' }]);
    view.receive({ type: 'send', text: 'Which one?' });
    await until(() => foldViewMessages(view.posted).entries.find((e) => e.kind === 'agent' && e.text === 'From the PATH.'), 'the answer', 30000);
    assert.ok(stub.log.includes(`Starting the Parley server: ${onPath} serve (in ${dirs.workspace})`), stub.log.join('\n'));
    assert.ok(stub.log.some((l) => l.includes(`the workspace's ${planted} is not one you approved, so it is not run`)), stub.log.join('\n'));
    assert.ok(!fs.existsSync(mark), "the workspace's parley did not run");
    assert.equal(context.globalState.get('parley.approvedWorkspaceServers'), undefined);
    assert.equal(questions(view).length, 1, 'still asked, once, in the session opened since');
  });

  it('"Use the workspace\'s server": kept in globalState, and run', async (t) => {
    if (skip) {
      return t.skip(skip);
    }
    view.receive(questions(view)[0].choices![0].message);
    await until(() => (fs.existsSync(mark) ? true : undefined), "the workspace's parley started", 30000);
    await until(() => stub.log.find((l) => l.startsWith(`Starting the Parley server: ${planted} serve`)), 'the log line');
    const kept = context.globalState.get<Record<string, { sha256: string; ino: string }>>('parley.approvedWorkspaceServers');
    assert.deepEqual(Object.keys(kept ?? {}), [planted]);
    assert.equal(kept![planted].ino, fs.statSync(planted, { bigint: true }).ino.toString());
    assert.equal(context.workspaceState.get('parley.approvedWorkspaceServers'), undefined, "not in the workspace's state");
  });

  it('replaced by a copy of itself (a new inode): not run, asked about again', async (t) => {
    if (skip) {
      return t.skip(skip);
    }
    fs.rmSync(mark, { force: true });
    fs.copyFileSync(planted, `${planted}.new`);
    fs.renameSync(`${planted}.new`, planted);
    const starts = stub.log.filter((l) => l.startsWith(`Starting the Parley server: ${onPath} serve`)).length;
    view.receive({ type: 'restart' });
    await until(
      () => (stub.log.filter((l) => l.startsWith(`Starting the Parley server: ${onPath} serve`)).length > starts ? true : undefined),
      'the PATH one started again',
      30000,
    );
    // The chat may have been cleared by the restart's session since: the question is found by
    // its words, not by its place among those shown.
    const again = await until(
      () => questions(view).find((q) => /which has changed since you approved it/.test(q.text)),
      'the question again',
      30000,
    );
    assert.match(again.text, /which has changed since you approved it/);
    assert.ok(!fs.existsSync(mark), "the workspace's parley did not run");
  });
});
