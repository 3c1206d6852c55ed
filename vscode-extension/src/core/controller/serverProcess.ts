/**
 * The server's lifecycle: start `parley serve` (once, however many callers wait), hand its
 * requests and updates to the parts that answer them, and say in the view when it stops.
 */

import { type ExitInfo, ParleyClient, ServerExitedError, describeError } from '../../client/client';
import type {
  EmptyResult,
  InitializeResult,
  RequestPermissionParams,
  RequestPermissionResult,
  SessionNotification,
  WriteTextFileParams,
} from '../../client/protocol';
import type { NoticeEntry } from '../../common/view';
import { WorkspaceFileAccess } from '../fileAccess';
import { differentServerVersion } from '../serverVersion';
import type { ChatCore } from './core';
import { keepingNotices } from './keptNotices';

/** Where the server's requests and news go (the other parts). */
export interface ServerHooks {
  requestPermission(params: RequestPermissionParams, signal: AbortSignal): Promise<RequestPermissionResult>;
  /** `fs/write_text_file`, written through the editor's files. */
  writeTextFile(files: WorkspaceFileAccess, params: WriteTextFileParams): Promise<EmptyResult>;
  /** A `session/update` notification. */
  update(notification: SessionNotification): void;
  /** The server answered `initialize`. */
  ready(init: InitializeResult): void;
  /** The server went away: what waited on it is let go (before the view says so). */
  exited(): void;
}

export class ServerProcess {
  private startPromise: Promise<void> | undefined;
  /** The other server versions said already (once each: not again at a restart). */
  private readonly versionsSaid = new Set<string>();

  constructor(
    private readonly core: ChatCore,
    private readonly hooks: ServerHooks,
  ) {}

  /** The chat is closed (the window closes): no server starts any more, not even for what was under way. */
  closed = false;

  /** Start the server if it is not running. */
  ensureStarted(): Promise<void> {
    if (this.core.client?.running) {
      return Promise.resolve();
    }
    if (this.closed) {
      return Promise.reject(new ServerExitedError('Parley is closed: the window is closing.'));
    }
    if (!this.startPromise) {
      this.startPromise = this.start().finally(() => {
        this.startPromise = undefined;
      });
    }
    return this.startPromise;
  }

  /** Stop the server (its exit is expected: no notice). */
  async stop(): Promise<void> {
    const client = this.core.client;
    this.core.client = undefined;
    await client?.stop();
  }

  private async start(): Promise<void> {
    const { core } = this;
    const blocked = core.host.serverBlocked?.();
    const refusal = blocked ? { text: blocked } : core.host.serverMissing?.();
    if (refusal) {
      this.refuseToStart(refusal);
    }
    const settings = core.host.settings();
    const cwd = settings.server.cwd ?? core.host.workspaceRoot();
    core.log(`Starting the Parley server: ${[settings.server.command, ...(settings.server.args ?? ['serve'])].join(' ')} (in ${cwd})`);
    core.meta({ serverState: 'starting' });
    const client = this.newClient(cwd);
    core.client = client;
    try {
      const init = await client.start();
      core.log(`The server is ready (default model ${init._meta?.parley?.defaultModel ?? 'unknown'}).`);
      this.hooks.ready(init);
      this.compareVersions(init);
    } catch (err) {
      core.log(`The server did not start: ${describeError(err)}`, 'error');
      core.meta({ serverState: 'exited', busy: false, loading: false });
      core.dispatch({
        type: 'notice',
        level: 'error',
        text: describeError(err),
        action: { label: 'Restart server', message: { type: 'restart' } },
      });
      throw err;
    }
  }

  /** Says (once per server version) that the server's version differs from the client's. */
  private compareVersions(init: InitializeResult): void {
    const { host } = this.core;
    const own = host.clientInfo?.version;
    const server = differentServerVersion(init, own);
    if (!own || !server || this.versionsSaid.has(server)) {
      return;
    }
    this.versionsSaid.add(server);
    if (host.serverVersionDiffers) {
      host.serverVersionDiffers(server, own);
    } else {
      this.core.log(`Parley server ${server} differs from this client's ${own}.`, 'warn');
    }
  }

  /** Says in the view (once) and the log why the server does not start, and throws. */
  private refuseToStart(refusal: { text: string; action?: NoticeEntry['action'] }): never {
    const { core } = this;
    core.meta({ serverState: 'stopped', busy: false, loading: false });
    if (!core.state.entries.some((e) => e.kind === 'notice' && e.text === refusal.text)) {
      core.dispatch({ type: 'notice', level: 'warning', text: refusal.text, ...(refusal.action ? { action: refusal.action } : {}) });
    }
    core.log(`Not starting the server: ${refusal.text}`, 'warn');
    throw new Error(refusal.text);
  }

  private newClient(cwd: string): ParleyClient {
    const { core, hooks } = this;
    const { host } = core;
    const files = host.files ? new WorkspaceFileAccess(() => host.workspaceRoot(), host.files) : undefined;
    const client = new ParleyClient({
      server: { ...host.settings().server, cwd },
      tools: host.editorTools?.specs ?? [],
      clientInfo: host.clientInfo,
      handlers: {
        requestPermission: (params, signal) => hooks.requestPermission(params, signal),
        callEditorTool: (params, signal) =>
          host.editorTools ? host.editorTools.run(params, signal) : Promise.resolve({ content: `Unknown editor tool ${params.name}`, isError: true }),
        ...(files
          ? {
              readTextFile: (params) => files.readTextFile(params),
              writeTextFile: (params) => hooks.writeTextFile(files, params),
            }
          : {}),
      },
    });
    client.on('update', (n) => hooks.update(n));
    client.on('log', (line) => core.log(line, 'server'));
    client.on('exit', (info) => {
      if (core.client === client) {
        this.onExit(info);
      }
    });
    return client;
  }

  private onExit(info: ExitInfo): void {
    const { core } = this;
    this.hooks.exited();
    core.meta({ serverState: info.expected ? 'stopped' : 'exited', busy: false, loading: false });
    const what = info.signal ? `signal ${info.signal}` : `exit code ${info.code}`;
    core.log(`The server ${info.expected ? 'stopped' : 'stopped unexpectedly'} (${what}).`, info.expected ? 'info' : 'error');
    if (!info.expected) {
      const tail = info.stderrTail.slice(-3).join('\n');
      keepingNotices(core, () =>
        core.dispatch({
          type: 'notice',
          level: 'error',
          text: `The Parley server stopped unexpectedly (${what}).${tail ? `\n${tail}` : ''}`,
          action: { label: 'Restart server', message: { type: 'restart' } },
        }),
      );
    }
  }
}
