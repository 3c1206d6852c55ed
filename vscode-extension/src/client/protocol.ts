/**
 * Wire types of the Parley protocol v1 (docs/protocol.md). ACP's part is the official SDK's
 * schema types (`@agentclientprotocol/sdk`, generated from ACP's JSON Schema), imported for
 * types only: nothing of the SDK runs in the extension. Where Parley sends an ACP message
 * with its own `_meta.parley` object, the type is ACP's with that object typed. Parley's
 * additions (`_meta.parley` objects, `_parley/*` methods) follow, apart. Every method is
 * listed once, in the maps at the end, with its params and result; the client's `request`
 * takes its types from there.
 */

import type * as acp from '@agentclientprotocol/sdk';

export const PROTOCOL_VERSION = 1;

// ---- ACP, from the SDK ----

export type ToolKind = acp.ToolKind;
export type ContentBlock = acp.ContentBlock;
export type ResourceBlock = Extract<acp.ContentBlock, { type: 'resource' }>;
export type ToolCallStatus = acp.ToolCallStatus;
/** What a tool call shows: text content, an edit's diff, or a terminal of the client that ran the command. */
export type ToolCallContent = acp.ToolCallContent;
export type ToolCallLocation = acp.ToolCallLocation;
/** ACP's session configuration option (`configOptions`): Parley's `model`, `tool_policy`, `thought_level`, `mode`, … */
export type SessionConfigOption = acp.SessionConfigOption;
export type SessionConfigSelectOption = acp.SessionConfigSelectOption;
/** ACP's `modes` in the answers of `session/new`, `load` and `resume`: the current mode and the choices. */
export type SessionModeState = acp.SessionModeState;
export type PlanEntry = acp.PlanEntry;
export type McpServer = acp.McpServer;
export type StopReason = acp.StopReason;
export type SessionSummary = acp.SessionInfo;
export type PermissionOption = acp.PermissionOption;
export type RequestPermissionResult = acp.RequestPermissionResponse;
export type ReadTextFileParams = acp.ReadTextFileRequest;
export type ReadTextFileResult = acp.ReadTextFileResponse;
/** `fs/write_text_file`: the whole new text of a workspace file (created when missing). */
export type WriteTextFileParams = acp.WriteTextFileRequest;
export type SessionIdParams = acp.CloseSessionRequest;
export type ListSessionsParams = acp.ListSessionsRequest;
export type ListSessionsResult = acp.ListSessionsResponse;
export type SetConfigOptionParams = acp.SetSessionConfigOptionRequest;
/** The full, current set. */
export type SetConfigOptionResult = acp.SetSessionConfigOptionResponse;
/** `session/set_mode`: the session's mode (answered `{}`; a `current_mode_update` follows). */
export type SetModeParams = acp.SetSessionModeRequest;
export type LoadSessionParams = acp.LoadSessionRequest;
/** `session/resume`: reattach to a stored session without a replay. */
export type ResumeSessionParams = WithParleyMeta<acp.ResumeSessionRequest, { kernel?: KernelAddress }>;

/** The user's own kernel a session attaches to (`_meta.parley.kernel`; docs/protocol.md, "The user's own kernel"): here, a local one by its connection file. */
export interface KernelAddress {
  connectionFile: string;
}

/** The result of methods that answer `{}`. */
export type EmptyResult = Record<string, never>;

/** `T` (an ACP message) with its `_meta` holding Parley's object `P` under `parley`. */
type WithParleyMeta<T, P> = Omit<T, '_meta'> & { _meta?: { parley?: P } | null };

/** The session update of ACP's kind `K`. */
type AcpUpdate<K extends acp.SessionUpdate['sessionUpdate']> = Extract<acp.SessionUpdate, { sessionUpdate: K }>;

// ---- Parley's additions ----

/** A tool the client runs itself, declared in `initialize` (`clientCapabilities._meta.parley.tools`). */
export interface ToolSpec {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  kind: ToolKind;
  needsPermission: boolean;
}

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  thoughtTokens?: number;
  cachedReadTokens?: number;
  cachedWriteTokens?: number;
}

export type Cost = Pick<acp.Cost, 'amount' | 'currency'>;

export interface UsageTotals extends Usage {
  cost: Cost | null;
  turns: number;
  rounds: number;
  /** `cost` by kind of token (null exactly when `cost` is). */
  costBreakdown?: CostBreakdown | null;
}

/** What a turn's priced calls cost, by the kind of token paid for. */
export interface CostBreakdown {
  uncachedInput: number;
  cacheReads: number;
  cacheWrites: number;
  output: number;
  currency: string;
}

export interface TurnStats {
  rounds: number;
  streamedRounds: number;
  syncFallbacks: number;
  discardedStreams: number;
  toolCalls: number;
  cost: Cost | null;
  model: string;
  usageComplete?: boolean;
  costBreakdown?: CostBreakdown;
  /** Tokens the discarded streams cost, estimated: never counted in `usage` or `cost`. */
  wastedTokensEstimate?: number;
}

export interface ModelInfo {
  id: string;
  provider: string;
  contextWindow?: number;
  available: boolean;
  reason?: string;
}

/** A tool the server offers, as `initialize` lists it. */
export interface ToolInfo {
  name: string;
  description?: string;
  kind?: ToolKind;
  needsPermission?: boolean;
}

export type ToolPolicy = 'hybrid' | 'stream' | 'sync';

/** Parley's settings for a new session, sent as `session/new`'s `_meta.parley`. */
export interface NewSessionOptions {
  model?: string;
  toolPolicy?: ToolPolicy;
  systemPrompt?: string;
  autoApprove?: string[];
}

/** A notice's `_meta.parley.notice`: the server speaking about the turn, shown once at `level`. */
export interface Notice {
  level: 'info' | 'warning' | 'error';
}

/** `_meta.parley.commandOutput` of a running command's `tool_call_update`. */
export interface CommandOutput {
  /** The command's new output since the last update (raw, ANSI colours kept). */
  append?: string;
}

/** `_meta.parley` of a tool call and its updates. */
export interface ToolCallMeta {
  /** The synchronous call did not make this call the stream announced. */
  superseded?: boolean;
  commandOutput?: CommandOutput;
}

/** The session's totals with the answers of `session/load` and `session/resume`. */
export interface SessionOpenedMeta {
  usage?: UsageTotals;
  model?: string;
}

// ---- client -> server ----

export type InitializeParams = Omit<acp.InitializeRequest, 'clientCapabilities'> & {
  clientCapabilities: WithParleyMeta<acp.ClientCapabilities, { tools?: ToolSpec[]; revisions?: boolean }>;
};

export type InitializeResult = WithParleyMeta<acp.InitializeResponse, { models?: ModelInfo[]; defaultModel?: string; tools?: ToolInfo[] }>;

export type NewSessionParams = WithParleyMeta<acp.NewSessionRequest, NewSessionOptions>;
export type NewSessionResult = acp.NewSessionResponse;
export type LoadSessionResult = WithParleyMeta<acp.LoadSessionResponse, SessionOpenedMeta>;
export type ResumeSessionResult = WithParleyMeta<acp.ResumeSessionResponse, SessionOpenedMeta>;

/**
 * `retry`: this prompt is the last one again, after that turn was cut off (cancelled, or
 * answered with an error); the server replaces the cut-off turn with this one when nothing
 * came after it, and says whether it did (`PromptResult`'s `replaced`).
 */
export type PromptParams = WithParleyMeta<acp.PromptRequest, { retry?: boolean }>;

export type PromptResult = WithParleyMeta<
  acp.PromptResponse,
  {
    usage?: Usage;
    turn?: TurnStats;
    session?: UsageTotals;
    /** Only for a prompt sent with `retry`: the cut-off turn was replaced (false: kept, this is a new turn). */
    replaced?: boolean;
    /** false: a slash command refused as a typo (`/mode pl`), not kept by the server; the chat drops it. */
    kept?: boolean;
  }
>;

/** A prompt result's usage: the turn's, its stats and the session's totals. */
export function promptUsage(result: PromptResult): { usage?: Usage; turn?: TurnStats; session?: UsageTotals } {
  const { usage, turn, session } = result._meta?.parley ?? {};
  return { ...(usage ? { usage } : {}), ...(turn ? { turn } : {}), ...(session ? { session } : {}) };
}

export interface ConfigureParams {
  sessionId: string;
  model?: string;
  toolPolicy?: ToolPolicy;
  autoApprove?: string[];
}

export interface UsageParams {
  sessionId?: string;
}

export interface UsageResult {
  session?: UsageTotals;
  total: UsageTotals;
}

export interface ModelsResult {
  models: ModelInfo[];
  defaultModel?: string;
}

/** `_parley/session/restore`: the files edited from `turn` on, put back as they were before it. */
export interface RestoreParams {
  sessionId: string;
  /** The turn's number in the session, 1-based, as `UsageTotals.turns` counts turns. */
  turn: number;
}

export interface RestoredFile {
  path: string;
  action: 'restored' | 'removed';
}

export interface RestoreResult {
  files: RestoredFile[];
  /** What the restore did, in the server's words: what the chat shows (it composes none). */
  text: string;
  /** The user declined to overwrite files changed since (the server asked): nothing was restored. */
  rejected?: boolean;
  /** Stopped (`session/cancel`) while the server asked: nothing was restored. */
  cancelled?: boolean;
  /** Files that could not be written (the others were restored; a later restore may try them again). */
  failed?: { path: string; reason: string }[];
}

/** `_parley/session/export`: a stored session as one document, the same from every client. */
export interface ExportParams {
  sessionId: string;
  format?: 'markdown' | 'json';
}

export interface ExportResult {
  text: string;
  format: 'markdown' | 'json';
}

// ---- server -> client ----

/**
 * `replaces`: a revision of the streamed message with that id (clients that opt in).
 * `stopReason`: on a replay (`session/load`), the answer's turn was cut short here.
 * `notice`: a notice, the server speaking about the turn (why it stopped, why it did not
 * start), not the model: its text is shown once at its level, never as answer text.
 * `command`: a slash command turn's answer (docs/protocol.md, "Slash command turns, replayed").
 */
export type AgentMessageChunk = WithParleyMeta<
  AcpUpdate<'agent_message_chunk'>,
  /** `level`: a command's answer said as a warning (a restore that failed or was rejected in part). */
  { replaces?: string; stopReason?: string; notice?: Notice; command?: boolean; level?: 'warning' }
>;
export type AgentThoughtChunk = AcpUpdate<'agent_thought_chunk'>;
/** Sent only while `session/load` replays the stored conversation; `command`: a slash command as typed (or an undo's). */
export type UserMessageChunk = WithParleyMeta<AcpUpdate<'user_message_chunk'>, { command?: boolean }>;
export type ToolCall = WithParleyMeta<AcpUpdate<'tool_call'>, ToolCallMeta>;
/** An update carries only what changed. */
export type ToolCallUpdate = WithParleyMeta<AcpUpdate<'tool_call_update'>, ToolCallMeta>;
/**
 * `size`, the model's context window, is absent when unknown (never 0); `_meta.parley` holds
 * the call's usage and the session's running totals (the view shows the totals as they are).
 */
export type UsageUpdate = WithParleyMeta<Omit<AcpUpdate<'usage_update'>, 'size' | 'used'>, { call?: Usage; session?: UsageTotals }> & {
  used?: number;
  size?: number;
};
export type SessionInfoUpdate = AcpUpdate<'session_info_update'>;
export type ConfigOptionUpdate = AcpUpdate<'config_option_update'>;
/** The slash commands the agent offers; `input.hint` says what to type after a name. */
export type AvailableCommandsUpdate = AcpUpdate<'available_commands_update'>;
/** The model's plan (`update_plan`): the whole plan, each time (it replaces the one shown). */
export type PlanUpdate = AcpUpdate<'plan'>;
/** The session's mode changed (by `session/set_mode`, the config option, or `/mode`). */
export type CurrentModeUpdate = AcpUpdate<'current_mode_update'>;

/**
 * One member per kind Parley sends, and no other: the client drops a kind it does not know
 * (see `isSessionUpdate`), so code that switches on `sessionUpdate` narrows exactly.
 */
export type SessionUpdate =
  | AgentMessageChunk
  | AgentThoughtChunk
  | UserMessageChunk
  | ToolCall
  | ToolCallUpdate
  | UsageUpdate
  | SessionInfoUpdate
  | ConfigOptionUpdate
  | AvailableCommandsUpdate
  | PlanUpdate
  | CurrentModeUpdate;

/** Every kind of `SessionUpdate`; the `Record` type makes the compiler keep it complete. */
const SESSION_UPDATE_KINDS: Record<SessionUpdate['sessionUpdate'], true> = {
  agent_message_chunk: true,
  agent_thought_chunk: true,
  user_message_chunk: true,
  tool_call: true,
  tool_call_update: true,
  usage_update: true,
  session_info_update: true,
  config_option_update: true,
  available_commands_update: true,
  plan: true,
  current_mode_update: true,
};

/** Whether an update is of a kind this client knows (its fields are taken as the server sent them). */
export function isSessionUpdate(update: unknown): update is SessionUpdate {
  if (typeof update !== 'object' || update === null || !('sessionUpdate' in update)) {
    return false;
  }
  const kind = update.sessionUpdate;
  return typeof kind === 'string' && Object.hasOwn(SESSION_UPDATE_KINDS, kind);
}

export type SessionNotification = Omit<acp.SessionNotification, 'update'> & { update: SessionUpdate };

/** `_meta.parley.tool` names the tool that asks (`restore`: a restore overwriting the user's own changes). */
export type RequestPermissionParams = Omit<acp.RequestPermissionRequest, 'toolCall'> & {
  toolCall: WithParleyMeta<acp.ToolCallUpdate, { tool?: string }>;
};

/** `_parley/editor/callTool`: the server runs a tool the client declared. */
export interface EditorCallToolParams {
  sessionId: string;
  toolCallId: string;
  name: string;
  arguments: Record<string, unknown>;
}

export interface EditorCallToolResult {
  content: string;
  isError?: boolean;
}

// ---- the methods ----

/** Requests the client sends the server: method → params and result. */
export interface AgentRequests {
  initialize: { params: InitializeParams; result: InitializeResult };
  'session/new': { params: NewSessionParams; result: NewSessionResult };
  'session/prompt': { params: PromptParams; result: PromptResult };
  'session/load': { params: LoadSessionParams; result: LoadSessionResult };
  'session/list': { params: ListSessionsParams; result: ListSessionsResult };
  'session/resume': { params: ResumeSessionParams; result: ResumeSessionResult };
  'session/close': { params: SessionIdParams; result: EmptyResult };
  'session/delete': { params: SessionIdParams; result: EmptyResult };
  'session/set_config_option': { params: SetConfigOptionParams; result: SetConfigOptionResult };
  'session/set_mode': { params: SetModeParams; result: EmptyResult };
  '_parley/session/configure': { params: ConfigureParams; result: EmptyResult };
  '_parley/session/restore': { params: RestoreParams; result: RestoreResult };
  '_parley/session/export': { params: ExportParams; result: ExportResult };
  '_parley/usage': { params: UsageParams; result: UsageResult };
  '_parley/models': { params: Record<string, never>; result: ModelsResult };
}

/** Notifications the client sends the server: method → params. */
export interface AgentNotifications {
  'session/cancel': acp.CancelNotification;
}

/** Requests the server sends the client: method → params and result. */
export interface ClientRequests {
  'session/request_permission': { params: RequestPermissionParams; result: RequestPermissionResult };
  '_parley/editor/callTool': { params: EditorCallToolParams; result: EditorCallToolResult };
  'fs/read_text_file': { params: ReadTextFileParams; result: ReadTextFileResult };
  'fs/write_text_file': { params: WriteTextFileParams; result: EmptyResult };
}

/** Notifications the server sends the client, as they arrive (the update's kind unchecked). */
export interface ClientNotifications {
  'session/update': { sessionId: string; update: unknown };
}

export type AgentMethod = keyof AgentRequests;
export type ParamsOf<M extends AgentMethod> = AgentRequests[M]['params'];
export type ResultOf<M extends AgentMethod> = AgentRequests[M]['result'];

/** The JSON-RPC error a provider failure ends a prompt with. */
export const PROVIDER_ERROR = -32001;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;
/** A resource (a session, a file) that does not exist. */
export const RESOURCE_NOT_FOUND = -32002;
