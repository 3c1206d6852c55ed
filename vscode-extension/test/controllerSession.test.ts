/**
 * The chat controller against scripted stand-in servers (`peer.ts`) for the second edition of
 * the contract, which the real server on main does not speak yet: usage totals in the prompt
 * result, `configOptions` and `session/set_config_option`, `session/resume` and
 * `session/close`, slash commands, modes, the plan and other workspace roots. Each test
 * checks both what the controller sends and what the view's state shows.
 */

import assert from 'node:assert/strict';
import * as os from 'node:os';
import { describe, it } from 'node:test';

import { ChatController } from '../src/core/controller';
import { INITIALIZE, SESSION, TURN, USAGE, controllerOn, text, withController } from './controllerHarness';
import { Peer, type PeerScript } from './peer';

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
