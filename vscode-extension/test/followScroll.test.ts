/**
 * Issue 43: the chat follows the conversation as Copilot Chat does, in headless Chromium at
 * 300 px. A prompt sent while the user reads above comes into view; while the user reads
 * above, new output does not move them and "Jump to latest" shows, which goes to the end.
 */

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import type { Browser, Page } from 'playwright-core';

import { type ChatPage, Host, haveChromium, launchChromium, nextFrames, openChatPage } from './webviewPage';

const LONG = Array.from({ length: 60 }, (_, i) => `Paragraph ${i + 1} of a long answer, which the user scrolls back to read.`).join('\n\n');

/** The transcript's scroll position, and whether its end is in view. */
function position(page: Page): Promise<{ top: number; atEnd: boolean }> {
  return page.locator('#transcript').evaluate((t) => ({ top: t.scrollTop, atEnd: t.scrollHeight - t.scrollTop - t.clientHeight < 2 }));
}

describe('the chat follows the conversation (issue 43)', { skip: haveChromium ? false : 'no Chromium' }, () => {
  let browser: Browser;
  let view: ChatPage;
  let page: Page;
  let host: Host;

  before(async () => {
    browser = await launchChromium();
    view = await openChatPage(browser, { width: 300, height: 600 });
    page = view.page;
    host = new Host(page);
    await host.apply({ type: 'meta', patch: { sessionId: 's1' } }, { type: 'userPrompt', text: 'Tell me a lot.', context: [] });
    await host.chunks('agent_message_chunk', 'm1', LONG, 200);
    await host.apply({ type: 'turnEnded', stopReason: 'end_turn', turn: 1 });
    await nextFrames(page);
  });

  after(async () => {
    await browser?.close();
  });

  it('keeps the end in view while the user is there; no "Jump to latest"', async () => {
    assert.equal((await position(page)).atEnd, true);
    assert.equal(await page.locator('#jump-latest').isHidden(), true);
  });

  it('does not move a user reading above when output comes, and shows "Jump to latest"', async () => {
    await page.locator('#transcript').evaluate((t) => (t.scrollTop = 0));
    await page.locator('#jump-latest').waitFor({ state: 'visible' });
    await host.apply({ type: 'userPrompt', text: 'And more?', context: [] }); // sent: brought into view
    await page.locator('#transcript').evaluate((t) => (t.scrollTop = 0));
    await host.chunks('agent_message_chunk', 'm2', LONG.slice(0, 2000), 100);
    await nextFrames(page);
    assert.equal((await position(page)).top, 0, 'still where the user reads');
    assert.equal(await page.locator('#jump-latest').innerText(), 'Jump to latest ↓');
    await page.locator('#jump-latest').click();
    assert.equal((await position(page)).atEnd, true, 'at the end');
    assert.equal(await page.locator('#jump-latest').isHidden(), true);
    await host.apply({ type: 'turnEnded', stopReason: 'end_turn', turn: 2 });
  });

  it('brings a prompt the user sends into view, wherever they were reading', async () => {
    await page.locator('#transcript').evaluate((t) => (t.scrollTop = 0));
    await host.apply({ type: 'userPrompt', text: 'The last question.', context: [] });
    assert.equal((await position(page)).atEnd, true);
    const prompt = await page.locator('.entry-user', { hasText: 'The last question.' }).evaluate((el) => {
      const box = el.getBoundingClientRect();
      const view = document.getElementById('transcript')!.getBoundingClientRect();
      return box.top >= view.top && box.bottom <= view.bottom;
    });
    assert.equal(prompt, true, 'the prompt sent is in view');
    assert.equal(await page.locator('#jump-latest').isHidden(), true);
    assert.deepEqual(view.problems, []);
  });
});
