/**
 * What "Open in Terminal" writes: a command's output as its card has it (ANSI colours kept,
 * the terminal draws them), then what came since, and a last line once the call ended. Pure:
 * the VS Code layer's pseudoterminal writes what this says.
 */

import type { ToolEntry } from '../common/view';

/** How far a terminal has followed a call: characters of its whole output written, and whether its end was. */
export interface FeedPosition {
  written: number;
  ended: boolean;
}

export const FEED_START: FeedPosition = { written: 0, ended: false };

/**
 * The text to write next for `entry` (the call's card now) after `at`, and the position after
 * it. Output dropped from the card's start before it was written is said to be cut; the end
 * is written once, with the last line of the call's result (the exit code and time).
 */
export function feed(entry: ToolEntry, at: FeedPosition): { text: string; at: FeedPosition } {
  if (at.ended) {
    return { text: '', at };
  }
  const output = entry.commandOutput ?? '';
  const cut = entry.commandOutputCut ?? 0;
  let text = '';
  if (at.written < cut) {
    text += dim(`[… ${cut - at.written} characters of output not kept …]`) + '\r\n';
  }
  text += terminalLines(output.slice(Math.max(0, at.written - cut)));
  const written = cut + output.length;
  const ended = entry.status === 'completed' || entry.status === 'failed';
  if (ended) {
    text += endLine(entry, output);
  }
  return { text, at: { written, ended } };
}

/** The call's end, once: the last line of its result (the exit code and time), on a line of its own. */
function endLine(entry: ToolEntry, output: string): string {
  const last = (entry.output ?? '').trimEnd().split('\n').pop() ?? '';
  return `${output.endsWith('\n') || output === '' ? '' : '\r\n'}${dim(last || (entry.status === 'failed' ? 'failed' : 'ended'))}\r\n`;
}

/** Newlines as a terminal needs them (`\r\n`); a `\r\n` already there is kept as it is. */
export function terminalLines(text: string): string {
  return text.replace(/\r?\n/g, '\r\n');
}

function dim(text: string): string {
  return `\x1b[2m${text}\x1b[0m`;
}
