/**
 * The transcript's entries as elements: a message (Markdown, block by block), a thought, a
 * tool card (its diff, input, output and summary), a permission card, a notice, the end of a
 * turn that edited files, and who speaks.
 */

import type {
  AgentEntry,
  ContextItem,
  Entry,
  LocationView,
  NoticeEntry,
  PermissionEntry,
  ThoughtEntry,
  ToolContentView,
  ToolEntry,
  TurnEntry,
  UserEntry,
  ViewToHost,
} from '../common/view';
import { withoutCodeMarks } from '../common/codeSpans.js';
import { summarizeToolResult } from '../common/display.js';
import { renderOutput } from './commandOutput.js';
import { byId, h, post } from './dom.js';
import { withCodeSpans } from './inlineCode.js';
import { codeOrPlainText, renderMessage, renderPlainText } from './messageRenderer.js';

const promptBox = byId<HTMLTextAreaElement>('prompt');
const announcer = byId<HTMLElement>('announcer');

export function createEntry(entry: Entry): HTMLElement {
  const el = h('div', { class: `entry entry-${entry.kind}`, 'data-id': entry.id });
  switch (entry.kind) {
    case 'thought': {
      const details = h('details', { class: 'thought' }, h('summary', {}, ''), h('div', { class: 'thought-body' }));
      el.append(details);
      break;
    }
    case 'tool': {
      const details = h(
        'details',
        { class: 'tool-card' },
        h(
          'summary',
          {},
          h('span', { class: 'tool-status-icon', 'aria-hidden': 'true' }),
          h('span', { class: 'tool-title' }),
          h('span', { class: 'tool-kind' }),
          h('span', { class: 'tool-stat diff-stat' }),
          h('span', { class: 'tool-badge' }),
        ),
        h('div', { class: 'tool-section tool-content' }),
        h('div', { class: 'tool-section tool-input' }, h('div', { class: 'section-label' }, 'Input'), h('pre', {})),
        h('div', { class: 'tool-section tool-output' }, h('div', { class: 'section-label' }, 'Output'), h('pre', {})),
      );
      // Folded, a finished call shows its result's first lines (docs/display.md's summary);
      // a running command its output, live.
      const terminalButton = h(
        'button',
        { class: 'secondary command-open-terminal', title: "Show this command's output in a terminal of the editor (read-only), live while it runs" },
        'Open in Terminal',
      );
      terminalButton.addEventListener('click', () => post({ type: 'openTerminal', toolCallId: entry.kind === 'tool' ? entry.toolCallId : '' }));
      el.append(
        details,
        h('div', { class: 'tool-summary' }),
        h('pre', { class: 'command-output', 'aria-label': 'Command output' }),
        h('div', { class: 'tool-terminal' }, 'Terminal output: shown in the terminal of the editor that ran the command.'),
        h('div', { class: 'tool-locations' }),
        h('div', { class: 'tool-actions' }, terminalButton),
      );
      break;
    }
    default:
      break;
  }
  updateEntry(el, entry);
  return el;
}

export function updateEntry(el: HTMLElement, entry: Entry): void {
  switch (entry.kind) {
    case 'user':
      return updateUser(el, entry);
    case 'agent':
      return updateAgent(el, entry);
    case 'thought':
      return updateThought(el, entry);
    case 'tool':
      return updateTool(el, entry);
    case 'permission':
      return updatePermission(el, entry);
    case 'notice':
      return updateNotice(el, entry);
    case 'turn':
      return updateTurn(el, entry);
  }
}

function updateUser(el: HTMLElement, entry: UserEntry): void {
  el.replaceChildren();
  if (entry.text) {
    el.append(h('div', { class: 'user-text' }, entry.text));
  }
  if (entry.context.length) {
    el.append(h('div', { class: 'chips' }, ...entry.context.map((c) => chip(c))));
  }
}

export function chip(c: ContextItem, onRemove?: () => void): HTMLElement {
  const el = h('span', { class: 'chip', title: c.uri }, c.label);
  if (onRemove) {
    const x = h('button', { class: 'icon chip-remove', title: `Remove ${c.label}`, 'aria-label': `Remove ${c.label}` }, '×');
    x.addEventListener('click', onRemove);
    el.append(x);
  }
  return el;
}

function updateAgent(el: HTMLElement, entry: AgentEntry): void {
  el.classList.toggle('streaming', entry.streaming);
  el.classList.toggle('revised', entry.revised);
  let body = el.querySelector<HTMLElement>('.markdown');
  if (!body) {
    body = h('div', { class: 'markdown' });
    el.append(body);
  }
  renderMessage(body, entry.text, entry.streaming, entry.revised);
}

function updateThought(el: HTMLElement, entry: ThoughtEntry): void {
  const summary = el.querySelector('summary');
  const body = el.querySelector<HTMLElement>('.thought-body');
  if (summary) {
    summary.textContent = entry.streaming ? 'Thinking…' : 'Thought';
  }
  if (body) {
    renderPlainText(body, entry.text);
  }
}

const STATUS_LABEL: Record<string, string> = {
  pending: 'pending',
  in_progress: 'running',
  completed: 'done',
  failed: 'failed',
  rejected: 'rejected',
  superseded: 'superseded',
};

const STATUS_ICON: Record<string, string> = {
  pending: '○',
  in_progress: '◔',
  completed: '✓',
  failed: '✗',
  rejected: '⊘',
  superseded: '–',
};

/**
 * A tool call's content: text (the code) as code, an image it displayed, an edit as a diff block — a header with
 * the file and its counts of added and removed lines, then the lines, each with its sign in
 * a gutter. With `openDiff`, the header has an "Open diff" button (an edit asked about).
 */
function contentElements(
  content: ToolContentView[],
  textClass: string,
  openDiff?: (diff: Extract<ToolContentView, { kind: 'diff' }>) => void,
): HTMLElement[] {
  return content.map((c) => {
    if (c.kind === 'text') {
      return codeOrPlainText(c.text, textClass);
    }
    if (c.kind === 'image') {
      return h('img', { class: 'tool-image', src: `data:${c.mimeType};base64,${c.data}`, alt: 'An image the call displayed' });
    }
    const lines = c.lines.map((l) => {
      const cls = l.op === '+' ? 'diff-add' : l.op === '-' ? 'diff-del' : 'diff-ctx';
      return h('span', { class: `diff-line ${cls}` }, h('span', { class: 'diff-sign' }, l.op), ` ${l.text}`);
    });
    const stat = h(
      'span',
      { class: 'diff-stat', title: `${c.added} line${c.added === 1 ? '' : 's'} added, ${c.removed} removed` },
      ...(c.newFile ? [h('span', { class: 'diff-new' }, 'new file'), ' '] : []),
      h('span', { class: 'diff-stat-add' }, `+${c.added}`),
      ' ',
      h('span', { class: 'diff-stat-del' }, `\u2212${c.removed}`),
    );
    const head = h('div', { class: 'diff-head' }, h('span', { class: 'diff-path' }, c.path), stat);
    if (openDiff) {
      const button = h(
        'button',
        { class: 'secondary diff-open', 'data-file': c.file, title: `Compare ${c.path} now with the edit, in the editor's diff view` },
        'Open diff',
      );
      button.addEventListener('click', () => openDiff(c));
      head.append(button);
    }
    return h(
      'div',
      { class: 'diff' },
      head,
      h('pre', { class: 'diff-lines' }, ...(lines.length ? lines : [h('span', { class: 'diff-ctx' }, '(no change)')])),
    );
  });
}

/** Links that open the files a tool call touches, at the line. */
function locationLinks(locations: LocationView[]): HTMLElement[] {
  return locations.map((l) => {
    const a = h('a', { class: 'location', href: '#', title: l.line ? `${l.path}:${l.line}` : l.path }, l.label);
    a.addEventListener('click', (e) => {
      e.preventDefault();
      post({ type: 'openLocation', path: l.path, ...(l.line ? { line: l.line } : {}) });
    });
    return a;
  });
}

/** Set the text of the element `selector` in `el`, when it has one. */
function setText(el: HTMLElement, selector: string, text: string): void {
  const part = el.querySelector<HTMLElement>(selector);
  if (part) {
    part.textContent = text;
  }
}

/** Show the element `selector` in `el` unless `hidden`, and `fill` it, when `el` has it. */
function showPart(el: HTMLElement, selector: string, hidden: boolean, fill?: (part: HTMLElement) => void): void {
  const part = el.querySelector<HTMLElement>(selector);
  if (part) {
    part.hidden = hidden;
    fill?.(part);
  }
}

/** An edit's lines added and removed, for its folded line. */
function diffStat(diffs: Extract<ToolEntry['content'][number], { kind: 'diff' }>[]): (HTMLElement | string)[] {
  return [
    h('span', { class: 'diff-stat-add' }, `+${diffs.reduce((n, d) => n + d.added, 0)}`),
    ' ',
    h('span', { class: 'diff-stat-del' }, `\u2212${diffs.reduce((n, d) => n + d.removed, 0)}`),
  ];
}

/** The first lines of a finished call's result (not of a superseded one), or undefined. */
function resultSummary(entry: ToolEntry): string | undefined {
  const done = (entry.status === 'completed' || entry.status === 'failed') && !entry.superseded;
  return done && entry.output !== undefined ? summarizeToolResult(entry.output) : undefined;
}

/** What a call's badge says: a superseded call is not an error, nor is one the user rejected. */
function shownStatus(entry: ToolEntry): string {
  if (entry.superseded) {
    return 'superseded';
  }
  return entry.rejected && entry.status === 'failed' ? 'rejected' : entry.status;
}

function updateTool(el: HTMLElement, entry: ToolEntry): void {
  // A superseded call is muted, with its own icon and badge; a rejected one too.
  const status = shownStatus(entry);
  el.className = `entry entry-tool status-${status}${entry.superseded ? ' superseded' : ''}`;
  setText(el, '.tool-status-icon', STATUS_ICON[status] ?? '•');
  showPart(el, '.tool-title', false, (title) => {
    title.replaceChildren(...withCodeSpans(entry.title));
    title.setAttribute('title', withoutCodeMarks(entry.title)); // whole when cut with …
  });
  setText(el, '.tool-kind', entry.toolKind);
  const diffs = entry.content.filter((c) => c.kind === 'diff');
  showPart(el, '.tool-stat', diffs.length === 0, (stat) => stat.replaceChildren(...diffStat(diffs)));
  setText(el, '.tool-badge', STATUS_LABEL[status] ?? status);
  showPart(el, '.tool-content', entry.content.length === 0, (c) => c.replaceChildren(...contentElements(entry.content, 'tool-code')));
  showPart(el, '.tool-locations', entry.locations.length === 0, (l) => l.replaceChildren(...locationLinks(entry.locations)));
  // The content shows what the call does; the raw input only when there is none.
  showPart(el, '.tool-input', entry.input === undefined || entry.content.length > 0);
  setText(el, '.tool-input pre', entry.input ?? '');
  showPart(el, '.tool-output', entry.output === undefined);
  setText(el, '.tool-output pre', entry.output ?? '');
  const summary = resultSummary(entry);
  showPart(el, '.tool-summary', summary === undefined, (part) => (part.textContent = summary ?? ''));
  showPart(el, '.tool-terminal', !entry.terminal);
  updateCommandOutput(el, entry);
}

/**
 * A command's output: live in the card while it runs (its colours drawn), until its result
 * comes; "Open in Terminal" for any call that has it.
 */
export function updateCommandOutput(el: HTMLElement, entry: ToolEntry): void {
  const live = el.querySelector<HTMLElement>('.command-output');
  const actions = el.querySelector<HTMLElement>('.tool-actions');
  const has = entry.commandOutput !== undefined;
  if (actions) {
    actions.hidden = !has;
  }
  if (!live) {
    return;
  }
  const ended = entry.status === 'completed' || entry.status === 'failed';
  live.hidden = !has || (ended && entry.output !== undefined);
  if (!live.hidden) {
    renderOutput(live, entry.commandOutput ?? '');
  }
}

/** What an answered permission card says, on its one line. */
const ANSWERED: Record<string, string> = {
  allow_once: 'Allowed once',
  allow_always: 'Always allowed',
  reject_once: 'Rejected',
  reject_always: 'Always rejected',
};

let permissionIds = 0;

/**
 * A permission card. Open, it is an alert dialog (named by its question, described by the
 * tool's input) that takes focus when it appears — the card itself, not a button, so a key
 * typed for the prompt box cannot approve anything. Answered, it folds to one line
 * ("Allowed once: python_eval") with the input still one click away.
 */
function updatePermission(el: HTMLElement, entry: PermissionEntry): void {
  const wasOpen = el.getAttribute('role') === 'alertdialog';
  const hadFocus = el.contains(document.activeElement) || document.activeElement === document.body;
  el.replaceChildren();
  el.classList.toggle('answered', entry.answer !== undefined);
  const input = permissionInput(entry);
  if (entry.answer) {
    showAnswered(el, entry, entry.answer, input);
    if (wasOpen && hadFocus) {
      promptBox.focus(); // the answered card holds nothing more to do
    }
    return;
  }
  showQuestion(el, entry, input);
}

/** What is asked about: the server's content (the code, the diff), else the raw input. */
function permissionInput(entry: PermissionEntry): HTMLElement | undefined {
  const openDiff = entry.answer
    ? undefined
    : (diff: { file: string }) => post({ type: 'openDiff', toolCallId: entry.toolCallId, file: diff.file });
  if (entry.content.length) {
    return h('div', { class: 'permission-content' }, ...contentElements(entry.content, 'permission-input', openDiff));
  }
  return entry.input ? h('pre', { class: 'permission-input' }, entry.input) : undefined;
}

/** An answered question: one line, what was answered, the input one click away. */
function showAnswered(el: HTMLElement, entry: PermissionEntry, answer: NonNullable<PermissionEntry['answer']>, input: HTMLElement | undefined): void {
  for (const name of ['role', 'aria-labelledby', 'aria-describedby', 'aria-live', 'tabindex']) {
    el.removeAttribute(name);
  }
  const said = (answer.kind && ANSWERED[answer.kind]) || answer.label;
  const line = h('summary', { class: 'permission-answer' }, ...withCodeSpans(said), ': ', ...withCodeSpans(entry.title));
  el.append(input ? h('details', { class: 'permission-record' }, line, input) : line);
  if (answer.note) {
    el.append(h('div', { class: 'permission-note-said' }, 'Your note: ', answer.note));
  }
}

/** An open question: an alert dialog with what it asks about and a button per option. */
function showQuestion(el: HTMLElement, entry: PermissionEntry, input: HTMLElement | undefined): void {
  const id = `permission-${++permissionIds}`;
  el.setAttribute('role', 'alertdialog');
  el.setAttribute('aria-labelledby', `${id}-question`);
  el.setAttribute('tabindex', '-1');
  el.setAttribute('aria-live', 'off'); // announced as a dialog, not again by the transcript's log
  const kind = entry.toolKind && entry.toolKind !== 'other' ? ` (${entry.toolKind})` : '';
  // The title is the server's words ("Run Python", "Read app.py:10-40") or a tool's name.
  el.append(h('div', { class: 'permission-title', id: `${id}-question` }, 'Parley asks permission: ', h('strong', {}, ...withCodeSpans(entry.title)), kind));
  if (entry.locations.length) {
    el.append(h('div', { class: 'permission-locations' }, ...locationLinks(entry.locations)));
  }
  if (input) {
    input.id = `${id}-input`;
    el.setAttribute('aria-describedby', input.id);
    el.append(input);
  }
  el.append(permissionButtons(el, entry));
}

/** A button per option; one click answers and disables them all, the focus kept in the card. */
function permissionButtons(el: HTMLElement, entry: PermissionEntry): HTMLElement {
  const buttons = h('div', { class: 'permission-buttons', role: 'group', 'aria-label': 'Your answer' });
  for (const option of entry.options) {
    const primary = option.kind === 'allow_once';
    const b = h(
      'button',
      { class: primary ? 'primary' : 'secondary', 'data-option-id': option.optionId, 'data-kind': option.kind },
      ...withCodeSpans(option.name),
    );
    b.addEventListener('click', () => answer(el, buttons, { type: 'permission', requestId: entry.requestId, optionId: option.optionId }));
    buttons.append(b);
  }
  const reject = entry.options.find((o) => o.kind === 'reject_once');
  if (reject) {
    const withNote = h('button', { class: 'secondary', 'data-action': 'reject-with-note' }, 'Reject with note\u2026');
    withNote.addEventListener('click', () => {
      withNote.remove();
      buttons.after(noteForm(el, buttons, entry.requestId, reject.optionId));
    });
    buttons.append(withNote);
  }
  return buttons;
}

/** Answers the question: its buttons disabled, the focus kept in the card. */
function answer(el: HTMLElement, buttons: HTMLElement, message: Extract<ViewToHost, { type: 'permission' }>): void {
  el.focus();
  for (const other of el.querySelectorAll<HTMLButtonElement | HTMLTextAreaElement>('button, textarea')) {
    other.disabled = true;
  }
  buttons.setAttribute('aria-disabled', 'true');
  post(message);
}

/** "Reject with note…": the user's words for the model ("use pathlib instead"), sent with the rejection (Enter; Shift+Enter: a new line). */
function noteForm(el: HTMLElement, buttons: HTMLElement, requestId: string, optionId: string): HTMLElement {
  const text = h('textarea', { class: 'permission-note', rows: '2', 'aria-label': 'Your note for the model', placeholder: 'Tell the model why, or what to do instead' });
  const send = h('button', { class: 'secondary', 'data-action': 'send-note' }, 'Reject with this note');
  const submit = () => answer(el, buttons, { type: 'permission', requestId, optionId, note: text.value });
  send.addEventListener('click', submit);
  text.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      submit();
    }
  });
  queueMicrotask(() => text.focus());
  return h('div', { class: 'permission-note-form' }, text, send);
}

/** A new question takes the focus; when the page has none (the user is in the editor), a
 *  live region says it instead, as focus would have. */
export function askForAttention(el: HTMLElement, entry: PermissionEntry): void {
  el.focus();
  if (!document.hasFocus()) {
    const first = entry.content.find((c) => c.kind === 'text')?.text ?? entry.input;
    const code = first ? ` — ${first.split('\n')[0]}` : '';
    announcer.textContent = `Parley asks permission: ${entry.title}${code}`;
  }
}

function updateNotice(el: HTMLElement, entry: NoticeEntry): void {
  el.replaceChildren();
  el.className = `entry entry-notice notice-${entry.level}`;
  el.append(h('div', { class: 'notice-text' }, entry.text));
  for (const action of [...(entry.action ? [entry.action] : []), ...(entry.choices ?? [])]) {
    const b = h('button', { class: 'secondary' }, action.label);
    b.addEventListener('click', () => post(action.message));
    el.append(b);
  }
}

/**
 * The end of a turn that edited files: which, and "Undo turn"; once undone, what the restore
 * did (or that an earlier turn's undo took this one's edits back too).
 */
function updateTurn(el: HTMLElement, entry: TurnEntry): void {
  el.replaceChildren();
  el.classList.toggle('undone', entry.undo === 'undone');
  const files = entry.files.join(', ');
  if (entry.undo === 'undone') {
    const what = entry.restored
      ? entry.restored.length
        ? entry.restored.map((f) => `${f.path} ${f.action}`).join(', ')
        : 'no files changed'
      : `with an earlier turn (${files})`;
    el.append(h('span', { class: 'turn-files' }, `Undone: ${what}`));
    return;
  }
  el.append(h('span', { class: 'turn-files', title: files }, `Edited ${files}`));
  const undoing = entry.undo === 'undoing';
  const button = h(
    'button',
    {
      class: 'secondary turn-undo',
      'data-turn': String(entry.turn),
      title: 'Put the files this turn (and any later one) edited back as they were before it; the conversation stays',
    },
    undoing ? 'Undoing…' : 'Undo turn',
  );
  button.disabled = undoing;
  button.addEventListener('click', () => {
    button.disabled = true;
    post({ type: 'undoTurn', turn: entry.turn });
  });
  el.append(button);
}

/** Who says a message: "You" or "Parley", shown above it and naming it for a screen reader. */
const SPEAKER: Partial<Record<Entry['kind'], string>> = { user: 'You', agent: 'Parley' };

export function labelSpeaker(el: HTMLElement, entry: Entry): void {
  const speaker = SPEAKER[entry.kind];
  if (speaker && el.dataset.speaker !== speaker) {
    el.dataset.speaker = speaker;
    el.setAttribute('role', 'article');
    el.setAttribute('aria-label', speaker);
  }
}
