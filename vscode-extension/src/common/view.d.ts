/**
 * What the chat view shows, and the messages between the extension host and the webview.
 * Shared by both sides; a declaration file so the webview build emits nothing for it.
 * Self-contained on purpose: the webview program must not pull in host modules.
 */

export interface ContextItem {
  /** Short label, e.g. `geometry.py:10-20`. */
  label: string;
  uri: string;
}

export interface UserEntry {
  kind: 'user';
  id: string;
  text: string;
  context: ContextItem[];
  /** The stored message's id, when replayed by `session/load`. */
  messageId?: string;
  /** A replayed slash command (`_meta.parley.command`): not one of the server's numbered turns. */
  command?: boolean;
}

export interface AgentEntry {
  kind: 'agent';
  id: string;
  text: string;
  messageId?: string;
  /** Message ids this entry's text answered to (revisions replace by id). */
  aliases: string[];
  revised: boolean;
  streaming: boolean;
}

export interface ThoughtEntry {
  kind: 'thought';
  id: string;
  text: string;
  messageId?: string;
  streaming: boolean;
}

export type ToolStatus = 'pending' | 'in_progress' | 'completed' | 'failed';

/** A file a tool call touches, shown as a link that opens it (at the line, 1-based). */
export interface LocationView {
  path: string;
  line?: number;
  /** E.g. `server/app.py:10` (relative to the workspace root when inside it). */
  label: string;
}

/** One line of a diff block: unchanged (` `), removed (`-`) or added (`+`). */
export interface DiffLine {
  op: ' ' | '-' | '+';
  text: string;
}

/** What a tool call shows: text (the code to be evaluated), an edit's diff, or an image it displayed (base64). */
export type ToolContentView =
  | { kind: 'text'; text: string }
  | { kind: 'image'; mimeType: string; data: string }
  | {
      kind: 'diff';
      /** As shown: relative to the workspace root when inside it. */
      path: string;
      /** The file's path as the server sent it (what "Open diff" asks the host for). */
      file: string;
      lines: DiffLine[];
      /** Lines added and removed, over the whole edit. */
      added: number;
      removed: number;
      /** A file the edit creates. */
      newFile: boolean;
    };

export interface ToolEntry {
  kind: 'tool';
  id: string;
  toolCallId: string;
  title: string;
  toolKind: string;
  status: ToolStatus;
  /** The input, as shown (pretty JSON). */
  input?: string;
  /** What the call does, as the server shows it (the code, the diff); shown instead of `input`. */
  content: ToolContentView[];
  locations: LocationView[];
  /** The output, as shown. */
  output?: string;
  /** The model did not make this call after all: shown muted, not as an error. */
  superseded: boolean;
  /** The user rejected this call when asked (it ends `failed`): shown as rejected, not as an error. */
  rejected?: boolean;
  /**
   * A command's output as it ran (`_meta.parley.commandOutput.append`, raw: ANSI colours
   * kept), its last part when long; shown live while it runs, and in "Open in Terminal".
   */
  commandOutput?: string;
  /** Characters of the command's output dropped from the start of `commandOutput` (it keeps the last part). */
  commandOutputCut?: number;
  /** The call showed a terminal of the client that ran it (another client's `{type: "terminal"}`). */
  terminal?: boolean;
}

export interface PermissionOptionView {
  optionId: string;
  name: string;
  kind: string;
}

export interface PermissionEntry {
  kind: 'permission';
  id: string;
  requestId: string;
  toolCallId: string;
  title: string;
  toolKind: string;
  input?: string;
  /** What is asked about (the code, the diff); shown instead of `input`. */
  content: ToolContentView[];
  locations: LocationView[];
  options: PermissionOptionView[];
  /** Set once answered: what was chosen (its option's kind, e.g. `allow_once`), as shown. */
  answer?: { optionId?: string; kind?: string; label: string; note?: string };
}

export interface NoticeEntry {
  kind: 'notice';
  id: string;
  level: 'info' | 'warning' | 'error';
  text: string;
  /** The server's notice's message id (`_meta.parley.notice`); none for the chat's own. */
  messageId?: string;
  /** A button under the notice. */
  action?: { label: string; message: ViewToHost };
  /** A question's buttons under the notice, one per answer (e.g. which server to run). */
  choices?: { label: string; message: ViewToHost }[];
}

/**
 * The end of a turn that edited files: which, and "Undo turn" (`_parley/session/restore`),
 * which puts the files edited from this turn on back as they were before it.
 */
export interface TurnEntry {
  kind: 'turn';
  id: string;
  /** The turn's number in the session (1-based, as the server counts turns). */
  turn: number;
  /** The files the turn edited, as shown (relative to the workspace root when inside it). */
  files: string[];
  /** `undoing` while the server restores; `undone` after (also for a later turn undone with an earlier one). */
  undo: 'ready' | 'undoing' | 'undone';
  /** What the restore did, once undone by this turn's own button or command. */
  restored?: { path: string; action: 'restored' | 'removed' }[];
  /** The plan shown before the turn's prompt (null: none), shown again when the turn is undone; absent when unknown (a replayed turn). */
  planBefore?: PlanItemView[] | null;
}

export type Entry = UserEntry | AgentEntry | ThoughtEntry | ToolEntry | PermissionEntry | NoticeEntry | TurnEntry;

export interface ModelOption {
  id: string;
  available: boolean;
  reason?: string;
}

export interface UsageView {
  /** Context tokens in use and the window size (last `usage_update`). */
  contextUsed?: number;
  contextSize?: number;
  /**
   * The session's totals exactly as the server last sent them (`usage_update`'s
   * `_meta.parley.session`, the prompt's and `session/load`'s results): never summed here.
   * Tokens counted in this session (input + output).
   */
  sessionTokens: number;
  inputTokens: number;
  outputTokens: number;
  /** Input tokens read from the provider's prompt cache, when the server counts them. */
  cachedReadTokens?: number;
  /** Session cost; null when a model's price is unknown. */
  cost?: { amount: number; currency: string } | null;
  /** The session's cost by kind of token, when the server said. */
  costBreakdown?: { uncachedInput: number; cacheReads: number; cacheWrites: number; output: number; currency: string };
  /** Turns in the session so far (the last turn's number), when the server said. */
  turns?: number;
  /** The last turn's cost by kind of token, and the discarded streams' estimated tokens, when the server said. */
  lastTurn?: {
    costBreakdown?: { uncachedInput: number; cacheReads: number; cacheWrites: number; output: number; currency: string };
    wastedTokensEstimate?: number;
  };
}

/** A select the server offers for the session (ACP `configOptions`): model, tool policy, … */
export interface ConfigOptionView {
  id: string;
  name: string;
  category?: string;
  description?: string;
  currentValue: string;
  /** Its values; `group` names the header a value is listed under. */
  options: { value: string; name: string; description?: string; group?: string }[];
}

/** A slash command the server offers (`available_commands_update`), without its `/`. */
export interface CommandView {
  name: string;
  description: string;
  /** What to type after the name, e.g. `PROVIDER:MODEL`. */
  hint?: string;
}

/** The session's mode (`ask`, `accept_edits`, `plan`) and the modes it may switch to. */
export interface ModeView {
  currentModeId: string;
  modes: { id: string; name: string; description?: string }[];
  /** How the server takes a change: `session/set_mode`, or the `mode` config option (its id). */
  via: { method: 'set_mode' } | { method: 'config_option'; configId: string };
}

/** One item of the model's plan, as shown above the transcript. */
export interface PlanItemView {
  content: string;
  status: 'pending' | 'in_progress' | 'completed';
  priority: 'high' | 'medium' | 'low';
}

export type ServerState = 'stopped' | 'starting' | 'ready' | 'exited';

export interface SessionRow {
  sessionId: string;
  title: string;
  updatedAt?: string;
  current: boolean;
}

export interface ViewMeta {
  serverState: ServerState;
  sessionId?: string;
  /** The session's workspace root (tool locations are shown relative to it). */
  cwd?: string;
  title?: string;
  model?: string;
  models: ModelOption[];
  /** The session's configuration options, from the server (empty: it offers none). */
  configOptions: ConfigOptionView[];
  /** The session's tool policy (`hybrid`, `stream`, `sync`). */
  toolPolicy?: string;
  /** The session's mode, when the server offers modes. */
  mode?: ModeView;
  /** The model's plan (the last `plan` update): shown above the transcript; none or empty: hidden. */
  plan?: PlanItemView[];
  /** The slash commands the prompt box offers when the user types `/`. */
  commands: CommandView[];
  busy: boolean;
  loading: boolean;
  usage: UsageView;
  /** Attachments waiting to go with the next prompt. */
  context: ContextItem[];
}

export interface ViewState {
  meta: ViewMeta;
  entries: Entry[];
}

export type HostToView =
  | { type: 'reset'; state: ViewState }
  /**
   * Revise: entries new or changed (other than by text appended while they stream), each
   * whole; and the ids of entries gone.
   */
  | { type: 'entries'; upserts: Entry[]; removed: string[] }
  /** Append: `text` added at the end of a streamed answer's or thought's text (a chunk). */
  | { type: 'append'; id: string; text: string }
  /** Finish: a streamed answer or thought is complete (its text as shown). */
  | { type: 'finish'; id: string }
  /** Output: `text` added at the end of a running command's output (a tool entry's `commandOutput`). */
  | { type: 'output'; id: string; text: string }
  | { type: 'meta'; meta: ViewMeta }
  /** The history list; `canDelete`: the server offers `session/delete`. */
  | { type: 'sessions'; sessions: SessionRow[]; canDelete?: boolean }
  | { type: 'focus' };

export type ViewToHost =
  | { type: 'ready' }
  | { type: 'send'; text: string }
  | { type: 'cancel' }
  /** An answer to a question; `note`: with a rejection, the user's words for the model (`_meta.parley.note`). */
  | { type: 'permission'; requestId: string; optionId: string | null; note?: string }
  | { type: 'selectModel'; model: string }
  /** Set a configuration option (`tool_policy`, `thought_level`, …) of the session. */
  | { type: 'setConfigOption'; configId: string; value: string }
  /** Switch the session's mode. */
  | { type: 'setMode'; modeId: string }
  /** Show a command's output in a (read-only) terminal of the editor, live while it runs. */
  | { type: 'openTerminal'; toolCallId: string }
  | { type: 'newSession' }
  | { type: 'listSessions' }
  | { type: 'loadSession'; sessionId: string }
  | { type: 'removeContext'; index: number }
  /** Open the editor's diff view of an edit asked about: the file now, and as the edit leaves it. */
  | { type: 'openDiff'; toolCallId: string; file: string }
  /** Undo a turn's edits (and those of the turns after it): `_parley/session/restore`. */
  | { type: 'undoTurn'; turn: number }
  /** Open a file a tool call touched, at its line (1-based). */
  | { type: 'openLocation'; path: string; line?: number }
  /** Insert a code block's text at the cursor of the active text editor (replacing its selection). */
  | { type: 'insertCode'; text: string }
  | { type: 'restart' }
  /** Install Parley's server into the extension's storage (the button when none is found). */
  | { type: 'installServer' }
  /** Approve the workspace's own `.venv/bin/parley` at `file` (as it was when asked) and run it. */
  | { type: 'useWorkspaceServer'; file: string }
  /** Keep running the installed server, not the workspace's `file` (not asked again in this window). */
  | { type: 'useInstalledServer'; file: string }
  /** Send the last prompt again (the error card's Retry, after a provider failure). */
  | { type: 'retry' }
  /** Save a session's transcript as Markdown (the host asks where). */
  | { type: 'exportSession'; sessionId: string }
  /** Delete a stored session (the view has asked the user to confirm). */
  | { type: 'deleteSession'; sessionId: string };
