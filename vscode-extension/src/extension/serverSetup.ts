/**
 * The server the extension brings: where it looks for `parley` (src/core/serverLocation.ts)
 * with its own storage, and the "Install Parley's server" button's work — a Python ≥ 3.11 from
 * the Python extension (when installed) or the PATH, a virtualenv in the extension's global
 * storage, the wheel bundled in the .vsix (`bundled/`) pip-installed into it, its output in the
 * "Parley Server Install" output channel, under a progress notification. No terminal.
 */

import * as path from 'node:path';
import * as vscode from 'vscode';

import type { NoticeEntry } from '../common/view';
import { type InstalledServer, bundledWheel, installServer, installedServer } from '../core/serverInstall';
import { type ServerLocation, locateServer } from '../core/serverLocation';
import type { ApprovedServers } from '../core/workspaceServerApproval';

export const INSTALL_LABEL = "Install Parley's server";

export const MISSING_TEXT =
  "Parley's server is not installed here: no parley.serverCommand, no approved parley in the workspace's .venv, none on the PATH. " +
  'The button below installs it for this extension (it needs Python 3.11 or newer); or install it yourself: ' +
  'uv tool install parley-code (or pipx install parley-code).';

/** The extension's storage directory for the server's virtualenv. */
export function serverStorage(context: vscode.ExtensionContext): string {
  return path.join(context.globalStorageUri.fsPath, 'server');
}

/**
 * The `parley` to run, with the storage's install among the places looked at, and the
 * workspace's own only when `approved` holds that very file (./workspaceServer.ts).
 */
export function findServer(configured: string, workspaceRoot: string, storage: string | undefined, approved: ApprovedServers): ServerLocation {
  return locateServer({
    configured,
    workspaceRoot,
    trusted: vscode.workspace.isTrusted !== false,
    approved,
    storageCommand: storage ? installedServer(storage)?.command : undefined,
  });
}

/** The notice and its button when there is no server. */
export function missingNotice(): { text: string; action: NonNullable<NoticeEntry['action']> } {
  return { text: MISSING_TEXT, action: { label: INSTALL_LABEL, message: { type: 'installServer' } } };
}

/** The part of `ms-python.python`'s API used here (its `environments` API). */
interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { path: string };
    resolveEnvironment(env: { path: string } | string): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
  };
}

/** The Python extension's active interpreter, if that extension is installed and knows one. */
async function pythonExtensionInterpreter(log: (line: string) => void): Promise<string | undefined> {
  const extension = vscode.extensions.getExtension<PythonExtensionApi>('ms-python.python');
  if (!extension) {
    return undefined;
  }
  try {
    const api = extension.isActive ? extension.exports : await extension.activate();
    const environments = api?.environments;
    if (!environments) {
      return undefined;
    }
    const active = environments.getActiveEnvironmentPath(vscode.workspace.workspaceFolders?.[0]?.uri);
    const resolved = await environments.resolveEnvironment(active);
    return resolved?.executable.uri?.fsPath;
  } catch (err) {
    log(`The Python extension gave no interpreter: ${(err as Error).message}`);
    return undefined;
  }
}

/**
 * Pythons to try: the Python extension's interpreter (in a trusted workspace only: it may be
 * the workspace's own .venv), then `python3` and `python` on the PATH.
 */
export async function pythonCandidates(log: (line: string) => void): Promise<string[]> {
  const fromExtension = vscode.workspace.isTrusted === false ? undefined : await pythonExtensionInterpreter(log);
  return [...(fromExtension ? [fromExtension] : []), ...(process.platform === 'win32' ? ['py', 'python'] : ['python3', 'python'])];
}

/**
 * Installs the bundled wheel into the extension's storage, its output in `channel` (shown),
 * under a progress notification. Throws with a message for the user when it cannot.
 */
export async function installBundledServer(context: vscode.ExtensionContext, channel: vscode.OutputChannel): Promise<InstalledServer> {
  channel.show(true);
  const log = (line: string) => channel.appendLine(line);
  return vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: "Installing Parley's server…", cancellable: true },
    async (_progress, token) => {
      const abort = new AbortController();
      token.onCancellationRequested(() => abort.abort());
      return installServer({
        storageDir: serverStorage(context),
        wheel: bundledWheel(path.join(context.extensionPath, 'bundled')),
        pythonCandidates: await pythonCandidates(log),
        log,
        signal: abort.signal,
      });
    },
  );
}
