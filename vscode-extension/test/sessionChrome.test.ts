/**
 * The chat controller against the real `parley serve` and the fake LLM, for what the view's
 * chrome asks of it: Retry after a provider failure or a stop (the cut-off turn replaced: needs
 * the server's side of Retry, docs/protocol.md), notices kept across a reload, Export (the
 * server's Markdown) and Delete from the history list.
 */

import assert from 'node:assert/strict';
import { after, before, describe, it, type TestContext } from 'node:test';

import { ChatController, type KeptNotice, type NoticeKeeper } from '../src/core/controller';
import { FakeLLM, PARLEY, cliExport, serverEnv, serverUnavailable, tempDirs } from './harness';

let skipReason: string | undefined;
let fake: FakeLLM | undefined;

function skipIfNoServer(t: TestContext): boolean {
  if (skipReason) {
    t.skip(skipReason);
    return true;
  }
  return false;
}

/** Kept notices in memory, as VS Code's workspace state keeps them across window reloads. */
function memoryKeeper(): NoticeKeeper & { kept: Map<string, KeptNotice[]> } {
  const kept = new Map<string, KeptNotice[]>();
  return { kept, get: (id) => kept.get(id) ?? [], set: (id, notices) => void kept.set(id, notices) };
}

/** What the chat shows, one line per entry. */
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

describe('chat controller, for the view chrome, against parley serve', () => {
  let dirs: ReturnType<typeof tempDirs>;
  const controllers: ChatController[] = [];

  const controller = (notices?: NoticeKeeper): ChatController => {
    const ctl = new ChatController({
      workspaceRoot: () => dirs.workspace,
      settings: () => ({ server: { command: PARLEY, args: ['serve'], env: serverEnv(fake!, dirs.home) } }),
      notices,
    });
    controllers.push(ctl);
    return ctl;
  };

  before(async () => {
    skipReason = await serverUnavailable();
    if (skipReason) {
      return;
    }
    fake = await FakeLLM.start();
    dirs = tempDirs();
  });

  after(async () => {
    for (const ctl of controllers) {
      await ctl.dispose();
    }
    await fake?.stop();
    dirs?.cleanup();
  });

  it('a new chat keeps the mode the one before had, in the server too (issue 43: New reset it to Ask)', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const ctl = controller();
    const first = await ctl.newSession();
    assert.equal(ctl.state.meta.mode?.currentModeId, 'ask');
    await ctl.setMode('plan');
    const second = await ctl.newSession();
    assert.notEqual(second, first);
    assert.equal(ctl.state.meta.mode?.currentModeId, 'plan');
    await ctl.loadSession(second); // the server's own word for the new session's mode
    assert.equal(ctl.state.meta.mode?.currentModeId, 'plan');
  });

  it('a provider failure shows its message with Retry, which sends the same prompt again', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const ctl = controller();
    // The first request fails (the fault fires once); the same reply answers the next one.
    await fake!.script([{ text: 'Now it works.', fault: { kind: 'http', status: 401, times: 1 } }]);
    await assert.rejects(ctl.send('What is 6 * 7?'));
    const card = ctl.state.entries[ctl.state.entries.length - 1];
    assert.ok(card.kind === 'notice' && card.level === 'error', JSON.stringify(card));
    assert.match(card.text, /\[openai 401/);
    assert.deepEqual(card.action, { label: 'Retry', message: { type: 'retry' } });

    assert.equal(await ctl.retry(), 'end_turn');
    // The failed turn replaced: one prompt, one answer.
    assert.deepEqual(shown(ctl), ['you: What is 6 * 7?', 'parley: Now it works.']);
    // The model got the same question the second time, once (the failed attempt is not in its history).
    const requests = await fake!.requests();
    const asked = requests.map((r) => JSON.stringify(r.body.messages?.filter((m) => m.role === 'user').at(-1)?.content));
    assert.equal(asked.length, 2);
    assert.match(asked[1], /What is 6 \* 7\?/);
    assert.equal(asked[1], asked[0]);
    assert.equal(requests[1].body.messages?.filter((m) => m.role === 'user').length, 1, 'the question once in the history');
  });

  it('a stopped turn, retried, is replaced: one prompt and one answer, live and when the session is loaded again', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const first = controller();
    await fake!.script([{ text: 'x'.repeat(4000), chunk_size: 4, pacing: { chunks_per_second: 50 } }]);
    const turn = first.send('Tell me about rectangles');
    await waitUntil(() => first.state.entries.some((e) => e.kind === 'agent' && e.text.startsWith('x')));
    await first.cancel();
    assert.equal(await turn, 'cancelled');
    assert.equal(shown(first).at(-1), 'info: Stopped. [Retry]');
    await fake!.script([{ text: 'Rectangles have four right angles.' }]);
    assert.equal(await first.retry(), 'end_turn');
    assert.deepEqual(shown(first), ['you: Tell me about rectangles', 'parley: Rectangles have four right angles.']);
    // The model was asked once, without the cut-off answer.
    const retried = (await fake!.requests()).at(-1)!;
    assert.deepEqual(retried.body.messages?.filter((m) => m.role !== 'system').map((m) => m.role), ['user']);
    // Stored so: another window loads one prompt and one answer.
    const sessionId = first.sessionId!;
    await first.dispose();
    const second = controller();
    await second.loadSession(sessionId);
    assert.deepEqual(shown(second), ['you: Tell me about rectangles', 'parley: Rectangles have four right angles.']);
  });

  it('an error that is not the provider\'s offers no Retry; Retry with no prompt sent says so', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const ctl = controller();
    await ctl.ensureSession();
    await assert.rejects(ctl.retry(), /no prompt to send again/);
  });

  it('"Stopped." and the failed turn\'s notice come back in place, once each, when the session is loaded again (a reload)', async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const keeper = memoryKeeper();
    const first = controller(keeper);
    await fake!.script([{ text: 'First answer.' }]);
    await first.send('First question');
    await fake!.script([{ text: 'x'.repeat(4000), chunk_size: 4, pacing: { chunks_per_second: 50 } }]);
    const turn = first.send('Second question, stopped');
    await waitUntil(() => first.state.entries.some((e) => e.kind === 'agent' && e.text.length > 0 && e.text.startsWith('x')));
    await first.cancel();
    assert.equal(await turn, 'cancelled');
    await fake!.script([{ text: 'never', fault: { kind: 'http', status: 401, times: 1 } }]);
    await assert.rejects(first.send('Third question, failing'));
    assert.ok(shown(first).at(-1)?.endsWith('[Retry]'), shown(first).join('\n'));
    await fake!.script([{ text: 'Fourth answer.' }]);
    await first.send('Fourth question');
    const sessionId = first.sessionId!;
    const before = shown(first).filter((l) => !l.startsWith('parley: x'));
    assert.ok(before.includes('info: Stopped.'), before.join('\n'));
    const failed = before.filter((l) => l.startsWith('error: '));
    assert.equal(failed.length, 1, before.join('\n'));
    assert.ok(!failed[0].endsWith('[Retry]'), 'another prompt went since: Retry would not send the one that failed');
    await first.dispose();

    // A new window: a new controller, the same workspace state, the session loaded from the store.
    const second = controller(keeper);
    await second.loadSession(sessionId);
    const after = shown(second).filter((l) => !l.startsWith('parley: x'));
    const noticeAt = (lines: string[], prefix: string) => lines.findIndex((l) => l.startsWith(prefix));
    assert.ok(noticeAt(after, 'info: Stopped.') > after.indexOf('you: Second question, stopped'), after.join('\n'));
    assert.ok(noticeAt(after, 'info: Stopped.') < after.indexOf('you: Third question, failing'), after.join('\n'));
    // The failed turn's notice, replayed by the server where it failed: once (the chat keeps none of its own).
    const errors = after.filter((l) => l.startsWith('error: '));
    assert.equal(errors.length, 1, after.join('\n'));
    const error = errors[0];
    assert.ok(error.includes('openai answered 401'), error);
    assert.ok(!error.endsWith('[Retry]'), 'after a reload there is no prompt to retry here');
    assert.ok(noticeAt(after, 'error: ') > after.indexOf('you: Third question, failing'), after.join('\n'));
    assert.ok(noticeAt(after, 'error: ') < after.indexOf('you: Fourth question'), after.join('\n'));
    assert.equal(after[after.length - 1], 'parley: Fourth answer.');
  });

  it("Export gives a session as the server's Markdown, the same as `parley export` (the one shown, and another without touching the view); Delete removes it", async (t) => {
    if (skipIfNoServer(t)) {
      return;
    }
    const keeper = memoryKeeper();
    const ctl = controller(keeper);
    // The model's own heading: nested under the turn's (the server's one format).
    await fake!.script([{ text: '# Area\n\nThe **area** is `w * h`.' }]);
    await ctl.send('How is the area computed?');
    const exported = ctl.sessionId!;
    const shownMarkdown = await ctl.exportMarkdown(exported);
    assert.equal(shownMarkdown, cliExport(exported, dirs.home), 'the same document as the command line');
    assert.match(shownMarkdown, /## You\n\nHow is the area computed\?\n/);
    assert.match(shownMarkdown, /\n### Area\n\nThe \*\*area\*\* is `w \* h`\.\n/);

    // Another session is shown now; the first is exported all the same, the view untouched.
    await ctl.newSession();
    const entriesBefore = ctl.state.entries;
    const rows = ctl.sessionRows(await ctl.listSessions());
    assert.ok(rows.some((r) => r.sessionId === exported));
    assert.equal(await ctl.exportMarkdown(exported), shownMarkdown);
    assert.equal(ctl.state.entries, entriesBefore, 'the view is not touched');
    // A session never prompted is not stored: the server says so.
    await assert.rejects(ctl.exportMarkdown(ctl.sessionId!), /Unknown session/);

    assert.equal(ctl.canDeleteSessions, true, 'the server offers session/delete');
    await ctl.deleteSession(exported);
    const after = await ctl.listSessions();
    assert.ok(!after.some((s) => s.sessionId === exported), 'the deleted session is no longer listed');
  });
});

async function waitUntil(ok: () => boolean, timeoutMs = 10000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > end) {
      throw new Error('timed out');
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}
