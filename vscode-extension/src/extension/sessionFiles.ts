/**
 * The history list's VS Code side: Export saves a session's transcript as Markdown where the
 * user says (a save dialog), and the notices the chat said about a session are kept in the
 * workspace's state so that a reload shows them again.
 */

import * as path from 'node:path';
import * as vscode from 'vscode';

import type { ChatController, KeptNotice, NoticeKeeper } from '../core/controller';

/** A file name for a session's export: its title, in lower case, words joined by `-`. */
export function exportFileName(title: string | undefined): string {
  const slug = (title ?? '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 60);
  return `${slug || 'parley-session'}.md`;
}

/** Asks where to save the session's Markdown and writes it there; says where it went. */
export async function exportSession(ctl: ChatController, sessionId: string, root: string): Promise<void> {
  const title = ctl.sessionTitle(sessionId);
  const markdown = await ctl.exportMarkdown(sessionId, title);
  const target = await vscode.window.showSaveDialog({
    defaultUri: vscode.Uri.file(path.join(root, exportFileName(title))),
    filters: { Markdown: ['md'] },
    saveLabel: 'Export',
    title: `Export “${title ?? sessionId}” as Markdown`,
  });
  if (!target) {
    return;
  }
  await vscode.workspace.fs.writeFile(target, new TextEncoder().encode(markdown));
  const open = await vscode.window.showInformationMessage(`Parley: saved the session to ${path.basename(target.fsPath)}.`, 'Open');
  if (open) {
    await vscode.window.showTextDocument(target);
  }
}

/** Kept notices in the workspace's state, under one key per session. */
export function workspaceNotices(state: vscode.Memento): NoticeKeeper {
  const key = (sessionId: string) => `parley.notices.${sessionId}`;
  return {
    get: (sessionId) => state.get<KeptNotice[]>(key(sessionId), []),
    set: (sessionId, notices) => void state.update(key(sessionId), notices.length ? notices : undefined),
  };
}
