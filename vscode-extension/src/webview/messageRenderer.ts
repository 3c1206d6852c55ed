/**
 * A message's Markdown body while it streams: finished blocks are rendered once and never
 * touched again; only the open (last) block is rendered again, at most once per animation
 * frame however many chunks arrived. The cost of a chunk is the cost of its own lines and of
 * the open block, not of the message so far.
 */

import type { default as MarkdownIt } from 'markdown-it';

import { type RenderEnv, createMarkdown } from './codeBlocks.js';
import { BlockSplitter, type OpenTopFence } from './markdownBlocks.js';

/** An open code block up to this many lines is rendered (highlighted) again each frame; a
 *  longer one grows line by line, plain until it closes. */
const OPEN_FENCE_RENDER_MAX_LINES = 80;
/** How many of the old text's last characters an appended chunk is checked against. */
const TAIL_CHECK = 64;

const md: MarkdownIt | undefined = createMarkdown();

/** Parsed HTML as nodes (markdown-it with `html: false` has escaped any HTML in the text). */
function nodes(src: string, env: RenderEnv): ChildNode[] {
  const template = document.createElement('template');
  template.innerHTML = md ? md.render(src, env) : '';
  if (!md) {
    template.content.append(document.createTextNode(src));
  }
  return [...template.content.childNodes];
}

class StreamedMarkdown {
  /** The text to show (shown at the next frame when dirty). */
  private text = '';
  /** The text the finished blocks show: `text.slice(0, finished)`. */
  private finished = 0;
  private splitter = new BlockSplitter();
  /** The open block's nodes, the last children of `root`. */
  private tail: ChildNode[] = [];
  private tailText: string | undefined;
  /** A long open code block shown line by line: its code element, how far the text shown goes. */
  private openFence: { start: number; code: HTMLElement; shownTo: number; partial: HTMLElement } | undefined;

  constructor(private readonly root: HTMLElement) {}

  /** The text shown until the next render replaces it all (a revision), if any. */
  private stale = false;

  private revised = false;

  /**
   * The new text; when it does not extend the old one (a revision), all is rendered anew.
   * The host's reducer only appends to a message that was not revised, so then a look at the
   * old text's last characters in the new one suffices (comparing all of it would make each
   * chunk cost the length of the message); a revised message is compared in full.
   */
  set(text: string, revised: boolean): void {
    const old = this.text;
    const extended =
      text.length >= old.length &&
      (revised || this.revised ? text.startsWith(old) : text.startsWith(old.slice(-TAIL_CHECK), Math.max(0, old.length - TAIL_CHECK)));
    this.stale ||= !extended;
    this.text = text;
    this.revised = revised;
  }

  /** Renders what changed: newly finished blocks once, then the open block (all of it when `final`). */
  render(final = false): void {
    const text = this.text;
    if (this.stale) {
      // The old text stays on the page until the new one replaces it: no empty frame.
      this.stale = false;
      this.root.replaceChildren();
      this.splitter = new BlockSplitter();
      this.finished = 0;
      this.tail = [];
      this.tailText = undefined;
      this.openFence = undefined;
    }
    for (const cut of this.splitter.push(text)) {
      this.replaceTail(nodes(text.slice(this.finished, cut), {}));
      this.tail = [];
      this.tailText = undefined;
      this.openFence = undefined;
      this.finished = cut;
    }
    const fence = this.splitter.openTopFence;
    if (fence && !final && fence.lines > OPEN_FENCE_RENDER_MAX_LINES) {
      this.appendToOpenFence(text, fence);
      return;
    }
    this.openFence = undefined;
    const open = text.slice(this.finished);
    if (open !== this.tailText) {
      this.replaceTail(open ? nodes(open, { open: true }) : []);
      this.tailText = open;
    }
  }

  /**
   * A long open code block: its new lines appended as plain text, the line being written
   * replaced, so a frame costs what arrived, not the block so far. It is highlighted once,
   * when it closes (a finished block).
   */
  private appendToOpenFence(text: string, fence: OpenTopFence): void {
    let shown = this.openFence;
    if (shown?.start !== fence.start) {
      // Its head (label, Copy, Insert) as the block would have it, with the code as text.
      const head = nodes(text.slice(this.finished, fence.codeStart), { open: true });
      this.replaceTail(head);
      this.tailText = undefined;
      const block = head.find((n): n is HTMLElement => n instanceof HTMLElement && n.classList.contains('code-block'));
      const code = block?.querySelector<HTMLElement>('pre code');
      if (!code) {
        return;
      }
      // Lines in blocks of their own: the browser lays out what was added, not the whole code.
      const partial = document.createElement('span');
      partial.className = 'code-lines';
      code.replaceChildren(partial);
      shown = { start: fence.start, code, shownTo: fence.codeStart, partial };
      this.openFence = shown;
    }
    const whole = this.splitter.scannedTo;
    if (whole > shown.shownTo) {
      const lines = document.createElement('span');
      lines.className = 'code-lines';
      lines.textContent = text.slice(shown.shownTo, whole);
      shown.partial.before(lines);
      shown.shownTo = whole;
    }
    shown.partial.textContent = text.slice(whole);
  }

  private replaceTail(next: ChildNode[]): void {
    for (const node of this.tail) {
      node.remove();
    }
    this.root.append(...next);
    this.tail = next;
  }
}

const streams = new WeakMap<HTMLElement, StreamedMarkdown>();
const dirty = new Set<StreamedMarkdown>();
let frame = 0;
/** Wraps each frame's rendering (the view keeps the transcript scrolled to the bottom). */
let frameWrapper: (render: () => void) => void = (render) => render();

function renderDirty(): void {
  frame = 0;
  const work = [...dirty];
  dirty.clear();
  frameWrapper(() => {
    for (const stream of work) {
      stream.render();
    }
  });
}

/** Sets what wraps each frame's rendering. */
export function onRenderFrame(wrapper: (render: () => void) => void): void {
  frameWrapper = wrapper;
}

/**
 * Shows `text` as Markdown in `body`. While `streaming`, at the next animation frame (one
 * render for all the chunks of a frame); otherwise now, so a finished message is complete
 * as soon as its last update is handled. `revised`: the message's text was replaced by a
 * revision (the entry's `revised`), so it may differ anywhere from the text shown.
 */
export function renderMessage(body: HTMLElement, text: string, streaming: boolean, revised = false): void {
  let stream = streams.get(body);
  if (!stream) {
    stream = new StreamedMarkdown(body);
    streams.set(body, stream);
  }
  stream.set(text, revised);
  if (streaming) {
    dirty.add(stream);
    frame ||= requestAnimationFrame(renderDirty);
  } else {
    dirty.delete(stream);
    stream.render(true);
  }
}

/** The text each plain-text body (a thought) shows. */
const plainTexts = new WeakMap<HTMLElement, string>();

/** Shows `text` as plain text in `body`, appending only what was added to the text shown. */
export function renderPlainText(body: HTMLElement, text: string): void {
  const shown = plainTexts.get(body);
  if (shown !== undefined && text.startsWith(shown)) {
    if (text.length > shown.length) {
      body.append(text.slice(shown.length));
    }
  } else {
    body.textContent = text;
  }
  plainTexts.set(body, text);
}

/** A text that is one fenced code block and nothing else (how the server shows a command). */
const ONE_FENCE = /^(`{3,}|~{3,})[^\n`]*\n[\s\S]*\n\1\s*$/;

/**
 * What a tool call shows as text (`textClass` on it): one fenced code block rendered as the
 * page renders code (its language, highlighted, Copy and Insert), any other text as it is,
 * preformatted (the code of an evaluation, an output: not Markdown).
 */
export function codeOrPlainText(text: string, textClass: string): HTMLElement {
  if (md && ONE_FENCE.test(text)) {
    const block = document.createElement('div');
    block.className = `markdown rendered-code ${textClass}-rendered`;
    block.append(...nodes(text, {}));
    return block;
  }
  const pre = document.createElement('pre');
  pre.className = textClass;
  pre.textContent = text;
  return pre;
}

/** One line of the model's Markdown (a plan item) as inline nodes: code, emphasis, links; no HTML. */
export function inlineMarkdown(text: string): Node[] {
  if (!md) {
    return [document.createTextNode(text)];
  }
  const template = document.createElement('template');
  template.innerHTML = md.renderInline(text);
  return [...template.content.childNodes];
}
