/**
 * The display rules of `docs/display.md`, in the one place the VS Code extension keeps them:
 * token, cost and context figures, tool input and result texts, times, the controls shown
 * escaped in what the user judges (the cases every client
 * checks are the repository's tests/display-cases.json). Words about a turn (why it stopped)
 * are the server's: it sends them as notices, shown as they come. Used by the extension host (status bar, reducer) and
 * by the webview, so it imports nothing and touches no DOM or Node API.
 */

/** `950`, `1.2k`, `12k`, `999k`, `1.2M`: one decimal below 10,000, whole thousands (cut) below a million. */
export function formatTokens(n: number): string {
  const count = Math.trunc(n);
  if (count < 1000) {
    return String(count);
  }
  if (count < 10_000) {
    return `${(count / 1000).toFixed(1)}k`;
  }
  if (count < 1_000_000) {
    return `${Math.floor(count / 1000)}k`;
  }
  return `${(count / 1_000_000).toFixed(1)}M`;
}

/** `$1.25` from $1, `$0.0123` below, `$0` for zero, `cost unknown` for none. */
export function formatCost(cost: { amount: number; currency?: string } | number | null | undefined): string {
  if (cost === null || cost === undefined) {
    return 'cost unknown';
  }
  const amount = typeof cost === 'number' ? cost : cost.amount;
  if (amount === 0) {
    return '$0';
  }
  return `$${amount.toFixed(Math.abs(amount) >= 1 ? 2 : 4)}`;
}

/** `context 12k/200k (6%)` with a known window, `context 12k` without one (never `/0`). */
export function formatContext(used: number, size?: number | null): string {
  if (!size) {
    return `context ${formatTokens(used)}`;
  }
  return `context ${formatTokens(used)}/${formatTokens(size)} (${roundHalfEven((100 * used) / size)}%)`;
}

/** Rounds as Python's `round` does (a half to the even neighbour), so every client shows one percent. */
function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const diff = x - floor;
  if (diff !== 0.5) {
    return Math.round(x);
  }
  return floor % 2 === 0 ? floor : floor + 1;
}

/**
 * The code argument of a tool and its language: `code` of `python_eval`, `form` of
 * `elisp_eval`, `command` of any tool. With no tool name (the wire does not always carry
 * one), `code` and `form` are taken as Parley's `python_eval` and `elisp_eval` would have them.
 */
function codeArgument(tool: string | undefined, input: Record<string, unknown>): { code: string; language: string } | undefined {
  const name = tool?.toLowerCase();
  if ((name === undefined || name === 'python_eval') && typeof input.code === 'string') {
    return { code: input.code, language: 'python' };
  }
  if ((name === undefined || name === 'elisp_eval') && typeof input.form === 'string') {
    return { code: input.form, language: 'elisp' };
  }
  if (typeof input.command === 'string') {
    return { code: input.command, language: 'sh' };
  }
  return undefined;
}

/** A tool's input split as `formatToolInput` shows it: its code argument, or JSON text. */
export function toolInputParts(
  tool: string | undefined,
  input: unknown,
): { kind: 'code'; code: string; language: string } | { kind: 'json'; text: string } {
  if (input !== null && typeof input === 'object' && !Array.isArray(input)) {
    const code = codeArgument(tool, input as Record<string, unknown>);
    if (code) {
      return { kind: 'code', ...code };
    }
  }
  return { kind: 'json', text: jsonWithLines(input, '') };
}

/**
 * A tool's input as Markdown: a code argument as a fenced code block in its language;
 * anything else as JSON indented by two spaces, where a string that holds newlines is
 * written as its lines (after `|`, indented), not with `\n` escapes.
 */
export function formatToolInput(tool: string | undefined, input: unknown): string {
  if (input === undefined) {
    return '';
  }
  const parts = toolInputParts(tool, input);
  if (parts.kind === 'json') {
    return parts.text;
  }
  const fence = parts.code.includes('```') ? '````' : '```';
  return `${fence}${parts.language}\n${parts.code.replace(/\n$/, '')}\n${fence}`;
}

/** Two-space JSON, where a string with newlines is written as its lines (indented), not `\n` escapes. */
function jsonWithLines(value: unknown, indent: string): string {
  if (typeof value === 'string' && value.includes('\n')) {
    const inner = `${indent}  `;
    return `|\n${value.replace(/\n$/, '').split('\n').map((l) => inner + l).join('\n')}`;
  }
  if (Array.isArray(value)) {
    if (value.length === 0) {
      return '[]';
    }
    const inner = `${indent}  `;
    return `[\n${value.map((v) => inner + jsonWithLines(v, inner)).join(',\n')}\n${indent}]`;
  }
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    if (entries.length === 0) {
      return '{}';
    }
    const inner = `${indent}  `;
    return `{\n${entries.map(([k, v]) => `${inner}${JSON.stringify(k)}: ${jsonWithLines(v, inner)}`).join(',\n')}\n${indent}}`;
  }
  return JSON.stringify(value) ?? String(value);
}

/** Lines that only label a section of a tool's output. */
const SECTION_LABEL = /^\s*(stdout|stderr|result):\s*$/;
const SUMMARY_LINES = 3;
const SUMMARY_WIDTH = 120;

/**
 * A tool result's summary: its first three non-blank lines after dropping section labels
 * (`stdout:` …), each longer than 120 characters cut to its first 120 and `…`; `(no output)` when nothing is left.
 * A failed call's summary starts with its error line (`error`, when given).
 */
export function summarizeToolResult(text: string, error?: string): string {
  let lines = text
    .split(/\r?\n/)
    .filter((l) => l.trim() !== '' && !SECTION_LABEL.test(l))
    .map((l) => l.trimEnd());
  if (error?.trim()) {
    // The error line first, and not again where the output repeats it.
    const first = error.trim().split(/\r?\n/)[0];
    lines = [first, ...lines.filter((l) => l.trim() !== first.trim())];
  }
  if (lines.length === 0) {
    return '(no output)';
  }
  return lines
    .slice(0, SUMMARY_LINES)
    .map((l) => (l.length > SUMMARY_WIDTH ? `${l.slice(0, SUMMARY_WIDTH)}…` : l))
    .join('\n');
}

/** Control and format characters (Unicode Cc, Cf: the bidi controls among them; a lone surrogate). */
const CONTROLS = /[\p{Cc}\p{Cf}\p{Cs}]/gu;
const NAMED_ESCAPES: Record<string, string> = { '\n': '\\n', '\r': '\\r' };

/**
 * `text` with its control and format characters written as escapes, as Python writes them
 * (`\x1b`, `\r`, `\u202e`, `\U000e0041`), tab and newline kept (with `oneLine`, a newline
 * escaped too): what the user judges (a command, a title, a path) cannot hide code, reorder
 * itself with bidi controls or carry an escape sequence.
 */
export function escapeControls(text: string, oneLine = false): string {
  return text.replace(CONTROLS, (ch) => (ch === '\t' || (ch === '\n' && !oneLine) ? ch : escapeOf(ch)));
}

function escapeOf(ch: string): string {
  const code = ch.codePointAt(0) ?? 0;
  const hex = code.toString(16);
  if (NAMED_ESCAPES[ch]) {
    return NAMED_ESCAPES[ch];
  }
  return code < 0x100 ? `\\x${hex.padStart(2, '0')}` : code < 0x10000 ? `\\u${hex.padStart(4, '0')}` : `\\U${hex.padStart(8, '0')}`;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** Local time: today `14:05`, this year `Nov 22 14:05`, older `2025-11-22 14:05`. */
export function formatTime(when: Date | string | number, now: Date = new Date()): string {
  const d = when instanceof Date ? when : new Date(when);
  if (Number.isNaN(d.getTime())) {
    return '';
  }
  const two = (n: number) => String(n).padStart(2, '0');
  const clock = `${two(d.getHours())}:${two(d.getMinutes())}`;
  if (d.getFullYear() !== now.getFullYear()) {
    return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${clock}`;
  }
  if (d.getMonth() !== now.getMonth() || d.getDate() !== now.getDate()) {
    return `${MONTHS[d.getMonth()]} ${d.getDate()} ${clock}`;
  }
  return clock;
}

/** The JSON-RPC error code of a provider failure: the chat offers Retry for it. */
export const PROVIDER_ERROR = -32001;
