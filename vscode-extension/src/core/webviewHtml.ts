/**
 * The chat view's HTML page. VS Code's webview security guidance: a strict content security
 * policy (no remote resources, scripts only with a per-load nonce), local resources only.
 * Does not import `vscode`: the Chromium test loads the same page.
 */

import type { AgentEntry, Entry, HostToView, ThoughtEntry, ToolEntry, ViewState } from '../common/view';
import { diffEntries } from './chatState';

export interface ChatPageResources {
  /** `webview.cspSource`: the origin local resources are served from. */
  cspSource: string;
  nonce: string;
  scriptUri: string;
  markdownItUri: string;
  /** highlight.js's browser build (code blocks). */
  highlightUri: string;
  /** The stylesheets of `CHAT_STYLESHEETS`, in its order. */
  styleUris: string[];
}

/**
 * The chat view's stylesheets (media/chat/), one concern each, in the order the page loads
 * them: later ones may override earlier ones, so the order is part of the cascade.
 */
export const CHAT_STYLESHEETS: readonly string[] = [
  'base.css',
  'toolbar.css',
  'transcript.css',
  'tools.css',
  'composer.css',
  'code.css',
  'plan-and-output.css',
];

export function chatPageHtml(r: ChatPageResources): string {
  const csp = [
    "default-src 'none'",
    `img-src ${r.cspSource} data:`,
    `style-src ${r.cspSource}`,
    `font-src ${r.cspSource}`,
    `script-src 'nonce-${r.nonce}'`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${escapeAttr(csp)}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
${r.styleUris.map((uri) => `<link rel="stylesheet" href="${escapeAttr(uri)}">`).join('\n')}
<title>Parley</title>
</head>
<body>
<div id="app">
  <header id="toolbar">
    <select id="model" title="Model for this session" aria-label="Model"></select>
    <select id="mode" title="Mode: what Parley may do without asking" aria-label="Mode" hidden></select>
    <button id="settings-button" class="icon" title="Settings: how tool calls are fetched, and the server's other options" aria-label="Settings" aria-controls="settings" aria-expanded="false">⚙</button>
  </header>
  <section id="settings" hidden aria-label="Settings">
    <label class="setting">Tool calls <select id="tool-policy" title="How the server gets tool calls from the model"></select></label>
    <span id="config-options"></span>
  </section>
  <section id="sessions" hidden aria-label="Sessions">
    <div class="sessions-head"><span>Sessions</span><input id="session-search" type="search" placeholder="Search" aria-label="Search sessions by title"><button id="sessions-close" class="icon" title="Close" aria-label="Close">×</button></div>
    <div id="session-none" class="muted" hidden>No session matches.</div>
    <ul id="session-list"></ul>
  </section>
  <div id="banner" hidden></div>
  <div id="announcer" class="visually-hidden" aria-live="assertive"></div>
  <div id="status" class="visually-hidden" role="status" aria-live="polite"></div>
  <section id="plan" aria-label="Plan" hidden></section>
  <main id="transcript" aria-label="Conversation">
    <div id="empty" class="empty">Ask Parley about your code. It can read your workspace, run Python in a live kernel, and look at your editor.</div>
  </main>
  <footer id="composer">
    <button id="jump-latest" class="secondary" hidden title="Scroll to the end of the conversation">Jump to latest ↓</button>
    <div id="context-chips"></div>
    <ul id="command-menu" role="listbox" aria-label="Commands" hidden></ul>
    <textarea id="prompt" rows="3" placeholder="Ask Parley… (Enter to send, Shift+Enter for a new line, / for commands)" aria-label="Prompt" aria-autocomplete="list" aria-controls="command-menu"></textarea>
    <div class="composer-row">
      <span id="usage" class="usage"></span>
      <span class="spacer"></span>
      <button id="stop-button" class="secondary" hidden title="Stop the turn (Escape)">Stop</button>
      <button id="send-button" title="Send (Enter)">Send</button>
    </div>
  </footer>
</div>
<script nonce="${r.nonce}" src="${escapeAttr(r.markdownItUri)}"></script>
<script nonce="${r.nonce}" src="${escapeAttr(r.highlightUri)}"></script>
<script nonce="${r.nonce}" type="module" src="${escapeAttr(r.scriptUri)}"></script>
</body>
</html>`;
}

function escapeAttr(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

export function makeNonce(): string {
  const chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  let out = '';
  for (let i = 0; i < 32; i++) {
    out += chars.charAt(Math.floor(Math.random() * chars.length));
  }
  return out;
}

/**
 * The messages that bring a webview from showing `prev` to showing `next`: deltas, so that
 * what a chunk costs to send is the chunk, not the message so far — text appended to a
 * streamed entry (`append`), its end (`finish`), and entries new or changed otherwise whole
 * (`entries`, with the ids of those gone).
 */
export function viewMessages(prev: ViewState, next: ViewState): HostToView[] {
  const out: HostToView[] = [];
  if (prev.entries !== next.entries) {
    const { upserts, removed } = diffEntries(prev.entries, next.entries);
    const before = new Map(prev.entries.map((e) => [e.id, e]));
    const whole: Entry[] = [];
    for (const entry of upserts) {
      const delta = entryDelta(before.get(entry.id), entry);
      if (delta) {
        out.push(delta);
      } else {
        whole.push(entry);
      }
    }
    if (whole.length || removed.length) {
      out.push({ type: 'entries', upserts: whole, removed });
    }
  }
  if (prev.meta !== next.meta) {
    out.push({ type: 'meta', meta: next.meta });
  }
  return out;
}

/**
 * `entry` as a change to `old` (the same entry as shown before), when it is one: text
 * appended while it streams, or its stream finished, and nothing else changed.
 */
function entryDelta(old: Entry | undefined, entry: Entry): HostToView | undefined {
  if (old?.kind === 'tool' && entry.kind === 'tool') {
    return outputDelta(old, entry);
  }
  if (!old || !isStreamed(old) || !isStreamed(entry) || !sameButTextAndStreaming(old, entry)) {
    return undefined;
  }
  return old.streaming ? streamDelta(old, entry) : undefined;
}

/** A streaming entry's text appended, or its stream finished (`old` was streaming). */
function streamDelta(old: AgentEntry | ThoughtEntry, entry: AgentEntry | ThoughtEntry): HostToView | undefined {
  if (entry.streaming && entry.text.length > old.text.length && entry.text.startsWith(old.text)) {
    return { type: 'append', id: entry.id, text: entry.text.slice(old.text.length) };
  }
  if (!entry.streaming && entry.text === old.text) {
    return { type: 'finish', id: entry.id };
  }
  return undefined;
}

/**
 * A running command's card whose output grew and nothing else changed: the output added
 * (`output`). When the output was cut at its start, the card goes whole.
 */
function outputDelta(old: ToolEntry, entry: ToolEntry): HostToView | undefined {
  const before = old.commandOutput ?? '';
  const after = entry.commandOutput;
  if (after === undefined || after.length <= before.length || (old.commandOutputCut ?? 0) !== (entry.commandOutputCut ?? 0)) {
    return undefined;
  }
  const keys = new Set([...Object.keys(old), ...Object.keys(entry)] as (keyof ToolEntry)[]);
  for (const key of keys) {
    if (key !== 'commandOutput' && key !== 'commandOutputCut' && old[key] !== entry[key]) {
      return undefined;
    }
  }
  return after.startsWith(before) ? { type: 'output', id: entry.id, text: after.slice(before.length) } : undefined;
}

function isStreamed(entry: Entry): entry is AgentEntry | ThoughtEntry {
  return entry.kind === 'agent' || entry.kind === 'thought';
}

/** Whether two versions of a streamed entry differ at most in their text and whether they stream. */
function sameButTextAndStreaming(a: AgentEntry | ThoughtEntry, b: AgentEntry | ThoughtEntry): boolean {
  if (a.kind !== b.kind || a.id !== b.id || a.messageId !== b.messageId) {
    return false;
  }
  if (a.kind === 'agent' && b.kind === 'agent') {
    return a.revised === b.revised && a.aliases.length === b.aliases.length && a.aliases.every((x, i) => x === b.aliases[i]);
  }
  return true;
}
