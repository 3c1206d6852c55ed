/**
 * Code in a message: fenced blocks highlighted by highlight.js (its browser build, loaded as a
 * vendor script: class names only, no inline styles, no eval — it runs under the view's CSP),
 * with a language label and Copy / Insert buttons, and `- [ ]` / `- [x]` task list items as
 * disabled checkboxes. These are markdown-it rules; the buttons work by delegation, so a
 * block's HTML can be made as a string.
 */

import type { default as MarkdownIt, StateCore, Token } from 'markdown-it';

/** The part of highlight.js this page uses. */
interface HighlightJs {
  getLanguage(name: string): unknown;
  highlight(code: string, options: { language: string; ignoreIllegals: boolean }): { value: string };
}

declare global {
  interface Window {
    hljs?: HighlightJs;
  }
}

/** Rendering options markdown-it passes to the rules (its `env`). */
export interface RenderEnv {
  /** The open (still streaming) block: a long open fence is not highlighted until it closes. */
  open?: boolean;
}

/** An open fence longer than this is shown plain until it closes, to keep each frame short. */
const OPEN_HIGHLIGHT_MAX_LINES = 200;

/** The language a fence's info string names (its first word), safe for a class name. */
function fenceLanguage(info: string): string {
  const word = info.trim().split(/\s+/)[0] ?? '';
  return word.replace(/[^\w+#.-]/g, '').slice(0, 40);
}

/** Highlighted HTML for `code`, or undefined when highlight.js is missing or does not know the language. */
function highlighted(code: string, lang: string): string | undefined {
  const hljs = window.hljs;
  if (!hljs || !lang || !hljs.getLanguage(lang)) {
    return undefined;
  }
  try {
    return hljs.highlight(code, { language: lang, ignoreIllegals: true }).value;
  } catch {
    return undefined;
  }
}

/** The fence rule (and the indented code rule): a labelled block with Copy and Insert, its code highlighted. */
function codeBlockRule(md: MarkdownIt): void {
  const escape = md.utils.escapeHtml;
  const block = (code: string, lang: string, env: RenderEnv | undefined): string => {
    const tooLong = env?.open === true && code.split('\n', OPEN_HIGHLIGHT_MAX_LINES + 2).length > OPEN_HIGHLIGHT_MAX_LINES;
    const html = tooLong ? undefined : highlighted(code, lang);
    const codeClass = html !== undefined ? `hljs language-${escape(lang)}` : lang ? `language-${escape(lang)}` : '';
    const label = lang || 'text';
    return (
      `<div class="code-block">` +
      `<div class="code-head"><span class="code-lang">${escape(label)}</span>` +
      `<button type="button" class="code-action code-copy" title="Copy the code" aria-label="Copy ${escape(label)} code">Copy</button>` +
      `<button type="button" class="code-action code-insert" title="Insert the code at the cursor in the editor" aria-label="Insert ${escape(label)} code at the cursor">Insert</button>` +
      `</div>` +
      `<pre tabindex="0"><code${codeClass ? ` class="${codeClass}"` : ''}>${html ?? escape(code)}</code></pre>` +
      `</div>\n`
    );
  };
  md.renderer.rules.fence = (tokens: Token[], idx: number, _options, env: RenderEnv) =>
    block(tokens[idx].content, fenceLanguage(tokens[idx].info), env);
  md.renderer.rules.code_block = (tokens: Token[], idx: number, _options, env: RenderEnv) => block(tokens[idx].content, '', env);
}

const TASK = /^\[([ xX])\][ \t]/;

/**
 * Task list items: a list item whose paragraph starts with `[ ] ` or `[x] ` gets a disabled
 * checkbox instead of the brackets (GitHub's rendering).
 */
function taskListRule(md: MarkdownIt): void {
  md.core.ruler.after('inline', 'parley_task_lists', (state: StateCore) => {
    const tokens = state.tokens;
    for (let i = 2; i < tokens.length; i++) {
      const inline = tokens[i];
      if (inline.type !== 'inline' || tokens[i - 1].type !== 'paragraph_open' || tokens[i - 2].type !== 'list_item_open') {
        continue;
      }
      const first = inline.children?.[0];
      const m = first?.type === 'text' ? TASK.exec(first.content) : null;
      if (!first || !m) {
        continue;
      }
      const checked = m[1] !== ' ';
      first.content = first.content.slice(m[0].length);
      const box = new state.Token('html_inline', '', 0);
      box.content = `<input type="checkbox" class="task-checkbox" disabled${checked ? ' checked' : ''}> `;
      inline.children?.unshift(box);
      tokens[i - 2].attrJoin('class', 'task-item');
    }
  });
}

/**
 * Table cells aligned by class (`align-left`, `align-center`, `align-right`), not by
 * markdown-it's `style="text-align:…"`, which the view's CSP refuses (it allows no inline
 * style); and each table in a wrapper that scrolls sideways, so a narrow view does not break
 * its words.
 */
function tableRule(md: MarkdownIt): void {
  md.core.ruler.push('parley_table_alignment', (state: StateCore) => {
    for (const token of state.tokens) {
      const align = /^text-align:(left|center|right)$/.exec(token.attrGet('style') ?? '');
      if (align) {
        token.attrs = (token.attrs ?? []).filter(([name]) => name !== 'style');
        token.attrJoin('class', `align-${align[1]}`);
      }
    }
  });
  md.renderer.rules.table_open = () => '<div class="table-scroll" tabindex="0"><table>\n';
  md.renderer.rules.table_close = () => '</table></div>\n';
}

/** markdown-it as the view uses it: HTML in the text escaped, links made clickable, code blocks, task lists and tables. */
export function createMarkdown(): MarkdownIt | undefined {
  const factory = (window as unknown as { markdownit?: (options: Record<string, unknown>) => MarkdownIt }).markdownit;
  if (!factory) {
    return undefined;
  }
  const md = factory({ html: false, linkify: true, breaks: false, typographer: false });
  codeBlockRule(md);
  taskListRule(md);
  tableRule(md);
  return md;
}

/** A code block's text as the model wrote it (without the fence's last newline). */
export function codeBlockText(block: Element): string {
  const code = block.querySelector('pre code');
  return (code?.textContent ?? '').replace(/\n$/, '');
}

/** Puts `text` on the clipboard; without the Clipboard API (or when it refuses), through a selected text area. */
async function copyText(text: string): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
    return;
  } catch {
    // fall through: the old way
  }
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.className = 'visually-hidden';
  document.body.append(area);
  area.select();
  const ok = document.execCommand('copy');
  area.remove();
  if (!ok) {
    throw new Error('the clipboard refused the text');
  }
}

/** Shows `text` on a button for a moment (Copied, Inserted), then its label again. */
function flash(button: HTMLButtonElement, text: string): void {
  const label = button.dataset.label ?? button.textContent ?? '';
  button.dataset.label = label;
  button.textContent = text;
  window.setTimeout(() => {
    button.textContent = label;
  }, 1500);
}

/**
 * Copy and Insert for every code block under `root`, now and later: Copy puts the block's
 * text on the clipboard, Insert asks the host (`insert`) to put it at the editor's cursor.
 */
export function handleCodeBlockButtons(root: HTMLElement, insert: (text: string) => void): void {
  root.addEventListener('click', (e) => {
    const button = (e.target as Element | null)?.closest<HTMLButtonElement>('button.code-action');
    const block = button?.closest('.code-block');
    if (!button || !block) {
      return;
    }
    const text = codeBlockText(block);
    if (button.classList.contains('code-copy')) {
      copyText(text).then(
        () => flash(button, 'Copied'),
        () => flash(button, 'Copy failed'),
      );
    } else {
      insert(text); // the host says so when no editor is open
    }
  });
}
