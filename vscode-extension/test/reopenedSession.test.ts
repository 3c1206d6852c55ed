/**
 * Issue 43, the real `parley serve` (against the fake LLM) behind the chat controller, and the
 * chat's page in headless Chromium showing what the controller holds: a question rejected with
 * a note ("Reject with note…") whose words the model reads in the call's result; a refused
 * slash command (`_meta.parley.kept: false`) dropped from the chat as Emacs drops it; a
 * reopened session showing an undo as the live chat did (the server's words as a notice, not
 * "You: /undo"); and, after undoing a reopened session's turn, the plan shown before it.
 */

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import type { Browser, Page } from 'playwright-core';

import { ChatController } from '../src/core/controller';
import { FakeLLM, PARLEY, serverEnv, serverUnavailable, tempDirs, until } from './harness';
import { type ChatPage, clearPosted, haveChromium, launchChromium, openChatPage, postToPage, posted } from './webviewPage';

const plan = (...names: string[]) => names.map((content) => ({ content, status: 'pending', priority: 'medium' }));
const PLAN_1 = plan('Read the notes', 'Write the summary');
const PLAN_2 = plan('Write a.txt');
const PLAN_3 = plan('Write b.txt');

describe('a reopened session and a rejection with a note, as the chat shows them (issue 43)', { skip: haveChromium ? false : 'no Chromium' }, () => {
  let skip: string | undefined;
  let fake: FakeLLM | undefined;
  let browser: Browser | undefined;
  let view: ChatPage;
  let page: Page;
  const dirs = tempDirs();
  let ctl: ChatController;

  before(async () => {
    skip = await serverUnavailable();
    if (skip) {
      return;
    }
    fake = await FakeLLM.start();
    browser = await launchChromium();
    view = await openChatPage(browser, { width: 300, height: 800 });
    page = view.page;
    ctl = new ChatController({
      workspaceRoot: () => dirs.workspace,
      settings: () => ({ server: { command: PARLEY, args: ['serve'], env: serverEnv(fake!, dirs.home) } }),
      // Each edit allowed (the page's card is only for the note's test, which runs none).
      onPermissionAsked: (params) => Promise.resolve(params.toolCall.kind === 'edit' ? (params.options.find((o) => o.kind === 'allow_once')?.optionId ?? null) : null),
    });
  });

  after(async () => {
    await ctl?.dispose();
    await browser?.close();
    await fake?.stop();
    dirs.cleanup();
  });

  /** The page shows what the controller holds now. */
  async function show(): Promise<void> {
    await postToPage(page, { type: 'reset', state: { meta: ctl.state.meta, entries: ctl.state.entries } });
  }

  it("rejects with a note from the card: the model reads the user's words in the call's result", async (t) => {
    if (skip) {
      return t.skip(skip);
    }
    await fake!.script([{ tool_calls: [{ name: 'python_eval', arguments: { code: 'import os; print(os.getcwd())' } }] }, { text: 'With pathlib, then.' }]);
    const turn = ctl.send('Where am I?');
    await until(() => ctl.state.entries.find((e) => e.kind === 'permission' && !e.answer), 'the question');
    await show();
    await clearPosted(page);
    const card = page.locator('.entry-permission');
    await card.getByRole('button', { name: 'Reject with note…' }).click();
    await card.getByRole('textbox', { name: 'Your note for the model' }).fill('use pathlib instead');
    await card.getByRole('textbox', { name: 'Your note for the model' }).press('Enter');
    const [answer] = (await posted(page)).filter((m) => m.type === 'permission');
    const { requestId, optionId, note } = answer as unknown as { requestId: string; optionId: string; note: string };
    assert.deepEqual([optionId, note], ['reject_once', 'use pathlib instead']);
    ctl.answerPermission(requestId, optionId, note);
    assert.equal(await turn, 'end_turn');
    const requests = await fake!.requests();
    const results = (requests[requests.length - 1].body.messages ?? []).filter((m) => m.role === 'tool');
    assert.match(String(results[results.length - 1]?.content), /The user rejected this call, so it was not run\. The user's note: use pathlib instead$/);
    await show();
    assert.equal(await page.locator('.permission-note-said').innerText(), 'Your note: use pathlib instead');
    assert.match(await page.locator('.permission-answer').innerText(), /^Rejected: /);
  });

  it('drops a slash command the server refused and did not keep (_meta.parley.kept: false), its notice kept', async (t) => {
    if (skip) {
      return t.skip(skip);
    }
    await ctl.send('/mode pl');
    await show();
    assert.equal(await page.locator('.entry-user', { hasText: '/mode pl' }).count(), 0, 'the typo is not in the chat');
    assert.match(await page.locator('.entry-notice').last().innerText(), /pl/, "the server's notice says why");
  });

  it('shows an undo in a reopened session as the live chat did: the server\'s words as a notice, no "You: /undo"', async (t) => {
    if (skip) {
      return t.skip(skip);
    }
    await ctl.newSession();
    const write = (file: string) => ({ name: 'write_file', arguments: { path: file, content: `${file}\n` } });
    const setPlan = (entries: unknown) => ({ name: 'update_plan', arguments: { entries } });
    await fake!.script([
      { tool_calls: [setPlan(PLAN_1)] },
      { text: 'Planned.' },
      { tool_calls: [setPlan(PLAN_2), write('a.txt')] },
      { text: 'Wrote a.' },
      { tool_calls: [setPlan(PLAN_3), write('b.txt')] },
      { text: 'Wrote b.' },
    ]);
    await ctl.send('Plan it.');
    await ctl.send('Write a.');
    await ctl.send('Write b.');
    const sessionId = ctl.state.meta.sessionId!;
    const live = await ctl.undoTurn(3);
    await show();
    const noticesLive = await page.locator('.entry-notice .notice-text').allInnerTexts();
    assert.ok(noticesLive.includes(live.text), `the live chat shows the server's words: ${JSON.stringify(noticesLive)}`);

    // Reopened: the three prompts, the undo as the server's words where it was — no "/undo".
    await ctl.newSession();
    await ctl.loadSession(sessionId);
    await show();
    assert.deepEqual(await page.locator('.entry-user').allInnerTexts(), ['Plan it.', 'Write a.', 'Write b.']);
    const notices = await page.locator('.entry-notice .notice-text').allInnerTexts();
    assert.ok(notices.includes(live.text), `the undo's words shown as a notice: ${JSON.stringify(notices)}`);
    assert.equal(await page.locator('.entry-agent', { hasText: live.text.split('\n')[0] }).count(), 0, 'not as an answer');
  });

  it("undoing a reopened session's turn shows the plan shown before that turn's prompt", async (t) => {
    if (skip) {
      return t.skip(skip);
    }
    await ctl.undoTurn(2);
    await show();
    assert.deepEqual(await page.locator('#plan .plan-content').allInnerTexts(), PLAN_1.map((p) => p.content));
    assert.deepEqual(view.problems, []);
  });
});
