/**
 * The chat controller: one Parley server, one current session, and the view state. It owns
 * the protocol client and the reducer; the VS Code layer gives it settings and a few host
 * services, renders its state, and forwards the user's actions.
 *
 * Does not import `vscode`: tested in plain Node against the real server.
 */

import { EventEmitter } from 'node:events';

import {
  type ExitInfo,
  ParleyClient,
  ServerExitedError,
  type ServerOptions,
  describeError,
  isMethodNotFound,
} from '../client/client';
import {
  type ConfigureParams,
  type ContentBlock,
  type EditorCallToolParams,
  type EditorCallToolResult,
  type EmptyResult,
  type ModelInfo,
  type NewSessionResult,
  type RequestPermissionParams,
  type RequestPermissionResult,
  type ResourceBlock,
  type RestoreResult,
  type RestoredFile,
  type ResumeSessionResult,
  type SessionNotification,
  type SessionSummary,
  type ToolPolicy,
  type ToolSpec,
  type WriteTextFileParams,
  promptUsage,
} from '../client/protocol';
import {
  type ChatEvent,
  type ChatState,
  MODEL_CATEGORY,
  TOOL_POLICY_OPTION,
  initialState,
  labelForUri,
  reduce,
} from './chatState';
import type { ContextItem, Entry, ModelOption, NoticeEntry, SessionRow, ViewState } from '../common/view';
import { PROVIDER_ERROR } from '../common/display';
import { transcriptMarkdown } from './transcriptMarkdown';
import { type EditorFiles, WorkspaceFileAccess } from './fileAccess';
import { relativeTo } from './toolView';

export interface ControllerSettings {
  server: ServerOptions;
  /** The model for new sessions; empty means the server's default. */
  defaultModel?: string;
  toolPolicy?: ToolPolicy;
  autoApprove?: string[];
  systemPrompt?: string;
}

export interface ControllerHost {
  /** The workspace root (absolute), sent as the session's `cwd`. */
  workspaceRoot(): string;
  settings(): ControllerSettings;
  /**
   * The editor's files: when given, the client advertises `fs.readTextFile` and
   * `fs.writeTextFile`, and the server reads and writes workspace files through it.
   */
  files?: EditorFiles;
  /** Editor tools (run in the editor) and their specs. */
  editorTools?: { specs: ToolSpec[]; run(params: EditorCallToolParams, signal: AbortSignal): Promise<EditorCallToolResult> };
  /**
   * Called when a permission prompt opens, besides showing it inline. May resolve with an
   * optionId (e.g. from a modal dialog), or null to leave it to the inline buttons.
   */
  onPermissionAsked?(params: RequestPermissionParams, signal: AbortSignal): Promise<string | null>;
  /** A line for the log: the server's stderr (level `server`: the line says its own) and the controller's. */
  log?(line: string, level?: LogLevel): void;
  /**
   * Why the server may not start now (e.g. VS Code's Restricted Mode), or undefined when it
   * may. Asked each time the server would start; the reason is shown in the view.
   */
  serverBlocked?(): string | undefined;
  clientInfo?: { name: string; version: string };
  /**
   * Where the chat's own notices of a session (errors, a crash) are kept: the server's
   * replay brings back its messages and its own notices, not what the chat said. E.g. VS Code's
   * workspace state; without it, a reload shows no notices.
   */
  notices?: NoticeKeeper;
}

/** A notice kept across reloads, and where it goes: after the answer to the `afterPrompt`-th prompt. */
export interface KeptNotice {
  level: NoticeEntry['level'];
  text: string;
  /** How many prompts came before it in the session (0: before the first). */
  afterPrompt: number;
  /** That prompt's text, to find it again if the replay numbers prompts differently. */
  promptText?: string;
}

export interface NoticeKeeper {
  get(sessionId: string): KeptNotice[];
  set(sessionId: string, notices: KeptNotice[]): void;
}

/** The most notices kept per session (the latest). */
const MAX_KEPT_NOTICES = 50;

/** How a log line is written: the controller's lines have a level, the server's say their own. */
export type LogLevel = 'info' | 'warn' | 'error' | 'server';

interface ControllerEvents {
  /** The state changed: (previous, next). */
  state: [ChatState, ChatState];
  /** A turn ended (for the status bar, tests). */
  turnEnded: [string];
}

interface PendingPermission {
  resolve: (optionId: string | null) => void;
  toolCallId: string;
}

/** An edit a permission prompt asks about: the file, and its diff's texts as the server sent them. */
export interface ProposedEdit {
  toolCallId: string;
  file: string;
  oldText: string | null;
  newText: string;
}

export class ChatController extends EventEmitter<ControllerEvents> {
  state: ChatState = initialState();
  client: ParleyClient | undefined;
  private startPromise: Promise<void> | undefined;
  private sessionPromise: Promise<string> | undefined;
  private readonly permissions = new Map<string, PendingPermission>();
  private contextBlocks: ResourceBlock[] = [];
  private permissionCounter = 0;
  private defaultModel: string | undefined;
  private chosenModel: string | undefined;
  /** The session open on the current server process (cleared when the server goes away). */
  private openSession: string | undefined;
  /** The tool policy chosen in the view (for this and new sessions), over the setting. */
  private chosenToolPolicy: ToolPolicy | undefined;
  /** `session/new` requests in flight, and the updates that came meanwhile for other sessions. */
  private opening = 0;
  private early: SessionNotification[] = [];
  /** The edits open permission prompts ask about, by `proposalKey`. */
  private readonly proposals = new Map<string, ProposedEdit>();
  /** A restore is running (one at a time). */
  private undoing = false;
  /** The files the server wrote through the editor in the running turn. */
  private writtenThisTurn = new Set<string>();
  /** The last prompt sent in this session, as sent: what Retry sends again. */
  private lastPrompt: { text: string; items: ContextItem[]; blocks: ContentBlock[] } | undefined;
  /** Sessions loaded only to read their replay (Export), and where their updates go. */
  private readonly collectors = new Map<string, (n: SessionNotification) => void>();
  /** The session `ensureSession` opens when the view shows none (`restoreOnOpen`). */
  private toRestore: { sessionId: string; title?: string } | undefined;
  /** Session titles from the last `session/list`, for a session opened or exported by id alone (the History list). */
  private readonly titles = new Map<string, string>();

  constructor(private readonly host: ControllerHost) {
    super();
  }

  get sessionId(): string | undefined {
    return this.state.meta.sessionId;
  }

  dispatch(event: ChatEvent): void {
    const prev = this.state;
    const next = reduce(prev, event);
    if (next !== prev) {
      this.state = next;
      this.emit('state', prev, next);
    }
  }

  private meta(patch: Partial<ViewState['meta']>): void {
    this.dispatch({ type: 'meta', patch });
  }

  private log(line: string, level: LogLevel = 'info'): void {
    this.host.log?.(line, level);
  }

  // ---- server lifecycle ----

  /** Start the server if it is not running. */
  ensureStarted(): Promise<void> {
    if (this.client?.running) {
      return Promise.resolve();
    }
    if (!this.startPromise) {
      this.startPromise = this.startServer().finally(() => {
        this.startPromise = undefined;
      });
    }
    return this.startPromise;
  }

  private async startServer(): Promise<void> {
    const blocked = this.host.serverBlocked?.();
    if (blocked) {
      this.meta({ serverState: 'stopped', busy: false, loading: false });
      if (!this.state.entries.some((e) => e.kind === 'notice' && e.text === blocked)) {
        this.dispatch({ type: 'notice', level: 'warning', text: blocked });
      }
      this.log(`Not starting the server: ${blocked}`, 'warn');
      throw new Error(blocked);
    }
    const settings = this.host.settings();
    const cwd = settings.server.cwd ?? this.host.workspaceRoot();
    this.log(`Starting the Parley server: ${[settings.server.command, ...(settings.server.args ?? ['serve'])].join(' ')} (in ${cwd})`);
    this.meta({ serverState: 'starting' });
    const files = this.host.files ? new WorkspaceFileAccess(() => this.host.workspaceRoot(), this.host.files) : undefined;
    const client = new ParleyClient({
      server: { ...settings.server, cwd },
      tools: this.host.editorTools?.specs ?? [],
      clientInfo: this.host.clientInfo,
      handlers: {
        requestPermission: (params, signal) => this.onPermission(params, signal),
        callEditorTool: (params, signal) =>
          this.host.editorTools
            ? this.host.editorTools.run(params, signal)
            : Promise.resolve({ content: `Unknown editor tool ${params.name}`, isError: true }),
        ...(files
          ? {
              readTextFile: (params) => files.readTextFile(params),
              writeTextFile: (params) => this.writeTextFile(files, params),
            }
          : {}),
      },
    });
    client.on('update', (n) => {
      const collect = this.collectors.get(n.sessionId);
      if (collect) {
        collect(n);
      } else if (n.sessionId === this.state.meta.sessionId) {
        this.dispatch({ type: 'update', update: n.update });
      } else if (this.opening > 0) {
        this.early.push(n); // perhaps the session being opened: its id is not known yet
      }
    });
    client.on('log', (line) => this.log(line, 'server'));
    client.on('exit', (info) => {
      if (this.client === client) {
        this.onServerExit(info);
      }
    });
    this.client = client;
    try {
      const init = await client.start();
      const parley = init._meta?.parley;
      this.defaultModel = parley?.defaultModel;
      this.log(`The server is ready (default model ${parley?.defaultModel ?? 'unknown'}).`);
      this.meta({
        serverState: 'ready',
        models: toModelOptions(parley?.models ?? []),
        model: this.chosenModel ?? (settings.defaultModel || undefined) ?? parley?.defaultModel,
      });
    } catch (err) {
      this.log(`The server did not start: ${describeError(err)}`, 'error');
      this.meta({ serverState: 'exited', busy: false, loading: false });
      this.dispatch({
        type: 'notice',
        level: 'error',
        text: describeError(err),
        action: { label: 'Restart server', message: { type: 'restart' } },
      });
      throw err;
    }
  }

  private onServerExit(info: ExitInfo): void {
    for (const [requestId, p] of this.permissions) {
      p.resolve(null);
      this.dispatch({ type: 'permissionAnswered', requestId, cancelled: true });
    }
    this.permissions.clear();
    this.proposals.clear();
    this.sessionPromise = undefined;
    this.openSession = undefined;
    this.meta({ serverState: info.expected ? 'stopped' : 'exited', busy: false, loading: false });
    const what = info.signal ? `signal ${info.signal}` : `exit code ${info.code}`;
    this.log(`The server ${info.expected ? 'stopped' : 'stopped unexpectedly'} (${what}).`, info.expected ? 'info' : 'error');
    if (!info.expected) {
      const tail = info.stderrTail.slice(-3).join('\n');
      this.keepingNotices(() =>
        this.dispatch({
        type: 'notice',
        level: 'error',
          text: `The Parley server stopped unexpectedly (${what}).${tail ? `\n${tail}` : ''}`,
          action: { label: 'Restart server', message: { type: 'restart' } },
        }),
      );
    }
  }

  /**
   * Restart the server. The current session, if any, is opened again: resumed (the view
   * kept as it is) when the server can, else loaded from the store (its history replays into
   * the view); if it cannot be, a new session starts.
   */
  async restart(): Promise<void> {
    const previous = this.state.meta.sessionId;
    const old = this.client;
    this.client = undefined;
    this.sessionPromise = undefined;
    this.openSession = undefined;
    if (old) {
      await old.stop();
    }
    this.meta({ busy: false, loading: false });
    await this.ensureStarted();
    if (previous) {
      try {
        const how = await this.reopen(previous);
        this.dispatch({ type: 'notice', level: 'info', text: `Server restarted; session ${how}.` });
        return;
      } catch (err) {
        this.log(`[parley] could not reload session ${previous}: ${describeError(err)}`);
        await this.newSession();
        this.dispatch({
          type: 'notice',
          level: 'warning',
          text: `Server restarted, but the session could not be reloaded (${describeError(err)}). This is a new session.`,
        });
        return;
      }
    }
    await this.newSession();
  }

  /** Close the open session (when the server can) and stop the server. */
  async dispose(): Promise<void> {
    await this.closeSession();
    const client = this.client;
    this.client = undefined;
    await client?.stop();
  }

  // ---- sessions ----

  /**
   * The current session, open on a running server. After the server went away, the session
   * shown is loaded again (resumed); when there is none, or it cannot be, a new one starts.
   */
  ensureSession(): Promise<string> {
    if (this.openSession && this.client?.running) {
      return Promise.resolve(this.openSession);
    }
    if (!this.sessionPromise) {
      this.sessionPromise = this.openOrResume().catch((err: unknown) => {
        this.sessionPromise = undefined;
        throw err;
      });
    }
    return this.sessionPromise;
  }

  private async openOrResume(): Promise<string> {
    await this.ensureStarted();
    const previous = this.state.meta.sessionId;
    const kept = previous ? undefined : this.toRestore;
    if (kept) {
      this.toRestore = undefined;
      try {
        await this.loadSession(kept.sessionId, kept.title);
        return kept.sessionId;
      } catch (err) {
        this.log(`Could not reopen session ${kept.sessionId}: ${describeError(err)}`, 'warn');
        const fresh = await this.newSession();
        this.dispatch({
          type: 'notice',
          level: 'warning',
          text: `The conversation open before could not be reopened (${describeError(err)}). This is a new session.`,
        });
        return fresh;
      }
    }
    if (previous) {
      try {
        await this.reopen(previous);
        return previous;
      } catch (err) {
        const sessionId = await this.newSession();
        this.dispatch({
          type: 'notice',
          level: 'warning',
          text: `The previous session could not be reloaded (${describeError(err)}). This is a new session.`,
        });
        return sessionId;
      }
    }
    return this.newSession();
  }

  /**
   * A session to open at the next `ensureSession` instead of a new one: the one open when the
   * window was reloaded. It is loaded from the store (its history replays into the view, its
   * title kept); when it cannot be (deleted meanwhile), a new session starts and the view says
   * why. Forgotten once tried, or when the user opens or starts another session first.
   */
  restoreOnOpen(sessionId: string, title?: string): void {
    this.toRestore = { sessionId, title };
  }

  /**
   * Open the session shown again on the running server: `session/resume` when the server
   * advertises it (no replay: the view keeps what it shows), else `session/load`.
   */
  private async reopen(sessionId: string): Promise<'resumed' | 'reloaded'> {
    const client = this.requireClient();
    if (!client.sessionCapabilities.resume) {
      await this.loadSession(sessionId, this.state.meta.title);
      return 'reloaded';
    }
    this.meta({ loading: true });
    let result: ResumeSessionResult;
    try {
      result = await client.resumeSession(sessionId, this.host.workspaceRoot());
    } finally {
      this.meta({ loading: false });
    }
    const parley = result._meta?.parley;
    this.meta({ sessionId, cwd: this.host.workspaceRoot(), busy: false, model: parley?.model ?? this.state.meta.model, configOptions: [] });
    this.dispatch({ type: 'configOptions', options: result.configOptions ?? [] });
    this.openSession = sessionId;
    if (parley?.usage) {
      this.dispatch({ type: 'usageTotals', totals: parley.usage });
    }
    this.log(`Resumed session ${sessionId}.`);
    return 'resumed';
  }

  /**
   * `session/close` for the session open on the server, when the server advertises it (it
   * ends the session's kernel and frees it; the session stays stored and shown, and is
   * opened again when needed). A failure is logged: there is nothing the user could do.
   */
  async closeSession(): Promise<void> {
    const sessionId = this.openSession;
    const client = this.client;
    this.openSession = undefined;
    this.sessionPromise = undefined;
    if (!sessionId || !client?.running || !client.sessionCapabilities.close) {
      return;
    }
    this.log(`Closing session ${sessionId} in the server.`);
    await closeQuietly(client, sessionId, (line) => this.log(line, 'warn'));
  }

  async newSession(): Promise<string> {
    this.toRestore = undefined;
    await this.ensureStarted();
    const client = this.requireClient();
    const settings = this.host.settings();
    const model = this.chosenModel ?? (settings.defaultModel || undefined);
    const toolPolicy = this.chosenToolPolicy ?? settings.toolPolicy;
    this.opening += 1;
    let result: NewSessionResult;
    try {
      result = await client.startSession(this.host.workspaceRoot(), {
        model,
        toolPolicy,
        autoApprove: settings.autoApprove?.length ? settings.autoApprove : undefined,
        systemPrompt: settings.systemPrompt || undefined,
      });
    } finally {
      this.opening -= 1;
    }
    const { sessionId } = result;
    const previous = this.openSession;
    this.lastPrompt = undefined;
    this.dispatch({ type: 'clear' });
    this.meta({
      sessionId,
      cwd: this.host.workspaceRoot(),
      title: undefined,
      busy: false,
      loading: false,
      model: model ?? this.defaultModel,
      toolPolicy: toolPolicy ?? 'hybrid',
      configOptions: [],
      commands: [],
      usage: { sessionTokens: 0, inputTokens: 0, outputTokens: 0 },
    });
    this.dispatch({ type: 'configOptions', options: result.configOptions ?? [] });
    this.openSession = sessionId;
    this.sessionPromise = undefined;
    this.log(`New session ${sessionId} (stored from its first prompt).`);
    this.replayEarly(sessionId);
    if (previous && previous !== sessionId && client.sessionCapabilities.close) {
      await closeQuietly(client, previous, (line) => this.log(line));
    }
    return sessionId;
  }

  /** Passes on the updates for `sessionId` that came before its id was known. */
  private replayEarly(sessionId: string): void {
    const early = this.early.filter((n) => n.sessionId === sessionId);
    if (this.opening === 0) {
      this.early = [];
    }
    for (const n of early) {
      this.dispatch({ type: 'update', update: n.update });
    }
  }

  async listSessions(): Promise<SessionSummary[]> {
    await this.ensureStarted();
    const client = this.requireClient();
    const sessions: SessionSummary[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 20; page++) {
      const result = await client.listSessions({ cwd: this.host.workspaceRoot(), cursor });
      sessions.push(...result.sessions);
      for (const s of result.sessions) {
        if (s.title) {
          this.titles.set(s.sessionId, s.title);
        }
      }
      if (!result.nextCursor || sessions.length >= 200) {
        break;
      }
      cursor = result.nextCursor;
    }
    return sessions;
  }

  /** A session's title, as last listed (or the one shown). */
  sessionTitle(sessionId: string): string | undefined {
    return sessionId === this.state.meta.sessionId ? (this.state.meta.title ?? this.titles.get(sessionId)) : this.titles.get(sessionId);
  }

  sessionRows(sessions: SessionSummary[]): SessionRow[] {
    return sessions.map((s) => ({
      sessionId: s.sessionId,
      title: s.title || '(untitled)',
      updatedAt: s.updatedAt ?? undefined,
      current: s.sessionId === this.state.meta.sessionId,
    }));
  }

  /**
   * Load a stored session: the view is cleared and the server replays its history. Without a
   * title, the one the last `session/list` gave it (`session/load` does not say it).
   */
  async loadSession(sessionId: string, title: string | undefined = this.titles.get(sessionId)): Promise<void> {
    this.toRestore = undefined;
    await this.ensureStarted();
    const client = this.requireClient();
    if (this.state.meta.busy && this.state.meta.sessionId) {
      await this.cancel();
    }
    const before = { entries: this.state.entries, meta: this.state.meta };
    const previous = this.openSession;
    this.dispatch({ type: 'clear' });
    this.meta({
      sessionId,
      cwd: this.host.workspaceRoot(),
      title,
      commands: [],
      loading: true,
      busy: false,
      usage: { sessionTokens: 0, inputTokens: 0, outputTokens: 0 },
    });
    try {
      const result = await client.loadSession(sessionId, this.host.workspaceRoot());
      const parley = result._meta?.parley;
      // The replay's last turn is the session's last: numbered, it offers "Undo turn" if it edited files.
      this.dispatch({ type: 'turnEnded', stopReason: 'end_turn', turn: parley?.usage?.turns || undefined });
      // What the chat said about its turns (the replay does not carry it), back in place.
      const kept = this.host.notices?.get(sessionId) ?? [];
      if (kept.length) {
        this.dispatch({ type: 'setEntries', entries: withKeptNotices(this.state.entries, kept) });
      }
      this.lastPrompt = undefined;
      this.meta({ loading: false, model: parley?.model ?? this.state.meta.model, configOptions: [] });
      this.dispatch({ type: 'configOptions', options: result.configOptions ?? [] });
      if (parley?.model) {
        this.chosenModel = parley.model;
      }
      this.openSession = sessionId;
      if (previous && previous !== sessionId && client.sessionCapabilities.close) {
        await closeQuietly(client, previous, (line) => this.log(line));
      }
      if (parley?.usage) {
        this.dispatch({ type: 'usageTotals', totals: parley.usage });
      }
      this.log(`Loaded session ${sessionId}${title ? ` (${title})` : ''}.`);
    } catch (err) {
      this.log(`Could not load session ${sessionId}: ${describeError(err)}`, 'warn');
      // Back to the session we had.
      this.dispatch({ type: 'setEntries', entries: before.entries });
      const { sessionId: shown, cwd, title: shownTitle, commands, configOptions, model, usage } = before.meta;
      this.meta({ sessionId: shown, cwd, title: shownTitle, commands, configOptions, model, usage, loading: false });
      throw err;
    }
  }

  /** The server offers `session/delete` (the history list's Delete). */
  get canDeleteSessions(): boolean {
    return Boolean(this.client?.initializeResult?.agentCapabilities?.sessionCapabilities?.delete);
  }

  /** Delete a stored session (and its kept notices); the session shown is replaced by a new one. */
  async deleteSession(sessionId: string): Promise<void> {
    await this.ensureStarted();
    await this.requireClient().deleteSession(sessionId);
    this.host.notices?.set(sessionId, []);
    if (sessionId === this.state.meta.sessionId) {
      this.openSession = undefined;
      this.sessionPromise = undefined;
      await this.newSession();
    }
  }

  /**
   * A session's transcript as Markdown: the one shown from the view's entries; another by
   * reading its `session/load` replay aside (the view is not touched), with its kept notices.
   */
  async exportMarkdown(sessionId: string, title?: string): Promise<string> {
    if (sessionId === this.state.meta.sessionId) {
      return transcriptMarkdown(this.state.meta.title ?? title, this.state.entries);
    }
    await this.ensureStarted();
    const client = this.requireClient();
    let state = reduce(initialState(), { type: 'meta', patch: { sessionId, cwd: this.host.workspaceRoot() } });
    this.collectors.set(sessionId, (n) => {
      state = reduce(state, { type: 'update', update: n.update });
    });
    try {
      await client.loadSession(sessionId, this.host.workspaceRoot());
    } finally {
      this.collectors.delete(sessionId);
    }
    if (sessionId !== this.openSession && client.sessionCapabilities.close) {
      await closeQuietly(client, sessionId, (line) => this.log(line));
    }
    state = reduce(state, { type: 'turnEnded', stopReason: 'end_turn' });
    const kept = this.host.notices?.get(sessionId) ?? [];
    return transcriptMarkdown(title, kept.length ? withKeptNotices(state.entries, kept) : state.entries);
  }

  /** Runs `change`, then keeps the notices it added to the session's entries (see `NoticeKeeper`). */
  private keepingNotices(change: () => void): void {
    const before = new Set(this.state.entries.map((e) => e.id));
    change();
    const sessionId = this.state.meta.sessionId;
    const keeper = this.host.notices;
    if (!sessionId || !keeper) {
      return;
    }
    const added: KeptNotice[] = [];
    let prompts = 0;
    let promptText: string | undefined;
    for (const e of this.state.entries) {
      if (e.kind === 'user') {
        prompts += 1;
        promptText = e.text;
      } else if (e.kind === 'notice' && !before.has(e.id)) {
        added.push({ level: e.level, text: e.text, afterPrompt: prompts, ...(promptText !== undefined ? { promptText } : {}) });
      }
    }
    if (added.length) {
      keeper.set(sessionId, [...keeper.get(sessionId), ...added].slice(-MAX_KEPT_NOTICES));
    }
  }

  // ---- prompts ----

  addContext(item: ContextItem, block: ResourceBlock): void {
    this.contextBlocks = [...this.contextBlocks, block];
    this.meta({ context: [...this.state.meta.context, item] });
  }

  removeContext(index: number): void {
    this.contextBlocks = this.contextBlocks.filter((_, i) => i !== index);
    this.meta({ context: this.state.meta.context.filter((_, i) => i !== index) });
  }

  /**
   * Send a prompt with the pending context (and `extra` blocks); resolves when the turn ends.
   * Errors are shown in the view and also rethrown.
   */
  async send(text: string, extra: { items: ContextItem[]; blocks: ResourceBlock[] } = { items: [], blocks: [] }): Promise<string> {
    if (this.state.meta.busy) {
      throw new Error('A turn is already running; stop it first.');
    }
    const sessionId = await this.ensureSession();
    const items = [...this.state.meta.context, ...extra.items];
    const blocks: ContentBlock[] = [...this.contextBlocks, ...extra.blocks];
    if (text.trim()) {
      blocks.unshift({ type: 'text', text });
    }
    this.contextBlocks = [];
    return this.runPrompt(sessionId, text, items, blocks);
  }

  /**
   * Send the last prompt of this session again, as it was sent (its text and attachments):
   * the error card's Retry after a provider failure.
   */
  async retry(): Promise<string> {
    if (this.state.meta.busy) {
      throw new Error('A turn is already running; stop it first.');
    }
    const last = this.lastPrompt;
    if (!last) {
      throw new Error('There is no prompt to send again in this session.');
    }
    const sessionId = await this.ensureSession();
    return this.runPrompt(sessionId, last.text, last.items, last.blocks);
  }

  private async runPrompt(sessionId: string, text: string, items: ContextItem[], blocks: ContentBlock[]): Promise<string> {
    const client = this.requireClient();
    this.lastPrompt = { text, items, blocks };
    this.writtenThisTurn = new Set();
    this.dispatch({ type: 'userPrompt', text, context: items });
    this.meta({ busy: true, context: [] });
    try {
      const result = await client.prompt(sessionId, blocks);
      const { session, turn } = promptUsage(result);
      // The session's count of turns after this one is this turn's number.
      this.dispatch({
        type: 'turnEnded',
        stopReason: result.stopReason,
        turn: session?.turns || undefined,
        edited: [...this.writtenThisTurn],
      });
      // The session's totals come with the result (and each usage_update): nothing to ask or add up.
      if (session) {
        this.dispatch({ type: 'usageTotals', totals: session, ...(turn ? { turn } : {}) });
      }
      this.emit('turnEnded', result.stopReason);
      return result.stopReason;
    } catch (err) {
      if (!(err instanceof ServerExitedError)) {
        this.dispatch({ type: 'turnEnded', stopReason: 'end_turn' });
        // A provider's failure may pass: the card offers to send the same prompt again.
        const retry = errorCode(err) === PROVIDER_ERROR ? { label: 'Retry', message: { type: 'retry' as const } } : undefined;
        this.keepingNotices(() =>
          this.dispatch({ type: 'notice', level: 'error', text: describeError(err), ...(retry ? { action: retry } : {}) }),
        );
      }
      this.meta({ busy: false });
      this.emit('turnEnded', 'error');
      throw err;
    }
  }

  /** Stop the running turn (`session/cancel`). */
  async cancel(): Promise<void> {
    const sessionId = this.state.meta.sessionId;
    if (!sessionId || !this.client?.running) {
      return;
    }
    await this.client.cancel(sessionId);
  }

  answerPermission(requestId: string, optionId: string | null): void {
    const p = this.permissions.get(requestId);
    if (!p) {
      return;
    }
    this.permissions.delete(requestId);
    this.forgetProposals(p.toolCallId);
    p.resolve(optionId);
    this.dispatch({ type: 'permissionAnswered', requestId, optionId: optionId ?? undefined, cancelled: optionId === null });
  }

  private onPermission(params: RequestPermissionParams, signal: AbortSignal): Promise<RequestPermissionResult> {
    this.permissionCounter += 1;
    const requestId = String(this.permissionCounter);
    return new Promise<RequestPermissionResult>((resolve) => {
      const finish = (optionId: string | null) => {
        resolve(optionId ? { outcome: { outcome: 'selected', optionId } } : { outcome: { outcome: 'cancelled' } });
      };
      const { toolCallId } = params.toolCall;
      this.permissions.set(requestId, { resolve: finish, toolCallId });
      for (const c of params.toolCall.content ?? []) {
        if (c.type === 'diff') {
          this.proposals.set(proposalKey(toolCallId, c.path), { toolCallId, file: c.path, oldText: c.oldText ?? null, newText: c.newText });
        }
      }
      this.dispatch({ type: 'permissionAsked', requestId, params });
      signal.addEventListener(
        'abort',
        () => {
          if (this.permissions.delete(requestId)) {
            this.forgetProposals(toolCallId);
            this.dispatch({ type: 'permissionAnswered', requestId, cancelled: true });
            finish(null);
          }
        },
        { once: true },
      );
      this.host.onPermissionAsked?.(params, signal).then(
        (optionId) => {
          if (optionId !== null && this.permissions.has(requestId)) {
            this.answerPermission(requestId, optionId);
          }
        },
        (err: unknown) => this.log(`[parley] permission dialog failed: ${describeError(err)}`),
      );
    });
  }

  // ---- undo ----

  /**
   * Undo a turn's edits: `_parley/session/restore` puts the files edited from that turn on
   * back as they were before it (the conversation stays). Without a number, the latest turn
   * shown that edited files, else the session's last turn. The view shows what was restored
   * and removed, or why nothing was (a notice, besides the rejection).
   */
  async undoTurn(turn?: number): Promise<RestoreResult> {
    const sessionId = this.state.meta.sessionId;
    const target = turn ?? this.lastUndoableTurn();
    const refuse = (text: string) => {
      this.dispatch({ type: 'notice', level: 'warning', text });
      return new Error(text);
    };
    if (!sessionId || target === undefined) {
      throw refuse('There is no turn to undo in this session. (/undo restores the latest turn whose edits can still be undone.)');
    }
    if (this.state.meta.busy) {
      throw refuse('A turn is running; stop it before undoing one.');
    }
    if (this.undoing) {
      throw refuse('A turn is being undone already.');
    }
    this.undoing = true;
    this.dispatch({ type: 'turnUndo', turn: target, state: 'undoing' });
    let result: RestoreResult;
    try {
      await this.ensureSession();
      result = await this.requireClient().restore(sessionId, target);
    } catch (err) {
      this.dispatch({ type: 'turnUndo', turn: target, state: 'ready' });
      const why = isMethodNotFound(err)
        ? 'this Parley server cannot undo turns (it has no _parley/session/restore); update it'
        : describeError(err);
      this.dispatch({ type: 'notice', level: 'error', text: `Could not undo turn ${target}: ${why}.` });
      throw err;
    } finally {
      this.undoing = false;
    }
    const cwd = this.state.meta.cwd;
    if (result.rejected) {
      this.dispatch({ type: 'turnUndo', turn: target, state: 'ready' });
      this.dispatch({
        type: 'notice',
        level: 'warning',
        text: `Turn ${target} was not undone: you chose to keep files changed since it; nothing was restored.`,
      });
      return result;
    }
    const failed = result.failed ?? [];
    // A file that could not be written keeps its checkpoint: the button stays to try again.
    this.dispatch({ type: 'turnUndo', turn: target, state: failed.length ? 'ready' : 'undone', restored: result.files });
    const later = (this.state.meta.usage.turns ?? target) > target;
    const summary = restoreSummary(target, result.files, cwd, later);
    if (failed.length) {
      const which = failed.map((f) => `${relativeTo(f.path, cwd)} (${f.reason})`).join(', ');
      this.dispatch({ type: 'notice', level: 'warning', text: `${summary} Could not restore ${which}; Undo turn tries again.` });
    } else {
      this.dispatch({ type: 'notice', level: 'info', text: summary });
    }
    return result;
  }

  /**
   * The latest turn shown that edited files and is not undone, else the session's last turn
   * (its edits may not be shown: a reload shows only the last turn's) unless it is shown undone.
   */
  private lastUndoableTurn(): number | undefined {
    const turns = this.state.entries.filter((e) => e.kind === 'turn');
    const ready = turns.filter((e) => e.undo === 'ready').pop();
    if (ready) {
      return ready.turn;
    }
    const last = this.state.meta.usage.turns || undefined;
    return turns.some((e) => e.turn === last) ? undefined : last;
  }

  // ---- files ----

  /** The edit an open permission prompt asks about (for the diff view); undefined once answered. */
  proposedEdit(toolCallId: string, file: string): ProposedEdit | undefined {
    return this.proposals.get(proposalKey(toolCallId, file));
  }

  private forgetProposals(toolCallId: string): void {
    for (const [key, edit] of this.proposals) {
      if (edit.toolCallId === toolCallId) {
        this.proposals.delete(key);
      }
    }
  }

  /** `fs/write_text_file`: the edit applied in the editor, and the file kept as one this turn edited. */
  private async writeTextFile(files: WorkspaceFileAccess, params: WriteTextFileParams): Promise<EmptyResult> {
    const result = await files.writeTextFile(params);
    this.writtenThisTurn.add(params.path);
    this.log(`[parley] wrote ${params.path} through the editor`);
    return result;
  }

  // ---- models ----

  async refreshModels(): Promise<ModelInfo[]> {
    await this.ensureStarted();
    const result = await this.requireClient().models();
    this.defaultModel = result.defaultModel ?? this.defaultModel;
    this.meta({ models: toModelOptions(result.models), model: this.state.meta.model ?? this.defaultModel });
    return result.models;
  }

  /**
   * The model for this session (from its next round) and new ones: through the model config
   * option (`session/set_config_option`) when the server offers one, else `_parley/session/configure`.
   */
  async selectModel(model: string): Promise<void> {
    this.chosenModel = model;
    const option = this.state.meta.configOptions.find((o) => o.category === MODEL_CATEGORY);
    await this.configureSession(option?.id, model, { model });
    this.meta({ model });
  }

  /**
   * Set a configuration option of the session. The tool policy (`tool_policy`) also holds
   * for new sessions, and goes through `_parley/session/configure` when the server offers no
   * such option; another option must be one the server offers.
   */
  async setConfigOption(configId: string, value: string): Promise<void> {
    const option = this.state.meta.configOptions.find((o) => o.id === configId);
    if (configId === TOOL_POLICY_OPTION) {
      const known = isToolPolicy(value);
      if (!known && !option) {
        throw new Error(`Unknown tool policy: ${value}`);
      }
      if (known) {
        this.chosenToolPolicy = value;
      }
      await this.configureSession(option?.id, value, known ? { toolPolicy: value } : undefined);
      this.meta({ toolPolicy: value });
      return;
    }
    if (!option) {
      throw new Error(`The server offers no option ${configId} for this session.`);
    }
    await this.configureSession(option.id, value, undefined);
  }

  /** Applies a setting to the open session: by its config option if any, else by `configure`. */
  private async configureSession(
    configId: string | undefined,
    value: string,
    fallback: Omit<ConfigureParams, 'sessionId'> | undefined,
  ): Promise<void> {
    const sessionId = this.state.meta.sessionId;
    if (!sessionId || !this.client?.running) {
      return; // no session open: the model and the tool policy go with the next session/new
    }
    if (configId) {
      const result = await this.client.setConfigOption(sessionId, configId, value);
      if (this.state.meta.sessionId === sessionId) {
        this.dispatch({ type: 'configOptions', options: result.configOptions });
      }
    } else if (fallback) {
      await this.client.configure({ sessionId, ...fallback });
    }
  }

  private requireClient(): ParleyClient {
    if (!this.client?.running) {
      throw new ServerExitedError('The Parley server is not running.');
    }
    return this.client;
  }
}

/** The JSON-RPC error code of `err`, if it is a JSON-RPC error. */
function errorCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

/**
 * `entries` (a replay) with the kept notices back in place: each at the end of the answer to
 * its prompt — the `afterPrompt`-th, or the last prompt with its text when the replay counts
 * differently — and at the end when neither is found.
 */
export function withKeptNotices(entries: Entry[], kept: KeptNotice[]): Entry[] {
  const out = [...entries];
  let next = 0;
  for (const n of kept) {
    const prompts = out.flatMap((e, i) => (e.kind === 'user' ? [i] : []));
    let at = n.afterPrompt === 0 ? -1 : prompts[n.afterPrompt - 1];
    const prompt = at === undefined || at < 0 ? undefined : out[at];
    if (n.afterPrompt > 0 && (prompt?.kind !== 'user' || (n.promptText !== undefined && prompt.text !== n.promptText))) {
      const byText = prompts.filter((i) => {
        const e = out[i];
        return e.kind === 'user' && e.text === n.promptText;
      });
      at = byText.length ? byText[byText.length - 1] : out.length - 1;
    }
    // After the answer: before the next prompt.
    const from = (at ?? out.length - 1) + 1;
    let end = from;
    while (end < out.length && out[end].kind !== 'user') {
      end++;
    }
    out.splice(end, 0, { kind: 'notice', id: `kept-notice-${++next}`, level: n.level, text: n.text });
  }
  return out;
}

/** What a restore did, as a notice: the files put back and those removed. */
export function restoreSummary(turn: number, files: RestoredFile[], cwd?: string, laterTurns = false): string {
  if (files.length === 0) {
    return `Nothing to undo in turn ${turn}${laterTurns ? ' and after it' : ''}: no file it edited needed restoring. The conversation is kept.`;
  }
  const names = (action: RestoredFile['action']) =>
    files.filter((f) => f.action === action).map((f) => relativeTo(f.path, cwd));
  const parts = [
    ...(names('restored').length ? [`restored ${names('restored').join(', ')}`] : []),
    ...(names('removed').length ? [`removed ${names('removed').join(', ')} (created by the turn)`] : []),
  ];
  return `Undid turn ${turn}${laterTurns ? ' and the turns after it' : ''}: ${parts.join('; ')}. The conversation is kept.`;
}

function proposalKey(toolCallId: string, file: string): string {
  return `${toolCallId}\u0000${file}`;
}

/** How long `session/close` may take before the controller goes on without its answer. */
const CLOSE_TIMEOUT_MS = 2000;

/** `session/close`, its failure (or a server slow to answer) logged rather than thrown. */
async function closeQuietly(client: ParleyClient, sessionId: string, log: (line: string) => void): Promise<void> {
  const timeout = new Promise<void>((resolve) => setTimeout(resolve, CLOSE_TIMEOUT_MS).unref());
  const closed = client.closeSession(sessionId).catch((err: unknown) => {
    log(`[parley] session/close ${sessionId} failed: ${describeError(err)}`);
  });
  await Promise.race([closed, timeout]);
}

const TOOL_POLICIES: readonly ToolPolicy[] = ['hybrid', 'stream', 'sync'];

function isToolPolicy(value: string): value is ToolPolicy {
  return (TOOL_POLICIES as readonly string[]).includes(value);
}

function toModelOptions(models: ModelInfo[]): ModelOption[] {
  return models.map((m) => ({ id: m.id, available: m.available, ...(m.reason ? { reason: m.reason } : {}) }));
}

/** A resource block and its chip, for a file or a part of one. */
export function resourceContext(
  uri: string,
  text: string,
  range?: { startLine: number; endLine: number },
  mimeType?: string,
): { item: ContextItem; block: ResourceBlock } {
  const base = labelForUri(uri);
  const label = range ? `${base}:${range.startLine}-${range.endLine}` : base;
  const fullUri = range ? `${uri}#L${range.startLine}-L${range.endLine}` : uri;
  return {
    item: { label, uri: fullUri },
    block: { type: 'resource', resource: { uri: fullUri, text, ...(mimeType ? { mimeType } : {}) } },
  };
}
