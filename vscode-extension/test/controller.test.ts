/**
 * The chat controller against scripted stand-in servers (`peer.ts`) for the second edition of
 * the contract, which the real server on main does not speak yet: usage totals in the prompt
 * result, `configOptions` and `session/set_config_option`, `session/resume` and
 * `session/close`, slash commands. Each test checks both what the controller sends and what
 * the view's state shows.
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { ChatController, type KeptNotice } from '../src/core/controller';
import { fileNotFound } from '../src/core/fileAccess';
import { Peer, type PeerScript } from './peer';
import { serverWordsCases } from './sharedCases';

const USAGE = { inputTokens: 12, outputTokens: 3, totalTokens: 15 };
const TURN = { rounds: 1, streamedRounds: 1, syncFallbacks: 0, discardedStreams: 0, toolCalls: 0, cost: null, model: 'openai:a' };
const SESSION = { inputTokens: 120, outputTokens: 30, totalTokens: 150, cost: { amount: 0.25, currency: 'USD' }, turns: 4, rounds: 5 };

const INITIALIZE = {
  result: {
    protocolVersion: 1,
    agentCapabilities: { loadSession: true },
    _meta: {
      parley: {
        defaultModel: 'openai:a',
        models: [
          { id: 'openai:a', provider: 'openai', available: true },
          { id: 'openai:b', provider: 'openai', available: true },
        ],
      },
    },
  },
};

/** A controller on `peer`; its log goes to the peer (which reads what it received from it). */
function controllerOn(peer: Peer): ChatController {
  return new ChatController({
    workspaceRoot: () => os.tmpdir(),
    settings: () => ({ server: peer.server, toolPolicy: 'hybrid' }),
    log: (line) => peer.log.push(line),
  });
}

async function withController(script: PeerScript, fn: (ctl: ChatController, peer: Peer) => Promise<void>): Promise<void> {
  const peer = new Peer(script);
  const ctl = controllerOn(peer);
  try {
    await fn(ctl, peer);
  } finally {
    await ctl.dispose();
  }
}

describe('chat controller: usage', () => {
  const BREAKDOWN = { uncachedInput: 0.1, cacheReads: 0.05, cacheWrites: 0.02, output: 0.08, currency: 'USD' };

  it('shows the session totals of the prompt result, without asking _parley/usage', async () => {
    await withController(
      {
        initialize: INITIALIZE,
        'session/new': { result: { sessionId: '$session' } },
        'session/prompt': {
          result: { stopReason: 'end_turn', _meta: { parley: { usage: USAGE, turn: { ...TURN, costBreakdown: BREAKDOWN, wastedTokensEstimate: 40 }, session: SESSION } } },
        },
        '_parley/usage': { result: { total: SESSION, session: SESSION } },
      },
      async (ctl, peer) => {
        assert.equal(await ctl.send('hello'), 'end_turn');
        assert.deepEqual(ctl.state.meta.usage, {
          sessionTokens: 150,
          inputTokens: 120,
          outputTokens: 30,
          cost: { amount: 0.25, currency: 'USD' },
          turns: 4,
          lastTurn: { costBreakdown: BREAKDOWN, wastedTokensEstimate: 40 },
        });
        assert.deepEqual(peer.received('_parley/usage'), []);
      },
    );
  });

  it('shows the totals of the usage_updates during a turn, and asks no _parley/usage after it', async () => {
    const call = { inputTokens: 7, outputTokens: 1, totalTokens: 8 };
    // Totals that are no sum of the calls: the view must show them as they are.
    const during = { ...SESSION, inputTokens: 1000, outputTokens: 200, totalTokens: 1200, cachedReadTokens: 900, cost: { amount: 0.3, currency: 'USD' } };
    const costBreakdown = { uncachedInput: 0.01, cacheReads: 0.001, cacheWrites: 0, output: 0.004, currency: 'USD' };
    await withController(
      {
        initialize: INITIALIZE,
        'session/new': { result: { sessionId: '$session' } },
        'session/prompt': {
          before: [
            { sessionId: '$session', update: { sessionUpdate: 'usage_update', used: 8, cost: during.cost, _meta: { parley: { call, session: during } } } },
          ],
          // The prompt answers without session totals: what the usage_update said stays.
          result: { stopReason: 'end_turn', _meta: { parley: { usage: call, turn: { ...TURN, costBreakdown } } } },
        },
        '_parley/usage': { result: { total: SESSION, session: SESSION } },
      },
      async (ctl, peer) => {
        assert.equal(await ctl.send('hello'), 'end_turn');
        assert.deepEqual(ctl.state.meta.usage, {
          sessionTokens: 1200,
          inputTokens: 1000,
          outputTokens: 200,
          cachedReadTokens: 900,
          contextUsed: 8,
          cost: { amount: 0.3, currency: 'USD' },
          turns: 4,
        });
        // Give a stray after-turn request time to arrive before saying there was none.
        await new Promise((resolve) => setTimeout(resolve, 200));
        assert.deepEqual(peer.received('_parley/usage'), []);
      },
    );
  });
});

const MODEL_OPTION = (current: string) => ({
  id: 'model',
  name: 'Model',
  category: 'model',
  type: 'select',
  currentValue: current,
  options: [
    { value: 'openai:a', name: 'openai:a' },
    { value: 'openai:b', name: 'openai:b' },
  ],
});
const POLICY_OPTION = (current: string) => ({
  id: 'tool_policy',
  name: 'Tool policy',
  type: 'select',
  currentValue: current,
  options: ['hybrid', 'stream', 'sync'].map((v) => ({ value: v, name: v })),
});

describe('chat controller: configuration options', () => {
  it('keeps the options of session/new and config_option_update, and sets them with session/set_config_option', async () => {
    await withController(
      {
        initialize: INITIALIZE,
        'session/new': {
          result: { sessionId: '$session', configOptions: [MODEL_OPTION('openai:a'), POLICY_OPTION('hybrid')] },
          // Sent before the answer: the controller does not know the session's id yet.
          before: [{ sessionId: '$session', update: { sessionUpdate: 'config_option_update', configOptions: [MODEL_OPTION('openai:a'), POLICY_OPTION('stream')] } }],
        },
        'session/set_config_option': { result: { configOptions: [MODEL_OPTION('openai:b'), POLICY_OPTION('sync')] } },
      },
      async (ctl, peer) => {
        const sessionId = await ctl.newSession();
        assert.equal(ctl.state.meta.model, 'openai:a');
        assert.equal(ctl.state.meta.toolPolicy, 'stream', 'the update that came before the answer is applied');
        assert.deepEqual(ctl.state.meta.configOptions.map((o) => o.id), ['model', 'tool_policy']);

        await ctl.selectModel('openai:b');
        await ctl.setConfigOption('tool_policy', 'sync');
        assert.deepEqual(
          peer.received('session/set_config_option').map((r) => r.params),
          [
            { sessionId, configId: 'model', value: 'openai:b' },
            { sessionId, configId: 'tool_policy', value: 'sync' },
          ],
        );
        assert.deepEqual(peer.received('_parley/session/configure'), []);
        assert.equal(ctl.state.meta.model, 'openai:b');
        assert.equal(ctl.state.meta.toolPolicy, 'sync');
        await assert.rejects(ctl.setConfigOption('thought_level', 'high'), /offers no option thought_level/);

        // The choices hold for the next session.
        await ctl.newSession();
        const [, second] = peer.received('session/new');
        assert.deepEqual(second.params._meta, { parley: { model: 'openai:b', toolPolicy: 'sync' } });
      },
    );
  });

  it('falls back to _parley/session/configure when the server offers no options (first edition)', async () => {
    await withController(
      {
        initialize: INITIALIZE,
        'session/new': { result: { sessionId: '$session' } },
        '_parley/session/configure': { result: {} },
      },
      async (ctl, peer) => {
        const sessionId = await ctl.newSession();
        assert.deepEqual(ctl.state.meta.configOptions, []);
        assert.equal(ctl.state.meta.toolPolicy, 'hybrid');
        await ctl.selectModel('openai:b');
        await ctl.setConfigOption('tool_policy', 'stream');
        assert.deepEqual(
          peer.received('_parley/session/configure').map((r) => r.params),
          [
            { sessionId, model: 'openai:b' },
            { sessionId, toolPolicy: 'stream' },
          ],
        );
        assert.equal(ctl.state.meta.model, 'openai:b');
        assert.equal(ctl.state.meta.toolPolicy, 'stream');
        await assert.rejects(ctl.setConfigOption('tool_policy', 'fastest'), /Unknown tool policy/);
      },
    );
  });
});

const text = (t: string) => ({ type: 'text', text: t });

describe('chat controller: session lifecycle', () => {
  const lifecycle = (sessionCapabilities: object | undefined): PeerScript => ({
    initialize: { result: { ...INITIALIZE.result, agentCapabilities: { loadSession: true, ...(sessionCapabilities ? { sessionCapabilities } : {}) } } },
    'session/new': { result: { sessionId: '$session', configOptions: [MODEL_OPTION('openai:a')] } },
    'session/prompt': {
      before: [{ sessionId: '$session', update: { sessionUpdate: 'agent_message_chunk', messageId: 'm1', content: text('Hello.') } }],
      result: { stopReason: 'end_turn', _meta: { parley: { usage: USAGE, turn: TURN, session: SESSION } } },
    },
    'session/resume': { result: { configOptions: [MODEL_OPTION('openai:b')] } },
    'session/load': {
      before: [
        { sessionId: '$session', update: { sessionUpdate: 'user_message_chunk', content: text('hi') } },
        { sessionId: '$session', update: { sessionUpdate: 'agent_message_chunk', messageId: 'm1', content: text('Hello.') } },
      ],
      result: { _meta: { parley: { usage: SESSION, model: 'openai:a' } } },
    },
    'session/close': { result: {} },
  });
  const shown = (ctl: ChatController) => ctl.state.entries.map((e) => `${e.kind}:${'text' in e ? e.text : ''}`);

  it('resumes the session after a restart, and closes the old session on a new chat and on dispose', async () => {
    const peer = new Peer(lifecycle({ list: {}, resume: {}, close: {} }));
    const ctl = controllerOn(peer);
    let disposed = false;
    try {
      await ctl.send('hi');
      const first = ctl.sessionId!;
      await ctl.restart();
      assert.equal(ctl.sessionId, first);
      assert.deepEqual(peer.received('session/resume').map((r) => r.params), [{ sessionId: first, cwd: os.tmpdir(), mcpServers: [] }]);
      assert.deepEqual(peer.received('session/load'), [], 'no replay');
      assert.deepEqual(shown(ctl), ['user:hi', 'agent:Hello.', 'notice:Server restarted; session resumed.'], 'the view kept as it was');
      assert.equal(ctl.state.meta.model, 'openai:b', 'the options of the resume result');
      assert.equal(ctl.state.meta.loading, false);

      const second = await ctl.newSession();
      assert.deepEqual(peer.received('session/close').map((r) => r.params), [{ sessionId: first }]);
      await ctl.dispose();
      disposed = true;
      assert.deepEqual(peer.received('session/close').map((r) => r.params), [{ sessionId: first }, { sessionId: second }]);
    } finally {
      if (!disposed) {
        await ctl.dispose();
      }
    }
  });

  it('closes the session when the view goes away, and resumes it for the next prompt', async () => {
    await withController(lifecycle({ resume: {}, close: {} }), async (ctl, peer) => {
      await ctl.send('hi');
      const sessionId = ctl.sessionId!;
      await ctl.closeSession();
      assert.deepEqual(peer.received('session/close').map((r) => r.params), [{ sessionId }]);
      assert.equal(ctl.sessionId, sessionId, 'still shown');
      await ctl.send('again');
      assert.deepEqual(peer.received('session/resume').map((r) => r.params.sessionId), [sessionId]);
      assert.deepEqual(peer.received('session/prompt').map((r) => r.params.sessionId), [sessionId, sessionId]);
      assert.deepEqual(peer.received('session/new').length, 1);
    });
  });

  it('loads (with the replay) instead, and closes nothing, when the server advertises neither', async () => {
    await withController(lifecycle(undefined), async (ctl, peer) => {
      await ctl.send('hi');
      const first = ctl.sessionId!;
      await ctl.restart();
      assert.deepEqual(peer.received('session/resume'), []);
      assert.deepEqual(peer.received('session/load').map((r) => r.params.sessionId), [first]);
      assert.deepEqual(shown(ctl), ['user:hi', 'agent:Hello.', 'notice:Server restarted; session reloaded.']);
      assert.equal(ctl.state.meta.usage.sessionTokens, 150, 'the totals of the load result');
      await ctl.newSession();
      await ctl.closeSession();
      assert.deepEqual(peer.received('session/close'), []);
      assert.deepEqual(peer.received('_parley/usage'), [], 'no usage call: the results carried the totals');
    });
  });
});

describe('chat controller: slash commands', () => {
  it('keeps the commands the server announces after the session starts', async () => {
    const commands = [
      { name: 'model', description: 'Switch the model', input: { hint: 'PROVIDER:MODEL' } },
      { name: 'cost', description: 'Show the session cost' },
    ];
    await withController(
      {
        initialize: INITIALIZE,
        'session/new': {
          result: { sessionId: '$session' },
          after: [{ sessionId: '$session', update: { sessionUpdate: 'available_commands_update', availableCommands: commands } }],
        },
      },
      async (ctl) => {
        await ctl.newSession();
        for (let i = 0; i < 200 && ctl.state.meta.commands.length === 0; i++) {
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        assert.deepEqual(ctl.state.meta.commands.map((c) => c.name), ['model', 'cost']);
      },
    );
  });
});

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

describe('chat controller: the server\'s notices, live and replayed (issue 24\'s contract)', () => {
  /** A notice as the server sends it: its own message id, `_meta.parley.notice: {level}`. */
  const noticeUpdate = (messageId: string, words: string, level: 'info' | 'warning' | 'error') => ({
    sessionId: '$session',
    update: { sessionUpdate: 'agent_message_chunk', messageId, content: text(words), _meta: { parley: { notice: { level } } } },
  });
  /** A stored session whose first turn was stopped: the replay marks the answer and then replays the stop's notice. */
  const replay = (stopReason: string, notices: ReturnType<typeof noticeUpdate>[]): PeerScript => ({
    initialize: INITIALIZE,
    'session/load': {
      before: [
        { sessionId: '$session', update: { sessionUpdate: 'user_message_chunk', content: text('count to 100') } },
        { sessionId: '$session', update: { sessionUpdate: 'agent_message_chunk', messageId: 'm1', content: text('one, two'), _meta: { parley: { stopReason } } } },
        ...notices,
        { sessionId: '$session', update: { sessionUpdate: 'user_message_chunk', content: text('thanks') } },
        { sessionId: '$session', update: { sessionUpdate: 'agent_message_chunk', messageId: 'm2', content: text('You are welcome.') } },
      ],
      result: { _meta: { parley: { usage: { ...SESSION, turns: 2 }, model: 'openai:a' } } },
    },
  });
  /** A controller whose kept notices are `kept` (as VS Code's workspace state would hold them). */
  const withKept = async (script: PeerScript, kept: KeptNotice[], fn: (ctl: ChatController) => Promise<void>) => {
    const peer = new Peer(script);
    const ctl = new ChatController({
      workspaceRoot: () => os.tmpdir(),
      settings: () => ({ server: peer.server }),
      log: (line) => peer.log.push(line),
      notices: { get: () => kept, set: () => undefined },
    });
    try {
      await fn(ctl);
    } finally {
      await ctl.dispose();
    }
  };
  const shown = (ctl: ChatController) =>
    ctl.state.entries.map((e) => (e.kind === 'notice' ? `${e.level}: ${e.text}` : `${e.kind}: ${'text' in e ? e.text : ''}`));

  it('a session cut short elsewhere shows the replayed notice once, at its level, after the answer it cut; the chat adds no words', async () => {
    await withKept(replay('cancelled', [noticeUpdate('n1', 'Stopped.', 'info')]), [], async (ctl) => {
      await ctl.loadSession('stored-1', 'Count');
      assert.deepEqual(shown(ctl), ['user: count to 100', 'agent: one, two', 'info: Stopped.', 'user: thanks', 'agent: You are welcome.']);
    });
    // A failed turn: the server stores no notice for an error, and the chat writes none.
    await withKept(replay('failed', []), [], async (ctl) => {
      await ctl.loadSession('stored-1', 'Count');
      assert.deepEqual(shown(ctl), ['user: count to 100', 'agent: one, two', 'user: thanks', 'agent: You are welcome.']);
    });
  });

  it('a notice in a live turn is shown once, at its level, never as answer text, and not kept by the chat (the server replays it)', async () => {
    const refusal = "Not started: this session's budget of $1.00 is spent ($1.02 so far). Raise it with /budget.";
    const cut = 'The answer was cut off: the model reached its output token limit (50 tokens).';
    const script: PeerScript = {
      initialize: INITIALIZE,
      'session/new': { result: { sessionId: '$session' } },
      'session/prompt': [
        { before: [noticeUpdate('n1', refusal, 'warning')], result: { stopReason: 'refusal', _meta: { parley: {} } } },
        {
          before: [
            { sessionId: '$session', update: { sessionUpdate: 'agent_message_chunk', messageId: 'm1', content: text('One, two') } },
            noticeUpdate('n2', cut, 'warning'),
          ],
          result: { stopReason: 'max_tokens', _meta: { parley: {} } },
        },
      ],
    };
    const kept: KeptNotice[] = [];
    const peer = new Peer(script);
    const ctl = new ChatController({
      workspaceRoot: () => os.tmpdir(),
      settings: () => ({ server: peer.server }),
      log: (line) => peer.log.push(line),
      notices: { get: () => [...kept], set: (_id, notices) => void kept.splice(0, kept.length, ...notices) },
    });
    try {
      assert.equal(await ctl.send('go on'), 'refusal');
      assert.deepEqual(shown(ctl), ['user: go on', `warning: ${refusal}`]);
      assert.equal(await ctl.send('count'), 'max_tokens');
      assert.deepEqual(shown(ctl), ['user: go on', `warning: ${refusal}`, 'user: count', 'agent: One, two', `warning: ${cut}`]);
      assert.deepEqual(kept, []);
    } finally {
      await ctl.dispose();
    }
  });

  it("a kept error notice comes back in place beside the server's replayed notices, each once", async () => {
    const failed: KeptNotice = { level: 'error', text: 'The model provider failed: 500.', afterPrompt: 1, promptText: 'count to 100' };
    await withKept(replay('failed', []), [failed], async (ctl) => {
      await ctl.loadSession('stored-1', 'Count');
      assert.deepEqual(shown(ctl), ['user: count to 100', 'agent: one, two', 'error: The model provider failed: 500.', 'user: thanks', 'agent: You are welcome.']);
    });
    const crash: KeptNotice = { level: 'error', text: 'The Parley server exited (exit 1).', afterPrompt: 1, promptText: 'count to 100' };
    await withKept(replay('cancelled', [noticeUpdate('n1', 'Stopped.', 'info')]), [crash], async (ctl) => {
      await ctl.loadSession('stored-1', 'Count');
      assert.deepEqual(shown(ctl).slice(1, 4), ['agent: one, two', 'info: Stopped.', `error: ${crash.text}`]);
    });
  });
});


describe('chat controller: modes, the plan, multi-root (issue 25)', () => {
  const MODES = {
    currentModeId: 'ask',
    availableModes: [
      { id: 'ask', name: 'Ask' },
      { id: 'accept_edits', name: 'Accept edits' },
      { id: 'plan', name: 'Plan (read only)' },
    ],
  };
  const MODE_OPTION = (value: string) => ({
    id: 'mode',
    name: 'Mode',
    category: 'mode',
    type: 'select',
    currentValue: value,
    options: MODES.availableModes.map((m) => ({ value: m.id, name: m.name })),
  });
  const PLAN = [
    { content: 'Run the tests', status: 'completed', priority: 'high' },
    { content: 'Fix the failure', status: 'in_progress', priority: 'medium' },
  ];
  const roots = ['/srv/other-root', '/srv/third root'];

  it('sends the other roots as additionalDirectories, shows the modes, and switches with session/set_mode', async () => {
    const peer = new Peer({
      initialize: { result: { ...INITIALIZE.result, agentCapabilities: { loadSession: true, sessionCapabilities: { resume: {}, additionalDirectories: {} } } } },
      'session/new': { result: { sessionId: '$session', configOptions: [MODE_OPTION('ask'), MODEL_OPTION('openai:a')], modes: MODES } },
      'session/set_mode': {
        result: {},
        after: [{ sessionId: '$session', update: { sessionUpdate: 'current_mode_update', currentModeId: 'plan' } }],
      },
      'session/resume': { result: { modes: { ...MODES, currentModeId: 'plan' } } },
      'session/load': {
        before: [
          { sessionId: '$session', update: { sessionUpdate: 'user_message_chunk', content: text('fix it') } },
          { sessionId: '$session', update: { sessionUpdate: 'plan', entries: PLAN } },
        ],
        result: { modes: { ...MODES, currentModeId: 'accept_edits' } },
      },
    });
    const ctl = new ChatController({
      workspaceRoot: () => os.tmpdir(),
      additionalDirectories: () => roots,
      settings: () => ({ server: peer.server }),
      log: (line) => peer.log.push(line),
    });
    try {
      const sessionId = await ctl.newSession();
      assert.deepEqual(peer.received('session/new')[0].params.additionalDirectories, roots);
      assert.equal(ctl.state.meta.mode?.currentModeId, 'ask');
      assert.deepEqual(ctl.state.meta.configOptions.map((o) => o.id), ['mode', 'model']);

      await ctl.setMode('plan');
      assert.deepEqual(peer.received('session/set_mode').map((r) => r.params), [{ sessionId, modeId: 'plan' }]);
      assert.deepEqual(peer.received('session/set_config_option'), []);
      assert.equal(ctl.state.meta.mode?.currentModeId, 'plan');
      await assert.rejects(ctl.setMode('yolo'), /Unknown mode: yolo/);

      await ctl.restart();
      assert.deepEqual(peer.received('session/resume')[0].params.additionalDirectories, roots);
      assert.equal(ctl.state.meta.mode?.currentModeId, 'plan');

      await ctl.loadSession(sessionId);
      assert.deepEqual(peer.received('session/load')[0].params.additionalDirectories, roots);
      assert.equal(ctl.state.meta.mode?.currentModeId, 'accept_edits');
      assert.deepEqual(ctl.state.meta.plan, PLAN, 'the plan replayed with the session');

      await ctl.newSession();
      assert.equal(ctl.state.meta.plan, undefined, 'a new session has no plan');
    } finally {
      await ctl.dispose();
    }
  });

  it('switches the mode through the mode option when the server offers modes only that way; sends no other roots to a server that does not take them', async () => {
    const peer = new Peer({
      initialize: INITIALIZE,
      'session/new': { result: { sessionId: '$session', configOptions: [MODE_OPTION('ask')] } },
      'session/set_config_option': { result: { configOptions: [MODE_OPTION('accept_edits')] } },
    });
    const ctl = new ChatController({
      workspaceRoot: () => os.tmpdir(),
      additionalDirectories: () => roots,
      settings: () => ({ server: peer.server }),
      log: (line) => peer.log.push(line),
    });
    try {
      const sessionId = await ctl.newSession();
      assert.equal(peer.received('session/new')[0].params.additionalDirectories, undefined, 'not advertised: not sent');
      assert.ok(peer.log.some((line) => line.includes('takes no other workspace folders')), 'the log says so');
      await ctl.setMode('accept_edits');
      assert.deepEqual(peer.received('session/set_config_option').map((r) => r.params), [{ sessionId, configId: 'mode', value: 'accept_edits' }]);
      assert.deepEqual(peer.received('session/set_mode'), []);
      assert.equal(ctl.state.meta.mode?.currentModeId, 'accept_edits');
    } finally {
      await ctl.dispose();
    }
  });

  it('a mode the server refuses leaves the mode shown as it was', async () => {
    await withController(
      {
        initialize: INITIALIZE,
        'session/new': { result: { sessionId: '$session', modes: MODES } },
        'session/set_mode': { error: { code: -32602, message: 'Invalid params: modeId' } },
      },
      async (ctl) => {
        await ctl.newSession();
        const before = ctl.state.meta.mode;
        await assert.rejects(ctl.setMode('plan'), /modeId/);
        assert.equal(ctl.state.meta.mode?.currentModeId, 'ask');
        assert.notEqual(ctl.state.meta.mode, before, 'sent to the page again, so its picker shows it');
      },
    );
  });
});
