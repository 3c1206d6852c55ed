/**
 * The chat view's state and the reducer that turns `session/update` notifications (and the
 * host's own events: a prompt sent, a permission asked, a turn ended) into it.
 *
 * Pure: no I/O, no `vscode`, no state outside its arguments (entry ids are numbered from the
 * state). Immutable: an entry that did not change keeps its identity, so `diffEntries` can
 * tell the webview just what changed.
 */

import type {
  AgentEntry,
  CommandView,
  ConfigOptionView,
  ContextItem,
  Entry,
  NoticeEntry,
  PermissionEntry,
  PlanItemView,
  ThoughtEntry,
  ToolEntry,
  TurnEntry,
  UsageView,
  UserEntry,
  ViewMeta,
  ViewState,
} from '../common/view';
import {
  type AvailableCommandsUpdate,
  type ContentBlock,
  type RequestPermissionParams,
  type RestoredFile,
  type SessionConfigOption,
  type SessionConfigSelectOption,
  type SessionModeState,
  type SessionUpdate,
  type ToolCall,
  type ToolCallUpdate,
  type TurnStats,
  type UsageTotals,
  type UsageUpdate,
} from '../client/protocol';
import { escapeControls } from '../common/display';
import { modeChanged, modeFromModes, modeWithOptions, planView } from './modesAndPlan';
import { formatInput, newToolEntry, updatedToolEntry } from './toolEntry';
import { blockText, contentViews, locationViews, relativeTo } from './toolView';

export { formatInput } from './toolEntry';

/** The reducer's state: what the view shows, and the number the next entry's id takes. */
export interface ChatState extends ViewState {
  nextEntryId: number;
  /** The plan shown when the user sent the running turn's prompt (null: none), kept with a turn that edits files so that undoing it shows it again. */
  planAtPrompt?: PlanItemView[] | null;
  /** The plan shown before each replayed turn's prompt (null: none), by turn number: undoing a reopened session's turn shows it again. */
  replayedPlans?: Record<number, PlanItemView[] | null>;
  /** The replay is at an undo's command turn (`/undo`, as a restore is kept): its answer is shown as the live chat showed it, a notice. */
  replayingUndo?: boolean;
}

/** The command a restore (Undo turn) is kept as, replayed where it was done (docs/protocol.md). */
const UNDO_COMMAND = '/undo';

/** The levels a notice is shown at; another level the server sends is shown as `info`. */
const NOTICE_LEVELS: readonly NoticeEntry['level'][] = ['info', 'warning', 'error'];

export type ChatEvent =
  | { type: 'update'; update: SessionUpdate }
  | { type: 'userPrompt'; text: string; context: ContextItem[] }
  | { type: 'permissionAsked'; requestId: string; params: RequestPermissionParams }
  | { type: 'permissionAnswered'; requestId: string; optionId?: string; cancelled?: boolean; note?: string }
  /**
   * `stopReason`: a `StopReason`, or another value, shown as it is. `turn`: the turn's number
   * (from the session's totals), when known; `edited`: the files written through the editor
   * in it. A numbered turn that edited files (those, or by its edit tool calls) ends with a
   * turn entry that offers "Undo turn". Why it stopped is the server's to say: its notice
   * came before the result.
   */
  | { type: 'turnEnded'; stopReason: string; turn?: number; edited?: string[] }
  /**
   * The turn just ended was cut off (stopped) and may be sent again: its last notice (the
   * server's "Stopped.") offers Retry.
   */
  | { type: 'offerRetry' }
  /** Retry of a cut-off turn: the turn (its prompt and all after it) leaves the view before it is sent again. */
  | { type: 'dropLastTurn' }
  /** A slash command the server refused as a typo and did not keep (`_meta.parley.kept: false`): its prompt leaves the view, the server's notice stays. */
  | { type: 'dropRefusedCommand' }
  /** "Undo turn" for `turn`: asked (`undoing`), done (`undone`, with what the server did), or failed (`ready`). */
  | { type: 'turnUndo'; turn: number; state: TurnEntry['undo']; restored?: RestoredFile[] }
  | { type: 'notice'; level: NoticeEntry['level']; text: string; action?: NoticeEntry['action']; choices?: NoticeEntry['choices'] }
  | { type: 'clear' }
  | { type: 'setEntries'; entries: Entry[] }
  | { type: 'meta'; patch: Partial<ViewMeta> }
  /** The session's totals (and the turn's stats) from a prompt's or `session/load`'s result: shown as they are. */
  | { type: 'usageTotals'; totals: UsageTotals; turn?: Partial<TurnStats> }
  /** The session's configuration options (from `session/new`, `load`, `resume`, `set_config_option`). */
  | { type: 'configOptions'; options: SessionConfigOption[] }
  /** The session's modes (ACP's `modes` of `session/new`, `load`, `resume`); none: the server offers none. */
  | { type: 'modes'; modes: SessionModeState | null | undefined };

export function initialState(): ChatState {
  return {
    meta: {
      serverState: 'stopped',
      models: [],
      configOptions: [],
      commands: [],
      busy: false,
      loading: false,
      usage: { sessionTokens: 0, inputTokens: 0, outputTokens: 0 },
      context: [],
    },
    entries: [],
    nextEntryId: 1,
  };
}

/** The id a new entry of `kind` takes; `withNumberedEntry` uses the number up. */
function entryId(state: ChatState, kind: Entry['kind']): string {
  return `${kind}-${state.nextEntryId}`;
}

/** `state` with `entries` and then `entry` (whose id is `entryId(state, …)`) after them. */
function withNumberedEntry(state: ChatState, entries: Entry[], entry: Entry): ChatState {
  return { ...state, entries: [...entries, entry], nextEntryId: state.nextEntryId + 1 };
}

/** The reducer of each kind of event: `reduce` looks it up (one small function each). */
type EventReducers = { [K in ChatEvent['type']]: (state: ChatState, event: Extract<ChatEvent, { type: K }>) => ChatState };

const EVENT_REDUCERS: EventReducers = {
  update: (state, event) => applyUpdate(state, event.update),
  userPrompt: (state, event) => {
    const entry: UserEntry = { kind: 'user', id: entryId(state, 'user'), text: event.text, context: event.context };
    // A live prompt: a command's answer from now on is the answer shown, not a replayed undo's.
    return { ...withNumberedEntry(state, withoutRetry(finishStreaming(state.entries)), entry), planAtPrompt: state.meta.plan ?? null, replayingUndo: false };
  },
  permissionAsked: (state, event) => ({ ...state, entries: [...finishStreaming(state.entries), permissionEntry(state, event.requestId, event.params)] }),
  permissionAnswered: (state, event) => markRejected(
    mapEntry(state, `perm-${event.requestId}`, (e) => (e.kind === 'permission' && !e.answer ? answered(e, event.optionId, event.cancelled, event.note) : e)),
    event.requestId,
  ),
  turnEnded: (state, event) => endTurn(state, event.turn, event.edited ?? []),
  offerRetry: (state) => offerRetry(state),
  dropLastTurn: (state) => {
    const start = lastTurnStart(state.entries);
    return start === 0 && state.entries[0]?.kind !== 'user' ? state : { ...state, entries: state.entries.slice(0, start) };
  },
  dropRefusedCommand: (state) => {
    const start = lastTurnStart(state.entries);
    return state.entries[start]?.kind === 'user' ? { ...state, entries: state.entries.filter((_, i) => i !== start) } : state;
  },
  turnUndo: (state, event) => applyTurnUndo(state, event.turn, event.state, event.restored),
  notice: (state, event) =>
    appendNotice({ ...state, entries: finishStreaming(state.entries) }, event.level, event.text, event.action, event.choices),
  clear: (state) => ({ ...state, entries: [], planAtPrompt: undefined, replayedPlans: undefined, replayingUndo: undefined }),
  setEntries: (state, event) => ({ ...state, entries: event.entries }),
  meta: (state, event) => ({ ...state, meta: { ...state.meta, ...event.patch } }),
  configOptions: (state, event) => applyConfigOptions(state, event.options),
  modes: (state, event) => ({ ...state, meta: { ...state.meta, mode: modeWithOptions(modeFromModes(event.modes), state.meta.configOptions) } }),
  usageTotals: (state, event) => applyUsageTotals(state, event.totals, event.turn),
};

export function reduce(state: ChatState, event: ChatEvent): ChatState {
  const reducer = EVENT_REDUCERS[event.type] as (state: ChatState, event: ChatEvent) => ChatState;
  return reducer(state, event);
}

/** The entry of a permission question, as the view shows it (what it asks about escaped). */
function permissionEntry(state: ChatState, requestId: string, params: RequestPermissionParams): Entry {
  const { toolCall } = params;
  return {
    kind: 'permission',
    id: `perm-${requestId}`,
    requestId,
    toolCallId: toolCall.toolCallId,
    title: escapeControls(toolCall.title ?? toolCall.toolCallId, true),
    toolKind: toolCall.kind ?? 'other',
    input: formatInput(toolCall.rawInput),
    content: contentViews(toolCall.content ?? [], state.meta.cwd),
    locations: locationViews(toolCall.locations ?? [], state.meta.cwd),
    options: params.options.map((o) => ({ optionId: o.optionId, name: escapeControls(o.name, true), kind: o.kind })),
  };
}

/** A permission question answered: the option chosen, or cancelled. */
function answered(entry: PermissionEntry, optionId: string | undefined, cancelled: boolean | undefined, note?: string): PermissionEntry {
  const option = entry.options.find((o) => o.optionId === optionId);
  const label = cancelled || !option ? 'Cancelled' : option.name;
  return { ...entry, answer: { optionId: option?.optionId, kind: cancelled ? undefined : option?.kind, label, ...(note ? { note } : {}) } };
}

/** The call a question was answered "reject" about, marked rejected (its card says so when it ends). */
function markRejected(state: ChatState, requestId: string): ChatState {
  const question = state.entries.find((e): e is PermissionEntry => e.id === `perm-${requestId}` && e.kind === 'permission');
  if (!question?.answer?.kind?.startsWith('reject')) {
    return state;
  }
  return mapEntry(state, `tool-${question.toolCallId}`, (e) => (e.kind === 'tool' ? { ...e, rejected: true } : e));
}

/** The turn's end: streaming done, open questions cancelled, and its turn entry when it edited files. */
function endTurn(state: ChatState, turn: number | undefined, written: string[]): ChatState {
  // A permission prompt left open when the turn ends can no longer be answered.
  const entries = finishStreaming(state.entries).map((e) => (e.kind === 'permission' && !e.answer ? { ...e, answer: { label: 'Cancelled' } } : e));
  let next: ChatState = { ...state, entries, meta: { ...state.meta, busy: false } };
  const edited = turn === undefined ? [] : turnEditedFiles(next, written);
  if (turn !== undefined && edited.length > 0) {
    const planBefore = state.planAtPrompt === undefined ? {} : { planBefore: state.planAtPrompt };
    const entry: TurnEntry = { kind: 'turn', id: `turn-${turn}`, turn, files: edited, undo: 'ready', ...planBefore };
    next = { ...next, entries: [...next.entries.filter((e) => e.id !== entry.id), entry] };
  }
  return next;
}

/** The session's totals and the last turn's stats, shown as they are. */
function applyUsageTotals(state: ChatState, totals: UsageTotals, turn: Partial<TurnStats> | undefined): ChatState {
  const usage: UsageView = { ...state.meta.usage, ...sessionUsage(totals) };
  if (!totals.costBreakdown) {
    delete usage.costBreakdown;
  }
  const lastTurn = turn ? lastTurnView(turn) : {};
  if (Object.keys(lastTurn).length > 0) {
    usage.lastTurn = lastTurn;
  } else {
    delete usage.lastTurn;
  }
  return { ...state, meta: { ...state.meta, usage } };
}

/** Tool kinds that change files. */
const EDIT_KINDS = new Set(['edit', 'delete', 'move']);

/**
 * The files the turn now ending edited, as shown: those written through the editor, and
 * those of its edit tool calls that completed (their diffs' files, else their locations).
 */
function turnEditedFiles(state: ChatState, written: string[]): string[] {
  const start = lastTurnStart(state.entries);
  const files = new Set(written.map((p) => relativeTo(p, state.meta.cwd)));
  for (const e of state.entries.slice(start)) {
    if (e.kind !== 'tool' || e.status !== 'completed' || e.superseded || !EDIT_KINDS.has(e.toolKind)) {
      continue;
    }
    const diffs = e.content.flatMap((c) => (c.kind === 'diff' ? [c.path] : []));
    for (const p of diffs.length ? diffs : e.locations.map((l) => relativeTo(l.path, state.meta.cwd))) {
      files.add(p);
    }
  }
  return [...files];
}

/** Where the last turn starts in `entries`: its prompt's index (0 when there is none). */
function lastTurnStart(entries: Entry[]): number {
  let start = entries.length;
  while (start > 0 && entries[start - 1].kind !== 'user') {
    start--;
  }
  return Math.max(0, start - 1);
}

const RETRY: NonNullable<NoticeEntry['action']> = { label: 'Retry', message: { type: 'retry' } };

/**
 * The last turn's last notice (the server's word for the stop) with Retry, if it has none yet.
 * The server says why every turn stopped: the chat adds no words of its own.
 */
function offerRetry(state: ChatState): ChatState {
  const start = lastTurnStart(state.entries);
  for (let i = state.entries.length - 1; i > start; i--) {
    const e = state.entries[i];
    if (e.kind === 'notice') {
      return e.action ? state : mapEntry(state, e.id, () => ({ ...e, action: RETRY }));
    }
  }
  return state;
}

/**
 * A restore of `turn` puts back the files of that turn and of every turn after it: their
 * entries are undone with it; `restored` (what the server did) goes on `turn`'s own.
 */
function applyTurnUndo(state: ChatState, turn: number, undo: TurnEntry['undo'], restored?: RestoredFile[]): ChatState {
  let changed = false;
  const entries = state.entries.map((e) => {
    if (e.kind !== 'turn' || e.turn < turn || e.undo === 'undone' || (undo !== 'undone' && e.turn !== turn)) {
      return e;
    }
    changed = true;
    const shown = restored?.map((f) => ({ path: relativeTo(f.path, state.meta.cwd), action: f.action }));
    return { ...e, undo, ...(e.turn === turn && shown ? { restored: shown } : {}) };
  });
  // A reopened session's turn has no entry (its plan before it came with the replay).
  return changed || undo === 'undone' ? planAfterUndo(changed ? { ...state, entries } : state, turn, undo) : state;
}

/**
 * Undone, a turn's plan goes back to the one shown before its prompt: as the view saw it sent,
 * else as the replay of a reopened session showed it.
 */
function planAfterUndo(state: ChatState, turn: number, undo: TurnEntry['undo']): ChatState {
  const entry = state.entries.find((e): e is TurnEntry => e.kind === 'turn' && e.turn === turn);
  const before = entry?.planBefore !== undefined ? entry.planBefore : state.replayedPlans?.[turn];
  if (undo !== 'undone' || before === undefined) {
    return state;
  }
  return { ...state, meta: { ...state.meta, plan: before ?? undefined } };
}

function appendNotice(
  state: ChatState,
  level: NoticeEntry['level'],
  text: string,
  action?: NoticeEntry['action'],
  choices?: NoticeEntry['choices'],
): ChatState {
  const entry: NoticeEntry = { kind: 'notice', id: entryId(state, 'notice'), level, text, ...(action ? { action } : {}), ...(choices ? { choices } : {}) };
  return withNumberedEntry(state, state.entries, entry);
}

/**
 * A notice (`_meta.parley.notice: {level}`): the server speaking about the turn (why it
 * stopped, why it did not start), shown once at its level where it comes, never as answer
 * text. Pieces with the notice's message id join.
 */
function appendNoticeChunk(state: ChatState, notice: unknown, text: string, messageId?: string): ChatState {
  const last = state.entries[state.entries.length - 1];
  if (last?.kind === 'notice' && messageId !== undefined && last.messageId === messageId) {
    return replaceLast(state, { ...last, text: last.text + text });
  }
  if (text === '') {
    return state;
  }
  const entry: NoticeEntry = {
    kind: 'notice',
    id: entryId(state, 'notice'),
    level: noticeLevel(notice),
    text,
    ...(messageId !== undefined ? { messageId } : {}),
  };
  return withNumberedEntry(state, finishStreaming(state.entries), entry);
}

/** The level of `_meta.parley.notice`, when it is one the view shows; else `info`. */
function noticeLevel(notice: unknown): NoticeEntry['level'] {
  const level = typeof notice === 'object' && notice !== null && 'level' in notice ? notice.level : undefined;
  return NOTICE_LEVELS.find((l) => l === level) ?? 'info';
}

/**
 * Error cards without their Retry: once another prompt goes (or the same one again), Retry
 * would no longer send the prompt that failed.
 */
function withoutRetry(entries: Entry[]): Entry[] {
  let changed = false;
  const out = entries.map((e) => {
    if (e.kind === 'notice' && e.action?.message.type === 'retry') {
      changed = true;
      const rest: NoticeEntry = { ...e };
      delete rest.action;
      return rest;
    }
    return e;
  });
  return changed ? out : entries;
}

/** Mark streamed text and thoughts as complete (entries that change get new identities). */
function finishStreaming(entries: Entry[]): Entry[] {
  let changed = false;
  const out = entries.map((e) => {
    if ((e.kind === 'agent' || e.kind === 'thought') && e.streaming) {
      changed = true;
      return { ...e, streaming: false };
    }
    return e;
  });
  return changed ? out : entries;
}

function mapEntry(state: ChatState, id: string, fn: (e: Entry) => Entry): ChatState {
  const i = state.entries.findIndex((e) => e.id === id);
  if (i < 0) {
    return state;
  }
  const old = state.entries[i];
  const updated = fn(old);
  if (updated === old) {
    return state;
  }
  const entries = state.entries.slice();
  entries[i] = updated;
  return { ...state, entries };
}

function replaceLast(state: ChatState, entry: Entry): ChatState {
  const entries = state.entries.slice();
  entries[entries.length - 1] = entry;
  return { ...state, entries };
}

/** The reducer of each kind of session update. */
type UpdateReducers = {
  [K in SessionUpdate['sessionUpdate']]: (state: ChatState, update: Extract<SessionUpdate, { sessionUpdate: K }>) => ChatState;
};

const UPDATE_REDUCERS: UpdateReducers = {
  agent_message_chunk: (state, update) => {
    const parley = update._meta?.parley;
    const text = blockText(update.content);
    const messageId = update.messageId ?? undefined;
    if (parley?.notice) {
      return appendNoticeChunk(state, parley.notice, text, messageId);
    }
    if (typeof parley?.replaces === 'string') {
      return reviseMessage(state, parley.replaces, text, messageId);
    }
    if (parley?.command && state.replayingUndo) {
      // At the level it was said live (`controller/undo.ts`'s `restoreOutcome`), as the server kept it.
      return appendNoticeChunk(state, { level: parley.level === 'warning' ? 'warning' : 'info' }, text, messageId);
    }
    return appendChunk(state, 'agent', text, messageId);
  },
  agent_thought_chunk: (state, update) => appendChunk(state, 'thought', blockText(update.content), update.messageId ?? undefined),
  user_message_chunk: (state, update) => appendUserChunk(state, update.content, update.messageId ?? undefined, update._meta?.parley?.command === true),
  tool_call: (state, update) => applyToolUpdate(state, update),
  tool_call_update: (state, update) => applyToolUpdate(state, update),
  usage_update: (state, update) => applyUsage(state, update),
  session_info_update: (state, update) => (typeof update.title === 'string' ? { ...state, meta: { ...state.meta, title: update.title } } : state),
  config_option_update: (state, update) => applyConfigOptions(state, update.configOptions),
  available_commands_update: (state, update) => ({ ...state, meta: { ...state.meta, commands: commandViews(update.availableCommands) } }),
  plan: (state, update) => ({ ...state, meta: { ...state.meta, plan: planView(update.entries) } }),
  current_mode_update: (state, update) => {
    const mode = modeChanged(state.meta.mode, update.currentModeId);
    return mode === state.meta.mode ? state : { ...state, meta: { ...state.meta, mode } };
  },
};

function applyUpdate(state: ChatState, update: SessionUpdate): ChatState {
  const reducer = UPDATE_REDUCERS[update.sessionUpdate] as (state: ChatState, update: SessionUpdate) => ChatState;
  return reducer(state, update);
}

/**
 * A replayed prompt's piece: its text, or a file it attached (as context); pieces of one
 * message join. A prompt to the model is a numbered turn: the plan shown before it is kept for
 * its undo. A slash command (`command`) is not a turn; an undo's (a restore, kept as `/undo`)
 * is shown as the live chat showed it: no prompt, its answer a notice.
 */
function appendUserChunk(state: ChatState, content: ContentBlock, messageId: string | undefined, command: boolean): ChatState {
  const last = state.entries[state.entries.length - 1];
  const item = attachedItem(content);
  const text = item ? '' : blockText(content);
  if (command && text === UNDO_COMMAND) {
    return { ...state, entries: finishStreaming(state.entries), replayingUndo: true };
  }
  if (last?.kind === 'user' && (messageId === undefined || last.messageId === undefined || last.messageId === messageId)) {
    return replaceLast(state, { ...last, text: last.text + text, context: item ? [...last.context, item] : last.context });
  }
  return appendReplayedPrompt(state, text, item ? [item] : [], messageId, command);
}

/** A replayed prompt's entry, and, for a turn's, the plan shown before it, kept by turn number. */
function appendReplayedPrompt(state: ChatState, text: string, context: ContextItem[], messageId: string | undefined, command: boolean): ChatState {
  const entry: UserEntry = { kind: 'user', id: entryId(state, 'user'), text, context, ...(messageId ? { messageId } : {}), ...(command ? { command } : {}) };
  const next = { ...withNumberedEntry(state, finishStreaming(state.entries), entry), replayingUndo: false };
  return entry.command ? next : { ...next, replayedPlans: { ...state.replayedPlans, [turnPrompts(next.entries)]: state.meta.plan ?? null } };
}

/** How many prompts to the model `entries` show (a replayed slash command is not one). */
function turnPrompts(entries: Entry[]): number {
  return entries.filter((e) => e.kind === 'user' && !e.command).length;
}

/** The file a replayed prompt's block attached, if it is one. */
function attachedItem(content: ContentBlock): ContextItem | undefined {
  if (content.type === 'resource' && content.resource.uri) {
    return { label: labelForUri(content.resource.uri), uri: content.resource.uri };
  }
  if (content.type === 'resource_link') {
    // A file the model was not shown (binary, outside the workspace), replayed as sent.
    return { label: labelForUri(content.uri), uri: content.uri };
  }
  return undefined;
}

/** The commands as the prompt box offers them: names without a leading `/`, the input's hint. */
function commandViews(commands: AvailableCommandsUpdate['availableCommands']): CommandView[] {
  return commands
    .filter((c) => typeof c.name === 'string' && c.name.replace(/^\//, '') !== '')
    .map((c) => {
      const input = c.input;
      const hint = typeof input === 'object' && input !== null && 'hint' in input && typeof input.hint === 'string' ? input.hint : undefined;
      return { name: c.name.replace(/^\//, ''), description: c.description ?? '', ...(hint ? { hint } : {}) };
    });
}

/** The model option: the select whose category is `model`. */
export const MODEL_CATEGORY = 'model';
/** Parley's tool policy option. */
export const TOOL_POLICY_OPTION = 'tool_policy';

/** The options as the view shows them; the model and the tool policy taken from theirs. */
function applyConfigOptions(state: ChatState, options: SessionConfigOption[]): ChatState {
  const views = configOptionViews(options);
  const model = views.find((o) => o.category === MODEL_CATEGORY);
  const toolPolicy = views.find((o) => o.id === TOOL_POLICY_OPTION);
  return {
    ...state,
    meta: {
      ...state.meta,
      configOptions: views,
      mode: modeWithOptions(state.meta.mode, views),
      ...(model ? { model: model.currentValue } : {}),
      ...(toolPolicy ? { toolPolicy: toolPolicy.currentValue } : {}),
    },
  };
}

/** Select options, their grouped values listed flat under their group's name (booleans are not shown). */
export function configOptionViews(options: SessionConfigOption[]): ConfigOptionView[] {
  const views: ConfigOptionView[] = [];
  for (const o of options) {
    if (o.type !== 'select' || !Array.isArray(o.options)) {
      continue;
    }
    const values: ConfigOptionView['options'] = [];
    const value = (x: SessionConfigSelectOption, group?: string) => ({
      value: x.value,
      name: x.name,
      ...(x.description ? { description: x.description } : {}),
      ...(group !== undefined ? { group } : {}),
    });
    for (const v of o.options) {
      if ('group' in v) {
        values.push(...v.options.map((x) => value(x, v.name)));
      } else {
        values.push(value(v));
      }
    }
    views.push({
      id: o.id,
      name: o.name,
      ...(o.category ? { category: o.category } : {}),
      ...(o.description ? { description: o.description } : {}),
      currentValue: o.currentValue,
      options: values,
    });
  }
  return views;
}

function applyUsage(state: ChatState, update: UsageUpdate): ChatState {
  const usage = { ...state.meta.usage };
  if (typeof update.used === 'number') {
    usage.contextUsed = update.used;
  }
  // No window when the server does not know it (absent; a first-edition server sent 0).
  if (typeof update.size === 'number' && update.size > 0) {
    usage.contextSize = update.size;
  } else {
    delete usage.contextSize;
  }
  if (update.cost !== undefined) {
    usage.cost = update.cost;
  }
  // The session's running totals replace what was shown; the call's own usage is never added.
  const session = update._meta?.parley?.session;
  if (session) {
    delete usage.costBreakdown;
    Object.assign(usage, sessionUsage(session));
  }
  return { ...state, meta: { ...state.meta, usage } };
}

/** The view's session counts from the server's totals. */
function sessionUsage(
  t: UsageTotals,
): Pick<UsageView, 'sessionTokens' | 'inputTokens' | 'outputTokens' | 'cachedReadTokens' | 'cost' | 'turns' | 'costBreakdown'> {
  return {
    sessionTokens: t.totalTokens,
    inputTokens: t.inputTokens,
    outputTokens: t.outputTokens,
    cost: t.cost,
    ...(typeof t.cachedReadTokens === 'number' ? { cachedReadTokens: t.cachedReadTokens } : {}),
    ...(typeof t.turns === 'number' ? { turns: t.turns } : {}),
    ...(t.costBreakdown ? { costBreakdown: t.costBreakdown } : {}),
  };
}

/** What the view keeps of a turn's stats: its cost breakdown and waste, when the server sent them. */
function lastTurnView(turn: Partial<TurnStats>): NonNullable<UsageView['lastTurn']> {
  return {
    ...(turn.costBreakdown ? { costBreakdown: turn.costBreakdown } : {}),
    ...(typeof turn.wastedTokensEstimate === 'number' ? { wastedTokensEstimate: turn.wastedTokensEstimate } : {}),
  };
}

function appendChunk(state: ChatState, kind: 'agent' | 'thought', text: string, messageId?: string): ChatState {
  const last = state.entries[state.entries.length - 1];
  if (
    last &&
    last.kind === kind &&
    last.streaming &&
    (messageId === undefined || last.messageId === undefined || last.messageId === messageId)
  ) {
    return replaceLast(state, { ...last, text: last.text + text, messageId: last.messageId ?? messageId });
  }
  if (text === '') {
    return state;
  }
  const id = entryId(state, kind);
  const entry: AgentEntry | ThoughtEntry =
    kind === 'agent'
      ? { kind, id, text, messageId, aliases: messageId ? [messageId] : [], revised: false, streaming: true }
      : { kind, id, text, messageId, streaming: true };
  return withNumberedEntry(state, finishStreaming(state.entries), entry);
}

/** A revision: the synchronous call's text replaces what was streamed under `replaces`. */
function reviseMessage(state: ChatState, replaces: string, text: string, messageId?: string): ChatState {
  const matches = (e: Entry): e is AgentEntry =>
    e.kind === 'agent' && (e.messageId === replaces || e.aliases.includes(replaces));
  const first = state.entries.findIndex(matches);
  if (first < 0) {
    return appendChunk(state, 'agent', text, messageId);
  }
  const entries: Entry[] = [];
  state.entries.forEach((e, i) => {
    if (i === first && matches(e)) {
      const aliases = [...new Set([...e.aliases, replaces, ...(messageId ? [messageId] : [])])];
      entries.push({ ...e, text, messageId: messageId ?? e.messageId, aliases, revised: true });
    } else if (!matches(e)) {
      entries.push(e);
    }
  });
  return { ...state, entries };
}

function applyToolUpdate(state: ChatState, u: ToolCall | ToolCallUpdate): ChatState {
  const id = `tool-${u.toolCallId}`;
  const existing = state.entries.find((e): e is ToolEntry => e.id === id && e.kind === 'tool');
  const next = updatedToolEntry(existing ?? newToolEntry(u.toolCallId), u, state.meta.cwd);
  if (existing) {
    return mapEntry(state, id, () => next);
  }
  return { ...state, entries: [...finishStreaming(state.entries), next] }; // its id is its call's, not numbered
}

export function labelForUri(uri: string): string {
  const withoutQuery = uri.split(/[?#]/)[0];
  const parts = withoutQuery.split('/');
  return decodeURIComponent(parts[parts.length - 1] || withoutQuery);
}

/** What changed between two states' entries, for the webview: changed or new, and removed. */
export function diffEntries(prev: Entry[], next: Entry[]): { upserts: Entry[]; removed: string[] } {
  if (prev === next) {
    return { upserts: [], removed: [] };
  }
  const before = new Map(prev.map((e) => [e.id, e]));
  const upserts: Entry[] = [];
  const seen = new Set<string>();
  for (const e of next) {
    seen.add(e.id);
    if (before.get(e.id) !== e) {
      upserts.push(e);
    }
  }
  const removed = prev.filter((e) => !seen.has(e.id)).map((e) => e.id);
  return { upserts, removed };
}
