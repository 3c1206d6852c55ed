/**
 * The editor's files, for the server's `fs/read_text_file` and `fs/write_text_file` (the
 * checks and the line slicing are `core/fileAccess.ts`'s): an open document's text, saved or
 * not; a write applied as a workspace edit (so it lands in open editors and their undo works),
 * then saved.
 */

import * as vscode from 'vscode';

import { type EditorFiles, fileNotFound } from '../core/fileAccess';

export class VscodeEditorFiles implements EditorFiles {
  async read(file: string): Promise<string> {
    const open = openDocument(file);
    if (open) {
      return open.getText();
    }
    const uri = vscode.Uri.file(file);
    let bytes: Uint8Array;
    try {
      bytes = await vscode.workspace.fs.readFile(uri);
    } catch (err) {
      if (isFileNotFound(err)) {
        throw fileNotFound(file);
      }
      throw err;
    }
    return new TextDecoder('utf-8').decode(bytes);
  }

  async write(file: string, content: string): Promise<void> {
    const uri = vscode.Uri.file(file);
    const edit = new vscode.WorkspaceEdit();
    if (openDocument(file) || (await exists(uri))) {
      const doc = await vscode.workspace.openTextDocument(uri);
      const whole = new vscode.Range(doc.positionAt(0), doc.positionAt(doc.getText().length));
      edit.replace(uri, whole, content);
    } else {
      // Created with its folders, then filled: one edit, undone as one.
      edit.createFile(uri, { ignoreIfExists: true });
      edit.insert(uri, new vscode.Position(0, 0), content);
    }
    if (!(await vscode.workspace.applyEdit(edit))) {
      throw new Error(`VS Code did not apply the edit to ${file}.`);
    }
    const doc = await vscode.workspace.openTextDocument(uri);
    if (doc.isDirty && !(await doc.save())) {
      throw new Error(`The edit to ${file} is in the editor, but VS Code could not save it.`);
    }
  }
}

/** The open text document of `file`, if any. */
function openDocument(file: string): vscode.TextDocument | undefined {
  return vscode.workspace.textDocuments.find((d) => d.uri.scheme === 'file' && d.uri.fsPath === file && !d.isClosed);
}

async function exists(uri: vscode.Uri): Promise<boolean> {
  try {
    await vscode.workspace.fs.stat(uri);
    return true;
  } catch (err) {
    if (isFileNotFound(err)) {
      return false;
    }
    throw err;
  }
}

function isFileNotFound(err: unknown): boolean {
  // vscode.FileSystemError's code; ENOENT from a plain Node error.
  const code = typeof err === 'object' && err !== null && 'code' in err ? err.code : undefined;
  return code === 'FileNotFound' || code === 'ENOENT';
}
