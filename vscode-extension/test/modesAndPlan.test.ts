/** The session's mode and the model's plan in the view's state (issue 25): the reducer. */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type SessionConfigOption, type SessionModeState, type SessionUpdate, isSessionUpdate } from '../src/client/protocol';
import { type ChatEvent, type ChatState, initialState, reduce } from '../src/core/chatState';
import { viewMessages } from '../src/core/webviewHtml';

function run(state: ChatState, ...events: (ChatEvent | SessionUpdate | { sessionUpdate: string; [k: string]: unknown })[]): ChatState {
  let s = state;
  for (const e of events) {
    if (!('sessionUpdate' in e)) {
      s = reduce(s, e);
    } else if (isSessionUpdate(e)) {
      s = reduce(s, { type: 'update', update: e });
    }
  }
  return s;
}

const MODES: SessionModeState = {
  currentModeId: 'ask',
  availableModes: [
    { id: 'ask', name: 'Ask', description: 'Every eval, edit and command asks' },
    { id: 'accept_edits', name: 'Accept edits' },
    { id: 'plan', name: 'Plan (read only)' },
  ],
};

const MODE_OPTION = (value: string): SessionConfigOption => ({
  id: 'mode',
  name: 'Mode',
  category: 'mode',
  type: 'select',
  currentValue: value,
  options: [
    { value: 'ask', name: 'Ask' },
    { value: 'accept_edits', name: 'Accept edits' },
    { value: 'plan', name: 'Plan (read only)' },
  ],
});

describe('the session\'s mode', () => {
  it('from `modes`: shown, changed by current_mode_update and by the mode option\'s value, switched by session/set_mode', () => {
    const s = run(initialState(), { type: 'modes', modes: MODES });
    assert.deepEqual(s.meta.mode, {
      currentModeId: 'ask',
      modes: [
        { id: 'ask', name: 'Ask', description: 'Every eval, edit and command asks' },
        { id: 'accept_edits', name: 'Accept edits' },
        { id: 'plan', name: 'Plan (read only)' },
      ],
      via: { method: 'set_mode' },
    });
    const planned = run(s, { sessionUpdate: 'current_mode_update', currentModeId: 'plan' });
    assert.equal(planned.meta.mode?.currentModeId, 'plan');
    assert.equal(viewMessages(s, planned).length, 1, 'the meta goes to the page');
    const byOption = run(planned, { sessionUpdate: 'config_option_update', configOptions: [MODE_OPTION('accept_edits')] });
    assert.equal(byOption.meta.mode?.currentModeId, 'accept_edits');
    assert.deepEqual(byOption.meta.mode?.via, { method: 'set_mode' }, 'still switched by session/set_mode');
  });

  it('from the mode config option alone (a server without `modes`): switched through the option', () => {
    const s = run(initialState(), { type: 'configOptions', options: [MODE_OPTION('plan')] }, { type: 'modes', modes: undefined });
    assert.equal(s.meta.mode?.currentModeId, 'plan');
    assert.deepEqual(s.meta.mode?.via, { method: 'config_option', configId: 'mode' });
    assert.deepEqual(s.meta.mode?.modes.map((m) => m.id), ['ask', 'accept_edits', 'plan']);
  });

  it('none offered: no mode; nonsense `modes` is none; a mode not listed is shown by its id', () => {
    assert.equal(run(initialState(), { type: 'modes', modes: undefined }).meta.mode, undefined);
    assert.equal(run(initialState(), { type: 'modes', modes: { currentModeId: 3 } as unknown as SessionModeState }).meta.mode, undefined);
    const s = run(initialState(), { sessionUpdate: 'current_mode_update', currentModeId: 'yolo' });
    assert.deepEqual(s.meta.mode?.modes, [{ id: 'yolo', name: 'yolo' }]);
  });
});

describe('the model\'s plan', () => {
  const plan = (...entries: unknown[]) => ({ sessionUpdate: 'plan', entries });

  it('each update replaces the whole plan; items keep their order, status and priority', () => {
    const first = run(
      initialState(),
      plan(
        { content: 'Run the tests', status: 'in_progress', priority: 'high' },
        { content: 'Fix the failure', status: 'pending', priority: 'medium' },
      ),
    );
    assert.deepEqual(first.meta.plan, [
      { content: 'Run the tests', status: 'in_progress', priority: 'high' },
      { content: 'Fix the failure', status: 'pending', priority: 'medium' },
    ]);
    const second = run(first, plan({ content: 'Run the tests', status: 'completed', priority: 'high' }, { content: 'Fix the failure', status: 'in_progress' }));
    assert.deepEqual(
      second.meta.plan?.map((i) => `${i.status}:${i.content}:${i.priority}`),
      ['completed:Run the tests:high', 'in_progress:Fix the failure:medium'],
    );
    assert.deepEqual(run(second, plan()).meta.plan, [], 'an empty plan hides it');
  });

  it('an entry without text is left out; an unknown status shows as pending, an unknown priority as medium', () => {
    const s = run(initialState(), plan({ status: 'completed' }, null, { content: 'Check', status: 'done', priority: 'urgent' }));
    assert.deepEqual(s.meta.plan, [{ content: 'Check', status: 'pending', priority: 'medium' }]);
  });
});
