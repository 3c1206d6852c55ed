/** The chat's own notices of a session, kept across reloads, back in place in a replay. */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { Entry } from '../src/common/view';
import { withKeptNotices } from '../src/core/controller';

const ENTRIES: Entry[] = [
  { kind: 'user', id: 'u1', text: 'Run it', context: [{ label: 'stats.py:1-4', uri: 'file:///ws/stats.py' }] },
  { kind: 'thought', id: 't1', text: 'I will run the code.\nThen answer.', streaming: false },
  {
    kind: 'tool',
    id: 'c1',
    toolCallId: 'c1',
    title: 'Run Python',
    toolKind: 'execute',
    status: 'completed',
    content: [{ kind: 'text', text: 'print("```")' }],
    locations: [],
    output: '```',
    superseded: false,
  },
  { kind: 'agent', id: 'a1', text: 'It prints three backticks.', aliases: [], revised: false, streaming: false },
  { kind: 'notice', id: 'n1', level: 'info', text: 'Stopped.' },
  { kind: 'user', id: 'u2', text: 'Again', context: [] },
  { kind: 'notice', id: 'n2', level: 'error', text: 'Rate limit. [openai 429]' },
];

describe('kept notices', () => {
  it('kept notices go back after the answer to their prompt, found by its text when the count differs', () => {
    const replay = ENTRIES.filter((e) => e.kind !== 'notice');
    const back = withKeptNotices(replay, [
      { level: 'info', text: 'Stopped.', afterPrompt: 1, promptText: 'Run it' },
      { level: 'error', text: 'Rate limit.', afterPrompt: 5, promptText: 'Again' },
      { level: 'warning', text: 'Nowhere.', afterPrompt: 9, promptText: 'gone' },
    ]);
    assert.deepEqual(
      back.map((e) => (e.kind === 'notice' ? `notice:${e.text}` : e.id)),
      ['u1', 't1', 'c1', 'a1', 'notice:Stopped.', 'u2', 'notice:Rate limit.', 'notice:Nowhere.'],
    );
  });
});
