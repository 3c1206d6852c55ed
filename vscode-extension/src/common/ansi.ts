/**
 * A command's output with ANSI escape sequences, as text runs with their style (SGR colours,
 * bold, dim, italic, underline, inverse): what the tool card draws as spans. Streamed: the
 * output comes in pieces, so the style and an escape sequence cut at a piece's end carry over
 * in `AnsiState`; parsing the pieces one after the other gives the runs of the whole.
 * Every other escape sequence (cursor moves, titles, links) and control character is dropped;
 * `\r\n` and a lone `\r` end a line; a bidi control is shown escaped (`\u202e`, docs/display.md).
 *
 * Written here, not taken from a library: ansi_up writes `style` attributes (bold, 256 and
 * true colours) that the page's content security policy refuses, and anser is CommonJS, which
 * the page (ES modules, no bundler) cannot load. Pure; shared by the host and the page.
 */

import { escapeControls } from './display.js';

/** A colour: 0-15 the terminal's palette (the theme's ANSI colours), or a CSS `rgb(…)`. */
export type AnsiColour = number | string;

export interface AnsiStyle {
  fg?: AnsiColour;
  bg?: AnsiColour;
  bold?: boolean;
  dim?: boolean;
  italic?: boolean;
  underline?: boolean;
  inverse?: boolean;
}

/** A run of text in one style. */
export interface AnsiRun {
  text: string;
  style: AnsiStyle;
}

/** What carries over from one piece of output to the next. */
export interface AnsiState {
  style: AnsiStyle;
  /** The start of an escape sequence (or a `\r`) the last piece ended in. */
  pending: string;
}

export const INITIAL_ANSI_STATE: AnsiState = { style: {}, pending: '' };

/** An unfinished escape sequence longer than this is not one: it is dropped. */
const MAX_PENDING = 512;

/**
 * An escape sequence at the start of the text: CSI (`ESC [` … final byte), OSC (`ESC ]` … BEL
 * or `ESC \`), or another (`ESC`, intermediate bytes, a final byte: `ESC (B`, `ESC =`).
 */
// eslint-disable-next-line no-control-regex
const ESCAPE = /^\x1b(?:\[([\x30-\x3f]*)[\x20-\x2f]*([\x40-\x7e])|\][^\x07\x1b]*(?:\x07|\x1b\\)|[\x20-\x2f]*[\x30-\x5a\x5c\x5e-\x7e])/;
/** The start of an escape sequence that the next piece may still finish. */
// eslint-disable-next-line no-control-regex
const UNFINISHED = /^\x1b(?:\[[\x30-\x3f]*[\x20-\x2f]*|\][^\x07\x1b]*\x1b?|[\x20-\x2f]+)?$/;
/** Control characters that are not shown (C0 but tab and newline, DEL, C1; `\r` and ESC are handled first). */
// eslint-disable-next-line no-control-regex
const CONTROLS = /[\x00-\x08\x0b-\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f]/g;
/** Bidi controls: shown, not obeyed (an output cannot reorder what the user reads). */
const BIDI_CONTROLS = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * The runs of `piece`, following the output before it (`state`), and the state after it.
 * Adjacent runs of one style are joined; runs are never empty.
 */
export function parseAnsi(piece: string, state: AnsiState = INITIAL_ANSI_STATE): { runs: AnsiRun[]; state: AnsiState } {
  const text = state.pending + piece;
  const runs: AnsiRun[] = [];
  let style = state.style;
  let plain = '';
  const flush = () => {
    const shown = plain.replace(CONTROLS, '').replace(BIDI_CONTROLS, (ch) => escapeControls(ch));
    plain = '';
    if (shown === '') {
      return;
    }
    const last = runs[runs.length - 1];
    if (last && last.style === style) {
      last.text += shown;
    } else {
      runs.push({ text: shown, style });
    }
  };
  let i = 0;
  while (i < text.length) {
    const next = nextSpecial(text, i);
    plain += text.slice(i, next);
    i = next;
    if (i >= text.length) {
      break;
    }
    if (text[i] === '\r') {
      if (i + 1 >= text.length) {
        flush();
        return { runs, state: { style, pending: '\r' } };
      }
      plain += '\n';
      i += text[i + 1] === '\n' ? 2 : 1;
      continue;
    }
    const rest = text.slice(i, i + MAX_PENDING);
    const m = ESCAPE.exec(rest);
    if (m) {
      if (m[2] === 'm') {
        flush();
        style = withSgr(style, m[1] ?? '');
      }
      i += m[0].length;
    } else if (UNFINISHED.test(rest) && text.length - i < MAX_PENDING) {
      flush();
      return { runs, state: { style, pending: text.slice(i) } };
    } else {
      i += 1; // a lone ESC (or a sequence past any sensible length): dropped
    }
  }
  flush();
  return { runs, state: { style, pending: '' } };
}

/** The index of the next ESC or `\r` from `from` on (the text's length when there is none). */
function nextSpecial(text: string, from: number): number {
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x1b || c === 0x0d) {
      return i;
    }
  }
  return text.length;
}

/** `text` without its escape sequences and control characters (as `parseAnsi` shows it, unstyled). */
export function stripAnsi(text: string): string {
  const { runs, state } = parseAnsi(text);
  return runs.map((r) => r.text).join('') + (state.pending === '\r' ? '\n' : '');
}

/** The style after an SGR sequence's parameters (`1;31`, `38;5;208`, `38:2::255:0:0`, `` = reset). */
export function withSgr(style: AnsiStyle, params: string): AnsiStyle {
  const codes = params.split(';');
  const next: AnsiStyle = { ...style };
  for (let i = 0; i < codes.length; i++) {
    i += applySgrCode(next, codes, i);
  }
  return sameStyle(style, next) ? style : next;
}

/** Apply the SGR code at `i` of `codes` to `style`; returns how many codes after it it took (an extended colour's). */
function applySgrCode(style: AnsiStyle, codes: string[], i: number): number {
  const code = codes[i];
  if (code.includes(':')) {
    // Sub-parameters in one code: `38:5:n`, `38:2:r:g:b`, `38:2:space:r:g:b`.
    const [first, kind, ...values] = code.split(':');
    // `38:2:space:r:g:b` names a colour space before the three values: not used here.
    const rgb = kind === '2' && values.length === 4 ? values.slice(1) : values;
    applyCode(style, Number(first || '0'), extendedColour([kind ?? '', ...rgb]));
    return 0;
  }
  const n = Number(code || '0');
  if ((n === 38 || n === 48) && i + 1 < codes.length) {
    const kind = codes[i + 1];
    const take = kind === '5' ? 2 : kind === '2' ? 4 : 1;
    applyCode(style, n, extendedColour(codes.slice(i + 1, i + 1 + take)));
    return take;
  }
  applyCode(style, n);
  return 0;
}

/** A 256-colour (`5;n`) or true colour (`2;r;g;b`) as an `AnsiColour`; undefined when malformed. */
function extendedColour(parts: string[]): AnsiColour | undefined {
  const [kind, ...values] = parts;
  const numbers = values.map((v) => Number(v || '0'));
  if (numbers.some((v) => !Number.isInteger(v) || v < 0 || v > 255)) {
    return undefined;
  }
  if (kind === '5' && numbers.length === 1) {
    return paletteColour(numbers[0]);
  }
  if (kind === '2' && numbers.length === 3) {
    return `rgb(${numbers.join(', ')})`;
  }
  return undefined;
}

/** The xterm 256-colour palette: 0-15 the theme's colours, then a 6×6×6 cube and 24 greys. */
export function paletteColour(n: number): AnsiColour {
  if (n < 16) {
    return n;
  }
  if (n >= 232) {
    const grey = 8 + (n - 232) * 10;
    return `rgb(${grey}, ${grey}, ${grey})`;
  }
  const levels = [0, 95, 135, 175, 215, 255];
  const c = n - 16;
  return `rgb(${levels[Math.floor(c / 36)]}, ${levels[Math.floor(c / 6) % 6]}, ${levels[c % 6]})`;
}

function applyCode(s: AnsiStyle, n: number, colour?: AnsiColour): void {
  if (n === 0) {
    for (const key of Object.keys(s) as (keyof AnsiStyle)[]) {
      delete s[key];
    }
  } else if (n === 1) {
    s.bold = true;
  } else if (n === 2) {
    s.dim = true;
  } else if (n === 3) {
    s.italic = true;
  } else if (n === 4) {
    s.underline = true;
  } else if (n === 7) {
    s.inverse = true;
  } else if (n === 22) {
    delete s.bold;
    delete s.dim;
  } else if (n === 23) {
    delete s.italic;
  } else if (n === 24) {
    delete s.underline;
  } else if (n === 27) {
    delete s.inverse;
  } else {
    applyColourCode(s, n, colour);
  }
}

/** The basic colours' codes: the first of eight, its layer, and the palette index it starts at. */
const BASIC_COLOURS = [
  [30, 'fg', 0],
  [90, 'fg', 8],
  [40, 'bg', 0],
  [100, 'bg', 8],
] as const;

function applyColourCode(s: AnsiStyle, n: number, colour?: AnsiColour): void {
  const basic = BASIC_COLOURS.find(([first]) => n >= first && n <= first + 7);
  if (basic) {
    const [first, layer, start] = basic;
    s[layer] = n - first + start;
  } else if (n === 39 || n === 49) {
    delete s[n === 39 ? 'fg' : 'bg'];
  } else if ((n === 38 || n === 48) && colour !== undefined) {
    s[n === 38 ? 'fg' : 'bg'] = colour;
  }
}

function sameStyle(a: AnsiStyle, b: AnsiStyle): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)] as (keyof AnsiStyle)[]);
  return [...keys].every((k) => a[k] === b[k]);
}
