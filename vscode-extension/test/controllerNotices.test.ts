/**
 * The chat controller and the server's notices, against scripted stand-in servers
 * (`peer.ts`): shown once at their level, live and replayed, never as answer text, beside the
 * error notices the chat keeps itself.
 */

import assert from 'node:assert/strict';
import * as os from 'node:os';
import { describe, it } from 'node:test';

import { ChatController, type KeptNotice } from '../src/core/controller';
import { INITIALIZE, SESSION, text } from './controllerHarness';
import { Peer, type PeerScript } from './peer';

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
