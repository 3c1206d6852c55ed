/** The editor tools the server may call: the selection, the open editors, the diagnostics. */

import * as path from 'node:path';
import * as vscode from 'vscode';

import type { EditorCallToolParams, EditorCallToolResult } from '../client/protocol';

const MAX_TEXT = 100_000;
const MAX_LINES = 500;

export class EditorTools implements vscode.Disposable {
  private lastEditor: vscode.TextEditor | undefined = vscode.window.activeTextEditor;
  private readonly subscription: vscode.Disposable;

  constructor(private readonly workspaceRoot: () => string) {
    // Focus in the chat view must not lose "the editor the user was in".
    this.subscription = vscode.window.onDidChangeActiveTextEditor((e) => {
      if (e) {
        this.lastEditor = e;
      }
    });
  }

  dispose(): void {
    this.subscription.dispose();
  }

  run(params: EditorCallToolParams): Promise<EditorCallToolResult> {
    switch (params.name) {
      case 'editor_selection':
        return Promise.resolve(this.selection());
      case 'open_editors':
        return Promise.resolve(this.openEditors());
      case 'diagnostics':
        return Promise.resolve(this.diagnostics(params.arguments ?? {}));
      default:
        return Promise.resolve({ content: `Unknown editor tool: ${params.name}`, isError: true });
    }
  }

  private rel(uri: vscode.Uri): string {
    if (uri.scheme !== 'file') {
      return uri.toString();
    }
    const relative = path.relative(this.workspaceRoot(), uri.fsPath);
    return relative && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : uri.fsPath;
  }

  private selection(): EditorCallToolResult {
    const editor = vscode.window.activeTextEditor ?? this.lastEditor;
    if (!editor || editor.document.isClosed) {
      return { content: 'No editor is open.', isError: true };
    }
    const doc = editor.document;
    const sel = editor.selection;
    let range: vscode.Range = sel;
    let what = 'selection';
    if (sel.isEmpty) {
      range = doc.lineAt(sel.active.line).range;
      what = 'line under the cursor (nothing is selected)';
    }
    let text = doc.getText(range);
    let note = '';
    if (text.length > MAX_TEXT) {
      text = text.slice(0, MAX_TEXT);
      note = `\n[truncated to ${MAX_TEXT} characters]`;
    }
    const header = [
      `file: ${this.rel(doc.uri)}${doc.isDirty ? ' (unsaved changes)' : ''}`,
      `language: ${doc.languageId}`,
      `${what}: line ${range.start.line + 1}, column ${range.start.character + 1} to line ${range.end.line + 1}, column ${range.end.character + 1}`,
      `cursor: line ${sel.active.line + 1}, column ${sel.active.character + 1}`,
    ];
    return { content: `${header.join('\n')}\n\n${text}${note}` };
  }

  private openEditors(): EditorCallToolResult {
    const lines: string[] = [];
    for (const group of vscode.window.tabGroups.all) {
      for (const tab of group.tabs) {
        const uri = tabFile(tab);
        if (uri) {
          const flags = [tab.isActive && group.isActive ? 'active' : '', tab.isDirty ? 'unsaved changes' : '', tab.isPinned ? 'pinned' : ''].filter(Boolean);
          lines.push(`${this.rel(uri)}${flags.length ? ` (${flags.join(', ')})` : ''}`);
        }
      }
    }
    return { content: lines.length ? lines.join('\n') : 'No files are open.' };
  }

  private diagnostics(args: Record<string, unknown>): EditorCallToolResult {
    const severityArg = typeof args.severity === 'string' ? args.severity : 'warning';
    const least = SEVERITIES.indexOf(severityArg);
    if (least < 0) {
      return { content: `Unknown severity "${severityArg}"; use one of ${SEVERITIES.join(', ')}.`, isError: true };
    }
    const lines: string[] = [];
    let dropped = 0;
    for (const [uri, diags] of this.diagnosticsOf(args.path)) {
      // vscode.DiagnosticSeverity: Error 0, Warning 1, Information 2, Hint 3.
      for (const d of diags.filter((d) => (d.severity as number) <= least)) {
        if (lines.length >= MAX_LINES) {
          dropped += 1;
        } else {
          lines.push(`${this.rel(uri)}:${diagnosticLine(d)}`);
        }
      }
    }
    if (dropped) {
      lines.push(`[${dropped} more not shown]`);
    }
    return { content: lines.length ? lines.join('\n') : 'No problems reported.' };
  }

  /** The diagnostics of the file `file` names (relative to the workspace root), else of every file. */
  private diagnosticsOf(file: unknown): [vscode.Uri, readonly vscode.Diagnostic[]][] {
    if (typeof file === 'string' && file) {
      const uri = vscode.Uri.file(path.isAbsolute(file) ? file : path.join(this.workspaceRoot(), file));
      return [[uri, vscode.languages.getDiagnostics(uri)]];
    }
    return vscode.languages.getDiagnostics();
  }
}

/** The diagnostics' severities, most severe first (as `vscode.DiagnosticSeverity` numbers them). */
const SEVERITIES = ['error', 'warning', 'information', 'hint'];

/** A diagnostic after its file: `line:column severity source(code): message`. */
function diagnosticLine(d: vscode.Diagnostic): string {
  const source = d.source ? ` ${d.source}` : '';
  const code = typeof d.code === 'object' ? d.code.value : d.code;
  return `${d.range.start.line + 1}:${d.range.start.character + 1} ${SEVERITIES[d.severity]}${source}${code !== undefined ? `(${code})` : ''}: ${d.message}`;
}

/** The file a tab shows (a diff's modified side), if it shows one. */
function tabFile(tab: vscode.Tab): vscode.Uri | undefined {
  const input = tab.input;
  if (input instanceof vscode.TabInputText || input instanceof vscode.TabInputNotebook) {
    return input.uri;
  }
  return input instanceof vscode.TabInputTextDiff ? input.modified : undefined;
}
