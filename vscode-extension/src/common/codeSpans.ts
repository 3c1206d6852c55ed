/**
 * The server's one-line words (a tool's title, a permission option's name) cut into text and
 * code spans: "Run `pytest -q`" is "Run " then the code `pytest -q`. Only CommonMark's code
 * spans (a run of backticks closed by a run of the same length; an unclosed one is text): a
 * path such as `__init__.py` outside one stays as it is. The page shows the code as code, a
 * place with plain text only (a terminal's name, a tooltip) the words without the backticks.
 */

export interface SpanPart {
  text: string;
  code: boolean;
}

/** `text` as text and code parts, in order. */
export function codeSpans(text: string): SpanPart[] {
  const parts: SpanPart[] = [];
  const run = /`+/g;
  let shown = 0;
  for (let open = run.exec(text); open; open = run.exec(text)) {
    const close = closingRun(text, run.lastIndex, open[0].length);
    if (close < 0) {
      continue;
    }
    if (open.index > shown) {
      parts.push({ text: text.slice(shown, open.index), code: false });
    }
    parts.push({ text: spanText(text.slice(run.lastIndex, close)), code: true });
    shown = close + open[0].length;
    run.lastIndex = shown;
  }
  if (shown < text.length) {
    parts.push({ text: text.slice(shown), code: false });
  }
  return parts;
}

/** Where the run of exactly `length` backticks that closes a span starting at `from` begins, or -1. */
function closingRun(text: string, from: number, length: number): number {
  const run = /`+/g;
  run.lastIndex = from;
  for (let m = run.exec(text); m; m = run.exec(text)) {
    if (m[0].length === length) {
      return m.index;
    }
  }
  return -1;
}

/** A code span's text: one space stripped from each side when both have one (CommonMark). */
function spanText(inner: string): string {
  return inner.length > 2 && inner.startsWith(' ') && inner.endsWith(' ') && inner.trim() !== '' ? inner.slice(1, -1) : inner;
}

/** `text` without its code spans' backticks (a terminal's name, a tooltip). */
export function withoutCodeMarks(text: string): string {
  return codeSpans(text)
    .map((p) => p.text)
    .join('');
}
