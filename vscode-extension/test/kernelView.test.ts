/**
 * The chat view's usage line names the user's kernel the session is attached to, by the
 * server's name for it (the `kernel` config option's current choice), and says nothing while
 * it uses Parley's own; an image an evaluation displayed is drawn in its tool card: the page
 * in headless Chromium, as in webview.test.ts.
 */

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import type { Browser, Page } from 'playwright-core';

import { CHROMIUM, Host, haveChromium, launchChromium, openChatPage } from './webviewPage';

/** A real 1×1 PNG, as the server sends an evaluation's image (ACP image block, base64). */
const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

const OWN = { value: 'parley', name: "Parley's own", description: 'Sandboxed, per session' };

function kernelOption(currentValue: string, ...more: { value: string; name: string }[]) {
  return { id: 'kernel', name: 'Kernel', type: 'select' as const, currentValue, options: [OWN, ...more] };
}

describe('chat view: the kernel in the usage line', { skip: haveChromium ? false : `no Chromium at ${CHROMIUM}` }, () => {
  let browser: Browser;
  let page: Page;
  let problems: string[];

  before(async () => {
    browser = await launchChromium();
    const view = await openChatPage(browser, { width: 440, height: 600 });
    page = view.page;
    problems = view.problems;
  });

  after(async () => {
    await browser?.close();
  });

  it("shows the attached kernel's name, and nothing on Parley's own", async () => {
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply(
      { type: 'meta', patch: { serverState: 'ready', sessionId: 'sess-k', model: 'openai:a' } },
      { type: 'configOptions', options: [kernelOption('parley', { value: '/run/kernel-1.json', name: 'kernel-1.json' })] },
    );
    assert.doesNotMatch(await page.locator('#usage').innerText(), /kernel/);
    await host.apply({
      type: 'configOptions',
      options: [kernelOption('/run/kernel-1.json', { value: '/run/kernel-1.json', name: 'the kernel of /run/kernel-1.json' })],
    });
    assert.match(await page.locator('#usage').innerText(), /^the kernel of \/run\/kernel-1\.json · 0 tokens$/);
    await host.apply({ type: 'configOptions', options: [kernelOption('parley')] });
    assert.equal(await page.locator('#usage').innerText(), '0 tokens');
    assert.deepEqual(problems, []);
  });

  it('draws the image an evaluation displayed in its tool card, with its text output', async () => {
    const host = new Host(page);
    await host.send({ type: 'reset', state: host.state });
    await host.apply({ type: 'meta', patch: { serverState: 'ready', sessionId: 'sess-i', model: 'openai:a' } });
    await host.update({ sessionUpdate: 'tool_call', toolCallId: 'call_p', title: 'Run Python in your kernel, not sandboxed', kind: 'execute', status: 'in_progress' });
    await host.update({
      sessionUpdate: 'tool_call_update',
      toolCallId: 'call_p',
      status: 'completed',
      content: [
        { type: 'content', content: { type: 'image', mimeType: 'image/png', data: PIXEL } },
        { type: 'content', content: { type: 'image', mimeType: 'image/svg+xml', data: 'PHN2Zz4=' } },
        { type: 'content', content: { type: 'text', text: 'display: a plot' } },
      ],
    });
    const card = page.locator('.entry-tool');
    await card.locator('summary').click();
    const images = card.locator('img.tool-image');
    assert.equal(await images.count(), 1, 'the PNG only: an SVG is not drawn');
    await page.waitForFunction(() => document.querySelector<HTMLImageElement>('img.tool-image')?.complete === true);
    assert.equal(await images.evaluate((img) => (img as HTMLImageElement).naturalWidth), 1, 'decoded: a real picture');
    assert.equal(await card.locator('.tool-output pre').innerText(), 'display: a plot');
    assert.deepEqual(problems, []);
  });
});
