/**
 * Issue 43: the history list at 300 px, in headless Chromium. A row is one line (its title cut
 * with …) until hovered or focused, which shows its Export and Delete; the search keeps the
 * rows whose title has its words, and says when none has.
 */

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import type { Browser, Page } from 'playwright-core';

import { type ChatPage, Host, haveChromium, launchChromium, openChatPage } from './webviewPage';

const SESSIONS = [
  { sessionId: 's-1', title: 'Compute the area of a rectangle and check the tests that cover it', updatedAt: '2025-03-02T10:00:00Z', current: true },
  { sessionId: 's-2', title: 'Refactor the perimeter function to take floats', updatedAt: '2025-03-01T10:00:00Z', current: false },
  { sessionId: 's-3', title: 'Why does the CI fail on Windows?', updatedAt: '2025-02-01T10:00:00Z', current: false },
];

/** Each row's height and whether its Export button shows. */
function rows(page: Page): Promise<{ id: string; height: number; exportShown: boolean }[]> {
  return page.locator('#session-list li[data-session-id]').evaluateAll((lis) =>
    lis.map((li) => ({
      id: li.getAttribute('data-session-id') ?? '',
      height: li.getBoundingClientRect().height,
      exportShown: li.querySelector<HTMLElement>('.session-export')?.offsetParent !== null,
    })),
  );
}

describe('the history list (issue 43)', { skip: haveChromium ? false : 'no Chromium' }, () => {
  let browser: Browser;
  let view: ChatPage;
  let page: Page;

  before(async () => {
    browser = await launchChromium();
    view = await openChatPage(browser, { width: 300, height: 700 });
    page = view.page;
    await new Host(page).send({ type: 'sessions', sessions: SESSIONS, canDelete: true });
    await page.locator('#sessions').waitFor({ state: 'visible' });
  });

  after(async () => {
    await browser?.close();
  });

  it('shows each row on one line, its buttons only while hovered or focused', async () => {
    await page.mouse.move(299, 699); // away from the list
    const lineHeight = await page.locator('.session-title').first().evaluate((el) => parseFloat(getComputedStyle(el).lineHeight) || 18);
    for (const row of await rows(page)) {
      assert.ok(row.height < lineHeight * 2, `${row.id} is one line (${row.height} px)`);
      assert.equal(row.exportShown, false, `${row.id}: no buttons until hovered`);
    }
    const long = page.locator('li[data-session-id="s-1"] .session-title');
    assert.equal(await long.evaluate((el) => el.scrollWidth > el.clientWidth), true, 'the long title is cut (…)');
    await page.locator('li[data-session-id="s-2"]').hover();
    const hovered = (await rows(page)).find((r) => r.id === 's-2');
    assert.equal(hovered?.exportShown, true, 'hovered: Export shows');
    assert.ok((hovered?.height ?? 99) < lineHeight * 2, 'and the row stays one line');
    await page.mouse.move(299, 699);
    await page.locator('li[data-session-id="s-3"] .session-open').focus();
    assert.equal((await rows(page)).find((r) => r.id === 's-3')?.exportShown, true, 'focused: Export shows (Tab reaches it)');
  });

  it('searches the titles', async () => {
    await page.locator('#session-search').fill('the PERIMETER');
    assert.deepEqual(await page.locator('#session-list li[data-session-id]:visible .session-title').allInnerTexts(), ['Refactor the perimeter function to take floats']);
    assert.equal(await page.locator('#session-none').isHidden(), true);
    await page.locator('#session-search').fill('linux');
    assert.equal(await page.locator('#session-list li[data-session-id]:visible').count(), 0);
    assert.equal(await page.locator('#session-none').innerText(), 'No session matches.');
    await page.locator('#session-search').fill('');
    assert.equal(await page.locator('#session-list li[data-session-id]:visible').count(), 3);
    assert.deepEqual(view.problems, []);
  });
});
