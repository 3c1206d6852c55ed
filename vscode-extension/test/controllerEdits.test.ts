/**
 * The chat controller and the editor's files, against scripted stand-in servers (`peer.ts`):
 * the file methods answered through the editor, an edit's permission and write, and undo
 * turn (`_parley/session/restore`). Each test checks both what the controller sends or
 * answers and what the view's state shows.
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { ChatController } from '../src/core/controller';
import { fileNotFound } from '../src/core/fileAccess';
import { INITIALIZE, SESSION, TURN, USAGE, text, withController } from './controllerHarness';
import { Peer, type PeerScript } from './peer';
import { serverWordsCases } from './sharedCases';

describe('chat controller: files through the editor', () => {
  it('advertises fs, answers fs/read_text_file from the editor and applies fs/write_text_file through it', async () => {
    const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'parley-ctl-files-')));
    const file = path.join(root, 'geometry.py');
    const editor = new Map([[file, 'def area(w, h):\n    return w * w\n']]);
    const writes: [string, string][] = [];
    const peer = new Peer({
      initialize: INITIALIZE,
      'session/new': { result: { sessionId: '$session' } },
      'session/prompt': {
        requests: [
          { method: 'fs/read_text_file', params: { sessionId: '$session', path: file, line: 2, limit: 1 } },
          { method: 'fs/write_text_file', params: { sessionId: '$session', path: file, content: 'def area(w, h):\n    return w * h\n' } },
          { method: 'fs/write_text_file', params: { sessionId: '$session', path: path.join(root, '..', 'elsewhere.py'), content: 'x' } },
          { method: 'fs/read_text_file', params: { sessionId: '$session', path: path.join(root, 'missing.py') } },
        ],
        result: { stopReason: 'end_turn', _meta: { parley: { usage: USAGE, turn: TURN, session: { ...SESSION, turns: 1 } } } },
      },
    });
    const ctl = new ChatController({
      workspaceRoot: () => root,
      settings: () => ({ server: peer.server }),
      log: (line) => peer.log.push(line),
      files: {
        read: (f) => (editor.has(f) ? Promise.resolve(editor.get(f)!) : Promise.reject(fileNotFound(f))),
        write: (f, content) => {
          writes.push([f, content]);
          editor.set(f, content);
          return Promise.resolve();
        },
      },
    });
    try {
      await ctl.send('fix area');
      const [init] = peer.received('initialize');
      const caps = init.params.clientCapabilities as { fs?: unknown };
      assert.deepEqual(caps.fs, { readTextFile: true, writeTextFile: true });
      const answers = peer.answers();
      assert.deepEqual(answers[0], { method: 'fs/read_text_file', result: { content: '    return w * w\n' } });
      assert.deepEqual(answers[1], { method: 'fs/write_text_file', result: {} });
      assert.equal(answers[2].error?.code, -32602);
      assert.match(answers[2].error?.message ?? '', /outside the workspace folder/);
      assert.equal(answers[3].error?.code, -32002);
      assert.deepEqual(writes, [[file, 'def area(w, h):\n    return w * h\n']], 'the port got the content; nothing outside');
    } finally {
      await ctl.dispose();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('an edit: the permission prompt keeps the proposal for the diff view; allowed, it is written through the port', async () => {
    const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'parley-ctl-edit-')));
    const file = path.join(root, 'app.py');
    const oldText = 'x = 1\n';
    const newText = 'x = 2\n';
    const writes: [string, string][] = [];
    const diff = { type: 'diff', path: file, oldText, newText };
    const peer = new Peer({
      initialize: INITIALIZE,
      'session/new': { result: { sessionId: '$session' } },
      'session/prompt': {
        before: [
          {
            sessionId: '$session',
            update: { sessionUpdate: 'tool_call', toolCallId: 'e1', title: 'Edit app.py', kind: 'edit', status: 'pending', content: [diff], locations: [{ path: file, line: 1 }] },
          },
        ],
        requests: [
          {
            method: 'session/request_permission',
            params: {
              sessionId: '$session',
              toolCall: { toolCallId: 'e1', title: 'Edit app.py', kind: 'edit', rawInput: { path: 'app.py' }, content: [diff] },
              options: [
                { optionId: 'allow', name: 'Allow once', kind: 'allow_once' },
                { optionId: 'reject', name: 'Reject', kind: 'reject_once' },
              ],
            },
          },
          { method: 'fs/write_text_file', params: { sessionId: '$session', path: file, content: newText } },
        ],
        result: { stopReason: 'end_turn', _meta: { parley: { usage: USAGE, turn: TURN, session: { ...SESSION, turns: 1 } } } },
      },
    });
    const ctl = new ChatController({
      workspaceRoot: () => root,
      settings: () => ({ server: peer.server }),
      log: (line) => peer.log.push(line),
      files: {
        read: () => Promise.resolve(oldText),
        write: (f, content) => {
          writes.push([f, content]);
          return Promise.resolve();
        },
      },
    });
    try {
      const turn = ctl.send('make x 2');
      let card = ctl.state.entries.find((e) => e.kind === 'permission');
      for (let i = 0; i < 500 && !card; i++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        card = ctl.state.entries.find((e) => e.kind === 'permission');
      }
      assert.ok(card?.kind === 'permission', 'the permission card');
      assert.equal(card.content[0].kind, 'diff');
      assert.deepEqual(ctl.proposedEdit('e1', file), { toolCallId: 'e1', file, oldText, newText });
      assert.deepEqual(writes, [], 'nothing written before the answer');
      ctl.answerPermission(card.requestId, 'allow');
      assert.equal(ctl.proposedEdit('e1', file), undefined, 'answered: no longer offered');
      assert.equal(await turn, 'end_turn');
      assert.deepEqual(peer.answers().map((a) => a.method), ['session/request_permission', 'fs/write_text_file']);
      assert.deepEqual(peer.answers()[0].result, { outcome: { outcome: 'selected', optionId: 'allow' } });
      assert.deepEqual(writes, [[file, newText]], 'the port got the content');
    } finally {
      await ctl.dispose();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('advertises no fs when the host gives no editor files', async () => {
    await withController({ initialize: INITIALIZE, 'session/new': { result: { sessionId: '$session' } } }, async (ctl, peer) => {
      await ctl.newSession();
      const [init] = peer.received('initialize');
      assert.equal((init.params.clientCapabilities as { fs?: unknown }).fs, undefined);
    });
  });
});

describe('chat controller: undo turn', () => {
  /** A turn that writes two files through the editor; the session has had two turns after it. */
  const editingTurn = (root: string): PeerScript => ({
    initialize: INITIALIZE,
    'session/new': { result: { sessionId: '$session' } },
    'session/prompt': {
      requests: [
        { method: 'fs/write_text_file', params: { sessionId: '$session', path: path.join(root, 'app.py'), content: 'x = 2\n' } },
        { method: 'fs/write_text_file', params: { sessionId: '$session', path: path.join(root, 'new.py'), content: 'y = 1\n' } },
      ],
      result: { stopReason: 'end_turn', _meta: { parley: { usage: USAGE, turn: TURN, session: { ...SESSION, turns: 2 } } } },
    },
  });
  const withEditor = async (scriptFor: (root: string) => PeerScript, fn: (ctl: ChatController, peer: Peer, root: string) => Promise<void>) => {
    const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'parley-ctl-undo-')));
    const peer = new Peer(scriptFor(root));
    const ctl = new ChatController({
      workspaceRoot: () => root,
      settings: () => ({ server: peer.server }),
      log: (line) => peer.log.push(line),
      files: { read: () => Promise.resolve(''), write: () => Promise.resolve() },
    });
    try {
      await fn(ctl, peer, root);
    } finally {
      await ctl.dispose();
      fs.rmSync(root, { recursive: true, force: true });
    }
  };
  const notices = (ctl: ChatController) => ctl.state.entries.flatMap((e) => (e.kind === 'notice' ? [`${e.level}: ${e.text}`] : []));
  const turnEntries = (ctl: ChatController) => ctl.state.entries.filter((e) => e.kind === 'turn');

  it('a turn that wrote files ends with its turn entry; undo sends _parley/session/restore and shows what it did', async () => {
    await withEditor(
      (root) => ({
        ...editingTurn(root),
        '_parley/session/restore': {
          result: {
            files: [
              { path: path.join(root, 'app.py'), action: 'restored' },
              { path: path.join(root, 'new.py'), action: 'removed' },
            ],
            text: 'Restored the files of turn 2 as they were before it:\n- `app.py` restored\n- `new.py` removed',
          },
        },
      }),
      async (ctl, peer) => {
        await ctl.send('edit two files');
        const [entry] = turnEntries(ctl);
        assert.ok(entry?.kind === 'turn');
        assert.deepEqual([entry.turn, entry.files, entry.undo], [2, ['app.py', 'new.py'], 'ready'], 'numbered by the session\'s totals');

        const result = await ctl.undoTurn(); // the command: the latest turn that edited files
        assert.deepEqual(peer.received('_parley/session/restore').map((r) => r.params), [{ sessionId: ctl.sessionId, turn: 2 }]);
        assert.equal(result.files.length, 2);
        const [undone] = turnEntries(ctl);
        assert.ok(undone.kind === 'turn');
        assert.equal(undone.undo, 'undone');
        assert.deepEqual(undone.restored, [
          { path: 'app.py', action: 'restored' },
          { path: 'new.py', action: 'removed' },
        ]);
        assert.deepEqual(notices(ctl), ['info: Restored the files of turn 2 as they were before it:\n- `app.py` restored\n- `new.py` removed'], 'the server\'s words');
        assert.equal(ctl.state.entries.filter((e) => e.kind === 'user').length, 1, 'the conversation stays');

        // Nothing left shown to undo: the command says so rather than restore nothing.
        await assert.rejects(ctl.undoTurn(), /no turn to undo/);
        // The view's button names its turn.
        await ctl.undoTurn(1);
        assert.deepEqual(peer.received('_parley/session/restore').map((r) => r.params.turn), [2, 1]);
      },
    );
  });

  it('says so in the chat when the restore fails, or there is nothing to undo', async () => {
    await withEditor(
      (root) => ({ ...editingTurn(root), '_parley/session/restore': { error: { code: -32003, message: 'The session is busy in another window' } } }),
      async (ctl) => {
        await assert.rejects(ctl.undoTurn(), /no turn to undo/);
        assert.deepEqual(notices(ctl), ['warning: There is no turn to undo in this session. (/undo restores the latest turn whose edits can still be undone.)']);
        await ctl.send('edit two files');
        await assert.rejects(ctl.undoTurn(), (err: { code?: number }) => err.code === -32003);
        const [entry] = turnEntries(ctl);
        assert.ok(entry.kind === 'turn');
        assert.equal(entry.undo, 'ready', 'the button is offered again');
        assert.deepEqual(notices(ctl), ['error: Could not undo turn 2: The session is busy in another window.']);
      },
    );
  });

  it('shows each restore answer of the shared cases in the server\'s words (tests/server-words-cases.json)', async () => {
    const cases = serverWordsCases().restore;
    assert.ok(cases.length >= 5);
    for (const { name, result, level, undone } of cases) {
      await withEditor(
        (root) => ({
          ...editingTurn(root),
          '_parley/session/restore': {
            result: {
              ...result,
              files: result.files.map((f) => ({ ...f, path: path.join(root, f.path) })),
              ...(result.failed ? { failed: result.failed.map((f) => ({ ...f, path: path.join(root, f.path) })) } : {}),
            },
          },
        }),
        async (ctl) => {
          await ctl.send('edit two files');
          await ctl.undoTurn();
          assert.deepEqual(notices(ctl), [`${level}: ${result.text}`], name);
          const [entry] = turnEntries(ctl);
          assert.ok(entry.kind === 'turn');
          assert.equal(entry.undo, undone ? 'undone' : 'ready', name);
        },
      );
    }
  });

  it('after a reload, the session\'s last turn offers Undo turn when it edited files', async () => {
    await withEditor(
      (root) => ({
        initialize: INITIALIZE,
        'session/new': { result: { sessionId: '$session' } },
        'session/load': {
          before: [
            { sessionId: '$session', update: { sessionUpdate: 'user_message_chunk', content: text('make x 2') } },
            {
              sessionId: '$session',
              update: {
                sessionUpdate: 'tool_call',
                toolCallId: 'e1',
                title: 'Edit app.py',
                kind: 'edit',
                status: 'completed',
                content: [{ type: 'diff', path: path.join(root, 'app.py'), oldText: 'x = 1\n', newText: 'x = 2\n' }],
                locations: [{ path: path.join(root, 'app.py'), line: 1 }],
              },
            },
            { sessionId: '$session', update: { sessionUpdate: 'agent_message_chunk', messageId: 'm1', content: text('Done.') } },
          ],
          result: { _meta: { parley: { usage: { ...SESSION, turns: 3 }, model: 'openai:a' } } },
        },
        '_parley/session/restore': { result: { files: [{ path: path.join(root, 'app.py'), action: 'restored' }] } },
      }),
      async (ctl, peer) => {
        await ctl.loadSession('stored-1', 'Make x 2');
        const [entry] = turnEntries(ctl);
        assert.ok(entry?.kind === 'turn');
        assert.deepEqual([entry.turn, entry.files, entry.undo], [3, ['app.py'], 'ready']);
        await ctl.undoTurn();
        assert.deepEqual(peer.received('_parley/session/restore').map((r) => r.params), [{ sessionId: 'stored-1', turn: 3 }]);
      },
    );
  });
});
