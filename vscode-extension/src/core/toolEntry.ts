/**
 * A tool call's entry in the view state, from its `tool_call` and `tool_call_update`s: each
 * update changes only what it carries (title, kind, status, input, locations, content,
 * output). Pure; `chatState.ts` places the entry.
 */

import { escapeControls, toolInputParts } from '../common/display';
import type { ToolEntry } from '../common/view';
import type { ToolCall, ToolCallUpdate } from '../client/protocol';
import { appendedOutput, contentViews, locationViews } from './toolView';

type ToolUpdate = ToolCall | ToolCallUpdate;

/** A call's entry before its first update is applied. */
export function newToolEntry(toolCallId: string): ToolEntry {
  return {
    kind: 'tool',
    id: `tool-${toolCallId}`,
    toolCallId,
    title: toolCallId,
    toolKind: 'other',
    status: 'pending',
    content: [],
    locations: [],
    superseded: false,
  };
}

/** `entry` with the update `u` applied; paths shown relative to the workspace root `cwd`. */
export function updatedToolEntry(entry: ToolEntry, u: ToolUpdate, cwd?: string): ToolEntry {
  const next: ToolEntry = { ...entry, ...changedFields(u, cwd) };
  // Content sent before the call ends says what it does (the code, the diff); content that
  // ends it is its result, shown as the output (a diff in it still shows as a diff).
  const ends = u.status === 'completed' || u.status === 'failed';
  const onlyOutputCopy = withCommandOutput(next, u, ends);
  const views = Array.isArray(u.content) && !onlyOutputCopy ? contentViews(u.content, cwd) : undefined;
  const outputText = views ? withContent(next, views, ends) : undefined;
  if (outputText) {
    next.output = outputText;
  } else if (u.rawOutput !== undefined && u.rawOutput !== null) {
    next.output = escapeControls(formatOutput(u.rawOutput));
  }
  // The server's content says why (the model did not make the call the stream announced).
  next.superseded ||= u._meta?.parley?.superseded === true;
  return next;
}

/** The fields an update sets as they come: title, kind, status, input, locations. */
function changedFields(u: ToolUpdate, cwd?: string): Partial<ToolEntry> {
  return {
    ...(typeof u.title === 'string' && u.title ? { title: escapeControls(u.title, true) } : {}),
    ...(typeof u.kind === 'string' && u.kind ? { toolKind: u.kind } : {}),
    ...(u.status ? { status: u.status } : {}),
    ...(u.rawInput !== undefined && u.rawInput !== null ? { input: formatInput(u.rawInput) } : {}),
    ...(Array.isArray(u.locations) ? { locations: locationViews(u.locations, cwd) } : {}),
  };
}

/**
 * The update's content (`views`) in `entry`: before the call ends, what it does; at its end,
 * its diffs and images kept and its text returned, the call's output.
 */
function withContent(entry: ToolEntry, views: ToolEntry['content'], ends: boolean): string | undefined {
  if (!ends) {
    // A terminal alone (another client's) leaves what the call does as it was.
    if (views.length > 0 || !entry.terminal) {
      entry.content = views;
    }
    return undefined;
  }
  // Its diffs and the images it displayed are kept, after what it does.
  const kept = views.filter((v) => v.kind === 'diff' || v.kind === 'image');
  if (kept.length) {
    entry.content = [...entry.content.filter((v) => v.kind === 'text'), ...kept];
  }
  return views.flatMap((v) => (v.kind === 'text' ? [v.text] : [])).join('\n');
}

/**
 * A running command's output (`_meta.parley.commandOutput.append`) added to `entry`, and a
 * terminal in its content noted. True when the update's content is only the generic
 * clients' copy of that output (the card shows the output itself), to be left out.
 */
function withCommandOutput(entry: ToolEntry, u: ToolUpdate, ends: boolean): boolean {
  if (Array.isArray(u.content) && u.content.some((c) => c?.type === 'terminal')) {
    entry.terminal = true;
  }
  const append = u._meta?.parley?.commandOutput?.append;
  if (typeof append !== 'string') {
    return false;
  }
  Object.assign(entry, appendedOutput(entry.commandOutput, entry.commandOutputCut, append));
  return !ends;
}

function formatOutput(raw: unknown): string {
  // A tool result `{content, isError?}` shows as its text.
  if (typeof raw === 'object' && raw !== null && !Array.isArray(raw) && 'content' in raw) {
    if (typeof raw.content === 'string' && Object.keys(raw).every((k) => k === 'content' || k === 'isError')) {
      return raw.content;
    }
  }
  return formatValue(raw) ?? '';
}

/**
 * A tool's input as shown (`docs/display.md`, `formatToolInput`): a code argument as the
 * code itself (the card shows it as code), anything else as two-space JSON whose multi-line
 * strings are written as their lines; its controls and bidi characters escaped
 * (`escapeControls`). The wire does not name the tool: its arguments do.
 */
export function formatInput(value: unknown): string | undefined {
  if (value === undefined || value === null) {
    return undefined;
  }
  if (typeof value === 'string') {
    return escapeControls(value);
  }
  const parts = toolInputParts(undefined, value);
  return escapeControls(parts.kind === 'code' ? parts.code : parts.text);
}

function formatValue(value: unknown): string | undefined {
  if (value === undefined || value === null) {
    return undefined;
  }
  if (typeof value === 'string') {
    return value;
  }
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return '(a value that cannot be shown)';
  }
}
