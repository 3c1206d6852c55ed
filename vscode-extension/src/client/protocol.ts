/**
 * Wire types of the Parley protocol v1 (ACP v1 shapes plus Parley's `_parley/` methods and
 * `_meta.parley` objects), after `../shared/protocol.md`. Typed: what the server sends today,
 * and the optional fields the contract names. Every method is listed once, in the maps at the
 * end, with its params and result; the client's `request` takes its types from there.
 */

export const PROTOCOL_VERSION = 1;

export type ToolKind =
  | 'read'
  | 'edit'
  | 'delete'
  | 'move'
  | 'search'
  | 'execute'
  | 'think'
  | 'fetch'
  | 'switch_mode'
  | 'other';

/** A tool the client runs itself, declared in `initialize`. */
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

export interface Cost {
  amount: number;
  currency: string;
}

export interface UsageTotals extends Usage {
  cost: Cost | null;
  turns: number;
  rounds: number;
  /** `cost` by kind of token (null exactly when `cost` is); absent from an older server. */
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

/** A value of a select option. */
export interface SessionConfigSelectOption {
  value: string;
  name: string;
  description?: string | null;
}

/** Values of a select option under a header. */
export interface SessionConfigSelectGroup {
  group: string;
  name: string;
  options: SessionConfigSelectOption[];
}

interface SessionConfigOptionBase {
  id: string;
  name: string;
  description?: string | null;
  /** `model`, `thought_level`, `mode`, … (for display only). */
  category?: string | null;
}

/**
 * ACP's session configuration option (`configOptions`): a select (Parley's `model`,
 * `tool_policy`, `thought_level`), with its values flat or grouped, or a boolean.
 */
export type SessionConfigOption =
  | (SessionConfigOptionBase & {
      type: 'select';
      currentValue: string;
      options: SessionConfigSelectOption[] | SessionConfigSelectGroup[];
    })
  | (SessionConfigOptionBase & { type: 'boolean'; currentValue: boolean });

/** An MCP server for `session/new` and `session/load` (ACP's stdio form; this client sends none). */
export interface McpServer {
  name: string;
  command: string;
  args: string[];
  env: { name: string; value: string }[];
}

// ---- content ----

export interface TextBlock {
  type: 'text';
  text: string;
}

export interface ImageBlock {
  type: 'image';
  data: string;
  mimeType: string;
  uri?: string;
}

export interface ResourceLinkBlock {
  type: 'resource_link';
  uri: string;
  name: string;
  mimeType?: string;
}

export interface ResourceBlock {
  type: 'resource';
  resource: { uri: string; text: string; mimeType?: string } | { uri: string; blob: string; mimeType?: string };
}

export type ContentBlock = TextBlock | ImageBlock | ResourceLinkBlock | ResourceBlock;

// ---- client -> server ----

export interface InitializeParams {
  protocolVersion: number;
  clientCapabilities: {
    fs?: { readTextFile?: boolean; writeTextFile?: boolean };
    terminal?: boolean;
    _meta?: { parley?: { tools?: ToolSpec[]; revisions?: boolean } };
  };
  clientInfo?: { name: string; version: string };
}

export interface InitializeResult {
  protocolVersion: number;
  agentCapabilities?: {
    loadSession?: boolean;
    promptCapabilities?: { image?: boolean; audio?: boolean; embeddedContext?: boolean };
    mcpCapabilities?: { http?: boolean };
    /** `additionalDirectories`: the session's params may name other workspace roots. */
    sessionCapabilities?: { list?: object; delete?: object; resume?: object; close?: object; additionalDirectories?: object };
  };
  agentInfo?: { name: string; version: string };
  authMethods?: unknown[];
  _meta?: { parley?: { models?: ModelInfo[]; defaultModel?: string; tools?: ToolInfo[] } };
}

export type ToolPolicy = 'hybrid' | 'stream' | 'sync';

/** Parley's settings for a new session, sent as `session/new`'s `_meta.parley`. */
export interface NewSessionOptions {
  model?: string;
  toolPolicy?: ToolPolicy;
  systemPrompt?: string;
  autoApprove?: string[];
}

export interface NewSessionParams {
  cwd: string;
  mcpServers: McpServer[];
  /** The workspace's other roots (absolute directories; ACP's field): sent only when there are some. */
  additionalDirectories?: string[];
  _meta?: { parley?: NewSessionOptions };
}

/** A session mode (`ask`, `accept_edits`, `plan`) as ACP lists it. */
export interface SessionMode {
  id: string;
  name: string;
  description?: string | null;
}

/** ACP's `modes` in the answers of `session/new`, `load` and `resume`: the current mode and the choices. */
export interface SessionModeState {
  currentModeId: string;
  availableModes: SessionMode[];
}

export interface NewSessionResult {
  sessionId: string;
  configOptions?: SessionConfigOption[];
  modes?: SessionModeState | null;
}

export interface PromptParams {
  sessionId: string;
  prompt: ContentBlock[];
  /**
   * `retry`: this prompt is the last one again, after that turn was cut off (cancelled, or
   * answered with an error); the server replaces the cut-off turn with this one when nothing
   * came after it, and says whether it did (`PromptResult`'s `replaced`).
   */
  _meta?: { parley?: { retry?: boolean } };
}

export type StopReason = 'end_turn' | 'max_tokens' | 'max_turn_requests' | 'refusal' | 'cancelled';

export interface PromptResult {
  stopReason: StopReason;
  /** The turn's usage at the root: the first edition's place (see `promptUsage`). */
  usage?: Usage;
  /**
   * The contract's `{usage, turn, session}`; the first edition put the turn's stats here
   * flat (`rounds`, `toolCalls`, …), which `promptUsage` still reads.
   */
  _meta?: {
    parley?: Partial<TurnStats> & {
      usage?: Usage;
      turn?: TurnStats;
      session?: UsageTotals;
      /** Only for a prompt sent with `retry`: the cut-off turn was replaced (false: kept, this is a new turn). */
      replaced?: boolean;
    };
  };
}

/** A prompt result's usage: the turn's, its stats and the session's totals, from either edition's shape. */
export function promptUsage(result: PromptResult): { usage?: Usage; turn?: Partial<TurnStats>; session?: UsageTotals } {
  const { usage, turn, session, ...rest } = result._meta?.parley ?? {};
  // The first edition's stats, flat: what is left but a retry's answer.
  const flatStats = Object.fromEntries(Object.entries(rest).filter(([key]) => key !== 'replaced')) as Partial<TurnStats>;
  const stats = turn ?? (Object.keys(flatStats).length > 0 ? flatStats : undefined);
  return {
    ...((usage ?? result.usage) ? { usage: usage ?? result.usage } : {}),
    ...(stats ? { turn: stats } : {}),
    ...(session ? { session } : {}),
  };
}

export interface SessionIdParams {
  sessionId: string;
}

export interface LoadSessionParams {
  sessionId: string;
  cwd: string;
  mcpServers: McpServer[];
  /** As `session/new`'s: not stored by the server, so sent with each load and resume. */
  additionalDirectories?: string[];
}

export interface LoadSessionResult {
  configOptions?: SessionConfigOption[];
  modes?: SessionModeState | null;
  _meta?: { parley?: { usage?: UsageTotals; model?: string } };
}

/** `session/resume`: reattach to a stored session without a replay. */
export type ResumeSessionParams = LoadSessionParams;

export interface ResumeSessionResult {
  configOptions?: SessionConfigOption[];
  modes?: SessionModeState | null;
  _meta?: { parley?: { usage?: UsageTotals; model?: string } };
}

export interface SetConfigOptionParams {
  sessionId: string;
  configId: string;
  value: string;
}

/** `session/set_mode`: the session's mode (answered `{}`; a `current_mode_update` follows). */
export interface SetModeParams {
  sessionId: string;
  modeId: string;
}

export interface SetConfigOptionResult {
  /** The full, current set. */
  configOptions: SessionConfigOption[];
}

export interface ListSessionsParams {
  cwd?: string;
  cursor?: string;
}

export interface SessionSummary {
  sessionId: string;
  cwd: string;
  title?: string | null;
  updatedAt?: string | null;
}

export interface ListSessionsResult {
  sessions: SessionSummary[];
  nextCursor?: string | null;
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

/** The result of methods that answer `{}`. */
export type EmptyResult = Record<string, never>;

// ---- server -> client ----

export type ToolCallStatus = 'pending' | 'in_progress' | 'completed' | 'failed';

/**
 * What a tool call shows: text content, an edit's diff, or a terminal of the client that ran
 * the command (another client's: this one advertises no `terminal`, so the card says so).
 */
export type ToolCallContent =
  | { type: 'content'; content: ContentBlock }
  | { type: 'diff'; path: string; oldText?: string | null; newText: string }
  | { type: 'terminal'; terminalId: string };

export interface ToolCallLocation {
  path: string;
  line?: number | null;
}

/** The fields of `tool_call` and `tool_call_update`; an update carries only what changed. */
interface ToolCallFields {
  toolCallId: string;
  title?: string | null;
  kind?: ToolKind | null;
  status?: ToolCallStatus | null;
  rawInput?: unknown;
  rawOutput?: unknown;
  content?: ToolCallContent[] | null;
  locations?: ToolCallLocation[] | null;
  /** `commandOutput.append`: a running command's new output since the last update (raw, ANSI colours kept). */
  _meta?: { parley?: { superseded?: boolean; commandOutput?: CommandOutput } };
}

/** `_meta.parley.commandOutput` of a running command's `tool_call_update`. */
export interface CommandOutput {
  append?: string;
}

export interface AgentMessageChunk {
  sessionUpdate: 'agent_message_chunk';
  content: ContentBlock;
  messageId?: string;
  /**
   * `replaces`: a revision of the streamed message with that id (clients that opt in).
   * `stopReason`: on a replay (`session/load`), the answer's turn was cut short here.
   * `notice`: a notice, the server speaking about the turn (why it stopped, why it did not
   * start), not the model: its text is shown once at `level`, never as answer text.
   */
  _meta?: { parley?: { replaces?: string; stopReason?: string; notice?: Notice } };
}

/** A notice's `_meta.parley.notice`. */
export interface Notice {
  level: 'info' | 'warning' | 'error';
}

export interface AgentThoughtChunk {
  sessionUpdate: 'agent_thought_chunk';
  content: ContentBlock;
  messageId?: string;
}

/** Sent only while `session/load` replays the stored conversation. */
export interface UserMessageChunk {
  sessionUpdate: 'user_message_chunk';
  content: ContentBlock;
  messageId?: string;
}

export interface ToolCall extends ToolCallFields {
  sessionUpdate: 'tool_call';
}

export interface ToolCallUpdate extends ToolCallFields {
  sessionUpdate: 'tool_call_update';
}

export interface UsageUpdate {
  sessionUpdate: 'usage_update';
  /** Tokens in the context now. */
  used?: number;
  /** The model's context window: absent (or, from a first-edition server, 0) when unknown. */
  size?: number;
  /** The session's total cost. */
  cost?: Cost | null;
  /** The call's usage and the session's running totals (the view shows the totals as they are). */
  _meta?: { parley?: { call?: Usage; session?: UsageTotals } };
}

export interface SessionInfoUpdate {
  sessionUpdate: 'session_info_update';
  title?: string | null;
  updatedAt?: string | null;
}

export interface ConfigOptionUpdate {
  sessionUpdate: 'config_option_update';
  configOptions: SessionConfigOption[];
}

/** A slash command the agent offers; `input.hint` says what to type after its name. */
export interface AvailableCommand {
  name: string;
  description: string;
  input?: { hint: string } | null;
}

export interface AvailableCommandsUpdate {
  sessionUpdate: 'available_commands_update';
  availableCommands: AvailableCommand[];
}

export type PlanEntryStatus = 'pending' | 'in_progress' | 'completed';
export type PlanEntryPriority = 'high' | 'medium' | 'low';

export interface PlanEntry {
  content: string;
  status: PlanEntryStatus;
  priority?: PlanEntryPriority;
}

/** The model's plan (`update_plan`): the whole plan, each time (it replaces the one shown). */
export interface PlanUpdate {
  sessionUpdate: 'plan';
  entries: PlanEntry[];
}

/** The session's mode changed (by `session/set_mode`, the config option, or `/mode`). */
export interface CurrentModeUpdate {
  sessionUpdate: 'current_mode_update';
  currentModeId: string;
}

/**
 * One member per kind the contract lists, and no other: the client drops a kind it does not
 * know (see `isSessionUpdate`), so code that switches on `sessionUpdate` narrows exactly.
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

export interface SessionNotification {
  sessionId: string;
  update: SessionUpdate;
}

export type PermissionOptionKind = 'allow_once' | 'allow_always' | 'reject_once' | 'reject_always';

export interface PermissionOption {
  optionId: string;
  name: string;
  kind: PermissionOptionKind;
}

export interface RequestPermissionParams {
  sessionId: string;
  toolCall: {
    toolCallId: string;
    title?: string;
    kind?: ToolKind;
    rawInput?: unknown;
    content?: ToolCallContent[];
    locations?: ToolCallLocation[];
  };
  options: PermissionOption[];
}

export type PermissionOutcome =
  | { outcome: 'selected'; optionId: string }
  | { outcome: 'cancelled' };

export interface RequestPermissionResult {
  outcome: PermissionOutcome;
}

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

/** `fs/read_text_file`: a workspace file's text as the editor has it; `line` (1-based) and `limit` a slice of its lines. */
export interface ReadTextFileParams {
  sessionId: string;
  path: string;
  line?: number | null;
  limit?: number | null;
}

export interface ReadTextFileResult {
  content: string;
}

/** `fs/write_text_file`: the whole new text of a workspace file (created when missing). */
export interface WriteTextFileParams {
  sessionId: string;
  path: string;
  content: string;
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
  /** The user declined to overwrite files changed since (the server asked): nothing was restored. */
  rejected?: boolean;
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
  'session/cancel': SessionIdParams;
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
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;
/** A resource (a session, a file) that does not exist. */
export const RESOURCE_NOT_FOUND = -32002;
