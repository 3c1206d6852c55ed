/**
 * The chat view's page script. It renders what the extension host sends (entries and meta,
 * see `common/view.d.ts`) and posts the user's actions back. It holds no conversation logic:
 * the host's reducer does that.
 */

import type {
  AgentEntry,
  CommandView,
  ConfigOptionView,
  ContextItem,
  Entry,
  HostToView,
  LocationView,
  NoticeEntry,
  PermissionEntry,
  SessionRow,
  ThoughtEntry,
  ToolContentView,
  ToolEntry,
  TurnEntry,
  UserEntry,
  ViewMeta,
  ViewToHost,
} from '../common/view';
import { handleCodeBlockButtons } from './codeBlocks.js';
import { onRenderFrame, renderMessage, renderPlainText } from './messageRenderer.js';
import { formatContext, formatCost, formatTime, formatTokens, summarizeToolResult } from '../common/display.js';
import { Announcer } from './announce.js';

interface VsCodeApi {
  postMessage(message: unknown): void;
  getState(): unknown;
  setState(state: unknown): void;
}

declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();

function post(message: ViewToHost): void {
  vscode.postMessage(message);
}

function byId<T extends HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) {
    throw new Error(`missing #${id}`);
  }
  return el as T;
}

const transcript = byId<HTMLElement>('transcript');
const empty = byId<HTMLElement>('empty');
const promptBox = byId<HTMLTextAreaElement>('prompt');
const sendButton = byId<HTMLButtonElement>('send-button');
const stopButton = byId<HTMLButtonElement>('stop-button');
const modelSelect = byId<HTMLSelectElement>('model');
const toolPolicySelect = byId<HTMLSelectElement>('tool-policy');
const configOptionsEl = byId<HTMLElement>('config-options');
const usageEl = byId<HTMLElement>('usage');
const banner = byId<HTMLElement>('banner');
const chips = byId<HTMLElement>('context-chips');
const sessionsPanel = byId<HTMLElement>('sessions');
const sessionList = byId<HTMLElement>('session-list');
const announcer = byId<HTMLElement>('announcer');
/** Says what is new (a polite status region): the transcript itself is not live. */
const status = new Announcer(byId<HTMLElement>('status'));

let meta: ViewMeta | undefined;
/** Each shown entry's element, by entry id. */
const rendered = new Map<string, HTMLElement>();
/** Each shown entry as last sent or changed by a delta, by entry id. */
const shownEntries = new Map<string, Entry>();

// ---- helpers ----

function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  ...children: (Node | string)[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') {
      el.className = v;
    } else {
      el.setAttribute(k, v);
    }
  }
  for (const c of children) {
    el.append(c);
  }
  return el;
}

function isNearBottom(): boolean {
  return transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 60;
}

// ---- entries ----

function createEntry(entry: Entry): HTMLElement {
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
      // Folded, a finished call shows its result's first lines (docs/display.md's summary).
      el.append(details, h('div', { class: 'tool-summary' }), h('div', { class: 'tool-locations' }));
      break;
    }
    default:
      break;
  }
  updateEntry(el, entry);
  return el;
}

function updateEntry(el: HTMLElement, entry: Entry): void {
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

function chip(c: ContextItem, onRemove?: () => void): HTMLElement {
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
  superseded: 'superseded',
};

const STATUS_ICON: Record<string, string> = {
  pending: '○',
  in_progress: '◔',
  completed: '✓',
  failed: '✗',
  superseded: '–',
};

/**
 * A tool call's content: text (the code) as code, an edit as a diff block — a header with
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
      return h('pre', { class: textClass }, c.text);
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

function updateTool(el: HTMLElement, entry: ToolEntry): void {
  // A superseded call is not an error: muted, with its own icon and badge.
  const status = entry.superseded ? 'superseded' : entry.status;
  el.className = `entry entry-tool status-${status}${entry.superseded ? ' superseded' : ''}`;
  const set = (sel: string, text: string) => {
    const t = el.querySelector<HTMLElement>(sel);
    if (t) {
      t.textContent = text;
    }
  };
  set('.tool-status-icon', STATUS_ICON[status] ?? '•');
  set('.tool-title', entry.title);
  set('.tool-kind', entry.toolKind);
  // An edit's lines added and removed, on its folded line.
  const diffs = entry.content.filter((c) => c.kind === 'diff');
  const stat = el.querySelector<HTMLElement>('.tool-stat');
  if (stat) {
    stat.hidden = diffs.length === 0;
    stat.replaceChildren(
      h('span', { class: 'diff-stat-add' }, `+${diffs.reduce((n, d) => n + d.added, 0)}`),
      ' ',
      h('span', { class: 'diff-stat-del' }, `\u2212${diffs.reduce((n, d) => n + d.removed, 0)}`),
    );
  }
  set('.tool-badge', STATUS_LABEL[status] ?? status);
  const content = el.querySelector<HTMLElement>('.tool-content');
  if (content) {
    content.hidden = entry.content.length === 0;
    content.replaceChildren(...contentElements(entry.content, 'tool-code'));
  }
  const locations = el.querySelector<HTMLElement>('.tool-locations');
  if (locations) {
    locations.hidden = entry.locations.length === 0;
    locations.replaceChildren(...locationLinks(entry.locations));
  }
  const input = el.querySelector<HTMLElement>('.tool-input');
  const output = el.querySelector<HTMLElement>('.tool-output');
  if (input) {
    // The content shows what the call does; the raw input only when there is none.
    input.hidden = entry.input === undefined || entry.content.length > 0;
    set('.tool-input pre', entry.input ?? '');
  }
  if (output) {
    output.hidden = entry.output === undefined;
    set('.tool-output pre', entry.output ?? '');
  }
  const summary = el.querySelector<HTMLElement>('.tool-summary');
  if (summary) {
    const done = (entry.status === 'completed' || entry.status === 'failed') && !entry.superseded && entry.output !== undefined;
    summary.hidden = !done;
    summary.textContent = done ? summarizeToolResult(entry.output ?? '') : '';
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
  const kind = entry.toolKind && entry.toolKind !== 'other' ? ` (${entry.toolKind})` : '';
  // What is asked about: the server's content (the code, the diff), else the raw input.
  const openDiff = entry.answer
    ? undefined
    : (diff: { file: string }) => post({ type: 'openDiff', toolCallId: entry.toolCallId, file: diff.file });
  const input = entry.content.length
    ? h('div', { class: 'permission-content' }, ...contentElements(entry.content, 'permission-input', openDiff))
    : entry.input
      ? h('pre', { class: 'permission-input' }, entry.input)
      : undefined;
  const locations = entry.locations.length ? h('div', { class: 'permission-locations' }, ...locationLinks(entry.locations)) : undefined;
  if (entry.answer) {
    for (const name of ['role', 'aria-labelledby', 'aria-describedby', 'aria-live', 'tabindex']) {
      el.removeAttribute(name);
    }
    const said = (entry.answer.kind && ANSWERED[entry.answer.kind]) || entry.answer.label;
    const line = h('summary', { class: 'permission-answer' }, `${said}: ${entry.title}`);
    el.append(input ? h('details', { class: 'permission-record' }, line, input) : line);
    if (wasOpen && hadFocus) {
      promptBox.focus(); // the answered card holds nothing more to do
    }
    return;
  }
  const id = `permission-${++permissionIds}`;
  el.setAttribute('role', 'alertdialog');
  el.setAttribute('aria-labelledby', `${id}-question`);
  el.setAttribute('tabindex', '-1');
  el.setAttribute('aria-live', 'off'); // announced as a dialog, not again by the transcript's log
  // The title is the server's words ("Run Python", "Read app.py:10-40") or a tool's name.
  el.append(h('div', { class: 'permission-title', id: `${id}-question` }, 'Parley asks permission: ', h('strong', {}, entry.title), kind));
  if (locations) {
    el.append(locations);
  }
  if (input) {
    input.id = `${id}-input`;
    el.setAttribute('aria-describedby', input.id);
    el.append(input);
  }
  const buttons = h('div', { class: 'permission-buttons', role: 'group', 'aria-label': 'Your answer' });
  for (const option of entry.options) {
    const primary = option.kind === 'allow_once';
    const b = h(
      'button',
      { class: primary ? 'primary' : 'secondary', 'data-option-id': option.optionId, 'data-kind': option.kind },
      option.name,
    );
    b.addEventListener('click', () => {
      el.focus(); // keep the focus in the card while its buttons are disabled
      for (const other of buttons.querySelectorAll('button')) {
        other.disabled = true;
      }
      post({ type: 'permission', requestId: entry.requestId, optionId: option.optionId });
    });
    buttons.append(b);
  }
  el.append(buttons);
}

/** A new question takes the focus; when the page has none (the user is in the editor), a
 *  live region says it instead, as focus would have. */
function askForAttention(el: HTMLElement, entry: PermissionEntry): void {
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
  if (entry.action) {
    const action = entry.action;
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

function labelSpeaker(el: HTMLElement, entry: Entry): void {
  const speaker = SPEAKER[entry.kind];
  if (speaker && el.dataset.speaker !== speaker) {
    el.dataset.speaker = speaker;
    el.setAttribute('role', 'article');
    el.setAttribute('aria-label', speaker);
  }
}

/** The text of the answer to the last prompt (its agent messages), as shown. */
function lastAnswerText(): string {
  const entries = [...transcript.querySelectorAll<HTMLElement>('.entry')];
  let start = entries.length;
  while (start > 0 && !entries[start - 1].classList.contains('entry-user')) {
    start--;
  }
  return entries
    .slice(start)
    .filter((el) => el.classList.contains('entry-agent'))
    .map((el) => el.innerText.trim())
    .join('\n');
}

function upsert(entries: Entry[], removed: string[]): void {
  const stick = isNearBottom();
  for (const id of removed) {
    rendered.get(id)?.remove();
    rendered.delete(id);
    shownEntries.delete(id);
  }
  for (const entry of entries) {
    shownEntries.set(entry.id, entry);
    const shown = rendered.get(entry.id);
    if (shown) {
      updateEntry(shown, entry);
      labelSpeaker(shown, entry);
    } else {
      const el = createEntry(entry);
      labelSpeaker(el, entry);
      rendered.set(entry.id, el);
      transcript.append(el);
      if (entry.kind === 'permission' && !entry.answer) {
        askForAttention(el, entry);
      } else if (entry.kind === 'notice' && !resetting) {
        status.say(entry.text);
        noticesSaid += 1;
      }
    }
  }
  empty.hidden = rendered.size > 0;
  if (stick) {
    transcript.scrollTop = transcript.scrollHeight;
  }
}

/**
 * A delta to a streamed entry shown: text appended, or its stream finished. The entry is
 * rendered from the text the page keeps (block by block: only what changed is drawn).
 */
function applyDelta(id: string, change: (entry: AgentEntry | ThoughtEntry) => AgentEntry | ThoughtEntry): void {
  const entry = shownEntries.get(id);
  const el = rendered.get(id);
  if (!entry || !el || (entry.kind !== 'agent' && entry.kind !== 'thought')) {
    return; // not shown (a reset came between): the next whole entry shows it
  }
  const stick = isNearBottom();
  const next = change(entry);
  shownEntries.set(id, next);
  updateEntry(el, next);
  if (stick) {
    transcript.scrollTop = transcript.scrollHeight;
  }
}

/** Notices said since the running turn began (one says why a turn ended). */
let noticesSaid = 0;

/** A reset shows what was there before: nothing of it is announced as new. */
let resetting = false;

function reset(entries: Entry[]): void {
  for (const el of rendered.values()) {
    el.remove();
  }
  rendered.clear();
  shownEntries.clear();
  resetting = true;
  try {
    upsert(entries, []);
  } finally {
    resetting = false;
  }
  transcript.scrollTop = transcript.scrollHeight;
}

// ---- meta ----

function renderMeta(m: ViewMeta): void {
  const wasBusy = meta?.busy ?? false;
  meta = m;
  if (m.busy && !wasBusy) {
    noticesSaid = 0;
    status.say('Parley is answering…');
  } else if (!m.busy && wasBusy) {
    // Read once the answer's last chunk is on the page (text is drawn at most once a frame).
    requestAnimationFrame(() =>
      setTimeout(() => {
        const answer = lastAnswerText();
        if (answer) {
          status.say(`Parley answered: ${answer}`);
        } else if (noticesSaid === 0) {
          status.say('Parley finished.'); // unless a notice ("Stopped.", an error) said why
        }
      }, 0),
    );
  }
  sendButton.hidden = m.busy;
  stopButton.hidden = !m.busy;
  sendButton.disabled = m.loading;
  document.body.classList.toggle('busy', m.busy);

  renderPickers(m);

  // Banner: server state, loading.
  let text = '';
  if (m.serverState === 'starting') {
    text = 'Starting Parley…';
  } else if (m.loading) {
    text = 'Loading session…';
  } else if (m.serverState === 'exited') {
    text = 'The Parley server is not running. Sending a prompt restarts it.';
  }
  banner.textContent = text;
  banner.hidden = text === '';

  // Usage line.
  const parts: string[] = [];
  if (m.title) {
    parts.push(m.title);
  }
  parts.push(`${formatTokens(m.usage.sessionTokens)} tokens`);
  if (m.usage.cost) {
    parts.push(formatCost(m.usage.cost));
  }
  if (m.usage.contextUsed !== undefined) {
    parts.push(formatContext(m.usage.contextUsed, m.usage.contextSize));
  }
  usageEl.textContent = parts.join(' · ');
  const cached = m.usage.cachedReadTokens ? ` (${m.usage.cachedReadTokens} from the cache)` : '';
  usageEl.title = `Input ${m.usage.inputTokens}${cached} · output ${m.usage.outputTokens} tokens this session`;

  // The commands may have changed under an open menu.
  if (document.activeElement === promptBox) {
    updateCommandMenu();
  }

  // Context chips waiting for the next prompt.
  chips.replaceChildren(...m.context.map((c, i) => chip(c, () => post({ type: 'removeContext', index: i }))));
  chips.hidden = m.context.length === 0;
}

const TOOL_POLICIES: ConfigOptionView['options'] = [
  { value: 'hybrid', name: 'hybrid' },
  { value: 'stream', name: 'stream' },
  { value: 'sync', name: 'sync' },
];

/** `<option>`s for a select's values, under `<optgroup>`s where they are grouped. */
function optionElements(
  values: { value: string; name: string; description?: string; group?: string; disabled?: boolean; title?: string }[],
): HTMLElement[] {
  const out: HTMLElement[] = [];
  let group: HTMLElement | undefined;
  let groupName: string | undefined;
  for (const v of values) {
    const opt = h('option', { value: v.value }, v.name);
    if (v.disabled) {
      opt.setAttribute('disabled', '');
    }
    if (v.title ?? v.description) {
      opt.title = v.title ?? v.description ?? '';
    }
    if (v.group === undefined) {
      group = undefined;
      groupName = undefined;
      out.push(opt);
    } else {
      if (!group || groupName !== v.group) {
        group = h('optgroup', { label: v.group });
        groupName = v.group;
        out.push(group);
      }
      group.append(opt);
    }
  }
  return out;
}

function setSelect(select: HTMLSelectElement, values: Parameters<typeof optionElements>[0], current?: string): void {
  if (current !== undefined && !values.some((v) => v.value === current)) {
    values = [{ value: current, name: current }, ...values];
  }
  select.replaceChildren(...optionElements(values));
  if (current !== undefined) {
    select.value = current;
  }
  select.disabled = values.length === 0;
}

/**
 * The model picker, the tool-policy picker and any other select the server offers: from the
 * session's config options when there are some, else from the model list and the three policies.
 */
function renderPickers(m: ViewMeta): void {
  const modelOption = m.configOptions.find((o) => o.category === 'model');
  const known = new Map(m.models.map((x) => [x.id, x]));
  const unavailable = (id: string) => {
    const info = known.get(id);
    return info && !info.available ? { disabled: true, title: info.reason } : {};
  };
  const modelValues = modelOption
    ? modelOption.options.map((o) => ({ ...o, ...unavailable(o.value) }))
    : m.models.map((x) => ({ value: x.id, name: x.available ? x.id : `${x.id} (unavailable)`, ...unavailable(x.id) }));
  setSelect(modelSelect, modelValues, modelOption?.currentValue ?? m.model);

  const policyOption = m.configOptions.find((o) => o.id === 'tool_policy');
  setSelect(toolPolicySelect, policyOption?.options ?? TOOL_POLICIES, policyOption?.currentValue ?? m.toolPolicy ?? 'hybrid');
  toolPolicySelect.title = policyOption?.description ?? 'How the server gets tool calls from the model';

  const others = m.configOptions.filter((o) => o !== modelOption && o !== policyOption);
  const shown = new Map([...configOptionsEl.querySelectorAll<HTMLSelectElement>('select')].map((el) => [el.dataset.configId, el]));
  configOptionsEl.replaceChildren(
    ...others.map((o) => {
      const select = shown.get(o.id) ?? h('select', { 'data-config-id': o.id, 'aria-label': o.name });
      select.title = o.description ?? o.name;
      setSelect(select, o.options, o.currentValue);
      select.onchange = () => post({ type: 'setConfigOption', configId: o.id, value: select.value });
      return select;
    }),
  );
}

/**
 * The history list: each row opens its session, and offers Export (Markdown, saved by the
 * host) and — when the server can delete sessions — Delete, which asks first in the row.
 */
function renderSessions(sessions: SessionRow[], canDelete: boolean): void {
  sessionList.replaceChildren();
  if (sessions.length === 0) {
    sessionList.append(h('li', { class: 'muted' }, 'No sessions yet in this workspace.'));
  }
  for (const s of sessions) {
    sessionList.append(sessionRow(s, canDelete));
  }
  setSessionsOpen(true);
}

function setSessionsOpen(open: boolean): void {
  sessionsPanel.hidden = !open;
  byId('sessions-button').setAttribute('aria-expanded', String(open));
}

function sessionRow(s: SessionRow, canDelete: boolean): HTMLElement {
  const when = s.updatedAt ? formatTime(s.updatedAt) : '';
  const li = h('li', { class: s.current ? 'current' : '', 'data-session-id': s.sessionId });
  const openButton = h(
    'button',
    { class: 'session-open', title: `Open “${s.title}”${s.current ? ' (the session shown)' : ''}` },
    h('span', { class: 'session-title' }, s.title),
    h('span', { class: 'session-time' }, when),
  );
  const open = () => {
    setSessionsOpen(false);
    post({ type: 'loadSession', sessionId: s.sessionId });
  };
  openButton.addEventListener('click', (e) => {
    e.stopPropagation();
    open();
  });
  li.addEventListener('click', open);
  const exportButton = h(
    'button',
    { class: 'secondary session-export', title: `Save “${s.title}” as Markdown`, 'aria-label': `Export “${s.title}” as Markdown` },
    'Export',
  );
  exportButton.addEventListener('click', (e) => {
    e.stopPropagation();
    post({ type: 'exportSession', sessionId: s.sessionId });
  });
  const actions = h('span', { class: 'session-actions' }, exportButton);
  if (canDelete) {
    const deleteButton = h(
      'button',
      { class: 'secondary session-delete', title: `Delete “${s.title}” from the store`, 'aria-label': `Delete “${s.title}”` },
      'Delete',
    );
    deleteButton.addEventListener('click', (e) => {
      e.stopPropagation();
      confirmDelete(li, s, actions);
    });
    actions.append(deleteButton);
  }
  li.append(openButton, actions);
  return li;
}

/** Delete asks in the row: "Delete “title”?" with Delete and Keep; Keep (or Escape) takes it back. */
function confirmDelete(li: HTMLElement, s: SessionRow, actions: HTMLElement): void {
  const question = h('span', { class: 'session-confirm-text', id: `confirm-${s.sessionId}` }, `Delete “${s.title}”? It cannot be undone.`);
  const yes = h('button', { class: 'danger session-confirm-delete', 'aria-describedby': question.id }, 'Delete');
  const no = h('button', { class: 'secondary session-confirm-keep' }, 'Keep');
  const box = h('span', { class: 'session-confirm', role: 'group', 'aria-label': 'Confirm delete' }, question, yes, no);
  const back = () => {
    box.replaceWith(actions);
    actions.querySelector<HTMLButtonElement>('.session-delete')?.focus();
  };
  yes.addEventListener('click', (e) => {
    e.stopPropagation();
    yes.disabled = true;
    no.disabled = true;
    li.classList.add('deleting');
    post({ type: 'deleteSession', sessionId: s.sessionId });
  });
  no.addEventListener('click', (e) => {
    e.stopPropagation();
    back();
  });
  box.addEventListener('click', (e) => e.stopPropagation());
  box.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      e.preventDefault();
      back();
    }
  });
  actions.replaceWith(box);
  no.focus(); // the safe answer first: Enter keeps the session
}

// ---- input ----

function send(): void {
  const text = promptBox.value;
  if (!text.trim() && !(meta?.context.length)) {
    return;
  }
  if (meta?.busy || meta?.loading) {
    return;
  }
  post({ type: 'send', text });
  promptBox.value = '';
  vscode.setState({ draft: '' });
  updateCommandMenu();
}

// ---- slash commands: typing `/` offers the server's commands ----

const commandMenu = byId<HTMLUListElement>('command-menu');
/** The commands the menu shows now, and the one selected. */
let menuCommands: CommandView[] = [];
let menuIndex = 0;

/** The commands matching what is typed, while the prompt is a `/` and a name being typed. */
function matchingCommands(): CommandView[] {
  const typed = /^\/(\S*)$/.exec(promptBox.value);
  if (!typed || !meta) {
    return [];
  }
  const prefix = typed[1].toLowerCase();
  return meta.commands.filter((c) => c.name.toLowerCase().startsWith(prefix));
}

function updateCommandMenu(): void {
  const matches = matchingCommands();
  const same = matches.length === menuCommands.length && matches.every((c, i) => c === menuCommands[i]);
  if (!same) {
    menuIndex = 0;
  }
  menuCommands = matches;
  commandMenu.replaceChildren(
    ...matches.map((c, i) => {
      const li = h(
        'li',
        { id: `command-${i}`, role: 'option', 'aria-selected': String(i === menuIndex), 'data-command': c.name },
        h('span', { class: 'command-name' }, `/${c.name}`),
        ...(c.hint ? [h('span', { class: 'command-hint' }, c.hint)] : []),
        h('span', { class: 'command-description' }, c.description),
      );
      // mousedown, not click: the prompt box keeps the focus.
      li.addEventListener('mousedown', (e) => {
        e.preventDefault();
        completeCommand(c);
      });
      return li;
    }),
  );
  commandMenu.hidden = matches.length === 0;
  if (matches.length) {
    promptBox.setAttribute('aria-activedescendant', `command-${menuIndex}`);
    commandMenu.children[menuIndex]?.scrollIntoView({ block: 'nearest' });
  } else {
    promptBox.removeAttribute('aria-activedescendant');
  }
}

function completeCommand(c: CommandView): void {
  promptBox.value = `/${c.name} `;
  promptBox.setSelectionRange(promptBox.value.length, promptBox.value.length);
  vscode.setState({ draft: promptBox.value });
  updateCommandMenu();
}

/** Keys while the menu is open: arrows choose, Tab or Enter completes, Escape closes. True if handled. */
function commandMenuKey(e: KeyboardEvent): boolean {
  if (commandMenu.hidden || menuCommands.length === 0) {
    return false;
  }
  const chosen = menuCommands[menuIndex];
  switch (e.key) {
    case 'ArrowDown':
    case 'ArrowUp':
      menuIndex = (menuIndex + (e.key === 'ArrowDown' ? 1 : menuCommands.length - 1)) % menuCommands.length;
      updateCommandMenu();
      return true;
    case 'Tab':
      completeCommand(chosen);
      return true;
    case 'Enter':
      if (e.shiftKey || e.isComposing || promptBox.value === `/${chosen.name}`) {
        return false; // a whole command name: Enter sends it
      }
      completeCommand(chosen);
      return true;
    case 'Escape':
      commandMenu.hidden = true;
      promptBox.removeAttribute('aria-activedescendant');
      return true;
    default:
      return false;
  }
}

promptBox.addEventListener('keydown', (e) => {
  if (commandMenuKey(e)) {
    e.preventDefault();
    return;
  }
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  } else if (e.key === 'Escape' && meta?.busy) {
    e.preventDefault();
    post({ type: 'cancel' });
  }
});
promptBox.addEventListener('input', () => {
  vscode.setState({ draft: promptBox.value });
  updateCommandMenu();
});
promptBox.addEventListener('blur', () => {
  commandMenu.hidden = true;
});
sendButton.addEventListener('click', send);
stopButton.addEventListener('click', () => post({ type: 'cancel' }));
modelSelect.addEventListener('change', () => post({ type: 'selectModel', model: modelSelect.value }));
toolPolicySelect.addEventListener('change', () =>
  post({ type: 'setConfigOption', configId: 'tool_policy', value: toolPolicySelect.value }),
);
byId('new-button').addEventListener('click', () => post({ type: 'newSession' }));
byId('sessions-button').addEventListener('click', () => {
  if (sessionsPanel.hidden) {
    post({ type: 'listSessions' });
  } else {
    setSessionsOpen(false);
  }
});
byId('sessions-close').addEventListener('click', () => {
  setSessionsOpen(false);
});

window.addEventListener('message', (event: MessageEvent<HostToView>) => {
  const msg = event.data;
  switch (msg.type) {
    case 'reset':
      renderMeta(msg.state.meta);
      reset(msg.state.entries);
      break;
    case 'entries':
      upsert(msg.upserts, msg.removed);
      break;
    case 'append':
      applyDelta(msg.id, (e) => ({ ...e, text: e.text + msg.text }));
      break;
    case 'finish':
      applyDelta(msg.id, (e) => ({ ...e, streaming: false }));
      break;
    case 'meta':
      renderMeta(msg.meta);
      break;
    case 'sessions':
      renderSessions(msg.sessions, msg.canDelete ?? false);
      break;
    case 'focus':
      promptBox.focus();
      break;
  }
});

handleCodeBlockButtons(transcript, (text) => post({ type: 'insertCode', text }));
// A message renders at the next frame: keep the transcript at the bottom if it was there.
onRenderFrame((render) => {
  const stick = isNearBottom();
  render();
  if (stick) {
    transcript.scrollTop = transcript.scrollHeight;
  }
});

const saved = vscode.getState() as { draft?: string } | undefined;
if (saved?.draft) {
  promptBox.value = saved.draft;
}
post({ type: 'ready' });
