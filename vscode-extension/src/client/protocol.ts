/**
 * Wire types of the Parley protocol v1 (ACP v1 shapes plus Parley's `_parley/` methods and
 * `_meta.parley` objects). Only what this client sends or reads is typed; unknown fields pass
 * through untouched.
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
}

export interface ModelInfo {
  id: string;
  provider: string;
  contextWindow?: number;
  available: boolean;
  reason?: string;
}

export interface ToolInfo {
  name: string;
  description?: string;
  kind?: ToolKind;
  needsPermission?: boolean;
  [key: string]: unknown;
}

export interface InitializeParams {
  protocolVersion: number;
  clientCapabilities: {
    fs?: Record<string, unknown>;
    _meta?: { parley?: { tools?: ToolSpec[] } };
  };
  clientInfo?: { name: string; version: string };
}

export interface InitializeResult {
  protocolVersion: number;
  agentCapabilities?: {
    loadSession?: boolean;
    promptCapabilities?: Record<string, boolean>;
    sessionCapabilities?: Record<string, unknown>;
  };
  agentInfo?: { name: string; version: string };
  authMethods?: unknown[];
  _meta?: { parley?: { models?: ModelInfo[]; defaultModel?: string; tools?: ToolInfo[] } };
}

export type ToolPolicy = 'hybrid' | 'stream' | 'sync';

export interface NewSessionOptions {
  model?: string;
  toolPolicy?: ToolPolicy;
  systemPrompt?: string;
  autoApprove?: string[];
}

export interface TextBlock {
  type: 'text';
  text: string;
}

export interface ResourceBlock {
  type: 'resource';
  resource: { uri: string; text: string; mimeType?: string };
}

export type ContentBlock = TextBlock | ResourceBlock | { type: string; [key: string]: unknown };

export type StopReason = 'end_turn' | 'max_tokens' | 'max_turn_requests' | 'refusal' | 'cancelled';

export interface PromptResult {
  /** A `StopReason`; other values are shown as they are. */
  stopReason: string;
  usage?: Usage;
  _meta?: { parley?: TurnStats };
}

export interface LoadSessionResult {
  _meta?: { parley?: { usage?: Usage; model?: string } };
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

export interface UsageResult {
  session?: UsageTotals;
  total: UsageTotals;
}

export interface ModelsResult {
  models: ModelInfo[];
  defaultModel?: string;
}

export interface ConfigureParams {
  sessionId: string;
  model?: string;
  toolPolicy?: ToolPolicy;
  autoApprove?: string[];
}

// ---- server -> client ----

export interface TextContent {
  type: 'text';
  text: string;
}

export interface ToolCallContent {
  /** `content` (text), or another ACP kind (`diff`, `terminal`) shown by name. */
  type: string;
  content?: { type: string; text?: string };
  [key: string]: unknown;
}

export interface ParleyMeta {
  replaces?: string;
  [key: string]: unknown;
}

export interface MessageChunkUpdate {
  sessionUpdate: 'agent_message_chunk' | 'agent_thought_chunk' | 'user_message_chunk';
  content: TextContent | ContentBlock;
  messageId?: string;
  _meta?: { parley?: ParleyMeta };
}

export interface ToolCallUpdate {
  sessionUpdate: 'tool_call' | 'tool_call_update';
  toolCallId: string;
  title?: string | null;
  /** A `ToolKind`. */
  kind?: string | null;
  status?: ToolCallStatus | null;
  rawInput?: unknown;
  rawOutput?: unknown;
  content?: ToolCallContent[] | null;
}

export interface UsageUpdate {
  sessionUpdate: 'usage_update';
  used?: number;
  size?: number;
  cost?: Cost | null;
  _meta?: { parley?: Partial<Usage> };
}

export interface SessionInfoUpdate {
  sessionUpdate: 'session_info_update';
  title?: string | null;
  updatedAt?: string | null;
}

/** `update.sessionUpdate` tells which; unknown kinds are ignored by this client. */
export type SessionUpdate =
  | MessageChunkUpdate
  | ToolCallUpdate
  | UsageUpdate
  | SessionInfoUpdate
  | { sessionUpdate: string; [key: string]: unknown };

export type ToolCallStatus = 'pending' | 'in_progress' | 'completed' | 'failed';

export interface SessionNotification {
  sessionId: string;
  update: SessionUpdate;
}

export type PermissionOptionKind = 'allow_once' | 'allow_always' | 'reject_once' | 'reject_always';

export interface PermissionOption {
  optionId: string;
  name: string;
  /** A `PermissionOptionKind`. */
  kind: string;
}

export interface RequestPermissionParams {
  sessionId: string;
  toolCall: { toolCallId: string; title?: string; kind?: string; rawInput?: unknown };
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

/** The JSON-RPC error a provider failure ends a prompt with. */
export const PROVIDER_ERROR = -32001;
export const METHOD_NOT_FOUND = -32601;
