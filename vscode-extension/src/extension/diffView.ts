/**
 * "Open diff": VS Code's diff view between a file as it is now (its open document, unsaved
 * changes included) and as an edit the server asks about would leave it. The proposed side
 * is a read-only virtual document served by this provider.
 */

import * as path from 'node:path';
import * as vscode from 'vscode';

import type { ProposedEdit } from '../core/controller';
import type { EditorFiles } from '../core/fileAccess';
import { proposedContent } from '../core/toolView';

export const PROPOSED_SCHEME = 'parley-proposed';

export class ProposedEditDocuments implements vscode.TextDocumentContentProvider {
  /** The virtual documents' texts, by URI; kept while the extension runs (a diff tab may stay open). */
  private readonly texts = new Map<string, string>();
  private opened = 0;

  constructor(private readonly files: EditorFiles) {}

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? '';
  }

  /** Opens the diff view of `edit`: the file now on the left, the proposal on the right. */
  async open(edit: ProposedEdit): Promise<void> {
    const current = await this.files.read(edit.file).catch(() => undefined);
    const name = path.basename(edit.file);
    const serial = String(++this.opened);
    const proposed = this.virtual(edit.file, `proposed-${serial}`, proposedContent(current, edit.oldText, edit.newText));
    // A file the edit creates has no left side on disk: an empty virtual one stands in.
    const left = current === undefined ? this.virtual(edit.file, `new-${serial}`, '') : vscode.Uri.file(edit.file);
    const title = current === undefined ? `${name} (new file proposed by Parley)` : `${name} ↔ Parley's edit`;
    await vscode.commands.executeCommand('vscode.diff', left, proposed, title, { preview: true });
  }

  private virtual(file: string, query: string, text: string): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: PROPOSED_SCHEME, path: file, query });
    this.texts.set(uri.toString(), text);
    return uri;
  }
}
