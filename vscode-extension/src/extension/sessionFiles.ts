/**
 * The history list's VS Code side: Export saves a session as the server's Markdown (the same
 * document every client gives) where the user says, in a save dialog that starts outside the
 * workspace (an export is not part of the repository unless the user puts it there); and the
 * notices the chat said about a session are kept in the workspace's state so that a reload
 * shows them again.
 */

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';

import type { ChatController, KeptNotice, NoticeKeeper } from '../core/controller';

/** The globalState key of the folder the last export went to (the next one starts there). */
export const EXPORT_FOLDER_KEY = 'parley.exportFolder';

/** A file name for a session's export: its title, in lower case, words joined by `-`. */
export function exportFileName(title: string | undefined): string {
  const slug = (title ?? '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 60);
  return `${slug || 'parley-session'}.md`;
}

/** Where the save dialog starts: the folder the last export went to (the user chose it), else the home folder. */
export function exportFolder(memory: vscode.Memento): string {
  const last = memory.get<string>(EXPORT_FOLDER_KEY);
  return last && fs.existsSync(last) ? last : os.homedir();
}

/** Asks where to save the session's Markdown (the server's export) and writes it there; says where it went. */
export async function exportSession(ctl: ChatController, sessionId: string, memory: vscode.Memento): Promise<void> {
  const title = ctl.sessionTitle(sessionId);
  const markdown = await ctl.exportMarkdown(sessionId);
  const target = await vscode.window.showSaveDialog({
    defaultUri: vscode.Uri.file(path.join(exportFolder(memory), exportFileName(title))),
    filters: { Markdown: ['md'] },
    saveLabel: 'Export',
    title: `Export “${title ?? sessionId}” as Markdown`,
  });
  if (!target) {
    return;
  }
  await vscode.workspace.fs.writeFile(target, new TextEncoder().encode(markdown));
  await memory.update(EXPORT_FOLDER_KEY, path.dirname(target.fsPath));
  const open = await vscode.window.showInformationMessage(`Parley: saved the session to ${target.fsPath}.`, 'Open');
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
