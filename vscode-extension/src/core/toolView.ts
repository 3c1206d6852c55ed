/**
 * What a tool call shows, from its wire form: the content (the code to be evaluated, the
 * diff of an edit) and the file locations, as the view renders them. Pure.
 */

import { escapeControls } from '../common/display';
import type { DiffLine, LocationView, ToolContentView } from '../common/view';
import type { ContentBlock, ToolCallContent, ToolCallLocation } from '../client/protocol';

/** Lines of unchanged text kept around a change in a diff block. */
const DIFF_CONTEXT = 3;
/** Above this many (old × new) changed lines, a diff shows all old lines removed and all new ones added. */
const DIFF_MAX_CELLS = 250_000;

/** The text of a content block (other content shows none). */
export function blockText(content: ContentBlock): string {
  return content.type === 'text' ? content.text : '';
}

/** The image types the view shows (those the server sends: `tools/kernel_images.py`). */
const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];

/** An image block as the view shows it, when it is one of `IMAGE_TYPES` in base64. */
function imageView(content: ContentBlock): ToolContentView | undefined {
  if (content.type !== 'image' || !IMAGE_TYPES.includes(content.mimeType) || !/^[A-Za-z0-9+/]*={0,2}$/.test(content.data)) {
    return undefined;
  }
  return { kind: 'image', mimeType: content.mimeType, data: content.data };
}

/**
 * A tool call's content as the view shows it: text blocks, images and diffs (terminals are not
 * shown); a diff's path relative to the workspace root `cwd` when inside it. Text and paths
 * with their controls and bidi characters escaped (`escapeControls`).
 */
export function contentViews(content: ToolCallContent[], cwd?: string): ToolContentView[] {
  const out: ToolContentView[] = [];
  for (const c of content) {
    if (c.type === 'content') {
      const text = blockText(c.content);
      const image = imageView(c.content);
      if (text !== '') {
        out.push({ kind: 'text', text: escapeControls(text) });
      } else if (image) {
        out.push(image);
      }
    } else if (c.type === 'diff') {
      const newFile = c.oldText === null || c.oldText === undefined;
      const lines = diffLines(c.oldText ?? '', c.newText, newFile);
      out.push({
        kind: 'diff',
        path: escapeControls(relativeTo(c.path, cwd), true),
        file: c.path,
        lines,
        added: lines.filter((l) => l.op === '+').length,
        removed: lines.filter((l) => l.op === '-').length,
        newFile,
      });
    }
  }
  return out;
}

/**
 * The whole text of a file as an edit leaves it, for the diff view: the edit's `newText` when
 * it is the whole file (the file is `oldText` now, or is new); when `oldText` is a part of
 * the file, found there once, the file with that part replaced. `current` is the file's text
 * now (undefined: there is none).
 */
export function proposedContent(current: string | undefined, oldText: string | null | undefined, newText: string): string {
  if (current === undefined || oldText === null || oldText === undefined || current === oldText || oldText === '') {
    return newText;
  }
  const at = current.indexOf(oldText);
  if (at >= 0 && current.indexOf(oldText, at + 1) < 0) {
    return current.slice(0, at) + newText + current.slice(at + oldText.length);
  }
  return newText;
}

/** Content as plain text (a modal dialog's detail): the text, and each diff's lines. */
export function contentText(views: ToolContentView[]): string {
  return views
    .flatMap((v) => (v.kind === 'text' ? [v.text] : v.kind === 'diff' ? [[v.path, ...v.lines.map((l) => `${l.op}${l.text}`)].join('\n')] : []))
    .join('\n\n');
}

/** Locations as links: labelled relative to the workspace root when inside it, with the line. */
export function locationViews(locations: ToolCallLocation[], cwd?: string): LocationView[] {
  return locations
    .filter((l) => typeof l.path === 'string' && l.path !== '')
    .map((l) => {
      const line = typeof l.line === 'number' && l.line > 0 ? l.line : undefined;
      const label = escapeControls(`${relativeTo(l.path, cwd)}${line ? `:${line}` : ''}`, true);
      return { path: l.path, ...(line ? { line } : {}), label };
    });
}

/** `path` relative to the workspace root `root` when inside it, else as it is. */
export function relativeTo(path: string, root?: string): string {
  if (!root) {
    return path;
  }
  const base = root.endsWith('/') ? root : `${root}/`;
  return path.startsWith(base) ? path.slice(base.length) : path;
}

/**
 * A line diff of `oldText` → `newText`: the changed region with `DIFF_CONTEXT` unchanged lines
 * around it (a longest common subsequence inside it). A new file is all added lines.
 */
export function diffLines(oldText: string, newText: string, newFile = false): DiffLine[] {
  const b = splitLines(newText);
  if (newFile) {
    return b.map((text) => ({ op: '+', text }));
  }
  const a = splitLines(oldText);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) {
    start++;
  }
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  if (start === endA && start === endB) {
    return []; // no change
  }
  const before = a.slice(Math.max(0, start - DIFF_CONTEXT), start).map((text): DiffLine => ({ op: ' ', text }));
  const after = a.slice(endA, endA + DIFF_CONTEXT).map((text): DiffLine => ({ op: ' ', text }));
  return [...before, ...middleDiff(a.slice(start, endA), b.slice(start, endB)), ...after];
}

function middleDiff(a: string[], b: string[]): DiffLine[] {
  if (a.length * b.length > DIFF_MAX_CELLS) {
    return [...a.map((text): DiffLine => ({ op: '-', text })), ...b.map((text): DiffLine => ({ op: '+', text }))];
  }
  const lcs = commonSubsequences(a, b);
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      out.push({ op: ' ', text: a[i] });
      i++;
      j++;
    } else if (i < a.length && (j === b.length || lcs[i + 1][j] >= lcs[i][j + 1])) {
      out.push({ op: '-', text: a[i] });
      i++;
    } else {
      out.push({ op: '+', text: b[j] });
      j++;
    }
  }
  return out;
}

/** `lcs[i][j]`: the length of the longest common subsequence of `a[i:]` and `b[j:]`. */
function commonSubsequences(a: string[], b: string[]): number[][] {
  const lcs: number[][] = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  return lcs;
}

function splitLines(text: string): string[] {
  if (text === '') {
    return [];
  }
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') {
    lines.pop(); // the final newline ends the last line; it is not a line of its own
  }
  return lines;
}

/** A command's output a card keeps: past this many characters, only its last `COMMAND_OUTPUT_KEPT`. */
export const COMMAND_OUTPUT_MAX = 256 * 1024;
/** Cut seldom and to half, so that nearly every update is an append the page can draw alone. */
export const COMMAND_OUTPUT_KEPT = 128 * 1024;

/**
 * A command's output after `append` (`_meta.parley.commandOutput.append`): the text so far
 * and how many characters were dropped from its start. Past `COMMAND_OUTPUT_MAX`, its last
 * `COMMAND_OUTPUT_KEPT` characters are kept, from a line's start when one begins there.
 */
export function appendedOutput(
  output: string | undefined,
  cut: number | undefined,
  append: string,
): { commandOutput: string; commandOutputCut: number } {
  const text = (output ?? '') + append;
  if (text.length <= COMMAND_OUTPUT_MAX) {
    return { commandOutput: text, commandOutputCut: cut ?? 0 };
  }
  let from = text.length - COMMAND_OUTPUT_KEPT;
  const line = text.indexOf('\n', from);
  if (line >= 0 && line < text.length - 1) {
    from = line + 1;
  }
  return { commandOutput: text.slice(from), commandOutputCut: (cut ?? 0) + from };
}
