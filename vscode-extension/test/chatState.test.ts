/** The reducer that turns session updates and host events into the chat view's state. */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type RequestPermissionParams, type SessionConfigOption, type SessionUpdate, isSessionUpdate } from '../src/client/protocol';
import type { Entry } from '../src/common/view';
import { type ChatEvent, type ChatState, diffEntries, formatInput, initialState, reduce } from '../src/core/chatState';
import { diffLines, proposedContent } from '../src/core/toolView';
import { viewMessages } from '../src/core/webviewHtml';

/** Reduces the events; updates pass the client's check of their kind first, as from the wire. */
function run(...events: (ChatEvent | SessionUpdate | { sessionUpdate: string })[]): ChatState {
  let s = initialState();
  for (const e of events) {
    if (!('sessionUpdate' in e)) {
      s = reduce(s, e);
    } else if (isSessionUpdate(e)) {
      s = reduce(s, { type: 'update', update: e });
    }
  }
  return s;
}

const msg = (messageId: string, text: string): SessionUpdate => ({
  sessionUpdate: 'agent_message_chunk',
  messageId,
  content: { type: 'text', text },
});
/** A notice as the server sends it (issue 24's contract): its own message id, `_meta.parley.notice: {level}`. */
const notice = (messageId: string, text: string, level: 'info' | 'warning' | 'error'): SessionUpdate => ({
  sessionUpdate: 'agent_message_chunk',
  messageId,
  content: { type: 'text', text },
  _meta: { parley: { notice: { level } } },
});
const thought = (messageId: string, text: string): SessionUpdate => ({
  sessionUpdate: 'agent_thought_chunk',
  messageId,
  content: { type: 'text', text },
});

function summary(entries: Entry[]): string[] {
  return entries.map((e) => {
    switch (e.kind) {
      case 'agent':
      case 'thought':
      case 'user':
        return `${e.kind}:${e.text}`;
      case 'tool':
        return `tool:${e.title}:${e.status}${e.superseded ? ':superseded' : ''}`;
      case 'permission':
        return `permission:${e.title}:${e.answer?.label ?? 'open'}`;
      case 'notice':
        return `notice:${e.level}:${e.text}`;
      case 'turn':
        return `turn:${e.turn}:${e.undo}`;
    }
  });
}

describe('chat state reducer', () => {
  it('joins chunks of one message and keeps thoughts apart', () => {
    const s = run(
      { type: 'userPrompt', text: 'hi', context: [] },
      thought('t1', 'Let me '),
      thought('t1', 'think.'),
      msg('m1', 'Hel'),
      msg('m1', 'lo'),
      msg('m2', ' New message.'),
    );
    assert.deepEqual(summary(s.entries), ['user:hi', 'thought:Let me think.', 'agent:Hello', 'agent: New message.']);
    assert.equal(s.entries.filter((e) => 'streaming' in e && e.streaming).length, 1, 'only the last streams');
  });

  it('applies a revision: the synchronous text replaces the streamed one', () => {
    const s = run(msg('m1', 'The ansewr'), msg('m1', ' is 4'), {
      sessionUpdate: 'agent_message_chunk',
      messageId: 'm2',
      content: { type: 'text', text: 'The answer is 4.' },
      _meta: { parley: { replaces: 'm1' } },
    });
    assert.deepEqual(summary(s.entries), ['agent:The answer is 4.']);
    assert.equal(s.entries[0].kind === 'agent' && s.entries[0].revised, true);
  });

  it('builds a tool card from tool_call and its updates, and marks superseded calls', () => {
    const s = run(
      { sessionUpdate: 'tool_call', toolCallId: 'c1', title: 'python_eval', kind: 'execute', status: 'pending' },
      { sessionUpdate: 'tool_call', toolCallId: 'c2', title: 'read_file', kind: 'read', status: 'pending' },
      { sessionUpdate: 'tool_call_update', toolCallId: 'c1', rawInput: { code: 'x = 1\nx + 1' } },
      { sessionUpdate: 'tool_call_update', toolCallId: 'c1', status: 'in_progress' },
      {
        sessionUpdate: 'tool_call_update',
        toolCallId: 'c1',
        status: 'completed',
        content: [{ type: 'content', content: { type: 'text', text: '2' } }],
      },
      { sessionUpdate: 'tool_call_update', toolCallId: 'c2', status: 'failed', _meta: { parley: { superseded: true } } },
    );
    assert.deepEqual(summary(s.entries), ['tool:python_eval:completed', 'tool:read_file:failed:superseded']);
    const card = s.entries[0];
    assert.ok(card.kind === 'tool');
    assert.equal(card.input, 'x = 1\nx + 1');
    assert.equal(card.output, '2');
  });

  it('shows a tool call as the server describes it: title, locations, code, diff, result (second edition)', () => {
    const code = { type: 'content' as const, content: { type: 'text' as const, text: 'from geometry import area\narea(3, 4)' } };
    const s = run(
      { type: 'meta', patch: { cwd: '/ws' } },
      { sessionUpdate: 'tool_call', toolCallId: 'c1', title: 'python_eval', kind: 'execute', status: 'pending' },
      {
        sessionUpdate: 'tool_call_update',
        toolCallId: 'c1',
        title: 'Run Python',
        rawInput: { code: 'from geometry import area\narea(3, 4)' },
        content: [code],
        locations: [{ path: '/ws/geometry.py', line: 10 }, { path: '/elsewhere/x.py' }],
      },
      { sessionUpdate: 'tool_call_update', toolCallId: 'c1', status: 'in_progress' },
      { sessionUpdate: 'tool_call_update', toolCallId: 'c1', status: 'completed', content: [{ type: 'content', content: { type: 'text', text: '12' } }] },
      {
        sessionUpdate: 'tool_call',
        toolCallId: 'c2',
        title: 'Edit geometry.py',
        kind: 'edit',
        status: 'pending',
        content: [{ type: 'diff', path: '/ws/geometry.py', oldText: 'a\nb\nc\n', newText: 'a\nB\nc\n' }],
      },
    );
    const [run1, edit] = s.entries;
    assert.ok(run1.kind === 'tool' && edit.kind === 'tool');
    assert.equal(run1.title, 'Run Python');
    assert.deepEqual(run1.content, [{ kind: 'text', text: 'from geometry import area\narea(3, 4)' }], 'the code stays when the result comes');
    assert.equal(run1.output, '12');
    assert.deepEqual(run1.locations, [
      { path: '/ws/geometry.py', line: 10, label: 'geometry.py:10' },
      { path: '/elsewhere/x.py', label: '/elsewhere/x.py' },
    ]);
    assert.deepEqual(edit.content, [
      {
        kind: 'diff',
        path: 'geometry.py',
        file: '/ws/geometry.py',
        lines: [
          { op: ' ', text: 'a' },
          { op: '-', text: 'b' },
          { op: '+', text: 'B' },
          { op: ' ', text: 'c' },
        ],
        added: 1,
        removed: 1,
        newFile: false,
      },
    ]);
    assert.equal(edit.output, undefined);
  });

  it('marks a call ended with _meta.parley.superseded as superseded, with the server\'s words', () => {
    const s = run(
      { sessionUpdate: 'tool_call', toolCallId: 'c1', title: 'Read a.py', kind: 'read', status: 'pending' },
      {
        sessionUpdate: 'tool_call_update',
        toolCallId: 'c1',
        status: 'failed',
        content: [{ type: 'content', content: { type: 'text', text: 'The model did not make this call after all.' } }],
        _meta: { parley: { superseded: true } },
      },
    );
    assert.deepEqual(summary(s.entries), ['tool:Read a.py:failed:superseded']);
    assert.ok(s.entries[0].kind === 'tool');
    assert.equal(s.entries[0].output, 'The model did not make this call after all.');
  });

  it('shows a permission prompt with what it asks about: the content and locations', () => {
    const s = run({ type: 'meta', patch: { cwd: '/ws' } }, {
      type: 'permissionAsked',
      requestId: '1',
      params: {
        sessionId: 's',
        toolCall: {
          toolCallId: 'c1',
          title: 'Run Python',
          kind: 'execute',
          rawInput: { code: 'print(1)' },
          content: [{ type: 'content', content: { type: 'text', text: 'print(1)' } }],
          locations: [{ path: '/ws/a.py', line: 3 }],
        },
        options: [{ optionId: 'a', name: 'Allow once', kind: 'allow_once' }],
      },
    });
    const card = s.entries[0];
    assert.ok(card.kind === 'permission');
    assert.deepEqual(card.content, [{ kind: 'text', text: 'print(1)' }]);
    assert.deepEqual(card.locations, [{ path: '/ws/a.py', line: 3, label: 'a.py:3' }]);
  });

  it('shows a title, an input, content and paths with their controls and bidi characters escaped', () => {
    const hostile = {
      toolCallId: 'c1',
      title: 'Run `ls \u202e;hs.lave`',
      kind: 'execute' as const,
      rawInput: { command: "printf '\u001b]52;c;eA==\u0007' \u2066x" },
      content: [{ type: 'content' as const, content: { type: 'text' as const, text: 'This runs\r\u009b2J' } }],
      locations: [{ path: '/ws/\u202edir/a.py', line: 3 }],
    };
    const s = run(
      { type: 'meta', patch: { cwd: '/ws' } },
      {
        type: 'permissionAsked',
        requestId: '1',
        params: {
          sessionId: 's',
          toolCall: hostile,
          options: [{ optionId: 'a', name: 'Always `ls \u202e` here', kind: 'allow_always' }],
        },
      },
      { sessionUpdate: 'tool_call', ...hostile, status: 'pending' },
    );
    const [card, tool] = s.entries;
    assert.ok(card.kind === 'permission' && tool.kind === 'tool');
    for (const entry of [card, tool]) {
      assert.equal(entry.title, 'Run `ls \\u202e;hs.lave`');
      assert.equal(entry.input, "printf '\\x1b]52;c;eA==\\x07' \\u2066x");
      assert.deepEqual(entry.content, [{ kind: 'text', text: 'This runs\\r\\x9b2J' }]);
      assert.deepEqual(entry.locations, [{ path: '/ws/\u202edir/a.py', line: 3, label: '\\u202edir/a.py:3' }]);
    }
    assert.equal(card.options[0].name, 'Always `ls \\u202e` here');
  });

  it('diffs lines: context around the change, new files all added', () => {
    const old = ['1', '2', '3', '4', '5', '6', '7', '8', '9'].join('\n');
    const lines = diffLines(old, old.replace('5', 'five').replace('6', 'six'));
    assert.deepEqual(
      lines.map((l) => `${l.op}${l.text}`),
      [' 2', ' 3', ' 4', '-5', '-6', '+five', '+six', ' 7', ' 8', ' 9'],
    );
    assert.deepEqual(diffLines('', 'x\ny\n', true), [{ op: '+', text: 'x' }, { op: '+', text: 'y' }]);
    assert.deepEqual(diffLines('same\n', 'same\n'), []);
    assert.deepEqual(
      diffLines('a\nb\n', 'a\nb\nc\n').map((l) => `${l.op}${l.text}`),
      [' a', ' b', '+c'],
    );
  });

  it('shows an edit\'s permission prompt as a diff: the file, its counts, the lines', () => {
    const s = run({ type: 'meta', patch: { cwd: '/ws' } }, {
      type: 'permissionAsked',
      requestId: '1',
      params: {
        sessionId: 's',
        toolCall: {
          toolCallId: 'e1',
          title: 'Edit app.py',
          kind: 'edit',
          content: [
            { type: 'diff', path: '/ws/app.py', oldText: 'a\nb\nc\n', newText: 'a\nB\nc\nd\n' },
            { type: 'diff', path: '/ws/new.py', oldText: null, newText: 'x = 1\n' },
          ],
        },
        options: [{ optionId: 'a', name: 'Allow once', kind: 'allow_once' }],
      },
    });
    const card = s.entries[0];
    assert.ok(card.kind === 'permission');
    assert.deepEqual(card.content, [
      {
        kind: 'diff',
        path: 'app.py',
        file: '/ws/app.py',
        lines: [{ op: ' ', text: 'a' }, { op: '-', text: 'b' }, { op: '+', text: 'B' }, { op: ' ', text: 'c' }, { op: '+', text: 'd' }],
        added: 2,
        removed: 1,
        newFile: false,
      },
      { kind: 'diff', path: 'new.py', file: '/ws/new.py', lines: [{ op: '+', text: 'x = 1' }], added: 1, removed: 0, newFile: true },
    ]);
  });

  it('builds the proposed whole file for the diff view from a whole-file or a partial diff', () => {
    const now = 'def f():\n    return 1\n\ndef g():\n    return 1\n';
    assert.equal(proposedContent(now, now, 'new whole\n'), 'new whole\n', 'oldText is the whole file');
    assert.equal(proposedContent(undefined, null, 'created\n'), 'created\n', 'a new file');
    assert.equal(
      proposedContent(now, 'def g():\n    return 1\n', 'def g():\n    return 2\n'),
      'def f():\n    return 1\n\ndef g():\n    return 2\n',
      'a part found once is replaced in the file',
    );
    assert.equal(proposedContent(now, '    return 1\n', 'X'), 'X', 'a part found twice: the edit\'s text as it is');
  });

  it('shows a permission prompt and its answer; a turn end closes unanswered ones', () => {
    const params: RequestPermissionParams = {
      sessionId: 's',
      toolCall: { toolCallId: 'c1', title: 'python_eval', kind: 'execute', rawInput: { code: '1' } },
      options: [
        { optionId: 'a', name: 'Allow once', kind: 'allow_once' },
        { optionId: 'r', name: 'Reject', kind: 'reject_once' },
      ],
    };
    let s = run(
      { type: 'permissionAsked', requestId: '1', params },
      { type: 'permissionAnswered', requestId: '1', optionId: 'r' },
      { type: 'permissionAsked', requestId: '2', params },
    );
    assert.deepEqual(summary(s.entries), ['permission:python_eval:Reject', 'permission:python_eval:open']);
    const answered = s.entries[0];
    assert.ok(answered.kind === 'permission');
    assert.deepEqual(answered.answer, { optionId: 'r', kind: 'reject_once', label: 'Reject' });
    assert.equal(answered.input, '1', 'code alone is shown as code, not as `code: 1`');
    s = reduce(s, { type: 'turnEnded', stopReason: 'cancelled' });
    // Why it stopped is the server's notice to say: the end of the turn adds no words.
    assert.deepEqual(summary(s.entries), ['permission:python_eval:Reject', 'permission:python_eval:Cancelled']);
    assert.equal(s.meta.busy, false);
    const limited = reduce(s, { type: 'turnEnded', stopReason: 'max_turn_requests' });
    assert.deepEqual(summary(limited.entries), summary(s.entries));
    // An error card's Retry goes once another prompt is sent: it would no longer send the one that failed.
    const failed = reduce(limited, { type: 'notice', level: 'error', text: 'Rate limit.', action: { label: 'Retry', message: { type: 'retry' } } });
    const card = failed.entries[failed.entries.length - 1];
    assert.equal(card.kind === 'notice' && card.action?.label, 'Retry');
    const next = reduce(failed, { type: 'userPrompt', text: 'something else', context: [] });
    const after = next.entries.find((e) => e.id === card.id);
    assert.ok(after?.kind === 'notice' && after.action === undefined && after.text === 'Rate limit.');
  });

  it('replays user messages (session/load) including embedded resources', () => {
    const s = run(
      { sessionUpdate: 'user_message_chunk', content: { type: 'text', text: 'Explain ' } },
      { sessionUpdate: 'user_message_chunk', content: { type: 'text', text: 'this.' } },
      {
        sessionUpdate: 'user_message_chunk',
        content: { type: 'resource', resource: { uri: 'file:///w/geometry.py#L1-L3', text: 'def area' } },
      },
      msg('m1', 'It computes an area.'),
      { sessionUpdate: 'user_message_chunk', content: { type: 'text', text: 'Thanks' } },
    );
    assert.deepEqual(summary(s.entries), ['user:Explain this.', 'agent:It computes an area.', 'user:Thanks']);
    // Two stored prompts in a row (the first turn was cancelled before any answer) stay apart.
    const two = run(
      { sessionUpdate: 'user_message_chunk', messageId: 'user_0', content: { type: 'text', text: 'first' } },
      { sessionUpdate: 'user_message_chunk', messageId: 'user_1', content: { type: 'text', text: 'second' } },
    );
    assert.deepEqual(summary(two.entries), ['user:first', 'user:second']);
    assert.ok(s.entries[0].kind === 'user');
    assert.deepEqual(s.entries[0].context, [{ label: 'geometry.py', uri: 'file:///w/geometry.py#L1-L3' }]);
  });

  it('tracks the context window, cost and title', () => {
    const s = run(
      { sessionUpdate: 'usage_update', used: 500, size: 1000, cost: { amount: 0.01, currency: 'USD' } },
      { sessionUpdate: 'usage_update', used: 800, size: 1000 },
      { sessionUpdate: 'session_info_update', title: 'Areas' },
      { sessionUpdate: 'something_new_and_unknown' },
    );
    // No session totals sent: no tokens shown.
    assert.deepEqual(s.meta.usage, {
      sessionTokens: 0,
      inputTokens: 0,
      outputTokens: 0,
      contextUsed: 800,
      contextSize: 1000,
      cost: { amount: 0.01, currency: 'USD' },
    });
    assert.equal(s.meta.title, 'Areas');
    // A first-edition size of 0 means no window either.
    assert.equal(run({ sessionUpdate: 'usage_update', used: 30, size: 0 }).meta.usage.contextSize, undefined);
  });

  it('shows exactly the session totals usage_update carries, never a sum of the calls', () => {
    const usd = (amount: number) => ({ amount, currency: 'USD' });
    const call = (inputTokens: number, outputTokens: number) => ({ inputTokens, outputTokens, totalTokens: inputTokens + outputTokens });
    // The totals deliberately differ from any sum of the calls (as after a reload, or calls the
    // client never saw): the view must show the server's numbers as they are.
    const first = { inputTokens: 5000, outputTokens: 700, totalTokens: 5700, cachedReadTokens: 4000, cost: usd(0.5), turns: 3, rounds: 7 };
    const second = { inputTokens: 5600, outputTokens: 760, totalTokens: 6360, cachedReadTokens: 4500, cost: usd(0.6), turns: 3, rounds: 8 };
    const updates: SessionUpdate[] = [
      { sessionUpdate: 'usage_update', used: 700, cost: usd(0.5), _meta: { parley: { call: call(300, 20), session: first } } },
      { sessionUpdate: 'usage_update', used: 760, cost: usd(0.6), _meta: { parley: { call: call(400, 60), session: second } } },
    ];
    const afterFirst = run(updates[0]);
    assert.deepEqual(afterFirst.meta.usage, {
      sessionTokens: 5700,
      inputTokens: 5000,
      outputTokens: 700,
      cachedReadTokens: 4000,
      contextUsed: 700,
      cost: usd(0.5),
      turns: 3,
    });
    const s = run(...updates);
    // The second call's totals replace the first's: not 5700 + 460, nor 320 + 460.
    assert.deepEqual(s.meta.usage, {
      sessionTokens: 6360,
      inputTokens: 5600,
      outputTokens: 760,
      cachedReadTokens: 4500,
      contextUsed: 760,
      cost: usd(0.6),
      turns: 3,
    });
    // A call's usage alone (no session totals) changes no count.
    const t = run(...updates, { sessionUpdate: 'usage_update', used: 900, _meta: { parley: { call: call(1000, 1000) } } });
    assert.deepEqual({ ...t.meta.usage, contextUsed: 760 }, s.meta.usage);
  });

  it("takes the prompt result's totals as they are, with the last turn's cost breakdown", () => {
    const costBreakdown = { uncachedInput: 0.01, cacheReads: 0.002, cacheWrites: 0.003, output: 0.02, currency: 'USD' };
    const session = { inputTokens: 900, outputTokens: 100, totalTokens: 1000, cost: { amount: 0.5, currency: 'USD' }, turns: 2, rounds: 3 };
    const s = run(
      { sessionUpdate: 'usage_update', used: 700, _meta: { parley: { session: { ...session, totalTokens: 99999 } } } },
      { type: 'usageTotals', totals: session, turn: { rounds: 1, costBreakdown, wastedTokensEstimate: 42 } },
    );
    assert.deepEqual(s.meta.usage, {
      sessionTokens: 1000,
      inputTokens: 900,
      outputTokens: 100,
      contextUsed: 700,
      cost: { amount: 0.5, currency: 'USD' },
      turns: 2,
      lastTurn: { costBreakdown, wastedTokensEstimate: 42 },
    });
  });

  it("shows the session's cost split from usage_update and the prompt result, and drops it when the totals have none", () => {
    const costBreakdown = { uncachedInput: 0.01, cacheReads: 0.002, cacheWrites: 0, output: 0.02, currency: 'USD' };
    const session = { inputTokens: 900, outputTokens: 100, totalTokens: 1000, cost: { amount: 0.032, currency: 'USD' }, turns: 2, rounds: 3 };
    const fromUpdate = run({ sessionUpdate: 'usage_update', used: 700, _meta: { parley: { session: { ...session, costBreakdown } } } });
    assert.deepEqual(fromUpdate.meta.usage.costBreakdown, costBreakdown);
    const fromResult = run({ type: 'usageTotals', totals: { ...session, costBreakdown } });
    assert.deepEqual(fromResult.meta.usage.costBreakdown, costBreakdown);
    // Totals without a split (no price known: null) leave none shown, not the last one.
    const unpriced = reduce(fromResult, { type: 'usageTotals', totals: { ...session, cost: null, costBreakdown: null } });
    assert.equal(unpriced.meta.usage.costBreakdown, undefined);
    const unpricedUpdate = reduce(fromUpdate, {
      type: 'update',
      update: { sessionUpdate: 'usage_update', used: 800, _meta: { parley: { session: { ...session, cost: null, costBreakdown: null } } } },
    });
    assert.equal(unpricedUpdate.meta.usage.costBreakdown, undefined);
  });

  it('shows a replayed answer that was cut short as it is: the server\'s replayed notice says why, the chat adds nothing', () => {
    const stopped = (messageId: string, text: string, stopReason: string): SessionUpdate => ({
      sessionUpdate: 'agent_message_chunk',
      messageId,
      content: { type: 'text', text },
      _meta: { parley: { stopReason } },
    });
    const user = (t: string): SessionUpdate => ({ sessionUpdate: 'user_message_chunk', content: { type: 'text', text: t } });
    const s = run(
      user('count to 100'),
      stopped('m1', 'one, two', 'cancelled'),
      notice('n1', 'Stopped.', 'info'),
      user('again'),
      stopped('m2', 'one', 'failed'),
      user('and once more'),
      stopped('m3', 'done', 'end_turn'),
      msg('m3', ' now'),
      { type: 'turnEnded', stopReason: 'end_turn' },
    );
    assert.deepEqual(summary(s.entries), [
      'user:count to 100',
      'agent:one, two',
      'notice:info:Stopped.',
      'user:again',
      'agent:one',
      'user:and once more',
      'agent:done now',
    ]);
    assert.ok(s.entries.every((e) => e.kind !== 'agent' || !e.streaming));
  });

  it('shows each notice once, at its level, where it comes, never as answer text', () => {
    const refusal = 'Not started: this session\'s budget of $1.00 is spent ($1.02 so far).';
    const s = run(
      { type: 'userPrompt', text: 'go on', context: [] },
      notice('n1', 'Not started: this session\'s budget of $1.00 ', 'warning'),
      notice('n1', 'is spent ($1.02 so far).', 'warning'),
      { type: 'turnEnded', stopReason: 'refusal' },
      { type: 'userPrompt', text: 'and now?', context: [] },
      msg('m2', 'Partly'),
      notice('n2', 'Stopped.', 'info'),
      { type: 'turnEnded', stopReason: 'cancelled' },
      { type: 'userPrompt', text: 'once more', context: [] },
      msg('m3', 'Cut'),
      notice('n3', 'The answer was cut off: the model reached its output token limit of 50.', 'warning'),
      { type: 'turnEnded', stopReason: 'max_tokens' },
      { type: 'userPrompt', text: 'and?', context: [] },
      notice('n4', 'The provider failed.', 'error'),
      { type: 'turnEnded', stopReason: 'end_turn' },
    );
    assert.deepEqual(summary(s.entries), [
      'user:go on',
      `notice:warning:${refusal}`,
      'user:and now?',
      'agent:Partly',
      'notice:info:Stopped.',
      'user:once more',
      'agent:Cut',
      'notice:warning:The answer was cut off: the model reached its output token limit of 50.',
      'user:and?',
      'notice:error:The provider failed.',
    ]);
    // Not answer text: the answers are untouched, and a notice ends the answer's streaming.
    const answers = s.entries.filter((e) => e.kind === 'agent');
    assert.deepEqual(answers.map((e) => e.text), ['Partly', 'Cut']);
    assert.ok(answers.every((e) => !e.streaming));
    // A level the view does not know is shown as info.
    const odd = run(notice('n9', 'Something.', 'loud' as 'info'));
    assert.deepEqual(summary(odd.entries), ['notice:info:Something.']);
  });

  it('keeps the configuration options; the model and the tool policy follow theirs', () => {
    const options: SessionConfigOption[] = [
      {
        id: 'model',
        name: 'Model',
        category: 'model',
        type: 'select',
        currentValue: 'openai:a',
        options: [
          { group: 'openai', name: 'OpenAI', options: [{ value: 'openai:a', name: 'a' }, { value: 'openai:b', name: 'b' }] },
          { group: 'ollama', name: 'Ollama', options: [{ value: 'ollama:q', name: 'q' }] },
        ],
      },
      {
        id: 'tool_policy',
        name: 'Tool calls',
        type: 'select',
        currentValue: 'hybrid',
        options: [
          { value: 'hybrid', name: 'Hybrid', description: 'Stream; one synchronous call fetches the tools' },
          { value: 'sync', name: 'Sync', description: null },
        ],
      },
      { id: 'fast', name: 'Fast', type: 'boolean', currentValue: true },
    ];
    let s = run({ type: 'configOptions', options });
    assert.equal(s.meta.model, 'openai:a');
    assert.equal(s.meta.toolPolicy, 'hybrid');
    assert.deepEqual(s.meta.configOptions[1].options, [
      { value: 'hybrid', name: 'Hybrid', description: 'Stream; one synchronous call fetches the tools' },
      { value: 'sync', name: 'Sync' },
    ]);
    assert.deepEqual(s.meta.configOptions.map((o) => o.id), ['model', 'tool_policy'], 'booleans are not shown');
    assert.deepEqual(s.meta.configOptions[0].options, [
      { value: 'openai:a', name: 'a', group: 'OpenAI' },
      { value: 'openai:b', name: 'b', group: 'OpenAI' },
      { value: 'ollama:q', name: 'q', group: 'Ollama' },
    ]);
    // Changed otherwise (a slash command, another window): config_option_update.
    s = reduce(s, {
      type: 'update',
      update: {
        sessionUpdate: 'config_option_update',
        configOptions: [
          { ...options[0], currentValue: 'ollama:q' } as SessionConfigOption,
          { ...options[1], currentValue: 'sync' } as SessionConfigOption,
        ],
      },
    });
    assert.equal(s.meta.model, 'ollama:q');
    assert.equal(s.meta.toolPolicy, 'sync');
  });

  it('keeps the slash commands the server offers', () => {
    const s = run({
      sessionUpdate: 'available_commands_update',
      availableCommands: [
        { name: 'model', description: 'Switch the model', input: { hint: 'PROVIDER:MODEL' } },
        { name: '/cost', description: 'Show the session cost', input: null },
        { name: '', description: 'nameless' },
      ],
    });
    assert.deepEqual(s.meta.commands, [
      { name: 'model', description: 'Switch the model', hint: 'PROVIDER:MODEL' },
      { name: 'cost', description: 'Show the session cost' },
    ]);
  });

  it('tells the webview only what changed', () => {
    const a = run(msg('m1', 'one'), { sessionUpdate: 'tool_call', toolCallId: 'c', title: 't', status: 'pending' });
    const b = reduce(a, { type: 'update', update: { sessionUpdate: 'tool_call_update', toolCallId: 'c', status: 'completed' } });
    const d = diffEntries(a.entries, b.entries);
    assert.deepEqual(d.upserts.map((e) => e.id), [a.entries[1].id]);
    assert.deepEqual(d.removed, []);
    assert.deepEqual(viewMessages(a, b).map((m) => m.type), ['entries']);
    const c = reduce(b, { type: 'meta', patch: { busy: true } });
    assert.deepEqual(viewMessages(b, c).map((m) => m.type), ['meta']);
  });

  it('sends the page deltas while a message streams: append what a chunk adds, finish, revise whole; never the whole entry per chunk', () => {
    const step = (state: ChatState, event: ChatEvent | SessionUpdate) => {
      const next = reduce(state, 'type' in event ? event : { type: 'update', update: event });
      return { next, sent: viewMessages(state, next) };
    };
    let s = run({ type: 'userPrompt', text: 'hi', context: [] });
    // The first chunk makes the entry: sent whole.
    let r = step(s, msg('m1', 'Hello'));
    assert.deepEqual(r.sent.map((m) => m.type), ['entries']);
    const id = r.next.entries[1].id;
    s = r.next;
    // Each later chunk: only its text.
    for (const piece of [', wor', 'ld', '!']) {
      r = step(s, msg('m1', piece));
      assert.deepEqual(r.sent, [{ type: 'append', id, text: piece }]);
      s = r.next;
    }
    r = step(s, thought('t1', 'Hmm'));
    // A thought after it: the answer finished, the thought new (whole).
    assert.deepEqual(r.sent[0], { type: 'finish', id });
    assert.deepEqual(r.sent.slice(1).map((m) => m.type), ['entries']);
    const thoughtId = r.next.entries[2].id;
    s = r.next;
    r = step(s, thought('t1', ', yes'));
    assert.deepEqual(r.sent, [{ type: 'append', id: thoughtId, text: ', yes' }]);
    s = r.next;
    // A revision replaces the text: the entry whole, once.
    r = step(s, { sessionUpdate: 'agent_message_chunk', messageId: 'm2', content: { type: 'text', text: 'Hi.' }, _meta: { parley: { replaces: 'm1' } } });
    const revised = r.sent.find((m) => m.type === 'entries');
    assert.ok(revised?.type === 'entries' && revised.upserts.some((e) => e.id === id && e.kind === 'agent' && e.text === 'Hi.' && e.revised));
    assert.ok(r.sent.every((m) => m.type !== 'append'));
    // The turn's end finishes the streamed entries.
    s = r.next;
    r = step(s, { type: 'turnEnded', stopReason: 'end_turn' });
    assert.deepEqual(r.sent.filter((m) => m.type === 'finish'), [{ type: 'finish', id: thoughtId }]);
  });

  it('is pure: the same events give the same state, entry ids included, and ids are never reused', () => {
    const events = [
      { type: 'userPrompt', text: 'hi', context: [] },
      msg('m1', 'Hello'),
      { type: 'notice', level: 'info', text: 'A notice.' },
    ] satisfies (ChatEvent | SessionUpdate)[];
    const first = run(...events);
    assert.deepEqual(run(...events), first);
    assert.equal(new Set(first.entries.map((e) => e.id)).size, 3);
    const cleared = reduce(reduce(first, { type: 'clear' }), { type: 'userPrompt', text: 'again', context: [] });
    assert.ok(!first.entries.some((e) => e.id === cleared.entries[0].id), 'a cleared id is not given again');
  });

  it('formats tool input by the display rules: code as code, the rest as two-space JSON', () => {
    assert.equal(formatInput({ code: 'a\nb' }), 'a\nb');
    assert.equal(formatInput({ path: 'x.py', startLine: 3 }), '{\n  "path": "x.py",\n  "startLine": 3\n}');
    assert.equal(formatInput({ nested: { a: 1 } }), '{\n  "nested": {\n    "a": 1\n  }\n}');
  });
});

describe('chat state reducer: turns that edited files, and undoing them', () => {
  const edit = (id: string, file: string, status: 'completed' | 'failed' = 'completed'): SessionUpdate[] => [
    {
      sessionUpdate: 'tool_call',
      toolCallId: id,
      title: `Edit ${file}`,
      kind: 'edit',
      status: 'pending',
      content: [{ type: 'diff', path: `/ws/${file}`, oldText: 'a\n', newText: 'b\n' }],
      locations: [{ path: `/ws/${file}` }],
    },
    { sessionUpdate: 'tool_call_update', toolCallId: id, status },
  ];
  const turns = (s: ChatState) =>
    s.entries.flatMap((e) => (e.kind === 'turn' ? [`${e.turn}:${e.files.join(',')}:${e.undo}${e.restored ? `:${e.restored.map((f) => `${f.path} ${f.action}`).join(',')}` : ''}`] : []));

  it('ends a numbered turn that edited files with a turn entry: its edit calls\' files and those written through the editor', () => {
    const s = run(
      { type: 'meta', patch: { cwd: '/ws' } },
      { type: 'userPrompt', text: 'fix it', context: [] },
      ...edit('e1', 'app.py'),
      ...edit('e2', 'broken.py', 'failed'),
      { type: 'turnEnded', stopReason: 'end_turn', turn: 3, edited: ['/ws/app.py', '/ws/new.py'] },
      { type: 'userPrompt', text: 'just talk', context: [] },
      msg('m1', 'Sure.'),
      { type: 'turnEnded', stopReason: 'end_turn', turn: 4, edited: [] },
      { type: 'userPrompt', text: 'edit, but the server gave no number', context: [] },
      ...edit('e3', 'other.py'),
      { type: 'turnEnded', stopReason: 'end_turn' },
    );
    assert.deepEqual(turns(s), ['3:app.py,new.py:ready'], 'a failed edit is not counted; no entry without edits or a number');
    assert.deepEqual(summary(s.entries).slice(0, 4), ['user:fix it', 'tool:Edit app.py:completed', 'tool:Edit broken.py:failed', 'turn:3:ready'], 'after the turn\'s entries');
  });

  it('undoing a turn: undoing, then undone with what the server did, later turns too; a failure makes it ready again', () => {
    let s = run(
      { type: 'meta', patch: { cwd: '/ws' } },
      { type: 'userPrompt', text: 'one', context: [] },
      ...edit('e1', 'a.py'),
      { type: 'turnEnded', stopReason: 'end_turn', turn: 1 },
      { type: 'userPrompt', text: 'two', context: [] },
      ...edit('e2', 'b.py'),
      { type: 'turnEnded', stopReason: 'end_turn', turn: 2 },
      { type: 'userPrompt', text: 'three', context: [] },
      ...edit('e3', 'c.py'),
      { type: 'turnEnded', stopReason: 'end_turn', turn: 3 },
    );
    assert.deepEqual(turns(s), ['1:a.py:ready', '2:b.py:ready', '3:c.py:ready']);
    s = reduce(s, { type: 'turnUndo', turn: 2, state: 'undoing' });
    assert.deepEqual(turns(s), ['1:a.py:ready', '2:b.py:undoing', '3:c.py:ready']);
    const failed = reduce(s, { type: 'turnUndo', turn: 2, state: 'ready' });
    assert.deepEqual(turns(failed), ['1:a.py:ready', '2:b.py:ready', '3:c.py:ready']);
    s = reduce(s, {
      type: 'turnUndo',
      turn: 2,
      state: 'undone',
      restored: [
        { path: '/ws/b.py', action: 'restored' },
        { path: '/ws/c.py', action: 'removed' },
      ],
    });
    assert.deepEqual(turns(s), ['1:a.py:ready', '2:b.py:undone:b.py restored,c.py removed', '3:c.py:undone']);
  });

  it('an undone turn shows the plan as it was before its prompt (issue 43: the plan said 4/4 after Undo)', () => {
    const plan = (done: number) => ({
      sessionUpdate: 'plan' as const,
      entries: ['Read', 'Fix'].map((content, i) => ({ content, priority: 'medium' as const, status: i < done ? ('completed' as const) : ('pending' as const) })),
    });
    let s = run(
      { type: 'userPrompt', text: 'one', context: [] },
      plan(0),
      ...edit('e1', 'a.py'),
      { type: 'turnEnded', stopReason: 'end_turn', turn: 1 },
      { type: 'userPrompt', text: 'two', context: [] },
      plan(2),
      ...edit('e2', 'b.py'),
      { type: 'turnEnded', stopReason: 'end_turn', turn: 2 },
    );
    assert.deepEqual(s.meta.plan?.map((i) => i.status), ['completed', 'completed']);
    s = reduce(s, { type: 'turnUndo', turn: 2, state: 'undone', restored: [{ path: '/ws/b.py', action: 'restored' }] });
    assert.deepEqual(s.meta.plan?.map((i) => i.status), ['pending', 'pending'], 'the plan before turn 2');
    s = reduce(s, { type: 'turnUndo', turn: 1, state: 'undone', restored: [{ path: '/ws/a.py', action: 'restored' }] });
    assert.equal(s.meta.plan, undefined, 'before turn 1 there was none');
  });

  it('keeps the session\'s count of turns from its totals', () => {
    const s = run({ type: 'usageTotals', totals: { inputTokens: 1, outputTokens: 2, totalTokens: 3, cost: null, turns: 5, rounds: 7 } });
    assert.equal(s.meta.usage.turns, 5);
  });

  it("a replayed undo is shown as its notice, at the level it was said; a command answered live after it is an answer", () => {
    const command = { parley: { command: true } };
    const warned = { parley: { command: true, level: 'warning' as const } };
    const s = run(
      { sessionUpdate: 'user_message_chunk', messageId: 'notice_2_0', content: { type: 'text', text: '/undo' }, _meta: command },
      { sessionUpdate: 'agent_message_chunk', messageId: 'notice_2_1', content: { type: 'text', text: 'Could not restore a.py.' }, _meta: warned },
      { sessionUpdate: 'user_message_chunk', messageId: 'notice_4_0', content: { type: 'text', text: '/undo' }, _meta: command },
      { sessionUpdate: 'agent_message_chunk', messageId: 'notice_4_1', content: { type: 'text', text: 'Restored the files of turn 1.' }, _meta: command },
      { type: 'userPrompt', text: '/cost', context: [] },
      { sessionUpdate: 'agent_message_chunk', messageId: 'c1', content: { type: 'text', text: 'Cost: $0.00' }, _meta: command },
    );
    assert.deepEqual(
      s.entries.map((e) => [e.kind, 'text' in e ? e.text : '', e.kind === 'notice' ? e.level : '']),
      [
        ['notice', 'Could not restore a.py.', 'warning'],
        ['notice', 'Restored the files of turn 1.', 'info'],
        ['user', '/cost', ''],
        ['agent', 'Cost: $0.00', ''],
      ],
    );
  });
});
