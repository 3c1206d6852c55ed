/**
 * Retry of a cut-off turn (docs/protocol.md, "Retry of a cut-off turn"), the client's side, against
 * scripted stand-in servers (`peer.ts`) that answer as the contract says: a stopped turn's
 * notice offers Retry; Retry removes the cut-off turn from the view before the prompt is shown
 * again, sends it with `_meta.parley.retry`, and the view shows one prompt and one answer; a
 * `replaced: false` answer is said in one line; after a finished turn Retry is a new turn.
 */

import assert from 'node:assert/strict';
import * as os from 'node:os';
import { describe, it } from 'node:test';

import { ChatController } from '../src/core/controller';
import { RETRY_KEPT_TEXT } from '../src/core/controller/turn';
import { INTERNAL_ERROR, INVALID_PARAMS, PROVIDER_ERROR } from '../src/client/protocol';
import { Peer, type PeerAnswer, type PeerScript } from './peer';

const text = (t: string) => ({ type: 'text', text: t });
const chunk = (messageId: string, t: string) => ({ sessionId: '$session', update: { sessionUpdate: 'agent_message_chunk', messageId, content: text(t) } });
const STOPPED = {
  sessionId: '$session',
  update: { sessionUpdate: 'agent_message_chunk', messageId: 'n1', content: text('Stopped.'), _meta: { parley: { notice: { level: 'info' } } } },
};

const CUT_OFF: PeerAnswer = { before: [chunk('m1', 'Half an ans'), STOPPED], result: { stopReason: 'cancelled' } };
const answer = (t: string, parley?: object): PeerAnswer => ({
  before: [chunk('m2', t)],
  result: { stopReason: 'end_turn', ...(parley ? { _meta: { parley } } : {}) },
});

function script(prompts: PeerAnswer[]): PeerScript {
  return {
    initialize: { result: { protocolVersion: 1, agentCapabilities: { loadSession: true } } },
    'session/new': { result: { sessionId: '$session' } },
    'session/prompt': prompts,
    '_parley/session/restore': { result: { files: [], text: 'Turn 1 left no files to restore.' } },
  };
}

/** What the chat shows, one line per entry (a notice's action in brackets). */
function shown(ctl: ChatController): string[] {
  return ctl.state.entries.map((e) => {
    switch (e.kind) {
      case 'user':
        return `you: ${e.text}`;
      case 'agent':
        return `parley: ${e.text}`;
      case 'notice':
        return `${e.level}: ${e.text}${e.action ? ` [${e.action.label}]` : ''}`;
      default:
        return e.kind;
    }
  });
}

async function withController(prompts: PeerAnswer[], fn: (ctl: ChatController, peer: Peer) => Promise<void>): Promise<void> {
  const peer = new Peer(script(prompts));
  const ctl = new ChatController({ workspaceRoot: () => os.tmpdir(), settings: () => ({ server: peer.server }), log: (line) => peer.log.push(line) });
  try {
    await fn(ctl, peer);
  } finally {
    await ctl.dispose();
  }
}

/** The `session/prompt` requests the peer received: each one's prompt text and `_meta`. */
function prompts(peer: Peer): { text: string; meta: unknown }[] {
  return peer.received('session/prompt').map((r) => ({
    text: (r.params.prompt as { text?: string }[]).map((b) => b.text ?? '').join(''),
    meta: r.params._meta,
  }));
}

describe('Retry of a cut-off turn (contract section 1)', () => {
  it('a stopped turn offers Retry on its notice; Retry replaces it: one prompt and one answer, sent with retry', async () => {
    await withController([CUT_OFF, answer('The whole answer.', { replaced: true })], async (ctl, peer) => {
      assert.equal(await ctl.send('Explain the area function'), 'cancelled');
      assert.deepEqual(shown(ctl), ['you: Explain the area function', 'parley: Half an ans', 'info: Stopped. [Retry]']);
      // The view, as the page sees it when the prompt goes again: the cut-off turn is gone first.
      const seen: string[][] = [];
      ctl.on('state', (_prev, next) => seen.push(next.entries.map((e) => e.kind)));
      assert.equal(await ctl.retry(), 'end_turn');
      assert.deepEqual(seen[0], [], 'the cut-off turn leaves the view before the prompt is shown again');
      assert.deepEqual(shown(ctl), ['you: Explain the area function', 'parley: The whole answer.']);
      assert.deepEqual(prompts(peer), [
        { text: 'Explain the area function', meta: undefined },
        { text: 'Explain the area function', meta: { parley: { retry: true } } },
      ]);
    });
  });

  it('after a provider failure, Retry replaces the failed turn too', async () => {
    const failed: PeerAnswer = { error: { code: PROVIDER_ERROR, message: 'Rate limit reached [openai 429]' } };
    await withController([failed, answer('Now it works.', { replaced: true })], async (ctl, peer) => {
      await assert.rejects(ctl.send('What is 6 * 7?'));
      assert.match(shown(ctl).at(-1) ?? '', /^error: .*429.*\[Retry\]$/);
      await ctl.retry();
      assert.deepEqual(shown(ctl), ['you: What is 6 * 7?', 'parley: Now it works.']);
      assert.deepEqual(prompts(peer).map((p) => p.meta), [undefined, { parley: { retry: true } }]);
    });
  });

  it('after an internal error, Retry replaces the turn; a prompt refused before its turn offers none and is no cut-off turn', async () => {
    const internal: PeerAnswer = { error: { code: INTERNAL_ERROR, message: 'Internal error' } };
    const refused: PeerAnswer = { error: { code: INVALID_PARAMS, message: 'The model does not take images' } };
    await withController([internal, answer('Recovered.', { replaced: true }), refused, answer('Again.')], async (ctl, peer) => {
      await assert.rejects(ctl.send('Summarise the log'));
      assert.match(shown(ctl).at(-1) ?? '', /\[Retry\]$/);
      await ctl.retry();
      assert.deepEqual(shown(ctl), ['you: Summarise the log', 'parley: Recovered.']);
      await assert.rejects(ctl.send('Look at this image'));
      assert.doesNotMatch(shown(ctl).at(-1) ?? '', /\[Retry\]/);
      await ctl.retry(); // sent again as it was: no turn of it to replace
      assert.deepEqual(prompts(peer).map((p) => p.meta), [undefined, { parley: { retry: true } }, undefined, undefined]);
    });
  });

  it('replaced: false (the session changed after it, in another window): one line says the earlier attempt is kept', async () => {
    await withController([CUT_OFF, answer('A new turn.', { replaced: false })], async (ctl) => {
      await ctl.send('Explain it');
      await ctl.retry();
      assert.deepEqual(shown(ctl), ['you: Explain it', 'parley: A new turn.', `info: ${RETRY_KEPT_TEXT}`]);
      assert.equal(RETRY_KEPT_TEXT, 'The earlier attempt is kept: the session changed after it (in another window).');
    });
  });

  it('after a finished turn, Retry is a new turn: no retry, the turn before kept', async () => {
    await withController([answer('Done.'), answer('Done again.')], async (ctl, peer) => {
      await ctl.send('Do it');
      await ctl.retry();
      assert.deepEqual(shown(ctl), ['you: Do it', 'parley: Done.', 'you: Do it', 'parley: Done again.']);
      assert.deepEqual(prompts(peer).map((p) => p.meta), [undefined, undefined]);
    });
  });

  it('an undo after the stop comes after the cut-off turn: Retry is then a new turn, sent without retry', async () => {
    await withController([CUT_OFF, answer('Again, in full.')], async (ctl, peer) => {
      await ctl.send('Explain it');
      await ctl.undoTurn(1);
      await ctl.retry();
      assert.deepEqual(prompts(peer).map((p) => p.meta), [undefined, undefined]);
      assert.deepEqual(shown(ctl).filter((l) => l.startsWith('you: ')), ['you: Explain it', 'you: Explain it'], 'the stopped turn stays in view');
    });
  });

  it('a stop whose server said nothing shows no words of the client\'s own', async () => {
    const silent: PeerAnswer = { before: [chunk('m1', 'Half')], result: { stopReason: 'cancelled' } };
    await withController([silent, answer('Other.')], async (ctl) => {
      await ctl.send('First');
      assert.deepEqual(shown(ctl), ['you: First', 'parley: Half']);
      await ctl.send('Second');
      assert.deepEqual(shown(ctl), ['you: First', 'parley: Half', 'you: Second', 'parley: Other.']);
    });
  });
});
