/**
 * Sessions and history: the session shown, open on the running server (new, loaded from the
 * store, resumed after a restart), where the server's updates go, and the stored sessions
 * (listed, deleted, exported as the server's Markdown).
 */

import { type ParleyClient, describeError } from '../../client/client';
import type { LoadSessionResult, NewSessionResult, ResumeSessionResult, SessionNotification, SessionSummary } from '../../client/protocol';
import type { SessionRow } from '../../common/view';
import type { ChatCore } from './core';
import { withKeptNotices } from './keptNotices';
import type { Models } from './models';
import type { ServerProcess } from './serverProcess';

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

const NO_USAGE = { sessionTokens: 0, inputTokens: 0, outputTokens: 0 };

export class Sessions {
  /** Called when another session (or the same again) is shown: the last prompt is no longer one to retry. */
  onShown: () => void = () => undefined;
  /** The session open on the current server process (cleared when the server goes away). */
  private openSession: string | undefined;
  private sessionPromise: Promise<string> | undefined;
  /** `session/new` requests in flight, and the updates that came meanwhile for other sessions. */
  private opening = 0;
  private early: SessionNotification[] = [];
  /** The session `ensureSession` opens when the view shows none (`restoreOnOpen`). */
  private toRestore: { sessionId: string; title?: string } | undefined;
  /** Session titles from the last `session/list`, for a session opened or exported by id alone (the History list). */
  private readonly titles = new Map<string, string>();

  constructor(
    private readonly core: ChatCore,
    private readonly server: ServerProcess,
    private readonly models: Models,
  ) {}

  /** The server went away (or is restarting): no session is open on it any more. */
  forgetOpen(): void {
    this.sessionPromise = undefined;
    this.openSession = undefined;
  }

  /** A `session/update`: to the view, or kept for a session being opened. */
  route(n: SessionNotification): void {
    if (n.sessionId === this.core.state.meta.sessionId) {
      this.core.dispatch({ type: 'update', update: n.update });
    } else if (this.opening > 0) {
      this.early.push(n); // perhaps the session being opened: its id is not known yet
    }
  }

  /**
   * The current session, open on a running server. After the server went away, the session
   * shown is loaded again (resumed); when there is none, or it cannot be, a new one starts.
   */
  ensureSession(): Promise<string> {
    if (this.openSession && this.core.client?.running) {
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
    await this.server.ensureStarted();
    const previous = this.core.state.meta.sessionId;
    const kept = previous ? undefined : this.toRestore;
    if (kept) {
      this.toRestore = undefined;
      try {
        await this.loadSession(kept.sessionId, kept.title);
        return kept.sessionId;
      } catch (err) {
        this.core.log(`Could not reopen session ${kept.sessionId}: ${describeError(err)}`, 'warn');
        return this.newSessionSaying(`The conversation open before could not be reopened (${describeError(err)}). This is a new session.`);
      }
    }
    if (previous) {
      try {
        await this.reopen(previous);
        return previous;
      } catch (err) {
        return this.newSessionSaying(`The previous session could not be reloaded (${describeError(err)}). This is a new session.`);
      }
    }
    return this.newSession();
  }

  /** A new session, and a warning in it (why the one before could not be opened). */
  async newSessionSaying(warning: string): Promise<string> {
    const sessionId = await this.newSession();
    this.core.dispatch({ type: 'notice', level: 'warning', text: warning });
    return sessionId;
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
  async reopen(sessionId: string): Promise<'resumed' | 'reloaded'> {
    const { core } = this;
    const client = core.requireClient();
    if (!client.sessionCapabilities.resume) {
      await this.loadSession(sessionId, core.state.meta.title);
      return 'reloaded';
    }
    core.meta({ loading: true });
    let result: ResumeSessionResult;
    try {
      result = await client.resumeSession(sessionId, core.host.workspaceRoot(), this.otherRoots());
    } finally {
      core.meta({ loading: false });
    }
    const parley = result._meta?.parley;
    core.meta({ sessionId, cwd: core.host.workspaceRoot(), busy: false, model: parley?.model ?? core.state.meta.model, configOptions: [] });
    core.dispatch({ type: 'configOptions', options: result.configOptions ?? [] });
    core.dispatch({ type: 'modes', modes: result.modes });
    this.openSession = sessionId;
    if (parley?.usage) {
      core.dispatch({ type: 'usageTotals', totals: parley.usage });
    }
    core.log(`Resumed session ${sessionId}.`);
    return 'resumed';
  }

  /**
   * `session/close` for the session open on the server, when the server advertises it (it
   * ends the session's kernel and frees it; the session stays stored and shown, and is
   * opened again when needed). A failure is logged: there is nothing the user could do.
   */
  async closeSession(): Promise<void> {
    const sessionId = this.openSession;
    const client = this.core.client;
    this.forgetOpen();
    if (!sessionId || !client?.running || !client.sessionCapabilities.close) {
      return;
    }
    this.core.log(`Closing session ${sessionId} in the server.`);
    await closeQuietly(client, sessionId, (line) => this.core.log(line, 'warn'));
  }

  async newSession(): Promise<string> {
    const { core } = this;
    this.toRestore = undefined;
    await this.server.ensureStarted();
    const client = core.requireClient();
    const settings = core.host.settings();
    const { model, toolPolicy } = this.models.forNewSession();
    this.opening += 1;
    let result: NewSessionResult;
    try {
      result = await client.startSession(
        core.host.workspaceRoot(),
        {
          model,
          toolPolicy,
          autoApprove: settings.autoApprove?.length ? settings.autoApprove : undefined,
          systemPrompt: settings.systemPrompt || undefined,
        },
        this.otherRoots(),
      );
    } finally {
      this.opening -= 1;
    }
    const { sessionId } = result;
    const previous = this.openSession;
    const keptMode = core.state.meta.mode?.currentModeId;
    this.onShown();
    core.dispatch({ type: 'clear' });
    core.meta({
      sessionId,
      cwd: core.host.workspaceRoot(),
      title: undefined,
      busy: false,
      loading: false,
      model: model ?? this.models.defaultModel,
      toolPolicy: toolPolicy ?? 'hybrid',
      configOptions: [],
      commands: [],
      usage: NO_USAGE,
      mode: undefined,
      plan: undefined,
    });
    core.dispatch({ type: 'configOptions', options: result.configOptions ?? [] });
    core.dispatch({ type: 'modes', modes: result.modes });
    this.openSession = sessionId;
    this.sessionPromise = undefined;
    core.log(`New session ${sessionId} (stored from its first prompt).`);
    this.replayEarly(sessionId);
    await this.keepMode(keptMode);
    if (previous && previous !== sessionId && client.sessionCapabilities.close) {
      await closeQuietly(client, previous, (line) => core.log(line));
    }
    return sessionId;
  }

  /**
   * A new chat keeps the mode the one before had (the user chose it: "New" is not "reset"),
   * when the new session offers it; a refusal is logged, the server's mode then shown.
   */
  private async keepMode(modeId: string | undefined): Promise<void> {
    const mode = this.core.state.meta.mode;
    if (!modeId || !mode || mode.currentModeId === modeId || !mode.modes.some((m) => m.id === modeId)) {
      return;
    }
    try {
      await this.models.setMode(modeId);
    } catch (err) {
      this.core.log(`The new session kept the server's mode (${mode.currentModeId}), not ${modeId}: ${describeError(err)}`, 'warn');
    }
  }

  /** The other roots the server could not be given were said in the log (once). */
  private rootsNotTaken = false;

  /**
   * The workspace's other roots, for `additionalDirectories`: sent only to a server that
   * advertises it (ACP's rule); to another, the log says they are not part of the session.
   */
  otherRoots(): string[] {
    const roots = this.core.host.additionalDirectories?.() ?? [];
    if (roots.length === 0 || this.core.client?.sessionCapabilities.additionalDirectories) {
      return roots;
    }
    if (!this.rootsNotTaken) {
      this.rootsNotTaken = true;
      this.core.log(`The server takes no other workspace folders (additionalDirectories): ${roots.join(', ')} are not part of the session.`, 'warn');
    }
    return [];
  }

  /** Passes on the updates for `sessionId` that came before its id was known. */
  private replayEarly(sessionId: string): void {
    const early = this.early.filter((n) => n.sessionId === sessionId);
    if (this.opening === 0) {
      this.early = [];
    }
    for (const n of early) {
      this.core.dispatch({ type: 'update', update: n.update });
    }
  }

  async listSessions(): Promise<SessionSummary[]> {
    await this.server.ensureStarted();
    const client = this.core.requireClient();
    const sessions: SessionSummary[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 20; page++) {
      const result = await client.listSessions({ cwd: this.core.host.workspaceRoot(), cursor });
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
    const meta = this.core.state.meta;
    return sessionId === meta.sessionId ? (meta.title ?? this.titles.get(sessionId)) : this.titles.get(sessionId);
  }

  sessionRows(sessions: SessionSummary[]): SessionRow[] {
    return sessions.map((s) => ({
      sessionId: s.sessionId,
      title: s.title || '(untitled)',
      updatedAt: s.updatedAt ?? undefined,
      current: s.sessionId === this.core.state.meta.sessionId,
    }));
  }

  /**
   * Load a stored session: the view is cleared and the server replays its history (its
   * notices included). Without a title, the one the last `session/list` gave it
   * (`session/load` does not say it).
   */
  async loadSession(sessionId: string, title: string | undefined = this.titles.get(sessionId)): Promise<void> {
    const { core } = this;
    this.toRestore = undefined;
    await this.server.ensureStarted();
    const client = core.requireClient();
    if (core.state.meta.busy && core.state.meta.sessionId) {
      await core.cancel();
    }
    const before = { entries: core.state.entries, meta: core.state.meta };
    const previous = this.openSession;
    core.dispatch({ type: 'clear' });
    core.meta({ sessionId, cwd: core.host.workspaceRoot(), title, commands: [], loading: true, busy: false, usage: NO_USAGE, mode: undefined, plan: undefined });
    try {
      const result = await client.loadSession(sessionId, core.host.workspaceRoot(), this.otherRoots());
      this.showLoaded(sessionId, result);
      if (previous && previous !== sessionId && client.sessionCapabilities.close) {
        await closeQuietly(client, previous, (line) => core.log(line));
      }
      if (result._meta?.parley?.usage) {
        core.dispatch({ type: 'usageTotals', totals: result._meta.parley.usage });
      }
      core.log(`Loaded session ${sessionId}${title ? ` (${title})` : ''}.`);
    } catch (err) {
      core.log(`Could not load session ${sessionId}: ${describeError(err)}`, 'warn');
      // Back to the session we had.
      core.dispatch({ type: 'setEntries', entries: before.entries });
      const { sessionId: shown, cwd, title: shownTitle, commands, configOptions, model, usage, mode, plan } = before.meta;
      core.meta({ sessionId: shown, cwd, title: shownTitle, commands, configOptions, model, usage, mode, plan, loading: false });
      throw err;
    }
  }

  /** A session replayed: its last turn ended, the chat's kept notices back in place, its model and options. */
  private showLoaded(sessionId: string, result: LoadSessionResult): void {
    const { core } = this;
    const parley = result._meta?.parley;
    // The replay's last turn is the session's last: numbered, it offers "Undo turn" if it edited files.
    core.dispatch({ type: 'turnEnded', stopReason: 'end_turn', turn: parley?.usage?.turns || undefined });
    this.restoreKeptNotices(sessionId);
    this.onShown();
    core.meta({ loading: false, model: parley?.model ?? core.state.meta.model, configOptions: [] });
    core.dispatch({ type: 'configOptions', options: result.configOptions ?? [] });
    core.dispatch({ type: 'modes', modes: result.modes });
    if (parley?.model) {
      this.models.chosenModel = parley.model;
    }
    this.openSession = sessionId;
  }

  /** What the chat said itself about the session (the replay does not carry it), back in place. */
  private restoreKeptNotices(sessionId: string): void {
    const kept = this.core.host.notices?.get(sessionId) ?? [];
    if (kept.length) {
      this.core.dispatch({ type: 'setEntries', entries: withKeptNotices(this.core.state.entries, kept) });
    }
  }

  /** The server offers `session/delete` (the history list's Delete). */
  get canDeleteSessions(): boolean {
    return Boolean(this.core.client?.initializeResult?.agentCapabilities?.sessionCapabilities?.delete);
  }

  /** Delete a stored session (and its kept notices); the session shown is replaced by a new one. */
  async deleteSession(sessionId: string): Promise<void> {
    await this.server.ensureStarted();
    await this.core.requireClient().deleteSession(sessionId);
    this.core.host.notices?.set(sessionId, []);
    if (sessionId === this.core.state.meta.sessionId) {
      this.forgetOpen();
      await this.newSession();
    }
  }

  /**
   * A stored session as Markdown: the server's export (`_parley/session/export`), the same
   * document every client and `parley export` give. The view is not touched.
   */
  async exportMarkdown(sessionId: string): Promise<string> {
    await this.server.ensureStarted();
    const { text } = await this.core.requireClient().exportSession(sessionId, 'markdown');
    return text;
  }
}
