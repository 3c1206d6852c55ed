/**
 * A running command's output in its tool card: ANSI colours and bold as spans (the text
 * itself always as text, never as HTML), drawn as it comes — only what is new is parsed and
 * added, the colour state carried from one piece to the next.
 */

import { type AnsiColour, type AnsiRun, type AnsiState, INITIAL_ANSI_STATE, parseAnsi } from '../common/ansi.js';
import { h } from './dom.js';

/** What each output element shows: the raw output drawn so far, and the ANSI state after it. */
const drawn = new WeakMap<HTMLElement, { text: string; state: AnsiState }>();

/**
 * Shows `text` (a command's whole output so far, raw) in `pre`: what it adds to the output
 * drawn is appended; other text is drawn anew.
 */
export function renderOutput(pre: HTMLElement, text: string): void {
  const shown = drawn.get(pre);
  if (shown?.text === text) {
    return;
  }
  const stick = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 20;
  let state = INITIAL_ANSI_STATE;
  let added = text;
  if (shown && text.startsWith(shown.text)) {
    state = shown.state;
    added = text.slice(shown.text.length);
  } else {
    pre.replaceChildren();
  }
  const parsed = parseAnsi(added, state);
  drawn.set(pre, { text, state: parsed.state });
  pre.append(...parsed.runs.map(runNode));
  if (stick) {
    pre.scrollTop = pre.scrollHeight; // follow the output, unless the user scrolled up to read
  }
}

/**
 * A run as a node: plain text, or a span whose classes give the theme's ANSI colours, bold,
 * dim, italic, underline, inverse; a 256-colour or true colour is set through the element's
 * style object (the page's CSP refuses `style` attributes, not CSSOM).
 */
function runNode(run: AnsiRun): Node {
  const s = run.style;
  const [fg, bg] = s.inverse ? [s.bg, s.fg] : [s.fg, s.bg];
  const classes = styleClasses(s, fg, bg);
  if (classes.length === 0 && fg === undefined && bg === undefined) {
    return document.createTextNode(run.text);
  }
  const span = h('span', classes.length ? { class: classes.join(' ') } : {}, run.text);
  if (typeof fg === 'string') {
    span.style.color = fg;
  }
  if (typeof bg === 'string') {
    span.style.backgroundColor = bg;
  }
  return span;
}

/** The classes of a run's style: inverse, the flags, the theme's colours (`fg`, `bg` after inverse). */
function styleClasses(s: AnsiRun['style'], fg: AnsiColour | undefined, bg: AnsiColour | undefined): string[] {
  return [
    ...(s.inverse ? ['ansi-inverse'] : []),
    ...(['bold', 'dim', 'italic', 'underline'] as const).filter((flag) => s[flag]).map((flag) => `ansi-${flag}`),
    ...(typeof fg === 'number' ? [`ansi-fg-${fg}`] : []),
    ...(typeof bg === 'number' ? [`ansi-bg-${bg}`] : []),
  ];
}
