/**
 * The Parley protocol client: spawns `parley serve`, speaks JSON-RPC over its stdio with
 * LSP framing (vscode-jsonrpc), and exposes the protocol's methods as typed calls. Each
 * method's params and result come from the maps in `protocol.ts`; a `session/update` of a kind
 * the protocol does not list is dropped here, with a log line, so the rest sees a closed union.
 *
 * Does not import `vscode`: it runs (and is tested) in plain Node.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import * as readline from 'node:readline';
import {
  type CancellationToken,
  type Message,
  type MessageConnection,
  type MessageWriter,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter,
  createMessageConnection,
} from 'vscode-jsonrpc/node';

import {
  type AgentMethod,
  type AgentNotifications,
  type ClientNotifications,
  type ClientRequests,
  type ConfigureParams,
  type ContentBlock,
  type EditorCallToolParams,
  type EmptyResult,
  type EditorCallToolResult,
  type ExportParams,
  type KernelAddress,
  type ExportResult,
  type InitializeResult,
  type ListSessionsParams,
  type ListSessionsResult,
  type LoadSessionResult,
  INTERNAL_ERROR,
  type ModelsResult,
  type NewSessionOptions,
  type NewSessionResult,
  PROTOCOL_VERSION,
  type ParamsOf,
  type PromptResult,
  type ReadTextFileParams,
  type ReadTextFileResult,
  type RequestPermissionParams,
  type RequestPermissionResult,
  type ResultOf,
  type RestoreResult,
  type ResumeSessionResult,
  type SessionNotification,
  type SetConfigOptionResult,
  type ToolSpec,
  type UsageResult,
  type WriteTextFileParams,
  isSessionUpdate,
} from './protocol';

export interface ServerOptions {
  /** The executable, e.g. `parley` or `/path/to/.venv/bin/parley`. */
  command: string;
  /** Arguments, by default `['serve']`. */
  args?: string[];
  /** Working directory of the server process. */
  cwd?: string;
  /** Extra environment, merged over `process.env`. */
  env?: Record<string, string | undefined>;
}

export interface ClientHandlers {
  /**
   * Ask the user about a tool call. `signal` aborts when the turn is cancelled (by us or by
   * the server); the client then answers `cancelled` itself, so the handler may just tidy up.
   */
  requestPermission?: (
    params: RequestPermissionParams,
    signal: AbortSignal,
  ) => Promise<RequestPermissionResult>;
  /** Run one of the editor tools declared in `initialize`. */
  callEditorTool?: (params: EditorCallToolParams, signal: AbortSignal) => Promise<EditorCallToolResult>;
  /**
   * `fs/read_text_file` and `fs/write_text_file`: advertised in `initialize` (`clientCapabilities.fs`)
   * when given. An error with a numeric `code` is answered as that JSON-RPC error.
   */
  readTextFile?: (params: ReadTextFileParams) => Promise<ReadTextFileResult>;
  writeTextFile?: (params: WriteTextFileParams) => Promise<EmptyResult>;
}

export interface ClientOptions {
  server: ServerOptions;
  /** Tools the client runs itself, declared under `clientCapabilities._meta.parley.tools`. */
  tools?: ToolSpec[];
  clientInfo?: { name: string; version: string };
  handlers?: ClientHandlers;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** True when the exit was asked for (`stop()`, `restart()`). */
  expected: boolean;
  /** The last lines the server wrote to stderr. */
  stderrTail: string[];
}

/** A request failed because the server process is gone (or was never started). */
export class ServerExitedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ServerExitedError';
  }
}

/** Why the server's `command` could not be spawned (`err`), for the chat. */
function whyNotStarted(command: string, err: unknown): string {
  if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
    return (
      `Could not start the Parley server: \`${command}\` was not found. ` +
      "Install Parley's server (Parley: Install Server) or set `parley.serverCommand` to its path."
    );
  }
  return `Could not start the Parley server (\`${command}\`): ${(err as Error).message}`;
}

/** The server could not be started at all (command not found, initialize failed). */
export class ServerStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ServerStartError';
  }
}

interface ClientEvents {
  update: [SessionNotification];
  exit: [ExitInfo];
  log: [string];
}

interface Pending {
  reject: (err: Error) => void;
}

const STDERR_TAIL = 40;

export class ParleyClient extends EventEmitter<ClientEvents> {
  private proc: ChildProcess | undefined;
  private conn: MessageConnection | undefined;
  private stopping = false;
  private readonly pending = new Set<Pending>();
  /** Open permission prompts / editor tool runs, by session, so a cancel can end them. */
  private readonly inFlight = new Map<string, Set<AbortController>>();
  private stderrTail: string[] = [];
  private exitPromise: Promise<ExitInfo> | undefined;
  private generation = 0;
  initializeResult: InitializeResult | undefined;

  constructor(private readonly options: ClientOptions) {
    super();
  }

  get running(): boolean {
    return this.conn !== undefined;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  /** The server's stderr, line by line: logged, its last lines kept for an exit's report. */
  private readStderr(proc: ChildProcess): void {
    if (!proc.stderr) {
      return;
    }
    readline.createInterface({ input: proc.stderr }).on('line', (line) => {
      this.stderrTail.push(line);
      if (this.stderrTail.length > STDERR_TAIL) {
        this.stderrTail.shift();
      }
      this.emit('log', line);
    });
  }

  /** Spawn the server and run `initialize`. */
  async start(): Promise<InitializeResult> {
    if (this.conn) {
      throw new Error('Parley server is already running');
    }
    const { command, args = ['serve'], cwd, env } = this.options.server;
    const generation = ++this.generation;
    this.stopping = false;
    this.stderrTail = [];
    const proc = spawn(command, args, {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
      windowsHide: true,
    });
    this.proc = proc;

    const spawned = new Promise<void>((resolve, reject) => {
      proc.once('spawn', () => resolve());
      proc.once('error', (err) => reject(err));
    });
    this.exitPromise = new Promise<ExitInfo>((resolve) => {
      proc.once('close', (code, signal) => {
        const info: ExitInfo = {
          code,
          signal,
          expected: this.stopping,
          stderrTail: [...this.stderrTail],
        };
        if (generation === this.generation) {
          this.onProcessExit(info);
        }
        resolve(info);
      });
    });
    proc.on('error', (err) => this.emit('log', `[parley] process error: ${err.message}`));

    this.readStderr(proc);

    try {
      await spawned;
    } catch (err) {
      this.proc = undefined;
      throw new ServerStartError(whyNotStarted(command, err));
    }

    const conn = createMessageConnection(
      new StreamMessageReader(proc.stdout),
      new SafeWriter(new StreamMessageWriter(proc.stdin)),
    );
    // A write to a dead process must not crash the host.
    proc.stdin.on('error', (err) => this.emit('log', `[parley] stdin: ${err.message}`));
    conn.onError(([err]) => this.emit('log', `[parley] connection error: ${err.message}`));
    conn.onNotification('session/update', (params: ClientNotifications['session/update']) =>
      this.receiveUpdate(params),
    );
    onClientRequest(conn, 'session/request_permission', (params, token) => this.handlePermission(params, token));
    onClientRequest(conn, '_parley/editor/callTool', (params, token) => this.handleEditorTool(params, token));
    const { readTextFile, writeTextFile } = this.options.handlers ?? {};
    if (readTextFile) {
      onClientRequest(conn, 'fs/read_text_file', (params) => answerOrError(() => readTextFile(params)));
    }
    if (writeTextFile) {
      onClientRequest(conn, 'fs/write_text_file', (params) => answerOrError(() => writeTextFile(params)));
    }
    conn.listen();
    this.conn = conn;

    try {
      this.initializeResult = await this.request('initialize', {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: {
          // The server reads and writes workspace files through us when we can.
          ...(readTextFile || writeTextFile
            ? { fs: { readTextFile: Boolean(readTextFile), writeTextFile: Boolean(writeTextFile) } }
            : {}),
          // `revisions`: this client applies `_meta.parley.replaces` chunks (hybrid revisions).
          _meta: { parley: { tools: this.options.tools ?? [], revisions: true } },
        },
        clientInfo: this.options.clientInfo ?? { name: 'parley-vscode', version: 'unknown' }, // the extension gives its own
      });
    } catch (err) {
      await this.stop();
      throw new ServerStartError(`The Parley server did not initialize: ${describeError(err)}`);
    }
    return this.initializeResult;
  }

  /** Stop the server: close its stdin, then terminate it if it lingers. */
  async stop(timeoutMs = 3000): Promise<void> {
    const proc = this.proc;
    const exited = this.exitPromise;
    if (!proc || !exited) {
      return;
    }
    this.stopping = true;
    this.conn?.end();
    proc.stdin?.end();
    const done = await Promise.race([exited.then(() => true), delay(timeoutMs).then(() => false)]);
    if (!done) {
      proc.kill('SIGTERM');
      const killed = await Promise.race([exited.then(() => true), delay(2000).then(() => false)]);
      if (!killed) {
        proc.kill('SIGKILL');
        await exited;
      }
    }
  }

  /** Stop the server (if it runs) and start a new one. */
  async restart(): Promise<InitializeResult> {
    await this.stop();
    return this.start();
  }

  // ---- protocol methods ----

  /**
   * `session/new`: the session's id and, from a second-edition server, its `configOptions`
   * and `modes`. `additionalDirectories`: the workspace's other roots (sent when there are some).
   */
  startSession(cwd: string, options: NewSessionOptions = {}, additionalDirectories: string[] = []): Promise<NewSessionResult> {
    const parley = pruneUndefined(options);
    return this.request('session/new', {
      cwd,
      mcpServers: [],
      ...roots(additionalDirectories),
      ...(Object.keys(parley).length ? { _meta: { parley } } : {}),
    });
  }

  async newSession(cwd: string, options: NewSessionOptions = {}): Promise<string> {
    return (await this.startSession(cwd, options)).sessionId;
  }

  /** `session/prompt`; `retry`: it replaces the session's last turn, which was cut off (see `PromptParams`). */
  prompt(sessionId: string, prompt: ContentBlock[] | string, options: { retry?: boolean } = {}): Promise<PromptResult> {
    const blocks: ContentBlock[] = typeof prompt === 'string' ? [{ type: 'text', text: prompt }] : prompt;
    return this.request('session/prompt', { sessionId, prompt: blocks, ...(options.retry ? { _meta: { parley: { retry: true } } } : {}) });
  }

  /** `session/cancel`; also answers our own open permission prompts of that session `cancelled`. */
  async cancel(sessionId: string): Promise<void> {
    this.abortInFlight(sessionId);
    await this.notify('session/cancel', { sessionId });
  }

  loadSession(sessionId: string, cwd: string, additionalDirectories: string[] = []): Promise<LoadSessionResult> {
    return this.request('session/load', { sessionId, cwd, mcpServers: [], ...roots(additionalDirectories) });
  }

  /** `session/resume` (when the server advertises it): reattach without a replay; `kernel`: on the user's kernel. */
  resumeSession(sessionId: string, cwd: string, additionalDirectories: string[] = [], kernel?: KernelAddress): Promise<ResumeSessionResult> {
    return this.request('session/resume', {
      sessionId,
      cwd,
      mcpServers: [],
      ...roots(additionalDirectories),
      ...(kernel ? { _meta: { parley: { kernel } } } : {}),
    });
  }

  /** `session/set_mode`: the session's mode (`ask`, `accept_edits`, `plan`). */
  async setMode(sessionId: string, modeId: string): Promise<void> {
    await this.request('session/set_mode', { sessionId, modeId });
  }

  /** `session/close` (when the server advertises it): frees the session in the server; it stays stored. */
  async closeSession(sessionId: string): Promise<void> {
    await this.request('session/close', { sessionId });
  }

  /** `session/set_config_option`: answers the full, current set of options. */
  setConfigOption(sessionId: string, configId: string, value: string): Promise<SetConfigOptionResult> {
    return this.request('session/set_config_option', { sessionId, configId, value });
  }

  /** What the server advertised of the session lifecycle in `initialize` (and whether it takes other roots). */
  get sessionCapabilities(): { resume: boolean; close: boolean; additionalDirectories: boolean } {
    const caps = this.initializeResult?.agentCapabilities?.sessionCapabilities;
    return { resume: Boolean(caps?.resume), close: Boolean(caps?.close), additionalDirectories: Boolean(caps?.additionalDirectories) };
  }

  listSessions(params: ListSessionsParams = {}): Promise<ListSessionsResult> {
    return this.request('session/list', pruneUndefined(params));
  }

  async deleteSession(sessionId: string): Promise<void> {
    await this.request('session/delete', { sessionId });
  }

  async configure(params: ConfigureParams): Promise<void> {
    await this.request('_parley/session/configure', pruneUndefined(params));
  }

  usage(sessionId?: string): Promise<UsageResult> {
    return this.request('_parley/usage', sessionId ? { sessionId } : {});
  }

  models(): Promise<ModelsResult> {
    return this.request('_parley/models', {});
  }

  /** `_parley/session/export`: a stored session as one document (Markdown: the same from every client). */
  exportSession(sessionId: string, format: ExportParams['format'] = 'markdown'): Promise<ExportResult> {
    return this.request('_parley/session/export', { sessionId, format });
  }

  /** `_parley/session/restore`: the files edited from `turn` on put back as before it. */
  restore(sessionId: string, turn: number): Promise<RestoreResult> {
    return this.request('_parley/session/restore', { sessionId, turn });
  }

  /**
   * A request to the server; its params and result are the method's in `AgentRequests`.
   * Rejects with `ServerExitedError` when the server is not running or exits first.
   */
  request<M extends AgentMethod>(method: M, params: ParamsOf<M>): Promise<ResultOf<M>> {
    const conn = this.conn;
    if (!conn || this.stopping) {
      return Promise.reject(new ServerExitedError('The Parley server is not running.'));
    }
    return new Promise<ResultOf<M>>((resolve, reject) => {
      const entry: Pending = { reject };
      this.pending.add(entry);
      // The one place the wire's untyped answer takes the method's result type.
      conn.sendRequest<ResultOf<M>>(method, params).then(
        (value) => {
          this.pending.delete(entry);
          resolve(value);
        },
        (err: unknown) => {
          this.pending.delete(entry);
          reject(err instanceof Error ? err : new Error(String(err)));
        },
      );
    });
  }

  // ---- internals ----

  /** A notification to the server; none is sent while it is not running or stopping. */
  private async notify<M extends keyof AgentNotifications>(method: M, params: AgentNotifications[M]): Promise<void> {
    if (this.conn && !this.stopping) {
      await this.conn.sendNotification(method, params);
    }
  }

  /** Passes on updates of the kinds the protocol lists; logs and drops any other. */
  private receiveUpdate({ sessionId, update }: ClientNotifications['session/update']): void {
    if (isSessionUpdate(update)) {
      const notification: SessionNotification = { sessionId, update };
      this.emit('update', notification);
      return;
    }
    const shown = String(JSON.stringify(update)).slice(0, 200);
    this.emit('log', `[parley] ignored a session/update of a kind this client does not know: ${shown}`);
  }

  private onProcessExit(info: ExitInfo): void {
    const conn = this.conn;
    this.conn = undefined;
    this.proc = undefined;
    const what = info.signal ? `signal ${info.signal}` : `code ${info.code}`;
    const err = new ServerExitedError(`The Parley server exited (${what}).`);
    for (const p of this.pending) {
      p.reject(err);
    }
    this.pending.clear();
    for (const sessionId of [...this.inFlight.keys()]) {
      this.abortInFlight(sessionId);
    }
    conn?.dispose();
    this.emit('exit', info);
  }

  private abortInFlight(sessionId: string): void {
    const set = this.inFlight.get(sessionId);
    if (!set) {
      return;
    }
    this.inFlight.delete(sessionId);
    for (const ac of set) {
      ac.abort();
    }
  }

  private track(sessionId: string, token: CancellationToken): AbortController {
    const ac = new AbortController();
    let set = this.inFlight.get(sessionId);
    if (!set) {
      set = new Set();
      this.inFlight.set(sessionId, set);
    }
    set.add(ac);
    token.onCancellationRequested(() => ac.abort());
    return ac;
  }

  private untrack(sessionId: string, ac: AbortController): void {
    const set = this.inFlight.get(sessionId);
    set?.delete(ac);
    if (set && set.size === 0) {
      this.inFlight.delete(sessionId);
    }
  }

  private async handlePermission(
    params: RequestPermissionParams,
    token: CancellationToken,
  ): Promise<RequestPermissionResult> {
    const handler = this.options.handlers?.requestPermission;
    if (!handler) {
      return CANCELLED_ANSWER;
    }
    return this.tracked(
      params.sessionId,
      token,
      (signal) => Promise.race([handler(params, signal), whenAborted(signal, CANCELLED_ANSWER)]),
      (err) => {
        this.emit('log', `[parley] permission handler failed: ${describeError(err)}`);
        return CANCELLED_ANSWER;
      },
    );
  }

  private async handleEditorTool(
    params: EditorCallToolParams,
    token: CancellationToken,
  ): Promise<EditorCallToolResult> {
    const handler = this.options.handlers?.callEditorTool;
    if (!handler) {
      return { content: `This client does not run the tool ${params.name}.`, isError: true };
    }
    return this.tracked(
      params.sessionId,
      token,
      (signal) => handler(params, signal),
      (err) => ({ content: `${params.name} failed: ${describeError(err)}`, isError: true }),
    );
  }

  /**
   * A request of the server answered by `work`, given a signal aborted when the server cancels
   * the request or the session's turn ends; a failure answered by `failed`.
   */
  private async tracked<T>(sessionId: string, token: CancellationToken, work: (signal: AbortSignal) => Promise<T>, failed: (err: unknown) => T): Promise<T> {
    const ac = this.track(sessionId, token);
    try {
      return await work(ac.signal);
    } catch (err) {
      return failed(err);
    } finally {
      this.untrack(sessionId, ac);
    }
  }
}

/** The answer to a permission question nobody answered. */
const CANCELLED_ANSWER: RequestPermissionResult = { outcome: { outcome: 'cancelled' } };

/** `value`, once `signal` is aborted (at once if it is already). */
function whenAborted<T>(signal: AbortSignal, value: T): Promise<T> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve(value);
    } else {
      signal.addEventListener('abort', () => resolve(value), { once: true });
    }
  });
}

/** Registers the handler of a request the server sends, typed by `ClientRequests`. */
function onClientRequest<M extends keyof ClientRequests>(
  conn: MessageConnection,
  method: M,
  handler: (
    params: ClientRequests[M]['params'],
    token: CancellationToken,
  ) => Promise<ClientRequests[M]['result'] | ResponseError<undefined>>,
): void {
  conn.onRequest(method, handler);
}

/**
 * The handler's answer; its failure as a JSON-RPC error: with the error's own numeric `code`
 * (a refused path, a missing file), else an internal error saying what went wrong.
 */
async function answerOrError<T>(handler: () => Promise<T>): Promise<T | ResponseError<undefined>> {
  try {
    return await handler();
  } catch (err) {
    const code = typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'number' ? err.code : INTERNAL_ERROR;
    return new ResponseError(code, describeError(err));
  }
}

/**
 * A writer whose writes never reject: a write to a server that is going away is reported via
 * `onError`, and the request it carried fails when the process exit is seen. (vscode-jsonrpc
 * 8.2 rethrows a failed request write inside a promise executor, an unhandled rejection.)
 */
class SafeWriter implements MessageWriter {
  readonly onError: MessageWriter['onError'];
  readonly onClose: MessageWriter['onClose'];
  constructor(private readonly inner: StreamMessageWriter) {
    this.onError = inner.onError;
    this.onClose = inner.onClose;
  }
  write(msg: Message): Promise<void> {
    return this.inner.write(msg).catch(() => undefined);
  }
  end(): void {
    this.inner.end();
  }
  dispose(): void {
    this.inner.dispose();
  }
}

/** A message a person can act on, from whatever a request rejected with. */
export function describeError(err: unknown): string {
  if (err instanceof ResponseError) {
    const data = err.data as { provider?: string; status?: number; type?: string } | undefined;
    const extra = data && typeof data === 'object' && data.provider
      ? ` [${data.provider}${data.status ? ` ${data.status}` : ''}${data.type ? ` ${data.type}` : ''}]`
      : '';
    return `${err.message}${extra}`;
  }
  if (err instanceof Error) {
    return err.message;
  }
  return String(err);
}

/** `obj` without its undefined fields (optional ones, so the type stays). */
function pruneUndefined<T extends object>(obj: T): T {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined)) as T;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/**
 * `additionalDirectories` for a session's params: only when there are some, so a
 * single-folder workspace sends what a server without multi-root accepts.
 */
function roots(additionalDirectories: string[]): { additionalDirectories?: string[] } {
  return additionalDirectories.length ? { additionalDirectories } : {};
}
