/**
 * A message's Markdown body while it streams: finished blocks are rendered once and never
 * touched again; only the open (last) block is rendered again, at most once per animation
 * frame however many chunks arrived. The cost of a chunk is the cost of its own lines and of
 * the open block, not of the message so far.
 */

import type { default as MarkdownIt } from 'markdown-it';

import { type RenderEnv, createMarkdown } from './codeBlocks.js';
import { BlockSplitter } from './markdownBlocks.js';

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

  constructor(private readonly root: HTMLElement) {}

  /** The text shown until the next render replaces it all (a revision), if any. */
  private stale = false;

  /** The new text; when it does not extend the old one (a revision), all is rendered anew. */
  set(text: string): void {
    this.stale ||= !text.startsWith(this.text);
    this.text = text;
  }

  /** Renders what changed: newly finished blocks once, then the open block. */
  render(): void {
    const text = this.text;
    if (this.stale) {
      // The old text stays on the page until the new one replaces it: no empty frame.
      this.stale = false;
      this.root.replaceChildren();
      this.splitter = new BlockSplitter();
      this.finished = 0;
      this.tail = [];
      this.tailText = undefined;
    }
    for (const cut of this.splitter.push(text)) {
      this.replaceTail(nodes(text.slice(this.finished, cut), {}));
      this.tail = [];
      this.tailText = undefined;
      this.finished = cut;
    }
    const open = text.slice(this.finished);
    if (open !== this.tailText) {
      this.replaceTail(open ? nodes(open, { open: true }) : []);
      this.tailText = open;
    }
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
 * as soon as its last update is handled.
 */
export function renderMessage(body: HTMLElement, text: string, streaming: boolean): void {
  let stream = streams.get(body);
  if (!stream) {
    stream = new StreamedMarkdown(body);
    streams.set(body, stream);
  }
  stream.set(text);
  if (streaming) {
    dirty.add(stream);
    frame ||= requestAnimationFrame(renderDirty);
  } else {
    dirty.delete(stream);
    stream.render();
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
