/**
 * Issue 25 on the chat page in headless Chromium (the real page, reducer and host→view
 * bridge, `webviewPage.ts`): a command's output live in its card with its colours (deltas
 * only, the text escaped, nothing refused by the page's CSP), "Open in Terminal", the end;
 * another client's terminal; the plan above the transcript ticking; the mode picker.
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import type { Browser, Page } from 'playwright-core';

import type { SessionUpdate } from '../src/client/protocol';
import type { HostToView } from '../src/common/view';
import { CHROMIUM, Host, OUTPUT, clearPosted, haveChromium, launchChromium, nextFrames, openChatPage, posted } from './webviewPage';

const ESC = '\x1b';

/** A running command's update as the server sends it (the generic copy of its output, and the delta). */
const output = (append: string): SessionUpdate => ({
  sessionUpdate: 'tool_call_update',
  toolCallId: 'run-1',
  status: 'in_progress',
  content: [{ type: 'content', content: { type: 'text', text: '```console\n(the output so far, without colours)\n```' } }],
  _meta: { parley: { commandOutput: { append } } },
});

describe('issue 25 on the chat page: a command\'s live output, the plan, the mode', { skip: haveChromium ? false : `no Chromium at ${CHROMIUM}` }, () => {
  let browser: Browser;
  let page: Page;
  let problems: string[];

  before(async () => {
    browser = await launchChromium();
    const view = await openChatPage(browser, { width: 440, height: 900 });
    page = view.page;
    problems = view.problems;
  });

  after(async () => {
    await browser?.close();
  });

  /** A host whose messages to the page are counted by type. */
  async function countingHost(): Promise<{ host: Host; sent: HostToView['type'][] }> {
    const host = new Host(page);
    const sent: HostToView['type'][] = [];
    const send = host.send.bind(host);
    host.send = (m: HostToView) => {
      sent.push(m.type);
      return send(m);
    };
    await host.send({ type: 'reset', state: host.state });
    await host.apply({ type: 'meta', patch: { serverState: 'ready', sessionId: 'sess-c', cwd: '/ws', busy: true } });
    return { host, sent };
  }

  it('shows a command\'s output live in its card, coloured, as deltas; then its result; Open in Terminal asks the host', async () => {
    await clearPosted(page);
    const { host, sent } = await countingHost();
    await host.apply({ type: 'userPrompt', text: 'Run the tests.', context: [] });
    await host.update({
      sessionUpdate: 'tool_call',
      toolCallId: 'run-1',
      title: 'Run `pytest -q`',
      kind: 'execute',
      status: 'pending',
      content: [{ type: 'content', content: { type: 'text', text: '```sh\npytest -q\n```' } }],
      locations: [{ path: '/ws' }],
    });
    const card = page.locator('.entry-tool[data-id="tool-run-1"]');
    const live = card.locator('.command-output');
    assert.equal(await live.isHidden(), true, 'no output yet');
    assert.equal(await card.locator('.command-open-terminal').isHidden(), true);

    sent.length = 0;
    // Pieces as a command writes them: an escape cut between two updates, HTML-looking text.
    await host.update(output(`${ESC}[1m============ test session starts ============${ESC}[0m\n${ESC}[32m..`));
    await host.update(output(`${ESC}[0m${ESC}[3`));
    await host.update(output(`1mF${ESC}[0m <script>window.__pwned = 1</script> & more\n`));
    await host.update(output(`${ESC}[38;5;208morange${ESC}[0m ${ESC}[1;31mFAILED${ESC}[0m test_geometry.py::test_area\n`));
    await nextFrames(page);
    assert.deepEqual(sent, ['entries', 'output', 'output', 'output'], 'pending → running goes whole once; then only the output added');

    // Seen without opening the card.
    assert.equal(await live.isVisible(), true);
    assert.equal(
      await live.innerText(),
      '============ test session starts ============\n..F <script>window.__pwned = 1</script> & more\norange FAILED test_geometry.py::test_area\n',
    );
    assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined, 'text, never HTML');
    const styles = await live.locator('span').evaluateAll((spans) =>
      spans.map((s) => ({ text: s.textContent ?? '', color: getComputedStyle(s).color, weight: getComputedStyle(s).fontWeight })),
    );
    const of = (text: string) => styles.find((s) => s.text === text);
    assert.equal(of('..')?.color, 'rgb(13, 188, 121)', 'green: the theme\'s ANSI green');
    assert.equal(of('F')?.color, 'rgb(205, 49, 49)', 'red, from an escape cut between two updates');
    assert.equal(of('FAILED')?.color, 'rgb(205, 49, 49)');
    assert.equal(of('FAILED')?.weight, '700', 'bold');
    assert.equal(of('orange')?.color, 'rgb(255, 135, 0)', 'a 256-colour, set without a style attribute');
    // Inside the folded card: what the call does is still the command.
    assert.match((await card.locator('.tool-content').textContent()) ?? '', /pytest -q/);

    fs.mkdirSync(OUTPUT, { recursive: true });
    await page.screenshot({ path: path.join(OUTPUT, 'chat-view-command-live.png'), fullPage: true });

    await card.locator('.command-open-terminal').click();
    assert.deepEqual(await posted(page), [{ type: 'openTerminal', toolCallId: 'run-1' }]);

    await host.update({
      sessionUpdate: 'tool_call_update',
      toolCallId: 'run-1',
      status: 'completed',
      content: [{ type: 'content', content: { type: 'text', text: '..F\nFAILED test_geometry.py::test_area\n\nExit code: 1 · 0.4 s' } }],
    });
    await live.waitFor({ state: 'hidden', timeout: 5000 }); // the page renders the update on its next frame
    assert.equal(await live.isHidden(), true, 'the result replaces the live output');
    assert.match(await card.locator('.tool-summary').innerText(), /\.\.F/);
    assert.match(await card.locator('.tool-output pre').textContent() ?? '', /Exit code: 1 · 0\.4 s$/);
    assert.equal(await card.locator('.command-open-terminal').isVisible(), true, 'the terminal still offered after the end');
    assert.deepEqual(problems, []);
  });

  it('a card with another client\'s terminal says so', async () => {
    const { host } = await countingHost();
    await host.update({ sessionUpdate: 'tool_call', toolCallId: 'run-2', title: 'Run `make`', kind: 'execute', status: 'in_progress', content: [{ type: 'terminal', terminalId: 't-9' }] });
    const card = page.locator('.entry-tool[data-id="tool-run-2"]');
    assert.match(await card.locator('.tool-terminal').innerText(), /Terminal output/);
    assert.equal(await card.locator('.command-output').isHidden(), true);
    assert.equal(await card.locator('.command-open-terminal').isHidden(), true);
  });

  it('shows the plan above the transcript, each update replacing it, items ticked as they complete', async () => {
    const { host } = await countingHost();
    const plan = (...statuses: ('pending' | 'in_progress' | 'completed')[]) =>
      host.update({
        sessionUpdate: 'plan',
        entries: [
          { content: 'Run the test suite', status: statuses[0], priority: 'high' },
          { content: 'Fix the failing test', status: statuses[1], priority: 'medium' },
          { content: 'Run the tests again', status: statuses[2], priority: 'low' },
        ],
      });
    const planEl = page.locator('#plan');
    assert.equal(await planEl.isHidden(), true, 'no plan: nothing shown');
    await plan('in_progress', 'pending', 'pending');
    assert.equal(await planEl.isVisible(), true);
    const items = () => planEl.locator('.plan-item').evaluateAll((els) => els.map((e) => `${(e as HTMLElement).dataset.status}:${e.querySelector('.plan-content')?.textContent}`));
    assert.deepEqual(await items(), ['in_progress:Run the test suite', 'pending:Fix the failing test', 'pending:Run the tests again']);
    assert.equal(await planEl.locator('.plan-progress').innerText(), '0/3 done');
    await plan('completed', 'in_progress', 'pending');
    assert.deepEqual(await planEl.locator('.plan-mark').allInnerTexts(), ['☑', '◐', '☐']);
    assert.equal(await planEl.locator('.plan-progress').innerText(), '1/3 done');
    assert.equal(await planEl.locator('.plan-completed .plan-content').evaluate((e) => getComputedStyle(e).textDecorationLine), 'line-through');
    // Above the transcript, in the page's order.
    const order = await page.evaluate(() => {
      const plan = document.getElementById('plan')!;
      const transcript = document.getElementById('transcript')!;
      return Boolean(plan.compareDocumentPosition(transcript) & Node.DOCUMENT_POSITION_FOLLOWING);
    });
    assert.ok(order, 'the plan comes before the transcript');
    await page.screenshot({ path: path.join(OUTPUT, 'chat-view-plan.png'), clip: { x: 0, y: 0, width: 440, height: 200 } });
    await plan('completed', 'completed', 'completed');
    assert.equal(await planEl.locator('.plan-progress').innerText(), '3/3 done');
    await host.update({ sessionUpdate: 'plan', entries: [] });
    assert.equal(await planEl.isHidden(), true, 'an empty plan is hidden');
    assert.deepEqual(problems, []);
  });

  it('offers the mode next to the model picker (once, not again among the other options) and posts the choice', async () => {
    await clearPosted(page);
    const { host } = await countingHost();
    const MODES = [
      { id: 'ask', name: 'Ask', description: 'Every eval, edit and command asks' },
      { id: 'accept_edits', name: 'Accept edits' },
      { id: 'plan', name: 'Plan (read only)' },
    ];
    const modeSelect = page.locator('#mode');
    assert.equal(await modeSelect.isHidden(), true, 'no modes offered: no picker');
    await host.apply(
      {
        type: 'configOptions',
        options: [
          { id: 'mode', name: 'Mode', category: 'mode', type: 'select', currentValue: 'ask', options: MODES.map((m) => ({ value: m.id, name: m.name })) },
          { id: 'model', name: 'Model', category: 'model', type: 'select', currentValue: 'openai:a', options: [{ value: 'openai:a', name: 'GPT A' }] },
        ],
      },
      { type: 'modes', modes: { currentModeId: 'ask', availableModes: MODES } },
    );
    assert.equal(await modeSelect.isVisible(), true);
    assert.deepEqual(await modeSelect.locator('option').allInnerTexts(), ['Ask', 'Accept edits', 'Plan (read only)']);
    assert.equal(await modeSelect.inputValue(), 'ask');
    assert.match((await modeSelect.getAttribute('title')) ?? '', /Ask — Every eval, edit and command asks/);
    assert.equal(await page.locator('#config-options select').count(), 0, 'the mode option is not shown twice');
    const beside = await page.evaluate(() => document.getElementById('model')?.nextElementSibling?.id);
    assert.equal(beside, 'mode');
    await modeSelect.selectOption('plan');
    assert.deepEqual(await posted(page), [{ type: 'setMode', modeId: 'plan' }]);
    await host.update({ sessionUpdate: 'current_mode_update', currentModeId: 'accept_edits' });
    assert.equal(await modeSelect.inputValue(), 'accept_edits', 'the server\'s word shown');
    assert.deepEqual(problems, []);
  });
});
