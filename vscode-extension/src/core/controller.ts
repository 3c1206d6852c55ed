/**
 * The chat controller: one Parley server, one current session, and the view state. The VS
 * Code layer gives it settings and a few host services, renders its state, and forwards the
 * user's actions. Its work is done by one part per concern (`controller/`), as agent-shell
 * splits its files; they change the view only by dispatching `ChatEvent`s to the reducer:
 *
 * - `controller/core.ts` — the state, `dispatch`, the host, the log, the client;
 * - `controller/serverProcess.ts` — the server's lifecycle;
 * - `controller/sessions.ts` — sessions and history (new, load, resume, list, delete, export);
 * - `controller/turn.ts` — the turn (prompt, attachments, its end, errors, Retry);
 * - `controller/permissions.ts` — permissions and edits; `controller/undo.ts` — Undo turn;
 * - `controller/models.ts` — models and the session's configuration;
 * - `controller/kernels.ts` — the user's own kernel: the running ones, the session attached to one;
 * - `controller/keptNotices.ts` — the chat's own notices kept across reloads.
 *
 * Does not import `vscode`: tested in plain Node against the real server.
 */

import { EventEmitter } from 'node:events';

import { describeError } from '../client/client';
import type { ModelInfo, ResourceBlock, RestoreResult, SessionSummary } from '../client/protocol';
import type { ContextItem, SessionRow } from '../common/view';
import { type ChatEvent, type ChatState, labelForUri } from './chatState';
import { ChatCore, type ControllerHost } from './controller/core';
import { Kernels, type RunningKernel } from './controller/kernels';
import { Models } from './controller/models';
import { Permissions, type ProposedEdit } from './controller/permissions';
import { ServerProcess } from './controller/serverProcess';
import { Sessions } from './controller/sessions';
import { Turn } from './controller/turn';
import { Undo } from './controller/undo';

export type { ControllerHost, ControllerSettings, KeptNotice, LogLevel, NoticeKeeper } from './controller/core';
export { withKeptNotices } from './controller/keptNotices';
export type { ProposedEdit } from './controller/permissions';
export { restoreOutcome } from './controller/undo';
export type { RunningKernel } from './controller/kernels';

interface ControllerEvents {
  /** The state changed: (previous, next). */
  state: [ChatState, ChatState];
  /** A turn ended (for the status bar, tests). */
  turnEnded: [string];
}

export class ChatController extends EventEmitter<ControllerEvents> {
  private readonly core: ChatCore;
  private readonly server: ServerProcess;
  private readonly models: Models;
  private readonly sessions: Sessions;
  private readonly permissions: Permissions;
  private readonly turn: Turn;
  private readonly undo: Undo;
  private readonly kernels: Kernels;

  constructor(host: ControllerHost) {
    super();
    this.core = new ChatCore(host, (prev, next) => this.emit('state', prev, next));
    this.permissions = new Permissions(this.core);
    this.server = new ServerProcess(this.core, {
      requestPermission: (params, signal) => this.permissions.requestPermission(params, signal),
      writeTextFile: (files, params) => this.permissions.writeTextFile(files, params),
      update: (n) => this.sessions.route(n),
      ready: (init) => this.models.serverReady(init),
      exited: () => {
        this.permissions.cancelAll();
        this.sessions.forgetOpen();
      },
    });
    this.models = new Models(this.core, () => this.server.ensureStarted());
    this.sessions = new Sessions(this.core, this.server, this.models);
    this.turn = new Turn(this.core, this.sessions, this.permissions, (stopReason) => this.emit('turnEnded', stopReason));
    this.sessions.onShown = () => this.turn.forgetLastPrompt();
    this.undo = new Undo(this.core, this.sessions);
    this.kernels = new Kernels(this.core, this.sessions);
  }

  get state(): ChatState {
    return this.core.state;
  }

  get client() {
    return this.core.client;
  }

  get sessionId(): string | undefined {
    return this.core.state.meta.sessionId;
  }

  dispatch(event: ChatEvent): void {
    this.core.dispatch(event);
  }

  // ---- server lifecycle ----

  /** Start the server if it is not running. */
  ensureStarted(): Promise<void> {
    return this.server.ensureStarted();
  }

  /**
   * Restart the server. The current session, if any, is opened again: resumed (the view
   * kept as it is) when the server can, else loaded from the store (its history replays into
   * the view); if it cannot be, a new session starts.
   */
  async restart(): Promise<void> {
    const { core } = this;
    const previous = core.state.meta.sessionId;
    this.sessions.forgetOpen();
    await this.server.stop();
    core.meta({ busy: false, loading: false });
    await this.server.ensureStarted();
    if (!previous) {
      await this.sessions.newSession();
      return;
    }
    try {
      const how = await this.sessions.reopen(previous);
      core.dispatch({ type: 'notice', level: 'info', text: `Server restarted; session ${how}.` });
    } catch (err) {
      core.log(`[parley] could not reload session ${previous}: ${describeError(err)}`);
      await this.sessions.newSessionSaying(
        `Server restarted, but the session could not be reloaded (${describeError(err)}). This is a new session.`,
      );
    }
  }

  private disposing: Promise<void> | undefined;

  /**
   * Close the open session (when the server can) and stop the server, for good: a session
   * still being opened starts no server after it. A second call (the window's subscriptions
   * right after `deactivate`) waits for the first rather than stopping the server under the
   * session's close.
   */
  dispose(): Promise<void> {
    this.disposing ??= (async () => {
      await this.sessions.closeSession();
      this.server.closed = true;
      await this.server.stop();
    })();
    return this.disposing;
  }

  // ---- sessions and history ----

  ensureSession(): Promise<string> {
    return this.sessions.ensureSession();
  }

  restoreOnOpen(sessionId: string, title?: string): void {
    this.sessions.restoreOnOpen(sessionId, title);
  }

  closeSession(): Promise<void> {
    return this.sessions.closeSession();
  }

  newSession(): Promise<string> {
    return this.sessions.newSession();
  }

  listSessions(): Promise<SessionSummary[]> {
    return this.sessions.listSessions();
  }

  sessionTitle(sessionId: string): string | undefined {
    return this.sessions.sessionTitle(sessionId);
  }

  sessionRows(sessions: SessionSummary[]): SessionRow[] {
    return this.sessions.sessionRows(sessions);
  }

  /** Load a stored session; without a title, the one the last `session/list` gave it. */
  loadSession(sessionId: string, title?: string): Promise<void> {
    return this.sessions.loadSession(sessionId, title);
  }

  get canDeleteSessions(): boolean {
    return this.sessions.canDeleteSessions;
  }

  deleteSession(sessionId: string): Promise<void> {
    return this.sessions.deleteSession(sessionId);
  }

  /** A stored session as the server's Markdown (`_parley/session/export`). */
  exportMarkdown(sessionId: string): Promise<string> {
    return this.sessions.exportMarkdown(sessionId);
  }

  // ---- the turn ----

  addContext(item: ContextItem, block: ResourceBlock): void {
    this.turn.addContext(item, block);
  }

  removeContext(index: number): void {
    this.turn.removeContext(index);
  }

  send(text: string, extra?: { items: ContextItem[]; blocks: ResourceBlock[] }): Promise<string> {
    return this.turn.send(text, extra);
  }

  retry(): Promise<string> {
    return this.turn.retry();
  }

  /** Stop the running turn (`session/cancel`). */
  cancel(): Promise<void> {
    return this.core.cancel();
  }

  // ---- permissions and edits ----

  answerPermission(requestId: string, optionId: string | null, note?: string): void {
    this.permissions.answerPermission(requestId, optionId, note);
  }

  proposedEdit(toolCallId: string, file: string): ProposedEdit | undefined {
    return this.permissions.proposedEdit(toolCallId, file);
  }

  undoTurn(turn?: number): Promise<RestoreResult> {
    // A restore comes after the last turn in the session: Retry no longer replaces that turn.
    this.turn.keepLastTurn();
    return this.undo.undoTurn(turn);
  }

  /**
   * Redo: the last undo undone, sent as the `/redo` command, so the chat shows the server's
   * report of each file (as a replay will) and the server keeps it at its place.
   */
  redoTurn(): Promise<string> {
    return this.turn.send('/redo');
  }

  // ---- models and configuration ----

  refreshModels(): Promise<ModelInfo[]> {
    return this.models.refreshModels();
  }

  selectModel(model: string): Promise<void> {
    return this.models.selectModel(model);
  }

  setConfigOption(configId: string, value: string): Promise<void> {
    return this.models.setConfigOption(configId, value);
  }

  // ---- the user's own kernel ----

  /** The Jupyter kernels running here (`parley kernels --json`). */
  runningKernels(): Promise<RunningKernel[]> {
    return this.kernels.running();
  }

  /** Attach the session's Python tools to `kernel` (the kernel option's value, or a connection file). */
  attachKernel(kernel: string): Promise<void> {
    return this.kernels.attach(kernel);
  }

  /** Switch the session's mode (`ask`, `accept_edits`, `plan`). */
  setMode(modeId: string): Promise<void> {
    return this.models.setMode(modeId);
  }
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
