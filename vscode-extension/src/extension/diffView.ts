/**
 * "Open diff": VS Code's diff view between a file as it is now (its open document, unsaved
 * changes included) and as an edit the server asks about would leave it. The proposed side
 * is a read-only virtual document served by this provider. While the question is open, the
 * diff editor's title has Allow and Reject (they answer it as the card's buttons do); once it
 * is answered — anywhere — or withdrawn, its diff tabs close: no stale proposal stays open.
 */

import * as path from 'node:path';
import * as vscode from 'vscode';

import type { PermissionEntry } from '../common/view';
import type { ChatState } from '../core/chatState';
import type { ChatController, ProposedEdit } from '../core/controller';
import type { EditorFiles } from '../core/fileAccess';
import { proposedContent } from '../core/toolView';

export const PROPOSED_SCHEME = 'parley-proposed';
/** The context key the diff editor's Allow and Reject are shown by: the paths of the proposals still asked about. */
export const ASKED_CONTEXT_KEY = 'parley.editsAskedAbout';

/** The option kind each title action of the diff editor answers with. */
const DECISIONS = { 'parley.allowEdit': 'allow_once', 'parley.rejectEdit': 'reject_once' } as const;

export class ProposedEditDocuments implements vscode.TextDocumentContentProvider {
  /** The virtual documents' texts, by URI; kept while the extension runs (a diff tab may stay open). */
  private readonly texts = new Map<string, string>();
  private opened = 0;
  /** The open proposals' URIs whose question is still open, with the tool call it asks about. */
  private readonly asking = new Map<string, { toolCallId: string; uri: vscode.Uri }>();

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
    this.asking.set(proposed.toString(), { toolCallId: edit.toolCallId, uri: proposed });
    await this.showAsked();
    await vscode.commands.executeCommand('vscode.diff', left, proposed, title, { preview: true });
  }

  /** Answers the question of the proposal `uri` (else the active diff's) with the option of `kind`. */
  decide(ctl: ChatController, kind: 'allow_once' | 'reject_once', uri?: vscode.Uri): void {
    const shown = uri ?? activeDiffProposal();
    const toolCallId = shown && this.asking.get(shown.toString())?.toolCallId;
    const question = ctl.state.entries.find((e): e is PermissionEntry => e.kind === 'permission' && e.toolCallId === toolCallId && !e.answer);
    const option = question?.options.find((o) => o.kind === kind);
    if (!question || !option) {
      void vscode.window.showErrorMessage('Parley: that edit is no longer waiting for an answer.');
      return;
    }
    ctl.answerPermission(question.requestId, option.optionId);
  }

  /** The chat changed: the diff tabs of proposals no longer asked about (answered, withdrawn, another session) close. */
  async stateChanged(state: ChatState): Promise<void> {
    if (!this.asking.size) {
      return; // no diff open for a question: nothing to look for in the chat (it changes with every chunk)
    }
    const open = new Set(state.entries.flatMap((e) => (e.kind === 'permission' && !e.answer ? [e.toolCallId] : [])));
    const decided = [...this.asking].filter(([, p]) => !open.has(p.toolCallId));
    if (!decided.length) {
      return;
    }
    for (const [key] of decided) {
      this.asking.delete(key);
    }
    await this.showAsked();
    const gone = new Set(decided.map(([key]) => key));
    const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => t.input instanceof vscode.TabInputTextDiff && gone.has(t.input.modified.toString()));
    await vscode.window.tabGroups.close(tabs);
  }

  /** The diff editor's title actions follow the context key: the paths still asked about. */
  private async showAsked(): Promise<void> {
    const paths = [...new Set([...this.asking.values()].map((p) => p.uri.path))];
    await vscode.commands.executeCommand('setContext', ASKED_CONTEXT_KEY, paths);
  }

  private virtual(file: string, query: string, text: string): vscode.Uri {
    // From `Uri.file`, so that a Windows path becomes a proper URI path too.
    const uri = vscode.Uri.file(file).with({ scheme: PROPOSED_SCHEME, query });
    this.texts.set(uri.toString(), text);
    return uri;
  }
}

/** The proposal the active tab's diff shows, if it shows one. */
function activeDiffProposal(): vscode.Uri | undefined {
  const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
  return input instanceof vscode.TabInputTextDiff && input.modified.scheme === PROPOSED_SCHEME ? input.modified : undefined;
}

/** The diff editor's Allow and Reject, and its tabs closed as the chat's questions are answered. */
export function diffDecisions(ctl: ChatController, docs: ProposedEditDocuments): vscode.Disposable[] {
  const closeDecided = (_prev: ChatState, next: ChatState) => {
    if (_prev.entries !== next.entries) {
      void docs.stateChanged(next);
    }
  };
  ctl.on('state', closeDecided);
  return [
    ...Object.entries(DECISIONS).map(([command, kind]) => vscode.commands.registerCommand(command, (uri?: vscode.Uri) => docs.decide(ctl, kind, uri))),
    { dispose: () => void ctl.off('state', closeDecided) },
  ];
}
