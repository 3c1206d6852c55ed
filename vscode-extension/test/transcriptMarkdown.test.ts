/** A session's transcript as Markdown (the history list's Export), from the entries the view shows. */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { Entry } from '../src/common/view';
import { withKeptNotices } from '../src/core/controller';
import { transcriptMarkdown } from '../src/core/transcriptMarkdown';

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

describe('transcript as Markdown', () => {
  it('speakers as headings, thoughts quoted, tool code and output fenced safely, notices quoted', () => {
    const md = transcriptMarkdown('Backticks', ENTRIES);
    assert.equal(
      md,
      [
        '# Backticks',
        '## You',
        'Run it',
        'Attached: `stats.py:1-4`',
        '## Parley',
        '> *Thought:* I will run the code.\n> Then answer.',
        '**Tool: Run Python** (completed)\n\n````\nprint("```")\n````\n\nOutput:\n\n````\n```\n````',
        'It prints three backticks.',
        '> Stopped.',
        '## You',
        'Again',
        '> **Error:** Rate limit. [openai 429]',
      ].join('\n\n') + '\n',
    );
    assert.match(transcriptMarkdown(undefined, []), /^# Parley session\n$/);
  });

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
