/**
 * A message's body in the chat view's real page (headless Chromium): code blocks (highlighted,
 * labelled, Copy and Insert, sideways scrolling, visible in dark and light themes), task lists,
 * and the streaming benchmark — a 2,000-line answer with code blocks, chunk by chunk, with a
 * table of the page's work per chunk and the structural property that makes it flat: finished
 * blocks are never rendered again.
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

import type { Browser, Page } from 'playwright-core';

import { type ChatState, initialState, reduce } from '../src/core/chatState';
import { viewMessages } from '../src/core/webviewHtml';
import type { HostToView } from '../src/common/view';
import {
  CHROMIUM,
  OUTPUT,
  haveChromium,
  launchChromium,
  nextFrames,
  openChatPage,
  postToPage,
  posted,
  setTheme,
  textContrasts,
} from './webviewPage';

/** The host's messages for one streamed agent chunk, through the real reducer. */
function agentChunk(state: ChatState, text: string): { state: ChatState; messages: HostToView[] } {
  const next = reduce(state, {
    type: 'update',
    update: { sessionUpdate: 'agent_message_chunk', messageId: 'm1', content: { type: 'text', text } },
  });
  return { state: next, messages: viewMessages(state, next) };
}

/** Posts a whole answer as one message, then ends the turn (the message stops streaming). */
async function showAnswer(page: Page, text: string): Promise<void> {
  let state = reduce(initialState(), { type: 'meta', patch: { serverState: 'ready', sessionId: 's1', busy: true } });
  await postToPage(page, { type: 'reset', state: { entries: state.entries, meta: state.meta } });
  const chunk = agentChunk(state, text);
  state = chunk.state;
  for (const m of chunk.messages) {
    await postToPage(page, m);
  }
  const ended = reduce(state, { type: 'turnEnded', stopReason: 'end_turn' });
  for (const m of viewMessages(state, ended)) {
    await postToPage(page, m);
  }
}

const PYTHON = [
  'from dataclasses import dataclass',
  '',
  '@dataclass',
  'class Rectangle:',
  '    width: float',
  '    height: float',
  '',
  '    def area(self) -> float:',
  '        """The area, in square units."""',
  '        return self.width * self.height  # a comment that makes this line much longer than the view is wide',
  '',
  'print(Rectangle(3, 4).area(), "done", 0x1F, True)',
].join('\n');

const SAMPLE = [
  'Use `Rectangle.area()` like this:',
  '',
  '```python',
  PYTHON,
  '```',
  '',
  'And in the shell:',
  '',
  '```bash',
  'python -m pip install --upgrade "geometry>=2.0" && echo ok',
  '```',
  '',
  '- [x] write the class',
  '- [ ] test it',
  '',
].join('\n');

describe('message bodies in the chat view page', { skip: haveChromium ? false : `no Chromium at ${CHROMIUM}` }, () => {
  let browser: Browser;

  before(async () => {
    browser = await launchChromium();
    fs.mkdirSync(OUTPUT, { recursive: true });
  });

  after(async () => {
    await browser?.close();
  });

  it('code blocks: highlighted, labelled, scrolling sideways, visible in dark and light themes', async () => {
    // The default sidebar width; twice the pixels, so the screenshots can be read closely.
    const { context, page, problems } = await openChatPage(browser, { width: 300, height: 700, scale: 2 });
    await showAnswer(page, SAMPLE);
    const blocks = page.locator('.entry-agent .code-block');
    assert.equal(await blocks.count(), 2);
    assert.deepEqual(await page.locator('.code-block .code-lang').allInnerTexts(), ['python', 'bash']);
    assert.deepEqual(await blocks.first().locator('.code-head button').allInnerTexts(), ['Copy', 'Insert']);
    // Highlighted: the keyword, the string, the comment are spans of their own.
    const python = blocks.first().locator('pre code');
    assert.equal(await python.innerText(), `${PYTHON}\n`);
    assert.ok((await python.locator('.hljs-keyword').allInnerTexts()).includes('def'));
    assert.ok((await python.locator('.hljs-string').allInnerTexts()).includes('"done"'));
    assert.equal(await python.locator('.hljs-comment').count(), 1);
    // No wrapping: the long line scrolls sideways, inside the block (the page does not).
    const pre = blocks.first().locator('pre');
    const widths = await pre.evaluate((el) => ({ scroll: el.scrollWidth, client: el.clientWidth, whiteSpace: getComputedStyle(el).whiteSpace }));
    assert.equal(widths.whiteSpace, 'pre');
    assert.ok(widths.scroll > widths.client, `the long line overflows the block: ${JSON.stringify(widths)}`);
    assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, 'the page does not scroll sideways');
    // Task lists: disabled checkboxes, no literal brackets.
    const boxes = page.locator('.entry-agent li input[type="checkbox"]');
    assert.equal(await boxes.count(), 2);
    assert.deepEqual(await boxes.evaluateAll((els) => els.map((e) => [(e as HTMLInputElement).checked, (e as HTMLInputElement).disabled])), [
      [true, true],
      [false, true],
    ]);
    assert.ok(!(await page.locator('.entry-agent').innerText()).includes('[ ]'));

    for (const kind of ['vscode-dark', 'vscode-light'] as const) {
      await setTheme(page, kind);
      const look = await page.evaluate(() => {
        const bg = (sel: string) => getComputedStyle(document.querySelector(sel)!).backgroundColor;
        return { view: getComputedStyle(document.body).backgroundColor, block: bg('.code-block'), inline: bg('.entry-agent p code') };
      });
      // Code stands out from the view: the block's background and inline code's are not the view's.
      assert.notEqual(look.block, look.view, `${kind}: a code block has a background of its own`);
      assert.notEqual(look.inline, 'rgba(0, 0, 0, 0)', `${kind}: inline code has a background`);
      const tokens = await textContrasts(page, '.code-block [class^="hljs-"]', look.block);
      assert.ok(tokens.length > 10);
      const faint = tokens.filter((t) => t.ratio < 4.5);
      assert.deepEqual(faint, [], `${kind}: every token readable on the code background`);
      const shot = path.join(OUTPUT, `chat-view-code-${kind.slice('vscode-'.length)}.png`);
      await page.locator('.entry-agent').screenshot({ path: shot });
    }
    assert.deepEqual(problems, []);
    await context.close();
  });

  it('Copy puts the block\'s text on the clipboard; Insert sends it to the host', async () => {
    const { context, page, problems } = await openChatPage(browser, { width: 440, height: 700, clipboard: true });
    await showAnswer(page, SAMPLE);
    await page.locator('.code-block').first().locator('button.code-copy').click();
    await page.waitForFunction(() => document.querySelector('.code-block button.code-copy')?.textContent === 'Copied');
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), PYTHON);

    await page.locator('.code-block').nth(1).locator('button.code-insert').click();
    const inserts = (await posted(page)).filter((m) => m.type === 'insertCode');
    assert.deepEqual(inserts, [{ type: 'insertCode', text: 'python -m pip install --upgrade "geometry>=2.0" && echo ok' }]);
    // Reached by keyboard: Tab from the first block's Copy goes to its Insert.
    await page.locator('.code-block').first().locator('button.code-copy').focus();
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('aria-label')), 'Insert python code at the cursor');
    assert.deepEqual(problems, []);
    await context.close();
  });

  it('a streamed thought shows its text so far, each chunk appended', async () => {
    const { context, page, problems } = await openChatPage(browser, { width: 440, height: 700 });
    let state = reduce(initialState(), { type: 'meta', patch: { serverState: 'ready', sessionId: 's1', busy: true } });
    await postToPage(page, { type: 'reset', state: { entries: state.entries, meta: state.meta } });
    const thought = 'The user wants the area.\nI should read geometry.py <b>first</b>, then run it.';
    for (let i = 0; i < thought.length; i += 5) {
      const next = reduce(state, {
        type: 'update',
        update: { sessionUpdate: 'agent_thought_chunk', messageId: 't1', content: { type: 'text', text: thought.slice(i, i + 5) } },
      });
      for (const m of viewMessages(state, next)) {
        await postToPage(page, m);
      }
      state = next;
    }
    const body = page.locator('.thought-body');
    assert.equal(await body.evaluate((el) => el.textContent), thought);
    assert.ok((await body.evaluate((el) => el.childNodes.length)) > 1, 'appended, not replaced');
    assert.equal(await body.locator('b').count(), 0);
    assert.deepEqual(problems, []);
    await context.close();
  });

  it('a revision that does not extend the streamed text replaces it, with no empty frame', async () => {
    const { context, page, problems } = await openChatPage(browser, { width: 440, height: 700 });
    let state = reduce(initialState(), { type: 'meta', patch: { serverState: 'ready', sessionId: 's1', busy: true } });
    await postToPage(page, { type: 'reset', state: { entries: state.entries, meta: state.meta } });
    const send = async (update: Parameters<typeof reduce>[1]) => {
      const next = reduce(state, update);
      for (const m of viewMessages(state, next)) {
        await postToPage(page, m);
      }
      state = next;
    };
    for (const piece of ['## Area\n\nThe area is ', '12 squre', ' units.\n\n```python\narea(3, 4)\n']) {
      await send({ type: 'update', update: { sessionUpdate: 'agent_message_chunk', messageId: 'm1', content: { type: 'text', text: piece } } });
      await nextFrames(page);
    }
    const body = page.locator('.entry-agent .markdown');
    assert.match(await body.innerText(), /squre/);
    // Watch every frame from the revision on: the body is never empty.
    await page.evaluate(() => {
      const w = window as unknown as { __emptyFrames: number };
      w.__emptyFrames = 0;
      const watch = () => {
        if (!document.querySelector('.entry-agent .markdown')?.textContent) {
          w.__emptyFrames++;
        }
        requestAnimationFrame(watch);
      };
      requestAnimationFrame(watch);
    });
    await send({
      type: 'update',
      update: {
        sessionUpdate: 'agent_message_chunk',
        messageId: 'm2',
        content: { type: 'text', text: '## Area\n\nThe area is **12** square units:\n\n```python\n>>> area(3, 4)\n12\n```\n' },
        _meta: { parley: { replaces: 'm1' } },
      },
    });
    await nextFrames(page);
    const text = await body.innerText();
    assert.ok(!text.includes('squre'), text);
    assert.equal(await body.locator('strong').innerText(), '12');
    assert.equal(await body.locator('.code-block code').innerText(), '>>> area(3, 4)\n12\n');
    assert.equal(await page.evaluate(() => (window as unknown as { __emptyFrames: number }).__emptyFrames), 0);
    assert.deepEqual(problems, []);
    await context.close();
  });

  it('a long code block shows its lines so far while it streams, then highlighted when it closes', async () => {
    const { context, page, problems } = await openChatPage(browser, { width: 300, height: 500, scale: 2 });
    let state = reduce(initialState(), { type: 'meta', patch: { serverState: 'ready', sessionId: 's1', busy: true } });
    await postToPage(page, { type: 'reset', state: { entries: state.entries, meta: state.meta } });
    const code = Array.from({ length: 120 }, (_, k) => `value_${k} = compute(${k}, "label ${k}")  # step ${k}`).join('\n');
    const answer = `The file:\n\n\`\`\`python\n${code}\n\`\`\`\n\nDone.`;
    const send = async (text: string) => {
      const next = reduce(state, { type: 'update', update: { sessionUpdate: 'agent_message_chunk', messageId: 'm1', content: { type: 'text', text } } });
      for (const m of viewMessages(state, next)) {
        await postToPage(page, m);
      }
      state = next;
    };
    const codeEl = page.locator('.entry-agent .code-block code');
    // 100 lines and half of the next: past the length that is rendered whole each frame.
    const cut = answer.indexOf('value_100 = comp') + 'value_100 = comp'.length;
    for (let i = 0; i < cut; i += 400) {
      await send(answer.slice(i, Math.min(cut, i + 400)));
      await nextFrames(page);
    }
    assert.equal(await codeEl.evaluate((el) => el.textContent), `${code.slice(0, code.indexOf('value_100'))}value_100 = comp`);
    assert.equal(await codeEl.locator('.hljs-string').count(), 0, 'plain while open');
    assert.equal(await page.locator('.code-block .code-lang').innerText(), 'python');
    await page.screenshot({ path: path.join(OUTPUT, 'chat-view-code-streaming-dark.png') });
    await send(answer.slice(cut));
    await nextFrames(page);
    assert.equal(await codeEl.evaluate((el) => el.textContent), `${code}\n`);
    assert.equal(await codeEl.locator('.hljs-string').count(), 120, 'highlighted once closed');
    assert.equal(await page.locator('.entry-agent .markdown > p').last().innerText(), 'Done.');
    assert.deepEqual(problems, []);
    await context.close();
  });

  it('a message cut into blocks renders as the whole text rendered at once does', async () => {
    const { context, page, problems } = await openChatPage(browser, { width: 440, height: 700 });
    await showAnswer(page, TRICKY);
    const split = await page.locator('.entry-agent .markdown').evaluate(shapeOf);
    // The same text through markdown-it in one piece (its <pre> is our code block's <div>, its
    // <table> our table's sideways-scrolling <div>).
    const whole = await page.evaluate((text) => {
      const factory = (window as unknown as { markdownit: (o: object) => { render(s: string): string } }).markdownit;
      const template = document.createElement('template');
      template.innerHTML = factory({ html: false, linkify: true }).render(text);
      const root = template.content;
      return {
        tags: Array.from(root.children).map((c) => (c.tagName === 'PRE' || c.tagName === 'TABLE' ? 'DIV' : c.tagName)),
        text: root.textContent ?? '',
      };
    }, TRICKY);
    assert.deepEqual(split.tags, whole.tags);
    assert.equal(split.text, whole.text);
    assert.deepEqual(problems, []);
    await context.close();
  });

  it('benchmark: a 2,000-line answer streams with flat per-chunk work, and finished blocks are never rendered again', async () => {
    const result = await benchmark(browser, 'a 2,000-line answer with code blocks', longAnswer(2000), false);
    // The structure that makes the cost flat: the blocks finished at a tenth of the stream are
    // the same DOM nodes at the end, and nothing inside them changed.
    assert.ok(result.marked > 20, `blocks finished early: ${result.marked}`);
    assert.equal(result.touched, 0, 'finished blocks were rendered again');
  });

  it('benchmark: one 2,000-line code block grows line by line, its early lines not rendered again while it is open', async () => {
    const answer = oneBlock(2000);
    // Until its closing line arrives (then it is highlighted, once).
    const result = await benchmark(browser, 'one 2,000-line code block', answer, true, answer.lastIndexOf('\n```\n'));
    assert.ok(result.marked > 10, `lines of code shown early: ${result.marked}`);
    assert.equal(result.touched, 0, 'the open block\'s early lines were rendered again');
  });
});

/** A file in one code block, `lines` lines or a few more. */
function oneBlock(lines: number): string {
  const out = ['Here is the file:', '', '```python'];
  for (let k = 0; out.length < lines; k++) {
    out.push(`def f${k}(x: int) -> int:`, `    """Step ${k}."""`, `    return x * ${k}  # line ${k}`, '');
  }
  out.push('```', '', 'END OF ANSWER');
  return out.join('\n');
}

/** Markdown whose blocks are easy to cut wrongly: loose and nested lists, fences in lists and
 * with blank lines, ~~~ fences, setext headings, tables, quotes, indented code, a lazy line. */
const TRICKY = [
  'Intro paragraph',
  'Setext heading',
  '==============',
  '',
  '1. first item',
  '',
  '2. second item, loose',
  '',
  '   continued inside the item',
  '',
  '   ```python',
  '   def f():',
  '',
  '       return 1',
  '   ```',
  '',
  '3. third',
  '   - nested',
  '',
  '   - nested loose',
  '',
  'After the list.',
  '# Heading right after',
  'A paragraph',
  '```',
  'fence interrupting it',
  '',
  '# not a heading inside a fence',
  '```',
  'text right after a fence',
  '',
  '~~~~md',
  '```',
  'a backtick fence inside a tilde fence',
  '```',
  '~~~~',
  '',
  '| a | b |',
  '| - | - |',
  '| 1 | 2 |',
  '',
  '> quoted',
  'lazy continuation',
  '',
  '> another quote',
  '',
  '    indented code',
  '',
  '    more indented code',
  '',
  '- a',
  '- b',
  '',
  '',
  '- c after two blank lines',
  '',
  '```js',
  'const unclosed = true;',
  '',
  'still code',
].join('\n');

/**
 * Streams `answer` into a fresh page as the host would, prints the table, and checks that the
 * streamed message shows what the whole answer rendered at once shows. `markOpenCode`: also
 * watch the lines of the code block still open at a tenth of the stream.
 */
async function benchmark(browser: Browser, title: string, answer: string, markOpenCode: boolean, until = answer.length) {
  const { context, page, problems } = await openChatPage(browser, { width: 440, height: 900 });
  const ends: number[] = [];
  for (let i = 0; i < answer.length; i += CHUNK) {
    ends.push(Math.min(answer.length, i + CHUNK));
  }
  // The host's messages for each chunk, through the real reducer: the new agent entry, then
  // what each chunk appends to it.
  const traffic = hostTraffic(answer, ends);
  await postToPage(page, { type: 'reset', state: { entries: traffic.start.entries, meta: traffic.start.meta } });
  const first = traffic.messages[0];
  assert.ok(first.length === 1 && first[0].type === 'entries' && first[0].upserts[0]?.kind === 'agent', JSON.stringify(first));
  assert.ok(traffic.messages.slice(1).every((ms) => ms.length === 1 && ms[0].type === 'append'), 'each later chunk is an append');

  const checkBefore = ends.findIndex((end) => end > until);
  const result = await page.evaluate(streamInPage, {
    messages: traffic.messages,
    final: traffic.final,
    ends,
    interval: INTERVAL_MS,
    markOpenCode,
    checkBefore: checkBefore === -1 ? ends.length : checkBefore,
  });
  const tenth = Math.floor(ends.length / 10);
  const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const firstTenth = avg(result.work.slice(0, tenth));
  const lastTenth = avg(result.work.slice(-tenth));
  const firstParsed = avg(result.parsed.slice(0, tenth));
  const lastParsed = avg(result.parsed.slice(-tenth));
  const total = result.work.reduce((a, b) => a + b, 0);
  const build = process.env.PARLEY_WEBVIEW_DIR ? `build in ${process.env.PARLEY_WEBVIEW_DIR}` : 'this build';
  console.log(
    [
      '',
      `Streaming benchmark, ${title} (${build}): ${answer.split('\n').length} lines, ${answer.length} chars, ${ends.length} chunks of ${CHUNK} chars every ${INTERVAL_MS} ms`,
      '| measure | value |',
      '| --- | --- |',
      `| page work per chunk, first tenth | ${firstTenth.toFixed(3)} ms |`,
      `| page work per chunk, last tenth | ${lastTenth.toFixed(3)} ms |`,
      `| last tenth / first tenth | ${(lastTenth / firstTenth).toFixed(2)} |`,
      `| Markdown parsed per chunk, first tenth → last tenth (independent of the machine's load) | ${firstParsed.toFixed(0)} → ${lastParsed.toFixed(0)} chars, ratio ${(lastParsed / firstParsed).toFixed(2)} |`,
      `| total page work | ${total.toFixed(0)} ms |`,
      `| of which in animation frames (${result.frames} frames) | ${result.frameWork.toFixed(0)} ms |`,
      `| last chunk handled to the view finished | ${result.lagSent.toFixed(1)} ms, ${result.lagFrames} frame(s) |`,
      `| last chunk due (the model's schedule) to the view finished | ${result.lag.toFixed(1)} ms |`,
      `| the turn's end (the message final) handled in | ${result.finalWork.toFixed(1)} ms |`,
      `| streaming wall time (model: ${((ends.length * INTERVAL_MS) / 1000).toFixed(1)} s) | ${(result.wall / 1000).toFixed(1)} s |`,
      `| host→page bytes per chunk, first tenth → last tenth | ${traffic.firstTenth.toFixed(0)} → ${traffic.lastTenth.toFixed(0)} bytes |`,
      `| host→page bytes per chunk, last tenth / first tenth (≤ 1.2: flat in the answer's length) | ${traffic.ratio.toFixed(2)} |`,
      `| host→page bytes in all | ${traffic.total} bytes (the answer: ${Buffer.byteLength(answer)} bytes) |`,
      `| nodes shown at a tenth, re-rendered or removed ${until < answer.length ? 'before the block closed' : 'later'} | ${result.touched} of ${result.marked} |`,
      '',
    ].join('\n'),
  );
  // The host sends the page what a chunk adds, not the message so far.
  assert.ok(traffic.ratio <= 1.2, `host→page bytes per chunk grow with the answer: last tenth / first tenth ${traffic.ratio.toFixed(2)}`);
  // The streamed message shows what the whole answer rendered at once shows.
  assert.equal(result.complete, true, 'the last line is shown');
  await showAnswer(page, answer);
  const atOnce = await page.locator('.entry-agent .markdown').evaluate(shapeOf);
  assert.deepEqual(result.shape, atOnce);
  assert.deepEqual(problems, []);
  await context.close();
  return result;
}

/**
 * The host's messages to the page while `answer` streams in chunks ending at `ends`, through
 * the real reducer and `viewMessages`: their size in bytes (as JSON, what `postMessage`
 * carries) per chunk, averaged over the first and the last tenth of the stream.
 */
function hostTraffic(answer: string, ends: number[]) {
  const start = reduce(initialState(), { type: 'meta', patch: { serverState: 'ready', sessionId: 's1', busy: true } });
  let state = start;
  const messages: HostToView[][] = [];
  const bytes: number[] = [];
  let from = 0;
  for (const end of ends) {
    const chunk = agentChunk(state, answer.slice(from, end));
    from = end;
    state = chunk.state;
    messages.push(chunk.messages);
    bytes.push(chunk.messages.reduce((n, m) => n + Buffer.byteLength(JSON.stringify(m)), 0));
  }
  // The turn's end: the message finished.
  const ended = reduce(state, { type: 'turnEnded', stopReason: 'end_turn' });
  const final = viewMessages(state, ended).filter((m) => m.type !== 'meta');
  const tenth = Math.max(1, Math.floor(ends.length / 10));
  const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const firstTenth = avg(bytes.slice(0, tenth));
  const lastTenth = avg(bytes.slice(-tenth));
  return { start, messages, final, firstTenth, lastTenth, ratio: lastTenth / firstTenth, total: bytes.reduce((a, b) => a + b, 0) };
}

const CHUNK = 24;
const INTERVAL_MS = 4;

/** A model's long answer: headings, paragraphs, lists, task items and code blocks, `lines` lines or a few more. */
function longAnswer(lines: number): string {
  const out: string[] = [];
  for (let n = 1; out.length < lines; n++) {
    out.push(`## Step ${n}: parse part ${n}`, '');
    out.push(`Paragraph ${n} explains \`parse_${n}()\`, **why** it matters and [the docs](https://example.com/${n}); it runs`, 'over two lines, as a model writes them.', '');
    out.push('```python', `def parse_${n}(text: str) -> list[int]:`, `    """Part ${n}: the numbers in text."""`, '    out = []');
    for (let k = 0; k < 12; k++) {
      out.push(`    out.append(int(text[${k}:${k + 2}], 16) + ${n * k})  # field ${k}`);
    }
    out.push('    return out', '```', '');
    out.push(`- item one of step ${n}`, '- item two with `code`', `- [x] done ${n}`, '');
    if (n % 3 === 0) {
      out.push('```ts', `export function step${n}(xs: number[]): number {`, '  return xs.reduce((a, b) => a + b, 0);', '}', '```', '');
    }
  }
  out.push('END OF ANSWER');
  return out.join('\n');
}

/** The rendered body's shape: top-level tags, then its text without the code blocks' headers. */
function shapeOf(body: Element): { tags: string[]; text: string } {
  const clone = body.cloneNode(true) as Element;
  for (const head of Array.from(clone.querySelectorAll('.code-head'))) {
    head.remove();
  }
  return { tags: Array.from(clone.children).map((c) => c.tagName), text: clone.textContent ?? '' };
}

/**
 * Runs in the page: streams the host's `messages` (those of chunk k at k × `interval` ms, a
 * model's schedule), then the turn's end (`final`), timing the
 * page's work per chunk — the message handler with the message's deserialisation, and the
 * animation frames after it, each with the layout it causes.
 */
async function streamInPage(args: {
  messages: HostToView[][];
  final: HostToView[];
  ends: number[];
  interval: number;
  markOpenCode: boolean;
  /** The chunk before which to count the watched nodes touched. */
  checkBefore: number;
}) {
  const { messages, final, ends, interval, markOpenCode, checkBefore } = args;
  const work = new Array<number>(ends.length).fill(0);
  const parsed = new Array<number>(ends.length).fill(0);
  const counter = window as unknown as { __markdownChars: number };
  let current = 0;
  let frames = 0;
  let frameWork = 0;
  const raf = window.requestAnimationFrame.bind(window);
  window.requestAnimationFrame = (cb) =>
    raf((t) => {
      const s = performance.now();
      const chars = counter.__markdownChars;
      cb(t);
      parsed[current] += counter.__markdownChars - chars;
      void document.body.offsetHeight;
      const spent = performance.now() - s;
      work[current] += spent;
      frameWork += spent;
      frames++;
    });
  const frame = () => new Promise<void>((r) => raf(() => r()));
  const body = () => document.querySelector('.entry-agent .markdown');
  const send = (k: number, streaming: boolean) => {
    const s = performance.now();
    const chars = counter.__markdownChars;
    for (const message of streaming ? messages[k] : final) {
      const data: unknown = structuredClone(message);
      window.dispatchEvent(new MessageEvent('message', { data }));
    }
    parsed[k] += counter.__markdownChars - chars;
    void document.body.offsetHeight;
    work[k] += performance.now() - s;
  };
  // Finished blocks at a tenth of the stream: all but the last few top-level nodes, watched.
  const marked: Node[] = [];
  const records: MutationRecord[] = [];
  const observer = new MutationObserver((rs) => records.push(...rs));
  const countTouched = () => {
    records.push(...observer.takeRecords());
    const touchedNodes = new Set<Node>();
    for (const node of marked) {
      if (!node.isConnected || records.some((r) => node.contains(r.target) || Array.from(r.removedNodes).includes(node))) {
        touchedNodes.add(node);
      }
    }
    return touchedNodes.size;
  };
  let touched = 0;
  const t0 = performance.now();
  for (let k = 0; k < ends.length; k++) {
    const due = t0 + k * interval;
    const wait = due - performance.now();
    if (wait > 0) {
      await new Promise((r) => setTimeout(r, wait));
    }
    if (k === checkBefore) {
      touched = countTouched();
    }
    current = k;
    send(k, true);
    if (k === Math.floor(ends.length / 10)) {
      await frame();
      const root = body()!;
      marked.push(...Array.from(root.children).slice(0, -4));
      const openCode = root.lastElementChild?.querySelector('pre code');
      if (markOpenCode && openCode) {
        marked.push(...Array.from(openCode.childNodes).slice(0, -1));
      }
      observer.observe(root, { childList: true, subtree: true, characterData: true, attributes: true });
    }
  }
  const lastDue = t0 + (ends.length - 1) * interval;
  const lastSent = performance.now();
  // Finished: the last line is on the page (checked after each frame's rendering).
  let lag = 0;
  let lagSent = 0;
  let lagFrames = 0;
  for (;;) {
    await frame();
    lagFrames++;
    if (body()?.textContent?.includes('END OF ANSWER')) {
      lag = performance.now() - lastDue;
      lagSent = performance.now() - lastSent;
      break;
    }
  }
  const wall = performance.now() - t0;
  const beforeFinal = work[ends.length - 1];
  send(ends.length - 1, false); // the turn ends
  const finalWork = work[ends.length - 1] - beforeFinal;
  await frame();
  if (checkBefore >= ends.length) {
    touched = countTouched();
  }
  observer.disconnect();
  const root = body()!;
  const clone = root.cloneNode(true) as Element;
  for (const head of Array.from(clone.querySelectorAll('.code-head'))) {
    head.remove();
  }
  return {
    work,
    parsed,
    frames,
    frameWork,
    lag,
    lagSent,
    lagFrames,
    finalWork,
    wall,
    marked: marked.length,
    touched,
    complete: (root.textContent ?? '').includes('END OF ANSWER'),
    shape: { tags: Array.from(clone.children).map((c) => c.tagName), text: clone.textContent ?? '' },
  };
}

