/**
 * The extension host's session keeping, log and Restricted Mode, activated in plain Node with
 * the stand-in `vscode` module against the real `parley serve` and the fake LLM: an empty
 * session is not kept (nor stored), the open conversation comes back after a window reload
 * with its title, History keeps titles, the log channel has the extension's and the server's
 * lines at their levels, and in Restricted Mode the chat says why Parley is off.
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import type { HostToView, ViewState } from '../src/common/view';
import type { LogLevel } from '../src/core/controller';
import { FakeLLM, PARLEY, delay, serverEnv, serverUnavailable, tempDirs, until } from './harness';
import { StubMemento, StubUri, type StubWebviewView, VscodeStub } from './vscodeStub';
import { foldViewMessages } from './viewModel';

const EXT_ROOT = path.resolve(__dirname, '..', '..');
const pkg = JSON.parse(fs.readFileSync(path.join(EXT_ROOT, 'package.json'), 'utf8')) as {
  main: string;
  capabilities?: { untrustedWorkspaces?: { supported: boolean | 'limited'; description?: string } };
};

interface ExtensionModule {
  activate(context: unknown): void;
  deactivate(): Promise<void>;
  OPEN_SESSION_KEY: string;
  RESTRICTED_MODE_TEXT: string;
  logWriter(output: unknown): (line: string, level?: LogLevel) => void;
  serverLogLevel(level: number | undefined): string | undefined;
}

type Meta = ViewState['meta'];
type Entry = ViewState['entries'][number];

/** What the page was told: the last meta, and every entry as the page shows it (by id). */
function shown(view: StubWebviewView): { meta: Meta | undefined; entries: Entry[] } {
  return foldViewMessages(view.posted);
}

describe('the extension host: sessions across reloads, the log, Restricted Mode', () => {
  const stub = new VscodeStub();
  const dirs = tempDirs();
  const workspaceState = new StubMemento();
  let ext: ExtensionModule;
  let fake: FakeLLM | undefined;
  let skip: string | undefined;
  let context: { subscriptions: { dispose(): unknown }[]; [k: string]: unknown } | undefined;
  /** The session with a prompt that the reload test made (the Restricted Mode test reopens it). */
  let stored: string | undefined;

  /** A window: the extension activated with this workspace's state (as a reload does). */
  function openWindow(version?: string): void {
    context = {
      subscriptions: [],
      extensionUri: StubUri.file(EXT_ROOT),
      extensionPath: EXT_ROOT,
      globalStorageUri: StubUri.file(path.join(dirs.home, 'storage')),
      extension: { packageJSON: version ? { ...pkg, version } : pkg },
      workspaceState,
      globalState: new StubMemento(),
    };
    ext.activate(context);
  }

  /**
   * The window closes (or reloads) as VS Code closes it: `deactivate` is called and the
   * extension's subscriptions (its output channels among them) are disposed right after,
   * without waiting for what `deactivate` still does.
   */
  async function closeWindow(): Promise<void> {
    const deactivated = ext.deactivate();
    for (const d of context?.subscriptions ?? []) {
      d.dispose();
    }
    context = undefined;
    await deactivated;
  }

  before(async () => {
    stub.install();
    stub.workspaceRoot = dirs.workspace;
    stub.logLevel = 3; // Info, VS Code's default
    skip = await serverUnavailable();
    if (!skip) {
      fake = await FakeLLM.start();
      stub.settings = { 'parley.serverCommand': PARLEY, 'parley.serverEnv': serverEnv(fake, dirs.home) };
    }
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    ext = require(path.join(EXT_ROOT, pkg.main)) as ExtensionModule;
  });

  after(async () => {
    if (context) {
      await closeWindow();
    }
    await fake?.stop();
    dirs.cleanup();
  });

  it('declares limited support for untrusted workspaces', () => {
    const untrusted = pkg.capabilities?.untrustedWorkspaces;
    assert.equal(untrusted?.supported, 'limited');
    assert.match(untrusted?.description ?? '', /Restricted Mode/);
  });

  it('writes the server\'s stderr lines at the level they name, and the server logs at the channel\'s level', () => {
    const written: string[] = [];
    const channel = Object.fromEntries(
      ['debug', 'info', 'warn', 'error'].map((level) => [level, (s: string) => written.push(`${level}: ${s}`)]),
    );
    const log = ext.logWriter(channel);
    log('Starting the Parley server: parley serve (in /w)');
    log('2026-11-25 03:40:00,123 WARNING parley.agent.turn: The model said nothing', 'server');
    log('Traceback (most recent call last):', 'server');
    log('2026-11-25 03:40:01,000 INFO httpx: HTTP Request: POST http://x/v1/chat/completions', 'server');
    log('[parley] process error: spawn ENOENT', 'server');
    log('Could not load session s1: gone', 'warn');
    assert.deepEqual(written, [
      'info: Starting the Parley server: parley serve (in /w)',
      'warn: [server] parley.agent.turn: The model said nothing',
      'warn: [server] Traceback (most recent call last):',
      'info: [server] httpx: HTTP Request: POST http://x/v1/chat/completions',
      'info: [parley] process error: spawn ENOENT',
      'warn: Could not load session s1: gone',
    ]);
    assert.deepEqual([1, 2, 3, 4, 5, undefined].map((l) => ext.serverLogLevel(l)), ['DEBUG', 'DEBUG', 'INFO', 'WARNING', 'ERROR', undefined]);
  });

  it('keeps only a session with a prompt, reopens it after a reload with its title, and History keeps titles', async (t) => {
    if (skip) {
      return t.skip(skip);
    }
    openWindow();
    let view = stub.showView('parley.chatView');
    view.receive({ type: 'ready' });
    const first = await until(() => shown(view).meta?.sessionId, 'a session');
    stored = first;
    // An empty session is neither kept for the next window nor stored by the server.
    assert.equal(workspaceState.get(ext.OPEN_SESSION_KEY), undefined);
    assert.ok(stub.log.some((l) => l.startsWith('Starting the Parley server: ')), stub.log.join('\n'));
    assert.ok(stub.log.some((l) => l === `New session ${first} (stored from its first prompt).`), stub.log.join('\n'));

    await fake!.script([{ text: 'Triangles have three sides.' }]);
    view.receive({ type: 'send', text: 'How many sides has a triangle?' });
    await until(() => (shown(view).meta?.title === 'How many sides has a triangle?' && !shown(view).meta?.busy ? true : undefined), 'the turn and its title');
    assert.deepEqual(workspaceState.get(ext.OPEN_SESSION_KEY), { sessionId: first, title: 'How many sides has a triangle?' });
    // The server's own log lines, at Info (the channel's level): its HTTP requests to the model.
    await until(() => stub.log.find((l) => l.startsWith('[server] ') && l.includes('HTTP Request: POST')), 'a server log line');

    // New: an empty chat, nothing kept; History still lists only the session with a prompt.
    view.receive({ type: 'newSession' });
    await until(() => (shown(view).meta?.sessionId !== first && shown(view).meta?.sessionId ? true : undefined), 'a new session');
    assert.equal(workspaceState.get(ext.OPEN_SESSION_KEY), undefined);
    view.receive({ type: 'listSessions' });
    const list = await until(() => view.posted.find((m) => m.type === 'sessions') as Extract<HostToView, { type: 'sessions' }> | undefined, 'the list');
    assert.deepEqual(list.sessions.map((s) => [s.sessionId, s.title]), [[first, 'How many sides has a triangle?']]);

    // Reopened from History (the page sends the id alone): the title is kept.
    view.receive({ type: 'loadSession', sessionId: first });
    await until(() => (shown(view).meta?.sessionId === first && !shown(view).meta?.loading ? true : undefined), 'the session loaded');
    assert.equal(shown(view).meta?.title, 'How many sides has a triangle?');
    assert.ok(shown(view).entries.some((e) => e.kind === 'agent' && e.text === 'Triangles have three sides.'));
    assert.deepEqual(workspaceState.get(ext.OPEN_SESSION_KEY), { sessionId: first, title: 'How many sides has a triangle?' });

    // A window reload: the same conversation, replayed, with its title.
    await closeWindow();
    stub.log.length = 0;
    openWindow();
    view = stub.showView('parley.chatView');
    view.receive({ type: 'ready' });
    await until(() => (shown(view).meta?.sessionId === first && !shown(view).meta?.loading ? true : undefined), 'the session back');
    const after = shown(view);
    assert.equal(after.meta?.title, 'How many sides has a triangle?');
    assert.deepEqual(
      after.entries.filter((e) => e.kind === 'user' || e.kind === 'agent').map((e) => (e.kind === 'user' || e.kind === 'agent' ? e.text : '')),
      ['How many sides has a triangle?', 'Triangles have three sides.'],
    );
    assert.ok(stub.log.includes(`Loaded session ${first} (How many sides has a triangle?).`), stub.log.join('\n'));
    await closeWindow();
  });

  it('a window reload writes nothing to the output channels it disposed (no "Channel has been closed")', async (t) => {
    if (skip) {
      return t.skip(skip);
    }
    stub.closedChannelWrites.length = 0;
    openWindow();
    const view = stub.showView('parley.chatView');
    view.receive({ type: 'ready' });
    await until(() => shown(view).meta?.sessionId, 'a session');
    await fake!.script([{ text: 'Still here.' }]);
    view.receive({ type: 'send', text: 'Are you there?' });
    await until(() => (shown(view).entries.some((e) => e.kind === 'agent' && e.text === 'Still here.') && !shown(view).meta?.busy ? true : undefined), 'the answer');
    await closeWindow();
    // What the closing session and the stopping server say comes after the channels closed.
    await delay(500);
    assert.deepEqual(stub.closedChannelWrites, []);
    // The lines said before it closed are in the log (the session closed in the server).
    assert.ok(stub.log.some((l) => l.startsWith('Closing session ')), stub.log.join('\n'));
  });

  it('a server of another version: one warning and one log line, naming both versions, not again at a restart', async (t) => {
    if (skip) {
      return t.skip(skip);
    }
    const warnings = () => stub.messages.filter((m) => m.level === 'warning').map((m) => m.text);
    stub.messages.length = 0;
    // The extension's own version: the server's; nothing said.
    openWindow();
    let view = stub.showView('parley.chatView');
    view.receive({ type: 'ready' });
    await until(() => shown(view).meta?.sessionId, 'a session');
    assert.deepEqual(warnings(), []);
    await closeWindow();
    // An extension of another version than the server's (the real one: its initialize's agentInfo).
    stub.log.length = 0;
    openWindow('0.0.1-test');
    view = stub.showView('parley.chatView');
    view.receive({ type: 'ready' });
    await until(() => shown(view).meta?.sessionId, 'a session');
    const said = warnings();
    assert.equal(said.length, 1, said.join('\n'));
    // The server given by the setting: the extension does not manage it, so no install button; how to update.
    assert.match(said[0], /^Parley server \d+\.\d+\.\d+\S* differs from this extension's 0\.0\.1-test: update the server \(uv tool upgrade parley-code/);
    assert.deepEqual(stub.log.filter((l) => l === said[0]), [said[0]], 'the same line in the log, once');
    await stub.commands.get('parley.restartServer')!();
    await until(() => (shown(view).meta?.serverState === 'ready' ? true : undefined), 'the server again');
    assert.equal(warnings().length, 1, 'not again when the same server restarts');
    await closeWindow();
  });

  it('reopens a new session, saying why, when the kept one is gone', async (t) => {
    if (skip) {
      return t.skip(skip);
    }
    await workspaceState.update(ext.OPEN_SESSION_KEY, { sessionId: 'sess-deleted-meanwhile', title: 'Gone' });
    openWindow();
    const view = stub.showView('parley.chatView');
    view.receive({ type: 'ready' });
    const notice = await until(() => shown(view).entries.find((e) => e.kind === 'notice' && /could not be reopened/.test(e.text)), 'a notice');
    assert.equal(notice.kind === 'notice' && notice.level, 'warning');
    const meta = await until(() => (shown(view).meta?.sessionId && !shown(view).meta?.loading ? shown(view).meta : undefined), 'a session');
    assert.notEqual(meta?.sessionId, 'sess-deleted-meanwhile');
    assert.equal(meta?.title, undefined);
    assert.equal(workspaceState.get(ext.OPEN_SESSION_KEY), undefined);
    await closeWindow();
  });

  it('in Restricted Mode says why Parley is off and starts no server; trusted, it reopens the kept session', async (t) => {
    stub.trusted = false;
    stub.log.length = 0;
    if (stored) {
      await workspaceState.update(ext.OPEN_SESSION_KEY, { sessionId: stored, title: 'How many sides has a triangle?' });
    }
    try {
      openWindow();
      const view = stub.showView('parley.chatView');
      view.receive({ type: 'ready' });
      const notice = await until(() => shown(view).entries.find((e) => e.kind === 'notice' && e.text === ext.RESTRICTED_MODE_TEXT), 'the notice');
      assert.equal(notice.kind === 'notice' && notice.level, 'warning');
      assert.match(ext.RESTRICTED_MODE_TEXT, /Restricted Mode.*Trust the folder/s);
      view.receive({ type: 'send', text: 'hello' });
      await delay(300);
      assert.ok(!stub.log.some((l) => l.startsWith('Starting the Parley server')), stub.log.join('\n'));
      assert.equal(shown(view).entries.filter((e) => e.kind === 'notice').length, 1, 'said once');
      assert.notEqual(shown(view).meta?.serverState, 'ready');
      if (skip) {
        return t.skip(`after trust: ${skip}`);
      }
      stub.trusted = true;
      assert.equal(stub.trustListeners.length, 1, 'one window listens');
      stub.trustListeners[0]();
      // The session kept from the last window, not a new one: held back, not forgotten.
      await until(() => (shown(view).meta?.sessionId === stored && !shown(view).meta?.loading ? true : undefined), 'the kept session after trust');
      assert.equal(shown(view).meta?.title, 'How many sides has a triangle?');
      assert.ok(shown(view).entries.some((e) => e.kind === 'agent' && e.text === 'Triangles have three sides.'));
    } finally {
      stub.trusted = true;
      if (context) {
        await closeWindow();
      }
    }
  });
});
