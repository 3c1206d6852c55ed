/**
 * Issue 43, in headless Chromium at the default sidebar's 300 px: an approval card renders the
 * server's words — a command's fence as a code block, code spans in its title and options as
 * code (no literal backticks), a control character shown escaped — and a call the user
 * rejected is badged "rejected", not "failed"; a table's alignment is a class (the CSP allows
 * no inline style: the console logs no error) and its words stay whole; a plan item's code is
 * code.
 */

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import type { Browser, Page } from 'playwright-core';

import { type ChatPage, Host, haveChromium, launchChromium, openChatPage } from './webviewPage';

/** A command as the server shows it: its title quotes it, its content is a fenced block. */
const COMMAND = "printf '\\033[31mred\\033[0m\\n'; git status";
const TITLE = "Run `printf '\\033[31mred\\033[0m\\n'; git status`\u001b[2J";

describe('approval cards, tables and the plan as a user sees them (issue 43)', { skip: haveChromium ? false : 'no Chromium' }, () => {
  let browser: Browser;
  let view: ChatPage;
  let page: Page;
  let host: Host;

  before(async () => {
    browser = await launchChromium();
    view = await openChatPage(browser, { width: 300, height: 800 });
    page = view.page;
    host = new Host(page);
    await host.apply({ type: 'meta', patch: { sessionId: 's1', busy: true } });
  });

  after(async () => {
    await browser?.close();
  });

  it("renders a command's question: the command as a code block, code in the title and options as code", async () => {
    await host.update({ sessionUpdate: 'tool_call', toolCallId: 'c1', title: TITLE, kind: 'execute', status: 'pending' });
    await host.apply({
      type: 'permissionAsked',
      requestId: 'r1',
      params: {
        sessionId: 's1',
        toolCall: { toolCallId: 'c1', title: TITLE, kind: 'execute', rawInput: { command: COMMAND }, content: [{ type: 'content', content: { type: 'text', text: `\`\`\`sh\n${COMMAND}\n\`\`\`` } }] },
        options: [
          { optionId: 'allow_once', name: 'Allow once', kind: 'allow_once' },
          { optionId: 'allow_always:git', name: 'Always allow `git` here', kind: 'allow_always' },
          { optionId: 'reject_once', name: 'Reject', kind: 'reject_once' },
        ],
      },
    });
    const card = page.locator('.entry-permission');
    const shown = await card.innerText();
    assert.doesNotMatch(shown, /`/, `no literal backtick on the card:\n${shown}`);
    assert.equal((await card.locator('.code-block pre code').innerText()).trimEnd(), COMMAND);
    assert.equal(await card.locator('.code-block .code-lang').innerText(), 'sh');
    assert.equal(await card.locator('.permission-title code').innerText(), "printf '\\033[31mred\\033[0m\\n'; git status");
    assert.match(await card.locator('.permission-title').innerText(), /\\x1b\[2J \(execute\)$/, 'the control character shown escaped');
    assert.equal(await card.locator('button[data-option-id="allow_always:git"] code').innerText(), 'git');
    assert.equal(await card.locator('button[data-option-id="allow_always:git"]').innerText(), 'Always allow git here');
    assert.equal(await page.locator('.entry-tool .tool-title code').innerText(), "printf '\\033[31mred\\033[0m\\n'; git status");
  });

  it('badges a call the user rejected as rejected, not failed', async () => {
    await host.apply({ type: 'permissionAnswered', requestId: 'r1', optionId: 'reject_once' });
    await host.update({
      sessionUpdate: 'tool_call_update',
      toolCallId: 'c1',
      status: 'failed',
      content: [{ type: 'content', content: { type: 'text', text: 'The user rejected this call, so it was not run.' } }],
    });
    const tool = page.locator('.entry-tool');
    assert.equal(await tool.locator('.tool-badge').innerText(), 'rejected');
    assert.equal(await tool.evaluate((el) => el.classList.contains('status-failed')), false);
    const answer = await page.locator('.permission-answer').innerText();
    assert.doesNotMatch(answer, /`/);
    assert.match(answer, /^Rejected: Run printf/);
  });

  it('a failed call that was allowed stays failed', async () => {
    await host.update({ sessionUpdate: 'tool_call', toolCallId: 'c2', title: 'Run `false`', kind: 'execute', status: 'pending' });
    await host.apply({
      type: 'permissionAsked',
      requestId: 'r2',
      params: { sessionId: 's1', toolCall: { toolCallId: 'c2', title: 'Run `false`', kind: 'execute' }, options: [{ optionId: 'allow_once', name: 'Allow once', kind: 'allow_once' }] },
    });
    await host.apply({ type: 'permissionAnswered', requestId: 'r2', optionId: 'allow_once' });
    await host.update({ sessionUpdate: 'tool_call_update', toolCallId: 'c2', status: 'failed' });
    assert.equal(await page.locator('.entry-tool[data-id="tool-c2"] .tool-badge').innerText(), 'failed');
  });

  it('aligns table columns by class, within the CSP (no console error), with words kept whole', async () => {
    const table = ['| Function | Lines | Status |', '| :--- | ---: | :---: |', '| perimeter_of_rectangle | 12 | ok |', '| area | 3 | ok |'].join('\n');
    await host.chunks('agent_message_chunk', 'm1', `Summary:\n\n${table}\n\nDone.`, 9);
    await host.apply({ type: 'turnEnded', stopReason: 'end_turn', turn: 1 });
    const cells = await page.locator('.entry-agent table tr:nth-child(1) td').evaluateAll((tds) =>
      tds.map((td): { cls: string; style: boolean; align: string } => ({ cls: td.getAttribute('class') ?? '', style: td.hasAttribute('style'), align: getComputedStyle(td).textAlign })),
    );
    assert.deepEqual(cells, [
      { cls: 'align-left', style: false, align: 'left' },
      { cls: 'align-right', style: false, align: 'right' },
      { cls: 'align-center', style: false, align: 'center' },
    ]);
    const header = await page.locator('.entry-agent th').first().evaluate((th) => {
      const range = document.createRange();
      range.selectNodeContents(th);
      return range.getClientRects().length;
    });
    assert.equal(header, 1, '"Function" on one line, not broken mid-word');
    assert.deepEqual(view.problems, [], 'no console error (a refused inline style is one)');
  });

  it("renders a plan item's code as code", async () => {
    await host.update({
      sessionUpdate: 'plan',
      entries: [
        { content: 'Run `pytest -q` and read the **failures**', priority: 'high', status: 'in_progress' },
        { content: 'Fix `perimeter`', priority: 'medium', status: 'pending' },
      ],
    });
    const items = page.locator('#plan .plan-content');
    assert.deepEqual(await items.allInnerTexts(), ['Run pytest -q and read the failures', 'Fix perimeter']);
    assert.equal(await items.first().locator('code').innerText(), 'pytest -q');
    assert.equal(await items.first().locator('strong').innerText(), 'failures');
  });
});
