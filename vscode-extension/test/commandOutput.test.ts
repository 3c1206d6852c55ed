/**
 * A running command's output (issue 25): the ANSI parser the card draws with (examples and
 * fast-check properties: pieces in any cut give the runs of the whole, no escape or control
 * character is ever shown, text without escapes is shown as it is), the reducer's output
 * deltas, the host→page `output` messages, and what "Open in Terminal" writes.
 */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';

import { type SessionUpdate, isSessionUpdate } from '../src/client/protocol';
import { type AnsiRun, type AnsiState, type AnsiStyle, INITIAL_ANSI_STATE, parseAnsi, stripAnsi } from '../src/common/ansi';
import type { ToolEntry } from '../src/common/view';
import { type ChatState, initialState, reduce } from '../src/core/chatState';
import { FEED_START, feed } from '../src/core/commandTerminalFeed';
import { COMMAND_OUTPUT_KEPT, COMMAND_OUTPUT_MAX } from '../src/core/toolView';
import { viewMessages } from '../src/core/webviewHtml';

const ESC = '\x1b';

/** Each character shown, with its style (runs' boundaries do not matter, the styles do). */
function styledChars(runs: AnsiRun[]): [string, string][] {
  return runs.flatMap((r) => [...r.text].map((c): [string, string] => [c, JSON.stringify(sortedStyle(r.style))]));
}

function sortedStyle(style: AnsiStyle): AnsiStyle {
  const sorted: AnsiStyle = Object.fromEntries(Object.entries(style).sort(([a], [b]) => a.localeCompare(b)));
  return sorted;
}

/** The runs of `pieces` parsed one after the other, as the page draws a streamed output. */
function parsePieces(pieces: string[]): { runs: AnsiRun[]; state: AnsiState } {
  let state = INITIAL_ANSI_STATE;
  const runs: AnsiRun[] = [];
  for (const piece of pieces) {
    const parsed = parseAnsi(piece, state);
    runs.push(...parsed.runs);
    state = parsed.state;
  }
  return { runs, state };
}

describe('ANSI output: runs and their styles', () => {
  it('colours, bold and resets become styles; the escapes are not shown', () => {
    const { runs } = parseAnsi(`${ESC}[1;31mFAILED${ESC}[0m test_x.py::test_a - assert 1 == 2\n${ESC}[32m1 passed${ESC}[39m, ${ESC}[38;5;208m256${ESC}[m ${ESC}[38;2;10;20;30mrgb${ESC}[0m`);
    assert.deepEqual(
      runs.map((r) => [r.text, sortedStyle(r.style)]),
      [
        ['FAILED', { bold: true, fg: 1 }],
        [' test_x.py::test_a - assert 1 == 2\n', {}],
        ['1 passed', { fg: 2 }],
        [', ', {}],
        ['256', { fg: 'rgb(255, 135, 0)' }],
        [' ', {}],
        ['rgb', { fg: 'rgb(10, 20, 30)' }],
      ],
    );
  });

  it('bright colours, backgrounds, sub-parameters, inverse and the other escapes (cursor, title, link)', () => {
    const { runs } = parseAnsi(
      `${ESC}[91;44ma${ESC}[7mb${ESC}[27;49;39m${ESC}[38:2::1:2:3mc${ESC}[0m${ESC}[2K${ESC}[1A${ESC}]0;title\x07${ESC}]8;;http://x\x1b\\link${ESC}]8;;\x1b\\${ESC}(B!`,
    );
    assert.deepEqual(
      runs.map((r) => [r.text, sortedStyle(r.style)]),
      [
        ['a', { bg: 4, fg: 9 }],
        ['b', { bg: 4, fg: 9, inverse: true }],
        ['c', { fg: 'rgb(1, 2, 3)' }],
        ['link!', {}],
      ],
    );
  });

  it('a sequence cut between two pieces is held until the next one; \\r\\n and a lone \\r end a line', () => {
    const first = parseAnsi(`ok ${ESC}[3`);
    assert.deepEqual(first.runs.map((r) => r.text), ['ok ']);
    assert.equal(first.state.pending, `${ESC}[3`);
    const second = parseAnsi('1mred\r', first.state);
    assert.deepEqual(second.runs.map((r) => [r.text, r.style]), [['red', { fg: 1 }]]);
    const third = parseAnsi('\nnext\rover', second.state);
    assert.deepEqual(third.runs.map((r) => r.text), ['\nnext\nover']);
    assert.equal(stripAnsi(`a\x07b\x00c${ESC}`), 'abc');
  });

  // Text that looks like ANSI and controls: ESC, CSI starts, parameters, final bytes, \r, \n, BEL, NUL.
  const nasty = fc.array(
    fc.oneof(
      fc.constantFrom(ESC, `${ESC}[`, `${ESC}]`, ';', ':', 'm', '38;5;', '38;2;', '1', '31', '999', '\r', '\n', '\x07', '\x00', '\x9b', '\\', '(', 'B', '<b>&'),
      fc.string({ maxLength: 5 }),
    ),
    { maxLength: 40 },
  ).map((parts) => parts.join(''));

  it('property: parsed in pieces cut anywhere, the output shows as parsed whole', () => {
    fc.assert(
      fc.property(nasty, fc.array(fc.nat(), { maxLength: 6 }), (text, cuts) => {
        const at = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
        const pieces = [0, ...at].map((from, i) => text.slice(from, [...at, text.length][i]));
        const whole = parsePieces([text]);
        const streamed = parsePieces(pieces);
        assert.deepEqual(styledChars(streamed.runs), styledChars(whole.runs));
        assert.deepEqual(streamed.state, whole.state);
      }),
      { numRuns: 400 },
    );
  });

  it('property: no escape or control character but newline and tab is ever shown; no run is empty', () => {
    fc.assert(
      fc.property(nasty, (text) => {
        for (const run of parseAnsi(text).runs) {
          assert.ok(run.text.length > 0);
          // eslint-disable-next-line no-control-regex
          assert.doesNotMatch(run.text, /[\x00-\x08\x0b-\x1f\x7f-\x9f]/);
        }
      }),
      { numRuns: 400 },
    );
  });

  it('a bidi control in the output is shown escaped, not obeyed', () => {
    const { runs } = parseAnsi(`ls \u202e;hs.lave\n${ESC}[31m\u2066x\u2069${ESC}[0m`);
    assert.equal(runs.map((r) => r.text).join(''), 'ls \\u202e;hs.lave\n\\u2066x\\u2069');
  });

  it('property: text without escapes or controls is shown as it is, unstyled', () => {
    fc.assert(
      // eslint-disable-next-line no-control-regex
      fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }).filter((s) => !/[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/.test(s)), (text) => {
        const { runs } = parseAnsi(text);
        assert.equal(runs.map((r) => r.text).join(''), text);
        assert.ok(runs.every((r) => Object.keys(r.style).length === 0));
      }),
    );
  });
});

const call = (status: 'pending' | 'in_progress' | 'completed'): SessionUpdate => ({
  sessionUpdate: 'tool_call',
  toolCallId: 'c1',
  title: 'Run `pytest -q`',
  kind: 'execute',
  status,
  content: [{ type: 'content', content: { type: 'text', text: '```sh\npytest -q\n```' } }],
  locations: [{ path: '/ws' }],
});

/** A running command's update as the server sends it: the generic clients' copy, and the delta. */
const output = (append: string, soFar: string): SessionUpdate => ({
  sessionUpdate: 'tool_call_update',
  toolCallId: 'c1',
  status: 'in_progress',
  content: [{ type: 'content', content: { type: 'text', text: `\`\`\`console\n${stripAnsi(soFar)}\n\`\`\`` } }],
  _meta: { parley: { commandOutput: { append } } },
});

const ended = (text: string): SessionUpdate => ({
  sessionUpdate: 'tool_call_update',
  toolCallId: 'c1',
  status: 'completed',
  content: [{ type: 'content', content: { type: 'text', text } }],
  rawOutput: { exitCode: 1, signal: null, timedOut: false, durationSeconds: 0.4, outputBytes: 30, cut: false },
});

function reduceAll(state: ChatState, ...updates: SessionUpdate[]): ChatState {
  let s = state;
  for (const u of updates) {
    assert.ok(isSessionUpdate(u));
    s = reduce(s, { type: 'update', update: u });
  }
  return s;
}

const tool = (s: ChatState): ToolEntry => {
  const e = s.entries.find((x) => x.kind === 'tool');
  assert.ok(e?.kind === 'tool');
  return e;
};

describe('a command\'s output in its card (reducer, host→page messages)', () => {
  it('appends each delta, keeps what the call does, and ends with the result as its output', () => {
    const start = reduceAll(initialState(), call('pending'));
    const one = reduceAll(start, output(`${ESC}[32m.`, `${ESC}[32m.`));
    const two = reduceAll(one, output(`.${ESC}[31mF${ESC}[0m\n`, `${ESC}[32m..${ESC}[31mF${ESC}[0m\n`));
    assert.equal(tool(two).commandOutput, `${ESC}[32m..${ESC}[31mF${ESC}[0m\n`);
    assert.equal(tool(two).status, 'in_progress');
    assert.deepEqual(tool(two).content, [{ kind: 'text', text: '```sh\npytest -q\n```' }], 'the command, not the generic copy of its output');
    assert.equal(tool(two).output, undefined);

    // Host → page: each delta goes alone, not the card whole.
    assert.deepEqual(viewMessages(one, two), [{ type: 'output', id: 'tool-c1', text: `.${ESC}[31mF${ESC}[0m\n` }]);
    assert.equal(viewMessages(start, one)[0].type, 'entries', 'pending → in progress: the card goes whole once');

    const done = reduceAll(two, ended('..F\n\nExit code: 1 · 0.4 s'));
    assert.equal(tool(done).status, 'completed');
    assert.equal(tool(done).output, '..F\n\nExit code: 1 · 0.4 s');
    assert.equal(tool(done).commandOutput, tool(two).commandOutput, 'kept for Open in Terminal');
    const [message] = viewMessages(two, done);
    assert.equal(message.type, 'entries', 'the end changes the card: it goes whole');
  });

  it('a long output keeps its last part (cut seldom, from a line\'s start); the cut card goes whole', () => {
    const line = `${'x'.repeat(99)}\n`;
    let s = reduceAll(initialState(), call('in_progress'));
    let cutSeen: ChatState | undefined;
    for (let i = 0; i < 3000; i++) {
      const next = reduceAll(s, output(line, ''));
      if ((tool(next).commandOutputCut ?? 0) > (tool(s).commandOutputCut ?? 0)) {
        cutSeen = s;
        assert.equal(viewMessages(s, next)[0].type, 'entries');
      }
      s = next;
    }
    const entry = tool(s);
    assert.ok(cutSeen, 'cut at least once');
    assert.ok(entry.commandOutput!.length <= COMMAND_OUTPUT_MAX && entry.commandOutput!.length >= COMMAND_OUTPUT_KEPT - line.length);
    assert.equal(entry.commandOutput!.length + entry.commandOutputCut!, 3000 * line.length, 'nothing lost from the count');
    assert.ok(entry.commandOutput!.startsWith('x'), 'from a line\'s start');
  });

  it('another client\'s terminal in the content is noted, and leaves what the call does as it was', () => {
    const s = reduceAll(
      initialState(),
      call('pending'),
      { sessionUpdate: 'tool_call_update', toolCallId: 'c1', status: 'in_progress', content: [{ type: 'terminal', terminalId: 'term-1' }] },
    );
    assert.equal(tool(s).terminal, true);
    assert.deepEqual(tool(s).content, [{ kind: 'text', text: '```sh\npytest -q\n```' }]);
    const done = reduceAll(s, {
      sessionUpdate: 'tool_call_update',
      toolCallId: 'c1',
      status: 'completed',
      content: [{ type: 'terminal', terminalId: 'term-1' }, { type: 'content', content: { type: 'text', text: 'ok\n\nExit code: 0 · 0.1 s' } }],
    });
    assert.equal(tool(done).output, 'ok\n\nExit code: 0 · 0.1 s');
    assert.equal(tool(done).commandOutput, undefined);
  });
});

describe('Open in Terminal: what the pseudoterminal is fed', () => {
  const entry = (fields: Partial<ToolEntry>): ToolEntry => ({
    kind: 'tool',
    id: 'tool-c1',
    toolCallId: 'c1',
    title: 'Run `pytest`',
    toolKind: 'execute',
    status: 'in_progress',
    content: [],
    locations: [],
    superseded: false,
    ...fields,
  });

  it('the output so far, then what is new, newlines as \\r\\n, colours kept; the end once, with the exit line', () => {
    const first = feed(entry({ commandOutput: `${ESC}[32m.\n` }), FEED_START);
    assert.equal(first.text, `${ESC}[32m.\r\n`);
    const again = feed(entry({ commandOutput: `${ESC}[32m.\n` }), first.at);
    assert.equal(again.text, '');
    const more = feed(entry({ commandOutput: `${ESC}[32m.\nF\r\n` }), first.at);
    assert.equal(more.text, 'F\r\n');
    const end = feed(entry({ commandOutput: `${ESC}[32m.\nF\r\n`, status: 'completed', output: '.F\n\nExit code: 1 · 0.4 s' }), more.at);
    assert.equal(end.text, `${ESC}[2mExit code: 1 · 0.4 s${ESC}[0m\r\n`);
    assert.equal(end.at.ended, true);
    assert.equal(feed(entry({ commandOutput: 'late', status: 'completed' }), end.at).text, '', 'nothing after the end');
  });

  it('output cut from the card before it was written is said to be cut', () => {
    const { text } = feed(entry({ commandOutput: 'tail\n', commandOutputCut: 500 }), FEED_START);
    assert.equal(text, `${ESC}[2m[… 500 characters of output not kept …]${ESC}[0m\r\ntail\r\n`);
  });
});
