/**
 * The chat view's page in headless Chromium (Debian's, driven by playwright-core), with a
 * stand-in for the VS Code webview API. A scripted sequence of session updates goes through
 * the real reducer and host→view bridge; the page must show it as a user would see it.
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import type { Browser, Page } from 'playwright-core';

import type { ChatEvent } from '../src/core/chatState';
import { CHROMIUM, Host, OUTPUT, type ThemeKind, haveChromium, launchChromium, openChatPage, posted, setTheme } from './webviewPage';

/**
 * For each element matching `selector`: the contrast ratio (WCAG) of its text, and of its
 * `.diff-sign`, against its background as painted (translucent layers composed over their
 * ancestors'), and that background.
 */
async function contrasts(page: Page, selector: string): Promise<{ text: number; sign: number; background: string }[]> {
  return page.locator(selector).evaluateAll((els) => {
    type RGBA = [number, number, number, number];
    // Computed colours come as rgb()/rgba(), or (from color-mix) as color(srgb r g b / a) in 0..1.
    const parse = (c: string): RGBA => {
      const m = /(rgba?|color)\(([^)]+)\)/.exec(c);
      if (!m) {
        throw new Error(`a colour this test does not read: ${c}`);
      }
      const parts = m[2].replace('srgb', '').split(/[ ,/]+/).filter(Boolean).map(Number);
      const scale = m[1] === 'color' ? 255 : 1;
      return [parts[0] * scale, parts[1] * scale, parts[2] * scale, parts[3] ?? 1];
    };
    const over = (top: RGBA, bottom: RGBA): RGBA => {
      const a = top[3] + bottom[3] * (1 - top[3]);
      if (a === 0) {
        return [0, 0, 0, 0];
      }
      const mix = (i: number) => (top[i] * top[3] + bottom[i] * bottom[3] * (1 - top[3])) / a;
      return [mix(0), mix(1), mix(2), a];
    };
    const painted = (el: Element): RGBA => {
      const layers: RGBA[] = [];
      for (let e: Element | null = el; e; e = e.parentElement) {
        layers.push(parse(getComputedStyle(e).backgroundColor));
      }
      let colour: RGBA = [255, 255, 255, 1];
      for (const layer of layers.reverse()) {
        colour = over(layer, colour);
      }
      return colour;
    };
    const luminance = ([r, g, b]: RGBA) => {
      const ch = (v: number) => {
        const x = v / 255;
        return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4;
      };
      return 0.2126 * ch(r) + 0.7152 * ch(g) + 0.0722 * ch(b);
    };
    const ratio = (a: RGBA, b: RGBA) => {
      const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
      return (hi + 0.05) / (lo + 0.05);
    };
    return els.map((el) => {
      const bg = painted(el);
      const text = over(parse(getComputedStyle(el).color), bg);
      const signEl = el.querySelector('.diff-sign');
      const sign = signEl ? over(parse(getComputedStyle(signEl).color), bg) : text;
      return { text: ratio(text, bg), sign: ratio(sign, bg), background: bg.map((v) => Math.round(v)).join(',') };
    });
  });
}

describe('chat view page in headless Chromium', { skip: haveChromium ? false : `no Chromium at ${CHROMIUM}` }, () => {
  let browser: Browser;
  let page: Page;
  let problems: string[];

  before(async () => {
    browser = await launchChromium();
    const view = await openChatPage(browser, { width: 440, height: 1100 });
    page = view.page;
    problems = view.problems;
  });

  after(async () => {
    await browser?.close();
  });

  it('renders a scripted turn as a user sees it, and posts the permission answer back', async () => {
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply(
      {
        type: 'meta',
        patch: {
          serverState: 'ready',
          sessionId: 'sess-1',
          model: 'openai:gpt-4.1-mini',
          models: [
            { id: 'openai:gpt-4.1-mini', available: true },
            { id: 'anthropic:claude-sonnet-4-5', available: false, reason: 'ANTHROPIC_API_KEY is not set' },
          ],
        },
      },
      {
        type: 'userPrompt',
        text: 'What does area() return for a 3×4 rectangle? Check it.',
        context: [{ label: 'geometry.py:1-12', uri: 'file:///ws/geometry.py#L1-L12' }],
      },
      { type: 'meta', patch: { busy: true } },
    );

    await host.chunks('agent_thought_chunk', 'm1', 'The user wants the area. I should look at the source and then run it to be sure.');
    await host.chunks('agent_message_chunk', 'm2', 'Let me look at **`geometry.area`** first. <script>window.__pwned = 1</script>');
    await host.update({ sessionUpdate: 'tool_call', toolCallId: 'call_1', title: 'python_eval', kind: 'execute', status: 'pending' });
    await host.update({
      sessionUpdate: 'tool_call_update',
      toolCallId: 'call_1',
      rawInput: { code: 'from geometry import area\narea(3, 4)' },
    });
    await host.apply({
      type: 'permissionAsked',
      requestId: '1',
      params: {
        sessionId: 'sess-1',
        toolCall: { toolCallId: 'call_1', title: 'python_eval', kind: 'execute', rawInput: { code: 'from geometry import area\narea(3, 4)' } },
        options: [
          { optionId: 'allow-once', name: 'Allow once', kind: 'allow_once' },
          { optionId: 'allow-always', name: 'Allow always', kind: 'allow_always' },
          { optionId: 'reject-once', name: 'Reject', kind: 'reject_once' },
        ],
      },
    });

    fs.mkdirSync(OUTPUT, { recursive: true });
    await page.screenshot({ path: path.join(OUTPUT, 'chat-view-permission.png'), fullPage: true });
    // The prompt shows three buttons; clicking "Allow once" posts the answer back.
    const buttons = page.locator('.entry-permission .permission-buttons button');
    assert.deepEqual(await buttons.allInnerTexts(), ['Allow once', 'Allow always', 'Reject', 'Reject with note…']);
    await page.locator('.entry-permission button[data-option-id="allow-once"]').click();
    const answers = (await posted(page)).filter((m) => (m as { type: string }).type === 'permission');
    assert.deepEqual(answers, [{ type: 'permission', requestId: '1', optionId: 'allow-once' }]);

    // The host resolves it; the tool runs and finishes.
    await host.apply({ type: 'permissionAnswered', requestId: '1', optionId: 'allow-once' });
    await host.update({ sessionUpdate: 'tool_call_update', toolCallId: 'call_1', status: 'in_progress' });
    await host.update({
      sessionUpdate: 'tool_call_update',
      toolCallId: 'call_1',
      status: 'completed',
      content: [{ type: 'content', content: { type: 'text', text: '12' } }],
      rawOutput: { content: '12', isError: false },
    });
    // A second round: streamed text, then revised by the synchronous call's text.
    await host.chunks('agent_message_chunk', 'm3', 'The area is 12 squre units');
    await host.update({
      sessionUpdate: 'agent_message_chunk',
      messageId: 'm4',
      content: {
        type: 'text',
        text: 'The area is **12** square units:\n\n```python\n>>> area(3, 4)\n12\n```\n\n- width `3`\n- height `4`',
      },
      _meta: { parley: { replaces: 'm3' } },
    });
    await host.update({
      sessionUpdate: 'usage_update',
      used: 1830,
      size: 128000,
      cost: { amount: 0.0021, currency: 'USD' },
      _meta: {
        parley: {
          call: { inputTokens: 1700, outputTokens: 130, totalTokens: 1830 },
          session: { inputTokens: 1700, outputTokens: 130, totalTokens: 1830, cost: { amount: 0.0021, currency: 'USD' }, turns: 1, rounds: 1 },
        },
      },
    });
    await host.update({ sessionUpdate: 'session_info_update', title: 'Area of a rectangle' });
    await host.apply({ type: 'turnEnded', stopReason: 'end_turn' });

    // Text in order, each entry once.
    const kinds = await page.locator('#transcript .entry').evaluateAll((els) =>
      els.map((e) => (e as HTMLElement).className.split(' ')[1]),
    );
    assert.deepEqual(kinds, ['entry-user', 'entry-thought', 'entry-agent', 'entry-tool', 'entry-permission', 'entry-agent']);
    const text = await page.locator('#transcript').innerText();
    const order = ['What does area() return', 'Thought', 'Let me look at', 'python_eval', 'Allowed once: python_eval', 'The area is 12 square units'];
    let at = -1;
    for (const needle of order) {
      const i = text.indexOf(needle, at + 1);
      assert.ok(i > at, `"${needle}" should come after position ${at} in:\n${text}`);
      at = i;
    }
    // The revision replaced the streamed text (no typo left), and Markdown rendered.
    assert.ok(!text.includes('squre'), 'the streamed text was replaced by the revision');
    assert.equal(await page.locator('.entry-agent strong').last().innerText(), '12');
    assert.equal(await page.locator('.entry-agent pre code').count(), 1);
    assert.equal(await page.locator('.entry-agent li').count(), 2);
    // HTML in the model's text is shown as text, never run.
    assert.ok(text.includes('<script>window.__pwned = 1</script>'));
    assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);
    assert.equal(await page.locator('.entry-agent script').count(), 0);

    // Thoughts are folded.
    assert.equal(await page.locator('details.thought').evaluate((d) => (d as HTMLDetailsElement).open), false);
    assert.equal(await page.locator('.thought-body').isVisible(), false);
    // The tool card: title, status, input and output (folded until clicked).
    const card = page.locator('.entry-tool');
    assert.match((await card.getAttribute('class')) ?? '', /status-completed/);
    assert.equal(await card.locator('.tool-badge').innerText(), 'done');
    await card.locator('summary').click();
    assert.match(await card.locator('.tool-input pre').innerText(), /area\(3, 4\)/);
    assert.equal(await card.locator('.tool-output pre').innerText(), '12');
    // The permission prompt shows its answer on one line, no buttons.
    assert.equal(await page.locator('.entry-permission button').count(), 0);
    assert.equal(await page.locator('.permission-answer').innerText(), 'Allowed once: python_eval');
    // Status line: title, tokens, cost.
    const usage = await page.locator('#usage').innerText();
    assert.match(usage, /Area of a rectangle/);
    assert.match(usage, /1\.8k tokens/);
    assert.match(usage, /\$0\.0021/);
    // The model picker lists the models; the unavailable one is disabled.
    assert.equal(await page.locator('#model').inputValue(), 'openai:gpt-4.1-mini');
    assert.equal(await page.locator('#model option[disabled]').count(), 1);
    await page.locator('#send-button').waitFor({ state: 'visible', timeout: 5000 });
    await page.locator('#stop-button').waitFor({ state: 'hidden', timeout: 5000 });

    fs.mkdirSync(OUTPUT, { recursive: true });
    await page.screenshot({ path: path.join(OUTPUT, 'chat-view.png'), fullPage: true });
    assert.deepEqual(problems, []);
  });

  it('a permission card takes focus, is announced, shows the code and folds to one line', async () => {
    await page.evaluate(() => {
      (window as unknown as { __posted: unknown[] }).__posted = [];
    });
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply({ type: 'meta', patch: { serverState: 'ready', sessionId: 'sess-2', busy: true } });
    // The user is typing in the prompt box when the question comes.
    await page.locator('#prompt').fill('next question');
    await page.locator('#prompt').focus();
    const code = 'import shutil\nshutil.rmtree("build")  # <b>not bold</b>\nprint("done")';
    const ask = (requestId: string): ChatEvent => ({
      type: 'permissionAsked',
      requestId,
      params: {
        sessionId: 'sess-2',
        toolCall: { toolCallId: `call_${requestId}`, title: 'python_eval', kind: 'execute', rawInput: { code } },
        options: [
          { optionId: 'allow_once', name: 'Allow once', kind: 'allow_once' },
          { optionId: 'allow_always', name: 'Always allow', kind: 'allow_always' },
          { optionId: 'reject_once', name: 'Reject', kind: 'reject_once' },
        ],
      },
    });
    await host.apply(ask('7'));
    const card = page.locator('.entry-permission');
    await card.waitFor({ state: 'visible', timeout: 5000 });

    // It has the focus: the card itself, so a key meant for the prompt box approves nothing.
    assert.equal(await card.evaluate((el) => el.contains(document.activeElement)), true);
    assert.equal(await card.evaluate((el) => document.activeElement === el), true);
    await page.keyboard.press('Enter');
    await page.keyboard.press(' ');
    assert.deepEqual(await posted(page), []);

    // Announced as a dialog: its name is the question, its description the code.
    assert.equal(await card.getAttribute('role'), 'alertdialog');
    const named = await card.evaluate((el) =>
      ['aria-labelledby', 'aria-describedby'].map((attr) => {
        const target = document.getElementById(el.getAttribute(attr) ?? '');
        return target && el.contains(target) ? target.textContent : null;
      }),
    );
    assert.deepEqual(named, ['Parley asks permission: python_eval (execute)', code]);
    // The code in full, as code (HTML in it shown as text).
    assert.equal(await card.locator('pre').innerText(), code);
    assert.equal(await card.locator('pre b').count(), 0);
    // Not the whole transcript read again: only the card, as a dialog.
    assert.equal(await card.getAttribute('aria-live'), 'off');

    // Keyboard: Tab reaches the buttons, each named by what it does; Enter answers.
    const names: string[] = [];
    for (let i = 0; i < 3; i++) {
      await page.keyboard.press('Tab');
      names.push(await page.evaluate(() => (document.activeElement as HTMLElement).innerText));
    }
    assert.deepEqual(names, ['Allow once', 'Always allow', 'Reject']);
    await page.keyboard.press('Enter');
    assert.deepEqual(await posted(page), [{ type: 'permission', requestId: '7', optionId: 'reject_once' }]);

    // Answered: one line, no dialog, the code folded away; the focus back in the prompt box.
    await host.apply({ type: 'permissionAnswered', requestId: '7', optionId: 'reject_once' });
    await card.locator('.permission-answer').waitFor({ state: 'visible', timeout: 5000 });
    assert.equal(await card.innerText(), 'Rejected: python_eval');
    assert.equal(await card.getAttribute('role'), null);
    assert.equal(await card.locator('button').count(), 0);
    assert.equal(await card.locator('pre').isVisible(), false);
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'prompt');
    assert.equal(await page.locator('#prompt').inputValue(), 'next question');

    // When the page does not have the focus (the user is in the editor), the live region says it.
    await page.evaluate(() => Object.defineProperty(document, 'hasFocus', { value: () => false, configurable: true }));
    await host.apply(ask('8'));
    await page.locator('.entry-permission[role="alertdialog"]').waitFor({ state: 'visible', timeout: 5000 });
    assert.equal(await page.locator('#announcer').getAttribute('aria-live'), 'assertive');
    assert.equal(await page.locator('#announcer').textContent(), 'Parley asks permission: python_eval — import shutil');
    assert.equal(await page.locator('#transcript #announcer').count(), 0);
    await host.apply({ type: 'permissionAnswered', requestId: '8', optionId: 'allow_once' });
    await page.locator('.entry-permission .permission-answer').last().waitFor({ state: 'visible', timeout: 5000 });
    assert.equal(await page.locator('.entry-permission').last().innerText(), 'Allowed once: python_eval');
    await page.evaluate(() => delete (document as { hasFocus?: unknown }).hasFocus);
    assert.deepEqual(problems, []);
  });

  it('shows tool calls as the server describes them: title, location links, code, diff, superseded', async () => {
    await page.evaluate(() => {
      (window as unknown as { __posted: unknown[] }).__posted = [];
    });
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply({ type: 'meta', patch: { serverState: 'ready', sessionId: 'sess-3', cwd: '/ws', busy: true } });
    const code = 'from geometry import area\nprint(area(3, 4))  # <i>not italic</i>';
    const codeContent = [{ type: 'content' as const, content: { type: 'text' as const, text: code } }];
    // A read: its title and a link to the file at the line.
    await host.update({
      sessionUpdate: 'tool_call',
      toolCallId: 'read_1',
      title: 'Read geometry.py:10-40',
      kind: 'read',
      status: 'completed',
      locations: [{ path: '/ws/geometry.py', line: 10 }],
    });
    // An evaluation that asks first: the permission card shows the code (not the raw input).
    await host.update({ sessionUpdate: 'tool_call', toolCallId: 'eval_1', title: 'Run Python', kind: 'execute', status: 'pending' });
    await host.update({ sessionUpdate: 'tool_call_update', toolCallId: 'eval_1', rawInput: { code, timeout: 30 }, content: codeContent });
    await host.apply({
      type: 'permissionAsked',
      requestId: '9',
      params: {
        sessionId: 'sess-3',
        toolCall: { toolCallId: 'eval_1', title: 'Run Python', kind: 'execute', rawInput: { code, timeout: 30 }, content: codeContent },
        options: [
          { optionId: 'allow_once', name: 'Allow once', kind: 'allow_once' },
          { optionId: 'reject_once', name: 'Reject', kind: 'reject_once' },
        ],
      },
    });
    const permission = page.locator('.entry-permission');
    await permission.waitFor({ state: 'visible', timeout: 5000 });
    assert.equal(await permission.locator('.permission-title').innerText(), 'Parley asks permission: Run Python (execute)');
    assert.equal(await permission.locator('pre').innerText(), code, 'the code, as the server sent it');
    assert.equal(await permission.locator('pre i').count(), 0, 'HTML in the code is shown as text');
    assert.doesNotMatch(await permission.innerText(), /timeout/, 'not the raw input');
    const described = await permission.evaluate((el) => document.getElementById(el.getAttribute('aria-describedby') ?? '')?.textContent);
    assert.equal(described, code);
    await host.apply({ type: 'permissionAnswered', requestId: '9', optionId: 'allow_once' });
    await host.update({
      sessionUpdate: 'tool_call_update',
      toolCallId: 'eval_1',
      status: 'completed',
      content: [{ type: 'content', content: { type: 'text', text: '12' } }],
    });
    // An edit: its diff.
    await host.update({
      sessionUpdate: 'tool_call',
      toolCallId: 'edit_1',
      title: 'Edit geometry.py',
      kind: 'edit',
      status: 'in_progress',
      locations: [{ path: '/ws/geometry.py', line: 3 }],
      content: [{ type: 'diff', path: '/ws/geometry.py', oldText: 'def area(w, h):\n    return w * w\n', newText: 'def area(w, h):\n    return w * h\n' }],
    });
    // A call the stream announced and the model did not make.
    await host.update({ sessionUpdate: 'tool_call', toolCallId: 'read_2', title: 'Read setup.py', kind: 'read', status: 'pending' });
    await host.update({
      sessionUpdate: 'tool_call_update',
      toolCallId: 'read_2',
      status: 'failed',
      content: [{ type: 'content', content: { type: 'text', text: 'The model did not make this call after all.' } }],
      _meta: { parley: { superseded: true } },
    });
    await host.apply({ type: 'turnEnded', stopReason: 'end_turn' });

    const cards = page.locator('.entry-tool');
    assert.deepEqual(await cards.locator('.tool-title').allInnerTexts(), ['Read geometry.py:10-40', 'Run Python', 'Edit geometry.py', 'Read setup.py']);
    // The location link is visible without unfolding the card, and opens the file at the line.
    const link = cards.nth(0).locator('a.location');
    assert.equal(await link.innerText(), 'geometry.py:10');
    assert.equal(await link.isVisible(), true);
    await link.click();
    assert.deepEqual(await posted(page), [{ type: 'openLocation', path: '/ws/geometry.py', line: 10 }]);
    // The evaluation's card: the code, then the output; the raw input is not repeated.
    const evalCard = cards.nth(1);
    await evalCard.locator('summary').click();
    assert.equal(await evalCard.locator('.tool-content pre').innerText(), code);
    assert.equal(await evalCard.locator('.tool-input').isVisible(), false);
    assert.equal(await evalCard.locator('.tool-output pre').innerText(), '12');
    // The edit's diff block: the removed and the added line; its counts on the folded line.
    const editCard = cards.nth(2);
    assert.equal(await editCard.locator('summary .tool-stat').innerText(), '+1 \u22121');
    assert.equal(await cards.nth(0).locator('summary .tool-stat').isVisible(), false, 'none for a read');
    await editCard.locator('summary').click();
    assert.equal(await editCard.locator('.diff-path').innerText(), 'geometry.py');
    assert.deepEqual(await editCard.locator('.diff-del').allInnerTexts(), ['-     return w * w']);
    assert.deepEqual(await editCard.locator('.diff-add').allInnerTexts(), ['+     return w * h']);
    // Superseded: muted, its own badge and icon, not an error.
    const superseded = cards.nth(3);
    const cls = (await superseded.getAttribute('class')) ?? '';
    assert.match(cls, /superseded/);
    assert.doesNotMatch(cls, /status-failed/);
    assert.equal(await superseded.locator('.tool-badge').innerText(), 'superseded');
    assert.notEqual(await superseded.locator('.tool-status-icon').innerText(), '✗');
    const [opacity, iconColor, failedColor] = await page.evaluate(() => {
      const card = document.querySelectorAll('.entry-tool')[3] as HTMLElement;
      const probe = document.createElement('div');
      probe.className = 'entry entry-tool status-failed';
      probe.innerHTML = '<span class="tool-status-icon">x</span>';
      document.body.append(probe);
      const failed = getComputedStyle(probe.querySelector('.tool-status-icon')!).color;
      probe.remove();
      return [getComputedStyle(card).opacity, getComputedStyle(card.querySelector('.tool-status-icon')!).color, failed];
    });
    assert.ok(Number(opacity) < 1, `muted (opacity ${opacity})`);
    assert.notEqual(iconColor, failedColor, 'not coloured as a failure');
    fs.mkdirSync(OUTPUT, { recursive: true });
    await page.screenshot({ path: path.join(OUTPUT, 'chat-view-tools.png'), fullPage: true });
    assert.deepEqual(problems, []);
  });

  it('an edit\'s permission card shows a readable diff in dark and light themes, and "Open diff" asks the host', async () => {
    await page.evaluate(() => {
      (window as unknown as { __posted: unknown[] }).__posted = [];
    });
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply({ type: 'meta', patch: { serverState: 'ready', sessionId: 'sess-d', cwd: '/ws', busy: true } });
    const oldText = 'def area(w, h):\n    """The area."""\n    return w * w\n';
    const newText = 'def area(w: float, h: float) -> float:\n    """The area."""\n    return w * h\n';
    const content = [
      { type: 'diff' as const, path: '/ws/geometry.py', oldText, newText },
      { type: 'diff' as const, path: '/ws/tests/test_area.py', oldText: null, newText: 'from geometry import area\n\nassert area(3, 4) == 12\n' },
    ];
    await host.update({ sessionUpdate: 'tool_call', toolCallId: 'edit_9', title: 'Edit geometry.py', kind: 'edit', status: 'pending', content });
    await host.apply({
      type: 'permissionAsked',
      requestId: '21',
      params: {
        sessionId: 'sess-d',
        toolCall: {
          toolCallId: 'edit_9',
          title: 'Edit geometry.py',
          kind: 'edit',
          rawInput: { path: 'geometry.py' },
          content,
          locations: [{ path: '/ws/geometry.py', line: 1 }],
        },
        options: [
          { optionId: 'allow_once', name: 'Allow once', kind: 'allow_once' },
          { optionId: 'allow_always', name: 'Allow always', kind: 'allow_always' },
          { optionId: 'reject_once', name: 'Reject', kind: 'reject_once' },
        ],
      },
    });
    const card = page.locator('.entry-permission');
    await card.waitFor({ state: 'visible', timeout: 5000 });
    assert.equal(await card.locator('.permission-title').innerText(), 'Parley asks permission: Edit geometry.py (edit)');
    // Each file: its name, what the edit adds and removes, the lines with their signs.
    assert.deepEqual(await card.locator('.diff-path').allInnerTexts(), ['geometry.py', 'tests/test_area.py']);
    assert.deepEqual(await card.locator('.diff-stat').allInnerTexts(), ['+2 \u22122', 'new file +3 \u22120']);
    const first = card.locator('.diff').first();
    assert.deepEqual(await first.locator('.diff-del').allInnerTexts(), ['- def area(w, h):', '-     return w * w']);
    assert.deepEqual(await first.locator('.diff-add').allInnerTexts(), ['+ def area(w: float, h: float) -> float:', '+     return w * h']);
    assert.deepEqual(await first.locator('.diff-ctx').allInnerTexts(), ['      """The area."""']);
    assert.equal(await card.locator('.diff').nth(1).locator('.diff-add').count(), 3);

    // Readable in both themes: the text and the signs stand out from the added and removed
    // lines' tints, which differ from each other and from unchanged lines.
    const themes: ThemeKind[] = ['vscode-dark', 'vscode-light'];
    for (const kind of themes) {
      await setTheme(page, kind);
      const added = await contrasts(page, '.entry-permission .diff-add');
      const removed = await contrasts(page, '.entry-permission .diff-del');
      const unchanged = await contrasts(page, '.entry-permission .diff-ctx');
      for (const line of [...added, ...removed, ...unchanged]) {
        assert.ok(line.text >= 4.5, `${kind}: text contrast ${line.text.toFixed(2)} on ${line.background}`);
      }
      for (const line of [...added, ...removed]) {
        assert.ok(line.sign >= 3, `${kind}: sign contrast ${line.sign.toFixed(2)} on ${line.background}`);
      }
      assert.notEqual(added[0].background, removed[0].background, `${kind}: added and removed lines look different`);
      assert.notEqual(added[0].background, unchanged[0].background, `${kind}: added lines stand out`);
      assert.notEqual(removed[0].background, unchanged[0].background, `${kind}: removed lines stand out`);
      const [addSign, delSign] = await page.evaluate(() =>
        ['.diff-add .diff-sign', '.diff-del .diff-sign'].map((sel) => getComputedStyle(document.querySelector(sel)!).color),
      );
      assert.notEqual(addSign, delSign, `${kind}: the signs have their own colours`);
      fs.mkdirSync(OUTPUT, { recursive: true });
      await card.screenshot({ path: path.join(OUTPUT, `chat-view-diff-${kind.slice('vscode-'.length)}.png`) });
    }
    await setTheme(page, 'vscode-dark');

    // "Open diff" for each file asks the host for the editor's diff view of that file.
    const openButtons = card.locator('button.diff-open');
    assert.deepEqual(await openButtons.allInnerTexts(), ['Open diff', 'Open diff']);
    await openButtons.nth(1).click();
    await openButtons.nth(0).click();
    assert.deepEqual(await posted(page), [
      { type: 'openDiff', toolCallId: 'edit_9', file: '/ws/tests/test_area.py' },
      { type: 'openDiff', toolCallId: 'edit_9', file: '/ws/geometry.py' },
    ]);
    // The answer buttons are as before; the diff buttons answered nothing.
    assert.deepEqual(await card.locator('.permission-buttons button').allInnerTexts(), ['Allow once', 'Allow always', 'Reject', 'Reject with note…']);
    await card.locator('button[data-option-id="allow_once"]').click();
    await host.apply({ type: 'permissionAnswered', requestId: '21', optionId: 'allow_once' });
    await card.locator('.permission-answer').waitFor({ state: 'visible', timeout: 5000 });
    assert.equal(await card.locator('.permission-answer').innerText(), 'Allowed once: Edit geometry.py');
    assert.equal(await card.locator('button').count(), 0, 'answered: no Open diff either');
    assert.deepEqual(problems, []);
  });

  it('a turn that edited files ends with "Undo turn", which asks the host and shows what was restored', async () => {
    await page.evaluate(() => {
      (window as unknown as { __posted: unknown[] }).__posted = [];
    });
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply(
      { type: 'meta', patch: { serverState: 'ready', sessionId: 'sess-u', cwd: '/ws' } },
      { type: 'userPrompt', text: 'Type the area function and add a test.', context: [] },
      { type: 'meta', patch: { busy: true } },
    );
    await host.update({
      sessionUpdate: 'tool_call',
      toolCallId: 'edit_u',
      title: 'Edit geometry.py',
      kind: 'edit',
      status: 'completed',
      content: [{ type: 'diff', path: '/ws/geometry.py', oldText: 'def area(w, h):\n', newText: 'def area(w: float, h: float) -> float:\n' }],
    });
    await host.chunks('agent_message_chunk', 'mu', 'Done: typed, and tested.');
    await host.apply({ type: 'turnEnded', stopReason: 'end_turn', turn: 4, edited: ['/ws/geometry.py', '/ws/tests/test_area.py'] });
    const turn = page.locator('.entry-turn');
    await turn.waitFor({ state: 'visible', timeout: 5000 });
    assert.equal(await turn.locator('.turn-files').innerText(), 'Edited geometry.py, tests/test_area.py');
    const kinds = await page.locator('#transcript .entry').evaluateAll((els) => els.map((e) => (e as HTMLElement).className.split(' ')[1]));
    assert.deepEqual(kinds, ['entry-user', 'entry-tool', 'entry-agent', 'entry-turn'], 'at the end of its turn');
    const button = turn.locator('button.turn-undo');
    assert.equal(await button.innerText(), 'Undo turn');
    fs.mkdirSync(OUTPUT, { recursive: true });
    await page.screenshot({ path: path.join(OUTPUT, 'chat-view-undo.png'), fullPage: true });
    await button.click();
    assert.deepEqual(await posted(page), [{ type: 'undoTurn', turn: 4 }]);

    await host.apply({ type: 'turnUndo', turn: 4, state: 'undoing' });
    // The click disables the button at once; the host's 'undoing' state relabels it.
    await turn.locator('button:disabled', { hasText: 'Undoing…' }).waitFor({ timeout: 5000 });
    assert.equal(await turn.locator('button').innerText(), 'Undoing…');
    await host.apply(
      {
        type: 'turnUndo',
        turn: 4,
        state: 'undone',
        restored: [
          { path: '/ws/geometry.py', action: 'restored' },
          { path: '/ws/tests/test_area.py', action: 'removed' },
        ],
      },
      // The server's words (`_parley/session/restore`'s `text`).
      { type: 'notice', level: 'info', text: 'Restored the files of turn 4 as they were before it:\n- `geometry.py` restored\n- `tests/test_area.py` removed' },
    );
    await turn.locator('.turn-files', { hasText: 'Undone' }).waitFor({ timeout: 5000 });
    assert.equal(await turn.innerText(), 'Undone: geometry.py restored, tests/test_area.py removed');
    assert.equal(await turn.locator('button').count(), 0);
    assert.match(await page.locator('.entry-notice').last().innerText(), /^Restored the files of turn 4 as they were before it:\s+- `geometry\.py` restored\s+- `tests\/test_area\.py` removed$/);
    assert.deepEqual(problems, []);
  });

  it('offers the session\'s configuration options as pickers, and posts the choices', async () => {
    await page.evaluate(() => {
      (window as unknown as { __posted: unknown[] }).__posted = [];
    });
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    // Without config options (a first-edition server): the model list and the three policies.
    await host.apply({
      type: 'meta',
      patch: { serverState: 'ready', sessionId: 'sess-4', model: 'openai:a', toolPolicy: 'hybrid', models: [{ id: 'openai:a', available: true }] },
    });
    assert.deepEqual(await page.locator('#tool-policy option').allInnerTexts(), ['hybrid', 'stream', 'sync']);
    assert.equal(await page.locator('#tool-policy').inputValue(), 'hybrid');
    assert.equal(await page.locator('#config-options select').count(), 0);
    assert.equal(await page.locator('#tool-policy').isHidden(), true, 'in the settings menu, not the toolbar');
    await page.locator('#settings-button').click();
    await page.locator('#tool-policy').selectOption('sync');

    await host.apply(
      {
        type: 'meta',
        patch: {
          models: [
            { id: 'openai:a', available: true },
            { id: 'anthropic:c', available: false, reason: 'ANTHROPIC_API_KEY is not set' },
          ],
        },
      },
      {
        type: 'configOptions',
        options: [
          {
            id: 'model',
            name: 'Model',
            category: 'model',
            type: 'select',
            currentValue: 'openai:a',
            options: [
              { group: 'openai', name: 'OpenAI', options: [{ value: 'openai:a', name: 'GPT A' }, { value: 'openai:b', name: 'GPT B' }] },
              { group: 'anthropic', name: 'Anthropic', options: [{ value: 'anthropic:c', name: 'Claude C' }] },
            ],
          },
          {
            id: 'tool_policy',
            name: 'Tool policy',
            type: 'select',
            currentValue: 'stream',
            options: [
              { value: 'hybrid', name: 'Hybrid', description: 'Stream; one synchronous call fetches the tools' },
              { value: 'stream', name: 'Stream' },
              { value: 'sync', name: 'Sync' },
            ],
          },
          {
            id: 'thought_level',
            name: 'Thinking',
            category: 'thought_level',
            type: 'select',
            currentValue: 'low',
            options: [
              { value: 'low', name: 'Low' },
              { value: 'high', name: 'High' },
            ],
          },
        ],
      },
    );
    assert.deepEqual(await page.locator('#model optgroup').evaluateAll((els) => els.map((e) => e.getAttribute('label'))), ['OpenAI', 'Anthropic']);
    assert.deepEqual(await page.locator('#model option').allInnerTexts(), ['GPT A', 'GPT B', 'Claude C']);
    assert.equal(await page.locator('#model option[value="anthropic:c"]').isDisabled(), true, 'an unavailable model cannot be chosen');
    assert.equal(await page.locator('#model').inputValue(), 'openai:a');
    assert.deepEqual(await page.locator('#tool-policy option').allInnerTexts(), ['Hybrid', 'Stream', 'Sync']);
    assert.equal(await page.locator('#tool-policy').inputValue(), 'stream');
    assert.equal(await page.locator('#tool-policy option[value="hybrid"]').getAttribute('title'), 'Stream; one synchronous call fetches the tools');
    const thinking = page.locator('#config-options select[data-config-id="thought_level"]');
    assert.equal(await thinking.getAttribute('aria-label'), 'Thinking');
    assert.equal(await thinking.inputValue(), 'low');

    await page.locator('#model').selectOption('openai:b');
    await page.locator('#tool-policy').selectOption('hybrid');
    await thinking.selectOption('high');
    assert.deepEqual(await posted(page), [
      { type: 'setConfigOption', configId: 'tool_policy', value: 'sync' },
      { type: 'selectModel', model: 'openai:b' },
      { type: 'setConfigOption', configId: 'tool_policy', value: 'hybrid' },
      { type: 'setConfigOption', configId: 'thought_level', value: 'high' },
    ]);
    fs.mkdirSync(OUTPUT, { recursive: true });
    await page.screenshot({ path: path.join(OUTPUT, 'chat-view-options.png'), clip: { x: 0, y: 0, width: 440, height: 120 } });
    assert.deepEqual(problems, []);
  });

  it('offers the slash commands when the user types /', async () => {
    await page.evaluate(() => {
      (window as unknown as { __posted: unknown[] }).__posted = [];
    });
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply({ type: 'meta', patch: { serverState: 'ready', sessionId: 'sess-5' } });
    await host.update({
      sessionUpdate: 'available_commands_update',
      availableCommands: [
        { name: 'model', description: 'Switch the model for the next rounds', input: { hint: 'PROVIDER:MODEL' } },
        { name: 'cost', description: 'Show what the session cost' },
        { name: 'compact', description: 'Compact the history' },
      ],
    });
    const menu = page.locator('#command-menu');
    const prompt = page.locator('#prompt');
    await prompt.fill('');
    await prompt.focus();
    assert.equal(await menu.isVisible(), false);
    await page.keyboard.type('/');
    await menu.waitFor({ state: 'visible', timeout: 5000 });
    assert.deepEqual(await menu.locator('.command-name').allInnerTexts(), ['/model', '/cost', '/compact']);
    assert.equal(await menu.locator('li').first().locator('.command-hint').innerText(), 'PROVIDER:MODEL');
    fs.mkdirSync(OUTPUT, { recursive: true });
    await page.screenshot({ path: path.join(OUTPUT, 'chat-view-commands.png'), fullPage: true });

    // Typing filters; Tab completes the selected one.
    await page.keyboard.type('c');
    assert.deepEqual(await menu.locator('.command-name').allInnerTexts(), ['/cost', '/compact']);
    await page.keyboard.press('ArrowDown');
    assert.equal(await menu.locator('li[aria-selected="true"] .command-name').innerText(), '/compact');
    assert.equal(await prompt.getAttribute('aria-activedescendant'), 'command-1');
    await page.keyboard.press('Tab');
    assert.equal(await prompt.inputValue(), '/compact ');
    assert.equal(await menu.isVisible(), false, 'closed once the name is complete');

    // Enter completes a partial name; on a whole name it sends.
    await prompt.fill('');
    await page.keyboard.type('/co');
    await page.keyboard.press('Enter');
    assert.equal(await prompt.inputValue(), '/cost ');
    await prompt.fill('');
    await page.keyboard.type('/cost');
    await page.keyboard.press('Enter');
    // A click chooses too; Escape closes the menu without stopping anything.
    await page.keyboard.type('/');
    await menu.locator('li[data-command="model"]').click();
    assert.equal(await prompt.inputValue(), '/model ');
    await prompt.fill('');
    await page.keyboard.type('/');
    await page.keyboard.press('Escape');
    assert.equal(await menu.isVisible(), false);
    assert.deepEqual(await posted(page), [{ type: 'send', text: '/cost' }]);
    await prompt.fill('');
    assert.deepEqual(problems, []);
  });

  it('posts prompts, stop, model changes and session choices', async () => {
    await page.evaluate(() => {
      (window as unknown as { __posted: unknown[] }).__posted = [];
    });
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply({
      type: 'meta',
      patch: {
        serverState: 'ready',
        model: 'openai:gpt-4.1-mini',
        models: [
          { id: 'openai:gpt-4.1-mini', available: true },
          { id: 'openai:gpt-4.1', available: true },
        ],
      },
    });
    assert.equal(await page.locator('#transcript .entry').count(), 0, 'reset cleared the transcript');
    await page.locator('#prompt').fill('hello there');
    await page.locator('#prompt').press('Enter');
    await host.apply({ type: 'meta', patch: { busy: true } });
    // The page renders on its own schedule: wait for what a user would wait to see.
    await page.locator('#stop-button').waitFor({ state: 'visible', timeout: 5000 });
    await page.locator('#stop-button').click();
    await page.locator('#model').selectOption('openai:gpt-4.1');
    await host.send({
      type: 'sessions',
      sessions: [
        { sessionId: 's-new', title: 'Newest', updatedAt: '2025-01-02T10:00:00Z', current: true },
        { sessionId: 's-old', title: 'Older one', updatedAt: '2025-01-01T10:00:00Z', current: false },
      ],
    });
    await page.locator('#session-list li[data-session-id="s-old"]').click();
    await page.locator('#sessions').waitFor({ state: 'hidden', timeout: 5000 });
    const messages = await posted(page);
    assert.deepEqual(messages, [
      { type: 'send', text: 'hello there' },
      { type: 'cancel' },
      { type: 'selectModel', model: 'openai:gpt-4.1' },
      { type: 'loadSession', sessionId: 's-old' },
    ]);
    assert.equal(await page.locator('#prompt').inputValue(), '');
    assert.deepEqual(problems, []);
  });
});
