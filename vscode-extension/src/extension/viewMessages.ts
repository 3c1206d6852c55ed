/**
 * What the host does with each message of the chat page (`ViewToHost`): one handler per
 * kind, in a table. A failure is shown in a pop-up; what the chat shows itself (a prompt's
 * error, an undo's answer) is not repeated there.
 */

import * as path from 'node:path';
import * as vscode from 'vscode';

import { describeError } from '../client/client';
import type { ViewToHost } from '../common/view';
import type { ChatController } from '../core/controller';
import type { ChatViewProvider } from './chatView';
import type { CommandTerminals } from './commandTerminals';
import type { ProposedEditDocuments } from './diffView';
import { exportSession } from './sessionFiles';
import type { WorkspaceServerApproval } from './workspaceServer';

/** What the handlers act on. */
export interface ViewMessageHost {
  ctl: ChatController;
  view: ChatViewProvider;
  proposedEdits: ProposedEditDocuments;
  terminals: CommandTerminals;
  /** Where Export remembers the folder it saved to. */
  exportMemory: vscode.Memento;
  /** The workspace's root, for a path a tool call gave relative. */
  workspaceRoot: () => string;
  installServer: () => Promise<void>;
  /** The answers to the question about the workspace's own server (./workspaceServer.ts). */
  workspaceServer: Pick<WorkspaceServerApproval, 'useWorkspaceServer' | 'useInstalledServer'>;
}

type ViewHandlers = { [K in ViewToHost['type']]: (m: Extract<ViewToHost, { type: K }>) => Promise<unknown> | void };

/** Ignore a failure the chat shows itself. */
const shownInTheView = () => undefined;

function viewHandlers(host: ViewMessageHost): ViewHandlers {
  const { ctl, view } = host;
  const postSessions = async () =>
    view.post({ type: 'sessions', sessions: ctl.sessionRows(await ctl.listSessions()), canDelete: ctl.canDeleteSessions });
  return {
    ready: async () => {
      view.post({ type: 'reset', state: ctl.state });
      // Start the server and a session as soon as the chat is shown: after a window reload,
      // the session that was open. A failure is shown in the chat (with a Restart button),
      // not in a pop-up as well.
      await ctl.ensureSession().catch(shownInTheView);
    },
    send: (m) => ctl.send(m.text).catch(shownInTheView),
    cancel: () => ctl.cancel(),
    permission: (m) => ctl.answerPermission(m.requestId, m.optionId, m.note),
    selectModel: (m) => ctl.selectModel(m.model),
    setConfigOption: (m) => ctl.setConfigOption(m.configId, m.value),
    setMode: (m) => ctl.setMode(m.modeId),
    openTerminal: (m) => host.terminals.show(m.toolCallId),
    newSession: async () => {
      if (ctl.state.meta.busy) {
        await ctl.cancel();
      }
      await ctl.newSession();
    },
    listSessions: postSessions,
    retry: () => ctl.retry().catch(shownInTheView),
    exportSession: (m) => exportSession(ctl, m.sessionId, host.exportMemory),
    deleteSession: async (m) => {
      try {
        await ctl.deleteSession(m.sessionId);
      } finally {
        // The list as the server has it now: without the row, or with it back if that failed.
        await postSessions();
      }
    },
    loadSession: (m) => ctl.loadSession(m.sessionId),
    removeContext: (m) => ctl.removeContext(m.index),
    openLocation: (m) => openLocation(path.isAbsolute(m.path) ? m.path : path.join(host.workspaceRoot(), m.path), m.line),
    insertCode: (m) => insertAtCursor(m.text),
    undoTurn: (m) => ctl.undoTurn(m.turn).catch(shownInTheView),
    openDiff: async (m) => {
      const edit = ctl.proposedEdit(m.toolCallId, m.file);
      if (!edit) {
        throw new Error('That edit is no longer waiting for an answer.');
      }
      await host.proposedEdits.open(edit);
    },
    restart: () => ctl.restart(),
    installServer: () => host.installServer(),
    useWorkspaceServer: (m) => host.workspaceServer.useWorkspaceServer(m.file),
    useInstalledServer: (m) => host.workspaceServer.useInstalledServer(m.file),
  };
}

/** A handler of the page's messages: each to its handler, a failure in a pop-up. */
export function viewMessageHandler(host: ViewMessageHost): (m: ViewToHost) => Promise<void> {
  const handlers = viewHandlers(host);
  return async (m) => {
    try {
      const handler = handlers[m.type] as (m: ViewToHost) => Promise<unknown> | void;
      await handler(m);
    } catch (err) {
      void vscode.window.showErrorMessage(`Parley: ${describeError(err)}`);
    }
  };
}

/** Opens a file a tool call touched, with the cursor at `line` (1-based) in view. */
export async function openLocation(file: string, line?: number): Promise<void> {
  const at = new vscode.Position(Math.max(0, (line ?? 1) - 1), 0);
  await vscode.window.showTextDocument(vscode.Uri.file(file), { selection: new vscode.Range(at, at), preview: true });
}

/**
 * A code block's Insert button: the text at the cursor of the active text editor (replacing
 * the selection, at every cursor), then the focus in that editor. The chat view has the focus
 * when the button is clicked, so the editor is the last active one, else a visible one.
 */
export async function insertAtCursor(text: string): Promise<void> {
  const editor = vscode.window.activeTextEditor ?? vscode.window.visibleTextEditors[0];
  if (!editor) {
    void vscode.window.showInformationMessage('Parley: open a file in an editor to insert the code there.');
    return;
  }
  const done = await editor.edit((edit) => {
    for (const selection of editor.selections) {
      edit.replace(selection, text);
    }
  });
  if (!done) {
    throw new Error('the editor did not take the code (is the file read-only?)');
  }
  await vscode.window.showTextDocument(editor.document, editor.viewColumn);
}
