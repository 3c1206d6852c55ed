/**
 * The chat controller against scripted stand-in servers (`peer.ts`) for the second edition of
 * the contract, which the real server on main does not speak yet: usage totals in the prompt
 * result, `configOptions` and `session/set_config_option`, `session/resume` and
 * `session/close`, slash commands. Each test checks both what the controller sends and what
 * the view's state shows.
 */

import assert from 'node:assert/strict';
import * as os from 'node:os';
import { describe, it } from 'node:test';

import { ChatController } from '../src/core/controller';
import { Peer, type PeerScript } from './peer';

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
  it('shows the session totals of the prompt result, without asking _parley/usage', async () => {
    await withController(
      {
        initialize: INITIALIZE,
        'session/new': { result: { sessionId: '$session' } },
        'session/prompt': { result: { stopReason: 'end_turn', _meta: { parley: { usage: USAGE, turn: TURN, session: SESSION } } } },
        '_parley/usage': { result: { total: SESSION, session: SESSION } },
      },
      async (ctl, peer) => {
        assert.equal(await ctl.send('hello'), 'end_turn');
        assert.deepEqual(ctl.state.meta.usage, { sessionTokens: 150, inputTokens: 120, outputTokens: 30, cost: { amount: 0.25, currency: 'USD' } });
        assert.deepEqual(peer.received('_parley/usage'), []);
      },
    );
  });

  it('asks _parley/usage after a turn when the result has no session totals (first edition)', async () => {
    await withController(
      {
        initialize: INITIALIZE,
        'session/new': { result: { sessionId: '$session' } },
        'session/prompt': { result: { stopReason: 'end_turn', usage: USAGE, _meta: { parley: TURN } } },
        '_parley/usage': { result: { total: SESSION, session: SESSION } },
      },
      async (ctl, peer) => {
        await ctl.send('hello');
        await peer.waitFor('_parley/usage');
        for (let i = 0; i < 100 && ctl.state.meta.usage.sessionTokens === 0; i++) {
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        assert.equal(ctl.state.meta.usage.sessionTokens, 150);
      },
    );
  });
});
