/**
 * Where a streamed Markdown text can be cut into blocks that render alone exactly as they do
 * together, so that a finished block is rendered once and only the open one again.
 *
 * Each line is looked at once, when it is complete (ends with a newline): the cost of a chunk
 * is the cost of its own lines, whatever the length of the text before it. A cut is made only
 * where CommonMark guarantees that nothing later changes what came before:
 *
 * - after the closing line of a fenced code block that starts at column 0;
 * - before a fence or an ATX heading (`# …`) at column 0 (both end any open paragraph, list,
 *   quote or table);
 * - before a non-indented line that follows a blank line, unless the open block has list
 *   items and that line is one too (a loose list stays one list).
 *
 * Never inside a fence. What this ignores: a link reference definition (`[x]: url`) applies
 * only inside its own block, not to earlier ones — rare in a model's answer.
 */

/** An opening fence: up to 3 spaces, then ``` or ~~~ (3 or more) and an info string. */
const FENCE_OPEN = /^( {0,3})(`{3,}|~{3,})(.*)$/;
const LIST_ITEM = /^ {0,3}(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)/;
const ATX_HEADING = /^#{1,6}(?:[ \t]|$)/;
const BLANK = /^[ \t]*$/;

interface OpenFence {
  char: string;
  length: number;
  /** At column 0: its closing line ends every open block. */
  topLevel: boolean;
}

/** A fence at column 0 that is still open: it is the whole open block. */
export interface OpenTopFence {
  /** Offset of its opening line (where the open block starts). */
  start: number;
  /** Offset of its first line of code. */
  codeStart: number;
  /** Its lines of code so far. */
  lines: number;
}

export class BlockSplitter {
  /** Offset of the first line not yet looked at (the text before it is whole lines). */
  private scanned = 0;
  /** The open block, when it is a fence at column 0 still open. */
  openTopFence: OpenTopFence | undefined;
  /** Offset where the open block starts. */
  private blockStart = 0;
  private fence: OpenFence | undefined;
  private blockHasText = false;
  private blockHasList = false;
  private afterBlank = false;

  /**
   * Looks at the lines of `text` completed since the last call (`text` extends the text given
   * before) and returns the offsets where new blocks start, in order: each one finishes the
   * block before it.
   */
  push(text: string): number[] {
    const cuts: number[] = [];
    for (let nl = text.indexOf('\n', this.scanned); nl !== -1; nl = text.indexOf('\n', this.scanned)) {
      const start = this.scanned;
      this.scanned = nl + 1;
      const cut = this.line(text.slice(start, nl), start, nl + 1);
      if (cut !== undefined) {
        cuts.push(cut);
      }
    }
    return cuts;
  }

  /** A cut this line makes (before or after it), if any. */
  /** Where the complete lines looked at end. */
  get scannedTo(): number {
    return this.scanned;
  }

  private line(line: string, start: number, end: number): number | undefined {
    if (this.fence) {
      return this.lineInFence(line, this.fence, end);
    }
    if (BLANK.test(line)) {
      this.afterBlank = this.blockHasText;
      return undefined;
    }
    const topLevel = !/^[ \t]/.test(line);
    const isItem = LIST_ITEM.test(line);
    const opener = openingFence(line);
    const cut = this.startsBlock(line, start, topLevel, isItem, opener !== undefined) ? this.cut(start) : undefined;
    this.afterBlank = false;
    this.blockHasText = true;
    this.blockHasList ||= isItem;
    if (opener) {
      this.fence = { ...opener, topLevel };
      if (topLevel) {
        this.openTopFence = { start, codeStart: end, lines: 0 };
      }
    }
    return cut;
  }

  /** A line inside an open fence: it closes the fence (a top-level one ends its block there) or is code. */
  private lineInFence(line: string, fence: NonNullable<typeof this.fence>, end: number): number | undefined {
    if (closesFence(line, fence)) {
      this.fence = undefined;
      return fence.topLevel ? this.cut(end) : undefined;
    }
    if (this.openTopFence) {
      this.openTopFence.lines++;
    }
    return undefined;
  }

  /** Whether a top-level line starts a new block: a fence or heading interrupts; after a blank line, anything but a list's next item. */
  private startsBlock(line: string, start: number, topLevel: boolean, isItem: boolean, opensFence: boolean): boolean {
    if (!this.blockHasText || start <= this.blockStart || !topLevel) {
      return false;
    }
    const interrupts = opensFence || ATX_HEADING.test(line);
    return interrupts || (this.afterBlank && !(isItem && this.blockHasList));
  }

  private cut(at: number): number {
    this.openTopFence = undefined;
    this.blockStart = at;
    this.blockHasText = false;
    this.blockHasList = false;
    this.afterBlank = false;
    return at;
  }
}

function openingFence(line: string): Omit<OpenFence, 'topLevel'> | undefined {
  const m = FENCE_OPEN.exec(line);
  if (!m || (m[2][0] === '`' && m[3].includes('`'))) {
    return undefined; // a backtick fence's info string has no backtick
  }
  return { char: m[2][0], length: m[2].length };
}

function closesFence(line: string, fence: OpenFence): boolean {
  const m = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(line);
  return m !== null && m[1][0] === fence.char && m[1].length >= fence.length;
}
