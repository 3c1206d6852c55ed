/**
 * The extension activated in plain Node with a stand-in `vscode` module: every contributed
 * command is registered, the chat view's page has a strict CSP, and (with the real server)
 * the view's messages drive a session end to end.
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import type { RequestPermissionParams } from '../src/client/protocol';
import type { HostToView } from '../src/common/view';
import { CHAT_STYLESHEETS } from '../src/core/webviewHtml';
import { FakeLLM, PARLEY, cliExport, serverEnv, serverUnavailable, tempDirs, until } from './harness';
import { StubMemento, StubUri, VscodeStub } from './vscodeStub';
import { foldViewMessages } from './viewModel';

const EXT_ROOT = path.resolve(__dirname, '..', '..');

interface PackageJson {
  main: string;
  contributes: {
    commands: { command: string }[];
    views: Record<string, { id: string; type?: string }[]>;
    viewsContainers: { activitybar: { id: string; icon: string }[] };
    keybindings: { command: string }[];
    menus: Record<string, { command: string }[]>;
    configuration: { properties: Record<string, unknown> };
  };
}

const pkg = JSON.parse(fs.readFileSync(path.join(EXT_ROOT, 'package.json'), 'utf8')) as PackageJson;

interface ExtensionModule {
  activate(context: unknown): void;
  deactivate(): Promise<void>;
  askPermission(params: RequestPermissionParams, signal: AbortSignal, viewVisible: boolean, openDiffs: () => Promise<void>): Promise<string | null>;
}

describe('the extension in a stand-in VS Code', () => {
  const stub = new VscodeStub();
  const dirs = tempDirs();
  let ext: ExtensionModule;
  let fake: FakeLLM | undefined;
  let skipServer: string | undefined;
  const context = {
    subscriptions: [] as { dispose(): unknown }[],
    extensionUri: StubUri.file(EXT_ROOT),
    extensionPath: EXT_ROOT,
    globalStorageUri: StubUri.file(path.join(os.tmpdir(), 'parley-extension-test-storage')),
    extension: { packageJSON: pkg },
    workspaceState: new StubMemento(),
    globalState: new StubMemento(),
  };

  before(async () => {
    stub.install();
    stub.workspaceRoot = dirs.workspace;
    skipServer = await serverUnavailable();
    if (!skipServer) {
      fake = await FakeLLM.start();
      stub.settings = {
        'parley.serverCommand': PARLEY,
        'parley.serverEnv': serverEnv(fake, dirs.home),
      };
    } else {
      stub.settings = { 'parley.serverCommand': path.join(dirs.workspace, 'no-such-parley') };
    }
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    ext = require(path.join(EXT_ROOT, pkg.main)) as ExtensionModule;
    ext.activate(context);
  });

  after(async () => {
    await ext?.deactivate();
    for (const d of context.subscriptions) {
      d.dispose();
    }
    await fake?.stop();
    dirs.cleanup();
  });

  it('registers every contributed command, the chat view and a status bar item', () => {
    const contributed = pkg.contributes.commands.map((c) => c.command).sort();
    assert.deepEqual([...stub.commands.keys()].sort(), contributed);
    for (const k of pkg.contributes.keybindings) {
      assert.ok(contributed.includes(k.command), `keybinding for a contributed command: ${k.command}`);
    }
    for (const items of Object.values(pkg.contributes.menus)) {
      for (const item of items) {
        assert.ok(contributed.includes(item.command), `menu item for a contributed command: ${item.command}`);
      }
    }
    const views = Object.values(pkg.contributes.views).flat();
    assert.deepEqual(views.map((v) => v.id), ['parley.chatView']);
    assert.equal(views[0].type, 'webview');
    assert.ok(stub.providers.has('parley.chatView'));
    assert.ok(fs.existsSync(path.join(EXT_ROOT, pkg.contributes.viewsContainers.activitybar[0].icon)));
    for (const key of ['serverCommand', 'defaultModel', 'autoApprove']) {
      assert.ok(`parley.${key}` in pkg.contributes.configuration.properties, `setting parley.${key}`);
    }
    const status = stub.statusItems[0];
    assert.ok(status.shown);
    assert.equal(status.command, 'parley.openChat');
    assert.match(status.text, /0 tok/);
  });

  it('serves the chat page with a strict content security policy and local resources only', () => {
    const view = stub.showView('parley.chatView');
    const html = view.webview.html;
    const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]+)">/.exec(html)?.[1];
    assert.ok(csp, 'a CSP meta tag');
    assert.match(csp, /default-src 'none'/);
    const nonce = /script-src 'nonce-([A-Za-z0-9]+)'/.exec(csp)?.[1];
    assert.ok(nonce && nonce.length >= 16, 'scripts by nonce');
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    const scripts = [...html.matchAll(/<script ([^>]*)>/g)].map((m) => m[1]);
    assert.equal(scripts.length, 3); // markdown-it, highlight.js, the page script
    for (const s of scripts) {
      assert.ok(s.includes(`nonce="${nonce}"`));
      assert.match(s, /src="https:\/\/stub\.vscode-cdn\.net\/[^"]+"/);
    }
    const urls = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    for (const u of urls) {
      assert.ok(u.startsWith('https://stub.vscode-cdn.net/'), `local resource: ${u}`);
      const file = u.slice('https://stub.vscode-cdn.net'.length);
      assert.ok(fs.existsSync(file), `exists: ${file}`);
    }
    // Every stylesheet of media/chat/, each once, in the order of the cascade; each says what it styles.
    const sheets = [...html.matchAll(/<link rel="stylesheet" href="([^"]+)">/g)].map((m) => path.relative(path.join(EXT_ROOT, 'media', 'chat'), m[1].slice('https://stub.vscode-cdn.net'.length)));
    assert.deepEqual(sheets, CHAT_STYLESHEETS);
    assert.deepEqual([...sheets].sort(), fs.readdirSync(path.join(EXT_ROOT, 'media', 'chat')).sort());
    for (const sheet of sheets) {
      const [header] = fs.readFileSync(path.join(EXT_ROOT, 'media', 'chat', sheet), 'utf8').split('\n');
      assert.match(header, /^\/\* Chat view [^*]+\. \*\/$/, `${sheet}: a one-line header comment`);
    }
    const options = view.webview.options as { enableScripts: boolean; localResourceRoots: StubUri[] };
    assert.equal(options.enableScripts, true);
    assert.deepEqual(
      options.localResourceRoots.map((u) => path.relative(EXT_ROOT, u.fsPath)).sort(),
      ['media', path.join('out', 'common'), path.join('out', 'webview')],
    );
  });

  it('opens a tool call\'s location at its line when the page asks', async () => {
    const view = stub.showView('parley.chatView');
    const before = stub.shownDocuments.length;
    view.receive({ type: 'openLocation', path: path.join(dirs.workspace, 'geometry.py'), line: 10 });
    view.receive({ type: 'openLocation', path: 'pkg/mod.py' });
    const shown = await until(() => (stub.shownDocuments.length >= before + 2 ? stub.shownDocuments.slice(before) : undefined), 'two documents');
    const at = shown.map(({ uri, options }) => {
      const selection = (options as { selection: { start: { line: number; character: number } } }).selection;
      return `${uri.fsPath}@${selection.start.line}:${selection.start.character}`;
    });
    assert.deepEqual(at, [`${path.join(dirs.workspace, 'geometry.py')}@9:0`, `${path.join(dirs.workspace, 'pkg/mod.py')}@0:0`]);
  });

  it('inserts a code block\'s text at the active editor\'s cursors, and says so when no editor is open', async () => {
    const view = stub.showView('parley.chatView');
    const window = stub.exports.window as Record<string, unknown>;
    const replaced: { at: string; text: string }[] = [];
    const document = { uri: StubUri.file(path.join(dirs.workspace, 'geometry.py')) };
    const selections = [
      { start: { line: 2, character: 4 }, end: { line: 2, character: 4 } },
      { start: { line: 7, character: 0 }, end: { line: 7, character: 0 } },
    ];
    const editor = {
      document,
      viewColumn: 1,
      selections,
      edit: (build: (edit: { replace: (range: { start: { line: number; character: number } }, text: string) => void }) => void) => {
        build({ replace: (range, text) => replaced.push({ at: `${range.start.line}:${range.start.character}`, text }) });
        return Promise.resolve(true);
      },
    };
    const shownBefore = stub.shownDocuments.length;
    window.activeTextEditor = editor;
    try {
      view.receive({ type: 'insertCode', text: 'print(area(3, 4))' });
      await until(() => (stub.shownDocuments.length > shownBefore ? true : undefined), 'the editor focused');
      assert.deepEqual(replaced, [
        { at: '2:4', text: 'print(area(3, 4))' },
        { at: '7:0', text: 'print(area(3, 4))' },
      ]);
    } finally {
      window.activeTextEditor = undefined;
    }
    const before = stub.messages.length;
    view.receive({ type: 'insertCode', text: 'x = 1' });
    const said = await until(() => (stub.messages.length > before ? stub.messages[stub.messages.length - 1] : undefined), 'a message');
    assert.equal(said.level, 'info');
    assert.match(said.text, /open a file in an editor/);
    stub.messages.splice(before);
  });

  it('serves proposed edits as virtual documents, and says so when an edit is no longer pending', async () => {
    assert.ok(stub.contentProviders.has('parley-proposed'), 'the provider of the diff view\'s proposed side');
    const view = stub.showView('parley.chatView');
    const before = stub.messages.length;
    view.receive({ type: 'openDiff', toolCallId: 'gone', file: path.join(dirs.workspace, 'geometry.py') });
    const shown = await until(() => (stub.messages.length > before ? stub.messages[stub.messages.length - 1] : undefined), 'a message');
    assert.equal(shown.level, 'error');
    assert.match(shown.text, /no longer waiting for an answer/);
    assert.equal(stub.executed.filter((e) => e.id === 'vscode.diff').length, 0);
    stub.messages.splice(before); // the session test counts error messages from here on
  });

  it('asks about an edit outside the hidden chat with "Open diff" besides the options, and asks again after it', async () => {
    const window = stub.exports.window as Record<string, unknown>;
    const original = { info: window.showInformationMessage, warning: window.showWarningMessage };
    const params = {
      sessionId: 's',
      toolCall: {
        toolCallId: 'e1',
        title: 'Edit geometry.py',
        kind: 'edit' as const,
        content: [{ type: 'diff' as const, path: '/ws/geometry.py', oldText: 'a\n', newText: 'b\n' }],
      },
      options: [
        { optionId: 'allow', name: 'Allow once', kind: 'allow_once' as const },
        { optionId: 'reject', name: 'Reject', kind: 'reject_once' as const },
      ],
    };
    const shown: { items: unknown[] }[] = [];
    const answers = ['Open diff', 'Allow once'];
    const ask = (_text: string, ...items: unknown[]) => {
      shown.push({ items });
      return Promise.resolve(answers.shift());
    };
    let diffs = 0;
    const openDiffs = () => {
      diffs += 1;
      return Promise.resolve();
    };
    try {
      window.showInformationMessage = ask;
      const picked = await ext.askPermission(params, new AbortController().signal, false, openDiffs);
      assert.equal(picked, 'allow');
      assert.equal(diffs, 1);
      assert.deepEqual(shown.map((s) => s.items), [['Allow once', 'Reject', 'Open diff'], ['Allow once', 'Reject', 'Open diff']]);
      // With the chat in sight, the inline card asks alone.
      assert.equal(await ext.askPermission(params, new AbortController().signal, true, openDiffs), null);
      // A modal dialog shows the diff as its detail.
      stub.settings['parley.permissionPrompt'] = 'modal';
      shown.length = 0;
      answers.push('Reject');
      window.showWarningMessage = ask;
      assert.equal(await ext.askPermission(params, new AbortController().signal, true, openDiffs), 'reject');
      const [options, ...items] = shown[0].items as [{ modal: boolean; detail: string }, ...unknown[]];
      assert.equal(options.modal, true);
      assert.equal(options.detail, '/ws/geometry.py\n-a\n+b');
      assert.deepEqual(items, ['Allow once', 'Reject', 'Open diff']);
    } finally {
      window.showInformationMessage = original.info;
      window.showWarningMessage = original.warning;
      delete stub.settings['parley.permissionPrompt'];
    }
  });

  it('drives a session from the chat view messages', async (t) => {
    const view = stub.showView('parley.chatView');
    const metas = () => view.posted.filter((m): m is Extract<HostToView, { type: 'meta' }> & { type: string } => m.type === 'meta');
    const entries = () => foldViewMessages(view.posted).entries;
    view.receive({ type: 'ready' });
    assert.equal(view.posted[0]?.type, 'reset');

    if (skipServer) {
      // Without a server, the chat says so (once, in the view) and offers a restart.
      const notice = await until(
        () => entries().find((e) => e.kind === 'notice' && e.level === 'error'),
        'an error notice',
      );
      assert.match(notice.kind === 'notice' ? notice.text : '', /was not found|serverCommand/);
      assert.equal(stub.messages.filter((m) => m.level === 'error').length, 0, 'no pop-up as well');
      t.skip(`server part: ${skipServer}`);
      return;
    }

    await until(() => metas().find((m) => m.meta.serverState === 'ready' && m.meta.sessionId), 'a session');
    // The page is told the session's options and slash commands.
    const offered = await until(() => metas().find((m) => m.meta.commands.length > 0 && m.meta.configOptions.length > 0), 'the commands');
    assert.ok(offered.meta.commands.some((c) => c.name === 'cost'));
    assert.ok(offered.meta.configOptions.some((o) => o.category === 'model'));
    await fake!.script([{ text: 'Hello from **Parley**.' }]);
    view.receive({ type: 'send', text: 'Say hello' });
    await until(() => metas().find((m) => m.meta.busy), 'busy');
    await until(() => metas().slice(-1).find((m) => !m.meta.busy && m.meta.usage.sessionTokens > 0), 'the turn to end');
    const agent = entries().filter((e) => e.kind === 'agent').pop();
    assert.equal(agent?.kind === 'agent' && agent.text, 'Hello from **Parley**.');
    assert.ok(entries().some((e) => e.kind === 'user' && e.text === 'Say hello'));
    assert.match(stub.statusItems[0].text, /gpt-4\.1-mini · 15 tok/);
    assert.ok(stub.executed.some((e) => e.id === 'setContext' && e.args[0] === 'parley.busy'));

    // History lists the session; the restart command reloads it.
    view.receive({ type: 'listSessions' });
    const sessions = await until(
      () => view.posted.find((m) => m.type === 'sessions') as Extract<HostToView, { type: 'sessions' }> | undefined,
      'the session list',
    );
    assert.equal(sessions.sessions.length, 1);
    assert.equal(sessions.sessions[0].current, true);
    await stub.commands.get('parley.restartServer')!();
    assert.equal(stub.messages.filter((m) => m.level === 'error').length, 0, JSON.stringify(stub.messages));
  });

  it("the chat view's Retry, Export and Delete go through the host to the server", async (t) => {
    if (skipServer) {
      t.skip(`server part: ${skipServer}`);
      return;
    }
    const view = stub.showView('parley.chatView');
    const entries = () => foldViewMessages(view.posted).entries;
    const lastMeta = () => (view.posted.filter((m) => m.type === 'meta').pop() as Extract<HostToView, { type: 'meta' }> | undefined)?.meta;
    // The page (re)loads: the host resets it to the session it has.
    view.receive({ type: 'ready' });
    const reset = await until(() => view.posted.find((m) => m.type === 'reset') as Extract<HostToView, { type: 'reset' }> | undefined, 'reset');
    const before = reset.state.meta.sessionId;
    view.receive({ type: 'newSession' });
    await until(() => (lastMeta()?.sessionId && lastMeta()?.sessionId !== before && !lastMeta()?.busy ? true : undefined), 'a new session');
    const sessionId = lastMeta()!.sessionId!;

    // A provider failure: the error card offers Retry; Retry sends the same prompt, which now works.
    await fake!.script([{ text: 'Recovered after the retry.', fault: { kind: 'http', status: 401, times: 1 } }]);
    view.receive({ type: 'send', text: 'Please answer' });
    const card = await until(() => entries().find((e) => e.kind === 'notice' && e.level === 'error'), 'the error card');
    assert.deepEqual(card.kind === 'notice' && card.action, { label: 'Retry', message: { type: 'retry' } });
    view.receive(card.kind === 'notice' ? card.action!.message : {});
    await until(() => entries().find((e) => e.kind === 'agent' && e.text === 'Recovered after the retry.'), 'the answer after Retry');
    assert.equal(entries().filter((e) => e.kind === 'user' && e.text === 'Please answer').length, 1, 'the same prompt, sent again in place of the failed turn');

    // Export: a save dialog that starts outside the workspace (the home folder), named for the
    // session; the server's Markdown (the same as `parley export`) in the chosen file.
    const exports = fs.mkdtempSync(path.join(os.tmpdir(), 'parley-exports-'));
    const target = path.join(exports, 'exported.md');
    stub.saveAnswer = StubUri.file(target);
    view.receive({ type: 'exportSession', sessionId });
    const markdown = await until(() => stub.disk.get(target), 'the exported file');
    assert.equal(markdown, cliExport(sessionId, dirs.home));
    assert.match(markdown, /## You\n\nPlease answer\n/);
    assert.match(markdown, /## Parley\n\nRecovered after the retry\.\n/);
    const dialog = stub.saveDialogs.at(-1) as { saveLabel?: string; defaultUri: StubUri };
    assert.equal(dialog.saveLabel, 'Export');
    assert.equal(dialog.defaultUri.fsPath, path.join(os.homedir(), 'please-answer.md'));
    // The next export starts where this one went (the user chose it).
    stub.saveAnswer = undefined;
    const asked = stub.saveDialogs.length;
    view.receive({ type: 'exportSession', sessionId });
    await until(() => (stub.saveDialogs.length > asked ? true : undefined), 'the second dialog');
    assert.equal((stub.saveDialogs.at(-1) as { defaultUri: StubUri }).defaultUri.fsPath, path.join(exports, 'please-answer.md'));
    fs.rmSync(exports, { recursive: true, force: true });

    // Delete (the view has asked): the server forgets it, the list comes back without it, a new session is shown.
    const lists = () => view.posted.filter((m) => m.type === 'sessions') as Extract<HostToView, { type: 'sessions' }>[];
    const listed = lists().length;
    view.receive({ type: 'deleteSession', sessionId });
    const list = await until(() => (lists().length > listed ? lists().at(-1) : undefined), 'the list after Delete');
    assert.equal(list.canDelete, true);
    assert.ok(!list.sessions.some((s) => s.sessionId === sessionId), 'the deleted session is gone');
    await until(() => (lastMeta()?.sessionId && lastMeta()?.sessionId !== sessionId ? true : undefined), 'a new session shown');
    assert.equal(stub.messages.filter((m) => m.level === 'error').length, 0, JSON.stringify(stub.messages));
  });
});
