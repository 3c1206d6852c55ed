/**
 * What the controller's parts share: the view state and the one way to change it (`dispatch`
 * a `ChatEvent`: the typed messages between the parts and the reducer), the host, the log,
 * and the protocol client of the running server.
 */

import type { ParleyClient, ServerOptions } from '../../client/client';
import { ServerExitedError } from '../../client/client';
import type { EditorCallToolParams, EditorCallToolResult, RequestPermissionParams, ToolPolicy, ToolSpec } from '../../client/protocol';
import type { NoticeEntry, ViewMeta } from '../../common/view';
import { type ChatEvent, type ChatState, initialState, reduce } from '../chatState';
import type { EditorFiles } from '../fileAccess';

/** A notice kept across reloads, and where it goes: after the answer to the `afterPrompt`-th prompt. */
export interface KeptNotice {
  level: NoticeEntry['level'];
  text: string;
  /** How many prompts came before it in the session (0: before the first). */
  afterPrompt: number;
  /** That prompt's text, to find it again if the replay numbers prompts differently. */
  promptText?: string;
}

/** Where a session's kept notices are (e.g. VS Code's workspace state). */
export interface NoticeKeeper {
  get(sessionId: string): KeptNotice[];
  set(sessionId: string, notices: KeptNotice[]): void;
}

export interface ControllerSettings {
  server: ServerOptions;
  /** The model for new sessions; empty means the server's default. */
  defaultModel?: string;
  toolPolicy?: ToolPolicy;
  autoApprove?: string[];
  systemPrompt?: string;
}

/** How a log line is written: the controller's lines have a level, the server's say their own. */
export type LogLevel = 'info' | 'warn' | 'error' | 'server';

export interface ControllerHost {
  /** The workspace root (absolute), sent as the session's `cwd`. */
  workspaceRoot(): string;
  /** The workspace's other roots (absolute; a multi-root workspace's folders after the first), sent as `additionalDirectories`. */
  additionalDirectories?(): string[];
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
  /**
   * Why there is no server to start (none installed, e.g.) and the button that fixes it, or
   * undefined when there is one. Asked after `serverBlocked`; shown in the view as a notice.
   */
  serverMissing?(): { text: string; action: NonNullable<NoticeEntry['action']> } | undefined;
  clientInfo?: { name: string; version: string };
  /**
   * The server is Parley of another version than `clientInfo.version`: say so (a notification
   * and a log line). Called once per server version the controller meets, not per session or
   * restart. Without it, the log says it.
   */
  serverVersionDiffers?(serverVersion: string, ownVersion: string): void;
  /**
   * Where the chat's own notices of a session (a server crash) are kept: the server's
   * replay brings back its messages and its own notices (a stop, a failed turn), not what
   * the chat said. E.g. VS Code's workspace state; without it, a reload shows none of them.
   */
  notices?: NoticeKeeper;
}

export class ChatCore {
  state: ChatState = initialState();
  /** The running server's client (undefined before the first start and while restarting). */
  client: ParleyClient | undefined;

  constructor(
    readonly host: ControllerHost,
    /** Called with (previous, next) whenever the state changed. */
    private readonly changed: (prev: ChatState, next: ChatState) => void,
  ) {}

  dispatch(event: ChatEvent): void {
    const prev = this.state;
    const next = reduce(prev, event);
    if (next !== prev) {
      this.state = next;
      this.changed(prev, next);
    }
  }

  meta(patch: Partial<ViewMeta>): void {
    this.dispatch({ type: 'meta', patch });
  }

  log(line: string, level: LogLevel = 'info'): void {
    this.host.log?.(line, level);
  }

  requireClient(): ParleyClient {
    if (!this.client?.running) {
      throw new ServerExitedError('The Parley server is not running.');
    }
    return this.client;
  }

  /** Stop the running turn (`session/cancel`). */
  async cancel(): Promise<void> {
    const sessionId = this.state.meta.sessionId;
    if (!sessionId || !this.client?.running) {
      return;
    }
    await this.client.cancel(sessionId);
  }
}
