/**
 * The chat view's chrome in headless Chromium at a narrow sidebar's width: the toolbar, a
 * tool card's one-line header, speaker labels and what is announced, keyboard use, the error card's Retry, the history
 * list's Export and Delete, and screenshots of a permission card and an error card in the
 * dark and light themes (test-output/).
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import type { Browser, Page } from 'playwright-core';

import type { ChatEvent } from '../src/core/chatState';
import { type ChatPage, Host, OUTPUT, type ThemeKind, clearPosted, haveChromium, launchChromium, openChatPage, posted, setTheme } from './webviewPage';

const WIDTH = 280;

const MODELS = [
  { id: 'anthropic:claude-sonnet-4-5-20250929', available: true },
  { id: 'openai:gpt-4.1-mini', available: true },
];

const THOUGHT_LEVEL = {
  type: 'select' as const,
  id: 'thought_level',
  name: 'Thinking',
  category: 'thought_level',
  currentValue: 'medium',
  options: [
    { value: 'low', name: 'low' },
    { value: 'medium', name: 'medium' },
    { value: 'high', name: 'high' },
  ],
};

function ask(requestId: string, sessionId: string, code = 'import statistics\nprint(statistics.mean([3, 4, 5]))'): ChatEvent {
  return {
    type: 'permissionAsked',
    requestId,
    params: {
      sessionId,
      toolCall: {
        toolCallId: `call_${requestId}`,
        title: 'Run Python',
        kind: 'execute',
        rawInput: { code },
      },
      options: [
        { optionId: 'allow_once', name: 'Allow once', kind: 'allow_once' },
        { optionId: 'allow_always', name: 'Always allow', kind: 'allow_always' },
        { optionId: 'reject_once', name: 'Reject', kind: 'reject_once' },
      ],
    },
  };
}

/** The page's document scrolls sideways (content wider than the view). */
async function scrollsSideways(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const out: string[] = [];
    for (const el of [document.documentElement, document.body, document.getElementById('app')!, document.getElementById('toolbar')!]) {
      if (el.scrollWidth > el.clientWidth) {
        out.push(`${el.tagName}#${el.id}: scrollWidth ${el.scrollWidth} > clientWidth ${el.clientWidth}`);
      }
    }
    return out;
  });
}

/** Buttons and selects of the toolbar whose box is not wholly inside the view. */
async function clipped(page: Page, selector: string): Promise<string[]> {
  return page.locator(selector).evaluateAll((els) =>
    els
      .filter((el) => (el as HTMLElement).offsetParent !== null)
      .filter((el) => {
        const r = el.getBoundingClientRect();
        return r.left < 0 || r.right > document.documentElement.clientWidth + 0.5;
      })
      .map((el) => `${el.id || el.textContent}: ${JSON.stringify(el.getBoundingClientRect())}`),
  );
}

describe(`chat view chrome at ${WIDTH} px`, { skip: haveChromium ? false : 'no Chromium' }, () => {
  let browser: Browser;
  let view: ChatPage;
  let page: Page;

  before(async () => {
    browser = await launchChromium();
    view = await openChatPage(browser, { width: WIDTH, height: 760 });
    page = view.page;
  });

  after(async () => {
    await browser?.close();
  });

  it('the toolbar fits: no sideways scrolling, every control inside the view, at 280 and 300 px', async () => {
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply(
      { type: 'meta', patch: { serverState: 'ready', sessionId: 's-1', model: MODELS[0].id, models: MODELS, title: 'Mean of a list in Python' } },
      { type: 'configOptions', options: [THOUGHT_LEVEL] },
      { type: 'userPrompt', text: 'What is the mean of 3, 4 and 5? averylongwordwithoutanyspacesthatmustwrapinsteadofwideningthepage', context: [] },
    );
    // Wide content: a table, a long code line, a tool's long output, a long error.
    await host.update({
      sessionUpdate: 'agent_message_chunk',
      messageId: 'm1',
      content: {
        type: 'text',
        text:
          '| column one | column two | column three | column four |\n|---|---|---|---|\n| 1 | 2 | 3 | 4 |\n\n' +
          '```python\nresult = statistics.mean([3, 4, 5]) + some_function_with_a_long_name(argument_one, argument_two)\n```\n\n' +
          'See https://example.com/a/very/long/path/that/goes/on/and/on/without/any/break/at/all',
      },
    });
    await host.update({ sessionUpdate: 'tool_call', toolCallId: 't1', title: 'Run Python', kind: 'execute', status: 'completed', rawInput: { code: 'x' }, rawOutput: { content: 'y'.repeat(300) } });
    await host.apply({ type: 'notice', level: 'error', text: `Provider error: ${'z'.repeat(200)}` });
    // A permission card whose code has a long line, and the tool card opened (its output one long line).
    await host.apply(ask('w1', 's-1', `values = [${'1234, '.repeat(40)}]`));
    // Folded, the tool card shows its result in brief (the display rules' summary: its first 120 characters, then …).
    const brief = await page.locator('.entry-tool .tool-summary').innerText();
    assert.equal(brief, `${'y'.repeat(120)}…`);
    await page.locator('.entry-tool summary').first().click();
    assert.equal(await page.locator('.entry-tool .tool-summary').isVisible(), false, 'open, the output shows instead');
    assert.equal(await page.locator('.entry-tool .tool-output pre').isVisible(), true);
    for (const width of [280, 300]) {
      await page.setViewportSize({ width, height: 760 });
      assert.deepEqual(await scrollsSideways(page), [], `${width} px`);
      assert.deepEqual(await clipped(page, '#toolbar button, #toolbar select'), [], `${width} px`);
      for (const id of ['model', 'settings-button']) {
        assert.equal(await page.locator(`#${id}`).isVisible(), true, `${id} shown at ${width} px`);
      }
    }
    // Each toolbar button is named for a screen reader and says what it does on hover.
    for (const id of ['settings-button']) {
      const b = page.locator(`#${id}`);
      assert.ok(await b.getAttribute('title'));
      assert.ok((await b.getAttribute('aria-label')) ?? (await b.innerText()));
    }
    await page.setViewportSize({ width: WIDTH, height: 760 });
    fs.mkdirSync(OUTPUT, { recursive: true });
    await page.screenshot({ path: path.join(OUTPUT, 'chat-view-280px.png') });
    assert.deepEqual(view.problems, []);
  });

  it("a tool card's header is one line at 300 px: its kind and status never wrap, a long title ends in …", async () => {
    await page.setViewportSize({ width: 300, height: 760 });
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply(
      { type: 'meta', patch: { serverState: 'ready', sessionId: 's-cards', model: MODELS[1].id, models: MODELS } },
      { type: 'userPrompt', text: 'Read the geometry module and fix it.', context: [] },
    );
    const calls = [
      { title: 'Read geometry.py', kind: 'read' as const, status: 'completed' as const },
      { title: 'Read server/parley/agent/conversation_history_and_replay.py:120-240', kind: 'read' as const, status: 'completed' as const },
      { title: 'Run Python', kind: 'execute' as const, status: 'in_progress' as const },
      { title: 'Edit vscode-extension/src/webview/entryViews.ts', kind: 'edit' as const, status: 'failed' as const },
    ];
    for (const [i, c] of calls.entries()) {
      await host.update({ sessionUpdate: 'tool_call', toolCallId: `card${i}`, title: c.title, kind: c.kind, status: c.status, rawInput: { path: 'geometry.py' } });
    }
    // Each header: its parts side by side on one row; the kind's and the status's text one line
    // each (the lines of a text: the tops of its boxes); a title too long for the row cut with "…".
    const headers = await page.locator('.entry-tool .tool-card summary').evaluateAll((summaries) =>
      summaries.map((summary) => {
        const lines = (el: Element) => {
          const range = document.createRange();
          range.selectNodeContents(el);
          return new Set(Array.from(range.getClientRects(), (r) => Math.round(r.top))).size;
        };
        const part = (selector: string) => summary.querySelector<HTMLElement>(selector)!;
        const parts = ['.tool-status-icon', '.tool-title', '.tool-kind', '.tool-badge'].map(part);
        const tops = parts.map((p) => Math.round(p.getBoundingClientRect().top));
        const title = part('.tool-title');
        const card = summary.closest('.entry-tool')!.getBoundingClientRect();
        return {
          title: title.textContent,
          hover: title.getAttribute('title'),
          kindLines: lines(part('.tool-kind')),
          statusLines: lines(part('.tool-badge')),
          titleLines: lines(title),
          rowSpread: Math.max(...tops) - Math.min(...tops),
          cut: title.scrollWidth > title.clientWidth,
          ellipsis: getComputedStyle(title).textOverflow,
          badgeInside: part('.tool-badge').getBoundingClientRect().right <= card.right,
        };
      }),
    );
    fs.mkdirSync(OUTPUT, { recursive: true });
    await page.screenshot({ path: path.join(OUTPUT, 'chat-view-tool-cards-300px.png') });
    assert.equal(headers.length, calls.length);
    for (const h of headers) {
      const what = JSON.stringify(h);
      assert.equal(h.kindLines, 1, `the kind on one line: ${what}`);
      assert.equal(h.statusLines, 1, `the status on one line: ${what}`);
      assert.equal(h.titleLines, 1, `the title on one line: ${what}`);
      assert.ok(h.rowSpread <= 4, `the header's parts on one row: ${what}`);
      assert.ok(h.badgeInside, `the status inside the card: ${what}`);
    }
    assert.deepEqual(headers.map((h) => h.hover), calls.map((c) => c.title), 'the whole title on hover');
    const long = headers[1];
    assert.ok(long.cut && long.ellipsis === 'ellipsis', `a long title ends in …: ${JSON.stringify(long)}`);
    assert.ok(!headers[0].cut, `a short title is whole: ${JSON.stringify(headers[0])}`);
    await page.setViewportSize({ width: WIDTH, height: 760 });
    assert.deepEqual(view.problems, []);
  });

  it('names the speakers, announces only what is new, and the transcript is not a live region', async () => {
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply({ type: 'meta', patch: { serverState: 'ready', sessionId: 's-a11y', model: MODELS[1].id, models: MODELS } });
    await host.apply({ type: 'userPrompt', text: 'What is the mean of 3, 4 and 5?', context: [] }, { type: 'meta', patch: { busy: true } });
    const status = page.locator('#status');
    await page.waitForFunction(() => document.getElementById('status')?.textContent === 'Parley is answering…');
    assert.equal(await status.getAttribute('role'), 'status');
    assert.equal(await status.getAttribute('aria-live'), 'polite');
    // Streaming: the answer grows in the transcript, which is not live (nothing read per chunk).
    for (const piece of ['The mean ', 'is **4**.']) {
      await host.update({ sessionUpdate: 'agent_message_chunk', messageId: 'a1', content: { type: 'text', text: piece } });
    }
    assert.equal(await status.textContent(), 'Parley is answering…');
    const transcript = page.locator('#transcript');
    assert.equal(await transcript.getAttribute('aria-live'), null);
    assert.equal(await transcript.getAttribute('role'), null);
    assert.equal(await page.locator('#transcript [aria-live]:not([aria-live="off"])').count(), 0);
    // The turn ends: the finished answer is said once.
    await host.apply({ type: 'turnEnded', stopReason: 'end_turn' });
    await page.waitForFunction(() => document.getElementById('status')?.textContent?.startsWith('Parley answered'));
    assert.equal(await status.textContent(), 'Parley answered: The mean is 4.');

    // Speakers: seen above each message, and named in the accessibility tree.
    assert.deepEqual(
      await page.locator('#transcript .entry[data-speaker]').evaluateAll((els) => els.map((el) => getComputedStyle(el, '::before').content)),
      ['"You" / ""', '"Parley" / ""'],
    );
    const tree = await transcript.ariaSnapshot();
    assert.match(tree, /article "You":[\s\S]*What is the mean of 3, 4 and 5\?/, tree);
    assert.match(tree, /article "Parley":[\s\S]*The mean is[\s\S]*4/, tree);
    assert.match(await page.locator('body').ariaSnapshot(), /main "Conversation"/);

    // A notice (here: stopped) is said when it comes.
    await host.apply({ type: 'userPrompt', text: 'And the median?', context: [] }, { type: 'meta', patch: { busy: true } });
    await host.apply(
      {
        type: 'update',
        update: { sessionUpdate: 'agent_message_chunk', messageId: 'n1', content: { type: 'text', text: 'Stopped.' }, _meta: { parley: { notice: { level: 'info' } } } },
      },
      { type: 'turnEnded', stopReason: 'cancelled' },
    );
    await page.waitForFunction(() => document.getElementById('status')?.textContent?.includes('Stopped.'));
    assert.doesNotMatch((await status.textContent()) ?? '', /finished/, 'the notice says why it ended');
    assert.deepEqual(view.problems, []);
  });

  it('keyboard only: Tab and Shift+Tab reach every toolbar button and every button of a permission card; Enter answers', async () => {
    await clearPosted(page);
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply({ type: 'meta', patch: { serverState: 'ready', sessionId: 's-keys', model: MODELS[1].id, models: MODELS, busy: true } });
    await host.apply(ask('k1', 's-keys'));
    const card = page.locator('.entry-permission');
    await card.waitFor({ state: 'visible', timeout: 5000 });
    // The question takes the focus (the card: a key typed for the prompt box approves nothing).
    assert.equal(await card.evaluate((el) => el === document.activeElement), true);
    const focused = () =>
      page.evaluate(() => {
        const el = document.activeElement as HTMLElement;
        return el.id || el.getAttribute('aria-label') || el.innerText || el.tagName;
      });
    const forward: string[] = [];
    for (let i = 0; i < 3; i++) {
      await page.keyboard.press('Tab');
      forward.push(await focused());
    }
    assert.deepEqual(forward, ['Allow once', 'Always allow', 'Reject']);
    await page.keyboard.press('Shift+Tab');
    assert.equal(await focused(), 'Always allow');
    // From the card back up to the toolbar, with Shift+Tab only.
    const backward: string[] = [];
    for (let i = 0; i < 8 && !backward.includes('model'); i++) {
      await page.keyboard.press('Shift+Tab');
      backward.push(await focused());
    }
    for (const name of ['settings-button', 'model']) {
      assert.ok(backward.includes(name), `Shift+Tab reaches ${name}: ${backward.join(' → ')}`);
    }
    // Down again to the card's first button, and Enter answers.
    for (let i = 0; i < 12 && (await focused()) !== 'Allow once'; i++) {
      await page.keyboard.press('Tab');
    }
    assert.equal(await focused(), 'Allow once');
    await page.keyboard.press('Enter');
    assert.deepEqual(await posted(page), [{ type: 'permission', requestId: 'k1', optionId: 'allow_once' }]);
    await host.apply({ type: 'permissionAnswered', requestId: 'k1', optionId: 'allow_once' });
    // The toolbar's button answers Enter too: the settings open, Escape closes them.
    await page.locator('#settings-button').focus();
    await page.keyboard.press('Enter');
    assert.equal(await page.locator('#settings-button').getAttribute('aria-expanded'), 'true');
    await page.locator('#tool-policy').focus();
    await page.keyboard.press('Escape');
    assert.equal(await page.locator('#settings').isHidden(), true);
    assert.equal(await focused(), 'settings-button');
    assert.deepEqual(view.problems, []);
  });

  it('a provider failure shows an error card whose Retry asks the host to send the prompt again', async () => {
    await clearPosted(page);
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply(
      { type: 'meta', patch: { serverState: 'ready', sessionId: 's-err', model: MODELS[1].id, models: MODELS } },
      { type: 'userPrompt', text: 'Summarise geometry.py', context: [] },
      { type: 'meta', patch: { busy: true } },
      { type: 'turnEnded', stopReason: 'end_turn' },
      {
        type: 'notice',
        level: 'error',
        text: 'Rate limit reached for gpt-4.1-mini. Please try again in 20s. [openai 429 rate_limit_exceeded]',
        action: { label: 'Retry', message: { type: 'retry' } },
      },
    );
    const card = page.locator('.entry-notice.notice-error');
    await card.waitFor({ state: 'visible', timeout: 5000 });
    assert.match(await card.locator('.notice-text').innerText(), /Rate limit reached .* \[openai 429 rate_limit_exceeded\]/);
    await page.waitForFunction(() => document.getElementById('status')?.textContent?.includes('Rate limit reached'));
    const retry = card.getByRole('button', { name: 'Retry' });
    assert.equal(await retry.isVisible(), true);
    await retry.focus();
    await page.keyboard.press('Enter');
    assert.deepEqual(await posted(page), [{ type: 'retry' }]);
    assert.deepEqual(view.problems, []);
  });

  it("the question about the workspace's own server: a notice with two buttons, each posting its answer", async () => {
    await clearPosted(page);
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    const file = '/ws/.venv/bin/parley';
    await host.apply({
      type: 'notice',
      level: 'warning',
      text: `This workspace has its own Parley server, ${file}, which has not been approved.`,
      choices: [
        { label: "Use the workspace's server", message: { type: 'useWorkspaceServer', file } },
        { label: 'Use the installed one', message: { type: 'useInstalledServer', file } },
      ],
    });
    const card = page.locator('.entry-notice.notice-warning');
    await card.waitFor({ state: 'visible', timeout: 5000 });
    assert.deepEqual(await card.getByRole('button').allInnerTexts(), ["Use the workspace's server", 'Use the installed one']);
    await card.getByRole('button', { name: 'Use the installed one' }).click();
    await card.getByRole('button', { name: "Use the workspace's server" }).click();
    assert.deepEqual(await posted(page), [
      { type: 'useInstalledServer', file },
      { type: 'useWorkspaceServer', file },
    ]);
    assert.deepEqual(view.problems, []);
  });

  it("a stopped turn's notice offers Retry; the retried turn replaces it on the page: one prompt, one answer", async () => {
    await clearPosted(page);
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    const stopped: ChatEvent = {
      type: 'update',
      update: { sessionUpdate: 'agent_message_chunk', messageId: 'n1', content: { type: 'text', text: 'Stopped.' }, _meta: { parley: { notice: { level: 'info' } } } },
    };
    await host.apply(
      { type: 'meta', patch: { serverState: 'ready', sessionId: 's-stop', model: MODELS[1].id, models: MODELS } },
      { type: 'userPrompt', text: 'Tell me about rectangles', context: [] },
      { type: 'meta', patch: { busy: true } },
      { type: 'update', update: { sessionUpdate: 'agent_message_chunk', messageId: 'a1', content: { type: 'text', text: 'Rectangles are' } } },
      stopped,
      { type: 'turnEnded', stopReason: 'cancelled' },
      { type: 'offerRetry' },
    );
    const notice = page.locator('.entry-notice', { hasText: 'Stopped.' });
    await notice.getByRole('button', { name: 'Retry' }).click();
    assert.deepEqual(await posted(page), [{ type: 'retry' }]);
    // The host's Retry: the cut-off turn leaves, the prompt again, the new answer.
    await host.apply(
      { type: 'dropLastTurn' },
      { type: 'userPrompt', text: 'Tell me about rectangles', context: [] },
      { type: 'update', update: { sessionUpdate: 'agent_message_chunk', messageId: 'a2', content: { type: 'text', text: 'Rectangles have four right angles.' } } },
      { type: 'turnEnded', stopReason: 'end_turn' },
    );
    await page.locator('.entry-agent', { hasText: 'four right angles' }).waitFor({ timeout: 5000 });
    const kinds = await page.locator('#transcript .entry').evaluateAll((els: Element[]) => els.map((el) => el.classList.item(1) ?? ''));
    assert.deepEqual(kinds, ['entry-user', 'entry-agent']);
    assert.deepEqual(view.problems, []);
  });

  it('the history list: Export posts the session; Delete asks in the row, Keep takes it back, Delete posts it', async () => {
    await clearPosted(page);
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply({ type: 'meta', patch: { serverState: 'ready', sessionId: 's-now', model: MODELS[1].id, models: MODELS } });
    assert.equal(await page.locator('#sessions').isHidden(), true, 'opens when the list comes (the title bar asks the host)');
    const sessions = [
      { sessionId: 's-now', title: 'Mean of a list in Python', updatedAt: new Date().toISOString(), current: true },
      { sessionId: 's-old', title: 'Refactor the area function to take floats and check its tests', updatedAt: '2025-03-02T10:00:00Z', current: false },
    ];
    await host.send({ type: 'sessions', sessions, canDelete: true });
    const old = page.locator('#session-list li[data-session-id="s-old"]');
    await old.waitFor({ state: 'visible', timeout: 5000 });
    assert.equal(await page.locator('#sessions').isVisible(), true);
    assert.match(await old.locator('.session-time').innerText(), /^2025-03-02 \d\d:\d\d$/, 'an older session: its date and local time');
    assert.deepEqual(await scrollsSideways(page), []);
    assert.deepEqual(await clipped(page, '#session-list button'), []);
    fs.mkdirSync(OUTPUT, { recursive: true });
    await page.screenshot({ path: path.join(OUTPUT, 'chat-view-history-280px.png') });

    await old.hover(); // a row shows its buttons while hovered (issue 43: one line until then)
    await old.getByRole('button', { name: /^Export/ }).click();
    assert.deepEqual(await posted(page), [{ type: 'exportSession', sessionId: 's-old' }]);
    assert.equal(await page.locator('#sessions').isVisible(), true, 'Export does not open the session');

    await old.getByRole('button', { name: /^Delete/ }).click();
    const question = old.locator('.session-confirm');
    assert.match(await question.innerText(), /Delete “Refactor the area function.*”\? It cannot be undone\./);
    assert.equal(await page.evaluate(() => (document.activeElement as HTMLElement).innerText), 'Keep', 'the safe answer has the focus');
    await page.keyboard.press('Enter');
    assert.equal(await question.count(), 0);
    assert.equal(await page.evaluate(() => (document.activeElement as HTMLElement).innerText), 'Delete', 'back on Delete');
    assert.equal((await posted(page)).length, 1, 'nothing deleted without the second Delete');
    // Asked again, by keyboard: Enter on Delete, Shift+Tab from Keep to the question's Delete, Enter.
    await page.keyboard.press('Enter');
    await page.screenshot({ path: path.join(OUTPUT, 'chat-view-history-delete-280px.png') });
    await page.keyboard.press('Shift+Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.className), 'danger session-confirm-delete');
    await page.keyboard.press('Enter');
    assert.deepEqual((await posted(page)).slice(-1), [{ type: 'deleteSession', sessionId: 's-old' }]);
    // The host answers with the list as the server has it now.
    await host.send({ type: 'sessions', sessions: sessions.slice(0, 1), canDelete: true });
    await old.waitFor({ state: 'detached', timeout: 5000 });
    assert.equal(await page.locator('#session-list li').count(), 1);

    // Without session/delete on the server, no Delete.
    await host.send({ type: 'sessions', sessions, canDelete: false });
    assert.equal(await page.locator('#session-list .session-delete').count(), 0);
    assert.equal(await page.locator('#session-list .session-export').count(), 2);
    await page.locator('#sessions-close').click();
    assert.deepEqual(view.problems, []);
  });

  it('screenshots: a permission card and an error card, dark and light, readable', async () => {
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply(
      { type: 'meta', patch: { serverState: 'ready', sessionId: 's-shot', model: MODELS[1].id, models: MODELS, busy: true } },
      { type: 'userPrompt', text: 'What is the mean of 3, 4 and 5? Run it.', context: [] },
    );
    await host.apply(ask('p1', 's-shot'));
    await page.locator('.entry-permission').waitFor({ state: 'visible', timeout: 5000 });
    const themes: ThemeKind[] = ['vscode-dark', 'vscode-light'];
    fs.mkdirSync(OUTPUT, { recursive: true });
    for (const kind of themes) {
      await setTheme(page, kind);
      await page.screenshot({ path: path.join(OUTPUT, `chat-view-permission-${kind.slice(7)}.png`) });
    }
    await host.apply({ type: 'permissionAnswered', requestId: 'p1', cancelled: true });
    await host.apply(
      { type: 'turnEnded', stopReason: 'end_turn' },
      {
        type: 'notice',
        level: 'error',
        text: 'Incorrect API key provided: sk-proj-****abcd. You can find your API key at https://platform.openai.com/account/api-keys. [openai 401 invalid_request_error]',
        action: { label: 'Retry', message: { type: 'retry' } },
      },
    );
    const card = page.locator('.entry-notice.notice-error');
    await card.waitFor({ state: 'visible', timeout: 5000 });
    for (const kind of themes) {
      await setTheme(page, kind);
      const [fg, bg] = await card.evaluate((el) => [getComputedStyle(el).color, getComputedStyle(el).backgroundColor]);
      assert.notEqual(fg, bg);
      await page.screenshot({ path: path.join(OUTPUT, `chat-view-error-${kind.slice(7)}.png`) });
    }
    await setTheme(page, 'vscode-dark');
    assert.deepEqual(view.problems, []);
  });
});
