/** Parley for VS Code: wires the chat controller to the chat view, commands and status bar. */

import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';

import { describeError } from '../client/client';
import { EDITOR_TOOL_SPECS } from '../client/editorToolSpecs';
import type { RequestPermissionParams, ToolPolicy } from '../client/protocol';
import type { ViewState, ViewToHost } from '../common/view';
import { formatCost, formatTokens } from '../common/display';
import { versionMismatchText } from '../core/serverVersion';
import { statusTooltipMarkdown } from '../core/statusTooltip';
import { attachedKernel } from '../common/kernel';
import { attachKernel } from './attachKernel';
import { TOOL_POLICY_OPTION, formatInput } from '../core/chatState';
import { contentText, contentViews } from '../core/toolView';
import { ChatController, type ControllerSettings, type LogLevel, resourceContext } from '../core/controller';
import type { ChatState } from '../core/chatState';
import { viewMessages } from '../core/webviewHtml';
import { ChatViewProvider } from './chatView';
import { CommandTerminals } from './commandTerminals';
import { PROPOSED_SCHEME, ProposedEditDocuments, diffDecisions } from './diffView';
import { VscodeEditorFiles } from './editorFiles';
import { EditorTools } from './editorTools';
import { closable } from './outputChannels';
import { INSTALL_LABEL, findServer, installBundledServer, missingNotice, serverStorage } from './serverSetup';
import { locationReason } from '../core/serverLocation';
import { WorkspaceServerApproval } from './workspaceServer';
import { workspaceNotices } from './sessionFiles';
import { viewMessageHandler } from './viewMessages';

const MAX_FILE_BYTES = 512 * 1024;

/** The workspaceState key of the session open in the chat, reopened after a window reload. */
export const OPEN_SESSION_KEY = 'parley.openSession';

/** What the chat says in Restricted Mode (and the log). */
export const RESTRICTED_MODE_TEXT =
  'Parley is off in Restricted Mode: it runs a server that executes code and edits files in this ' +
  "workspace (and would use the workspace's own .venv/bin/parley). Trust the folder " +
  '(Workspaces: Manage Workspace Trust) to use Parley here.';

/** The session to reopen after a reload: one with a prompt in it (an empty one is not stored). */
export interface OpenSession {
  sessionId: string;
  title?: string;
}

export function sessionToKeep(state: ChatState): OpenSession | undefined {
  const { sessionId, title } = state.meta;
  if (!sessionId || !state.entries.some((e) => e.kind === 'user')) {
    return undefined;
  }
  return title ? { sessionId, title } : { sessionId };
}

/** The server's log level, from the output channel's (the user sets it with "Set Log Level…"). */
export function serverLogLevel(level: vscode.LogLevel | undefined): string | undefined {
  switch (level) {
    case undefined:
      return undefined;
    case vscode.LogLevel.Trace:
    case vscode.LogLevel.Debug:
      return 'DEBUG';
    case vscode.LogLevel.Info:
      return 'INFO';
    case vscode.LogLevel.Warning:
      return 'WARNING';
    default:
      return 'ERROR';
  }
}

const SERVER_LOG_LINE = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) (.*)$/;

/**
 * Writes log lines to the output channel at their level. The server's stderr lines
 * ("2026-11-25 03:40:00,123 WARNING parley.x: …") go at the level they name, without their
 * timestamp (the channel adds its own); a line that names none (a traceback's) at the level of
 * the line before it.
 */
export function logWriter(output: Pick<vscode.LogOutputChannel, 'debug' | 'info' | 'warn' | 'error'>): (line: string, level?: LogLevel) => void {
  let serverLevel: 'debug' | 'info' | 'warn' | 'error' = 'info';
  return (line, level = 'info') => {
    if (level !== 'server') {
      output[level](line);
      return;
    }
    const m = SERVER_LOG_LINE.exec(line);
    if (m) {
      serverLevel = m[1] === 'DEBUG' ? 'debug' : m[1] === 'INFO' ? 'info' : m[1] === 'WARNING' ? 'warn' : 'error';
      output[serverLevel](`[server] ${m[2]}`);
    } else {
      output[serverLevel](line.startsWith('[parley]') ? line : `[server] ${line}`);
    }
  };
}

let controller: ChatController | undefined;
/** Where the extension installs its own server (set on activation). */
let storage: string | undefined;
/** The user's answers about workspaces' own servers (set on activation). */
let workspaceServer: WorkspaceServerApproval | undefined;

/** The `parley` to run: the setting, else an approved workspace .venv's (trusted only), the PATH, the storage. */
function serverLocation() {
  const configured = vscode.workspace.getConfiguration('parley').get<string>('serverCommand', 'parley');
  return findServer(configured, workspaceRoot(), storage, workspaceServer?.approved() ?? {});
}

function workspaceRoot(): string {
  return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? os.homedir();
}

/** A multi-root workspace's other folders (on disk), for the session's `additionalDirectories`. */
export function additionalDirectories(): string[] {
  return (vscode.workspace.workspaceFolders ?? [])
    .slice(1)
    .filter((f) => f.uri.scheme === 'file')
    .map((f) => f.uri.fsPath);
}

function readSettings(logLevel?: vscode.LogLevel): ControllerSettings {
  const c = vscode.workspace.getConfiguration('parley');
  const { command } = serverLocation();
  const env: Record<string, string> = {};
  // The server logs on stderr at the channel's level, unless the settings say otherwise.
  const level = serverLogLevel(logLevel);
  if (level && !process.env.PARLEY_LOG_LEVEL) {
    env.PARLEY_LOG_LEVEL = level;
  }
  for (const [k, v] of Object.entries(c.get<Record<string, unknown>>('serverEnv', {}))) {
    if (typeof v === 'string') {
      env[k] = v;
    }
  }
  return {
    server: { command, args: c.get<string[]>('serverArgs', ['serve']), env },
    defaultModel: c.get<string>('defaultModel', '') || undefined,
    toolPolicy: c.get<ToolPolicy>('toolPolicy', 'hybrid'),
    autoApprove: c.get<string[]>('autoApprove', []),
    systemPrompt: c.get<string>('systemPrompt', '') || undefined,
  };
}

function updateStatusBar(item: vscode.StatusBarItem, state: ViewState): void {
  const m = state.meta;
  const model = m.model ? m.model.slice(m.model.indexOf(':') + 1) : 'Parley';
  const icon = m.busy ? '$(sync~spin)' : m.serverState === 'exited' ? '$(error)' : '$(comment-discussion)';
  const cost = m.usage.cost ? ` · ${formatCost(m.usage.cost)}` : '';
  const kernel = attachedKernel(m.configOptions) ? ' · $(notebook-kernel-select)' : '';
  item.text = `${icon} ${model} · ${formatTokens(m.usage.sessionTokens)} tok${cost}${kernel}`;
  item.tooltip = new vscode.MarkdownString(statusTooltipMarkdown(m), true);
}

export function activate(context: vscode.ExtensionContext): void {
  const output = closable(vscode.window.createOutputChannel('Parley', { log: true }));
  const editorTools = new EditorTools(workspaceRoot);
  const editorFiles = new VscodeEditorFiles();
  const proposedEdits = new ProposedEditDocuments(editorFiles);
  const version = (context.extension.packageJSON as { version?: string }).version ?? '0.0.0';
  storage = serverStorage(context);
  const installOutput = closable(vscode.window.createOutputChannel('Parley Server Install'));

  const log = logWriter(output);
  workspaceServer = new WorkspaceServerApproval(context.globalState, () => ctl, log);
  const approval = workspaceServer;
  /** Asked once per start, before the settings: says which server runs and why, and asks about a workspace's own. */
  const serverMissing = () => {
    const location = serverLocation();
    log(locationReason(location), location.passedOver ? 'warn' : 'info');
    void approval.offer(location).catch((err: unknown) => log(`Could not ask about the workspace's server: ${describeError(err)}`, 'warn'));
    return location.source === 'missing' ? missingNotice() : undefined;
  };
  const ctl: ChatController = new ChatController({
    workspaceRoot,
    additionalDirectories,
    settings: () => readSettings(output.logLevel),
    serverBlocked: () => (vscode.workspace.isTrusted === false ? RESTRICTED_MODE_TEXT : undefined),
    serverMissing,
    clientInfo: { name: 'parley-vscode', version },
    serverVersionDiffers: (server, own) => {
      // The extension manages the server it installed into its storage: its button reinstalls it.
      const managed = serverLocation().source === 'storage';
      const text = versionMismatchText(server, own, managed);
      log(text, 'warn');
      void vscode.window.showWarningMessage(text, ...(managed ? [INSTALL_LABEL] : [])).then((pick) => (pick ? installServer() : undefined));
    },
    files: editorFiles,
    editorTools: { specs: EDITOR_TOOL_SPECS, run: (params) => editorTools.run(params) },
    log,
    notices: workspaceNotices(context.workspaceState),
    onPermissionAsked: (params, signal) =>
      askPermission(params, signal, chatView.visible, () => openProposedDiffs(ctl, proposedEdits, params)),
  });
  controller = ctl;

  // The session open in the chat, kept for the next window: a reload reopens it.
  let kept = context.workspaceState.get<OpenSession>(OPEN_SESSION_KEY);
  if (kept) {
    ctl.restoreOnOpen(kept.sessionId, kept.title);
  }

  const terminals = new CommandTerminals(() => ctl.state);
  const chatView: ChatViewProvider = new ChatViewProvider(
    context.extensionUri,
    (m: ViewToHost) => void handleViewMessage(m),
    // The session is closed in the server (when it can) and opened again when the view returns.
    () => void ctl.closeSession(),
  );

  const status = vscode.window.createStatusBarItem('parley.status', vscode.StatusBarAlignment.Right, 100);
  status.name = 'Parley';
  status.command = 'parley.openChat';
  updateStatusBar(status, ctl.state);
  status.show();

  let busy = false;
  /** The session to reopen after a reload, kept when it changed. */
  const keepOpenSession = (next: ChatState) => {
    const keep = sessionToKeep(next);
    if (keep?.sessionId !== kept?.sessionId || keep?.title !== kept?.title) {
      kept = keep;
      void context.workspaceState.update(OPEN_SESSION_KEY, keep);
    }
  };
  /** The status bar, and whether a turn runs (what Stop and Undo turn are enabled by). */
  const showMeta = (next: ChatState) => {
    updateStatusBar(status, next);
    if (next.meta.busy !== busy) {
      busy = next.meta.busy;
      void vscode.commands.executeCommand('setContext', 'parley.busy', busy);
    }
  };
  ctl.on('state', (prev, next) => {
    for (const m of viewMessages(prev, next)) {
      chatView.post(m);
    }
    terminals.stateChanged(prev, next);
    approval.stateChanged(prev, next);
    // No session yet (the window just opened) or one loading: nothing to change.
    if ((prev.entries !== next.entries || prev.meta !== next.meta) && next.meta.sessionId && !next.meta.loading) {
      keepOpenSession(next);
    }
    if (prev.meta !== next.meta) {
      showMeta(next);
    }
  });

  const run = (fn: () => Promise<unknown>) => async () => {
    try {
      await fn();
    } catch (err) {
      void vscode.window.showErrorMessage(`Parley: ${describeError(err)}`);
    }
  };

  /**
   * The install button's and command's work: install, then (re)start the server — a new
   * session or the one open, resumed; a server running from an older install loses its files.
   */
  const installServer = run(async () => {
    const installed = await installBundledServer(context, installOutput);
    output.info(`Installed Parley's server ${installed.version}: ${installed.command}`);
    void vscode.window.showInformationMessage(`Parley's server ${installed.version} is installed.`);
    await ctl.restart();
  });
  const handleViewMessage = viewMessageHandler({
    ctl,
    view: chatView,
    proposedEdits,
    terminals,
    exportMemory: context.globalState,
    workspaceRoot,
    installServer,
    workspaceServer: approval,
  });

  context.subscriptions.push(
    output,
    installOutput,
    editorTools,
    status,
    terminals,
    vscode.window.registerWebviewViewProvider(ChatViewProvider.viewId, chatView),
    vscode.workspace.registerTextDocumentContentProvider(PROPOSED_SCHEME, proposedEdits),
    ...diffDecisions(ctl, proposedEdits),
    vscode.commands.registerCommand('parley.openChat', run(() => chatView.reveal())),
    vscode.commands.registerCommand('parley.sendSelection', run(() => sendSelection(ctl, chatView))),
    vscode.commands.registerCommand(
      'parley.addFileToContext',
      (uri?: vscode.Uri) => run(() => addFileToContext(ctl, chatView, uri))(),
    ),
    vscode.commands.registerCommand(
      'parley.newSession',
      run(async () => {
        await chatView.reveal();
        if (ctl.state.meta.busy) {
          await ctl.cancel();
        }
        await ctl.newSession();
      }),
    ),
    vscode.commands.registerCommand('parley.showSessions', run(() => showSessions(ctl, chatView))),
    vscode.commands.registerCommand('parley.restartServer', run(() => ctl.restart())),
    vscode.commands.registerCommand('parley.installServer', installServer),
    vscode.commands.registerCommand('parley.cancel', run(() => ctl.cancel())),
    vscode.commands.registerCommand('parley.selectModel', run(() => selectModel(ctl))),
    vscode.commands.registerCommand('parley.attachKernel', run(() => attachKernel(ctl))),
    vscode.commands.registerCommand(
      'parley.undoTurn',
      run(async () => {
        await chatView.reveal();
        await ctl.undoTurn().catch(() => undefined); // the chat shows what happened
      }),
    ),
    vscode.commands.registerCommand(
      'parley.redoTurn',
      run(async () => {
        await chatView.reveal();
        await ctl.redoTurn().catch(() => undefined); // the chat shows what happened
      }),
    ),
    vscode.commands.registerCommand('parley.showLog', () => output.show()),
    // Trusted at last: start what Restricted Mode held back, if the chat is open.
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      if (chatView.visible) {
        void ctl.ensureSession().catch(() => undefined);
      }
    }),
    vscode.workspace.onDidChangeConfiguration((e) => settingsChanged(e, ctl, output, run(() => ctl.restart()))),
    { dispose: () => void ctl.dispose() },
  );
}

/** Settings changed: the server's offer a restart; the tool policy and autoApprove apply to the session now. */
function settingsChanged(e: vscode.ConfigurationChangeEvent, ctl: ChatController, output: vscode.LogOutputChannel, restart: () => Promise<void>): void {
  if (!e.affectsConfiguration('parley')) {
    return;
  }
  const serverSettings = ['parley.serverCommand', 'parley.serverArgs', 'parley.serverEnv'];
  if (serverSettings.some((name) => e.affectsConfiguration(name)) && ctl.client?.running) {
    void vscode.window
      .showInformationMessage('Parley: restart the server to use the new server settings?', 'Restart')
      .then((pick) => (pick ? restart() : undefined));
  }
  const sessionId = ctl.sessionId;
  const policy = readSettings().toolPolicy;
  if (e.affectsConfiguration('parley.toolPolicy') && policy) {
    void ctl
      .setConfigOption(TOOL_POLICY_OPTION, policy)
      .catch((err: unknown) => output.warn(`setting the tool policy failed: ${describeError(err)}`));
  }
  if (sessionId && ctl.client?.running && e.affectsConfiguration('parley.autoApprove')) {
    // autoApprove has no config option: `_parley/session/configure` stays its way.
    void ctl.client
      .configure({ sessionId, autoApprove: readSettings().autoApprove })
      .catch((err: unknown) => output.warn(`configure failed: ${describeError(err)}`));
  }
}

export async function deactivate(): Promise<void> {
  await controller?.dispose();
  controller = undefined;
}

/** The choice a dialog or notification about an edit adds to the server's options. */
export const OPEN_DIFF_CHOICE = 'Open diff';

/**
 * Asks outside the chat when the chat cannot (a modal dialog when `parley.permissionPrompt`
 * is `modal`, a notification while the chat is hidden); null leaves it to the inline buttons.
 * For an edit, "Open diff" shows the diff and asks again.
 */
export async function askPermission(
  params: RequestPermissionParams,
  signal: AbortSignal,
  viewVisible: boolean,
  openDiffs: () => Promise<void>,
): Promise<string | null> {
  const mode = vscode.workspace.getConfiguration('parley').get<string>('permissionPrompt', 'inline');
  if (mode !== 'modal' && viewVisible) {
    return null;
  }
  const content = params.toolCall.content ?? [];
  const choices = [...params.options.map((o) => o.name), ...(content.some((c) => c.type === 'diff') ? [OPEN_DIFF_CHOICE] : [])];
  for (;;) {
    const pick = await askOutsideTheChat(params, mode === 'modal', choices);
    if (signal.aborted || pick === undefined) {
      return null;
    }
    if (pick === OPEN_DIFF_CHOICE) {
      await openDiffs();
      continue;
    }
    return params.options.find((o) => o.name === pick)?.optionId ?? null;
  }
}

/** The question once: a modal dialog with what is asked about, or a notification; the choice picked. */
function askOutsideTheChat(params: RequestPermissionParams, modal: boolean, choices: string[]): Thenable<string | undefined> {
  const question = `Parley asks permission: ${params.toolCall.title ?? params.toolCall.toolCallId}.`;
  if (!modal) {
    // The inline prompt is out of sight: offer the choice in a notification too.
    return vscode.window.showInformationMessage(question, ...choices);
  }
  const detail = contentText(contentViews(params.toolCall.content ?? [])) || formatInput(params.toolCall.rawInput);
  return vscode.window.showWarningMessage(question, { modal: true, detail }, ...choices);
}

/** The diff view of each file an edit asks about. */
async function openProposedDiffs(ctl: ChatController, proposedEdits: ProposedEditDocuments, params: RequestPermissionParams): Promise<void> {
  for (const c of params.toolCall.content ?? []) {
    const edit = c.type === 'diff' ? ctl.proposedEdit(params.toolCall.toolCallId, c.path) : undefined;
    if (edit) {
      await proposedEdits.open(edit);
    }
  }
}

async function sendSelection(ctl: ChatController, view: ChatViewProvider): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor) {
    throw new Error('Open a file and select some text first.');
  }
  const doc = editor.document;
  const range = editor.selection.isEmpty
    ? new vscode.Range(0, 0, doc.lineCount, 0)
    : new vscode.Range(editor.selection.start, editor.selection.end);
  const text = doc.getText(range);
  const lines = editor.selection.isEmpty
    ? undefined
    : { startLine: range.start.line + 1, endLine: range.end.line + (range.end.character === 0 && range.end.line > range.start.line ? 0 : 1) };
  const { item, block } = resourceContext(doc.uri.toString(), text, lines, mimeFor(doc.languageId));
  const question = await vscode.window.showInputBox({
    title: `Ask Parley about ${item.label}`,
    prompt: 'Your question (leave empty to attach the selection to the chat prompt)',
    placeHolder: 'Explain this code',
  });
  if (question === undefined) {
    return;
  }
  await view.reveal();
  if (!question.trim()) {
    ctl.addContext(item, block);
    return;
  }
  await ctl.send(question, { items: [item], blocks: [block] }).catch(() => undefined);
}

async function addFileToContext(ctl: ChatController, view: ChatViewProvider, uri?: vscode.Uri): Promise<void> {
  const target = uri ?? vscode.window.activeTextEditor?.document.uri;
  if (!target) {
    throw new Error('No file to add: open one, or use the command from the Explorer.');
  }
  const open = vscode.workspace.textDocuments.find((d) => d.uri.toString() === target.toString());
  let text: string;
  let languageId: string | undefined;
  if (open) {
    text = open.getText();
    languageId = open.languageId;
  } else {
    const stat = await vscode.workspace.fs.stat(target);
    if (stat.type & vscode.FileType.Directory) {
      throw new Error('Add files one at a time; folders are not supported.');
    }
    if (stat.size > MAX_FILE_BYTES) {
      throw new Error(`${path.basename(target.fsPath)} is larger than ${MAX_FILE_BYTES / 1024} KB.`);
    }
    text = new TextDecoder('utf-8').decode(await vscode.workspace.fs.readFile(target));
  }
  const { item, block } = resourceContext(target.toString(), text, undefined, languageId ? mimeFor(languageId) : undefined);
  ctl.addContext(item, block);
  await view.reveal();
}

function mimeFor(languageId: string): string | undefined {
  const map: Record<string, string> = {
    python: 'text/x-python',
    javascript: 'text/javascript',
    typescript: 'text/x-typescript',
    json: 'application/json',
    markdown: 'text/markdown',
    plaintext: 'text/plain',
  };
  return map[languageId];
}

/** The view's title bar's clock: the chat's History list (open, export, delete a session). */
async function showSessions(ctl: ChatController, view: ChatViewProvider): Promise<void> {
  await view.reveal();
  view.post({ type: 'sessions', sessions: ctl.sessionRows(await ctl.listSessions()), canDelete: ctl.canDeleteSessions });
}

async function selectModel(ctl: ChatController): Promise<void> {
  const models = await ctl.refreshModels();
  const pick = await vscode.window.showQuickPick(
    models.map((m) => ({
      label: m.id,
      description: m.id === ctl.state.meta.model ? 'current' : undefined,
      detail: m.available ? undefined : `unavailable: ${m.reason ?? 'not configured'}`,
      id: m.id,
      available: m.available,
    })),
    { title: 'Parley model', placeHolder: 'Model for this session' },
  );
  if (!pick) {
    return;
  }
  if (!pick.available) {
    throw new Error(`${pick.id} is not available: ${pick.detail ?? ''}`);
  }
  await ctl.selectModel(pick.id);
}
