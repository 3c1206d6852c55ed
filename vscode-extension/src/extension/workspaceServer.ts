/**
 * Asking the user about the workspace's own `.venv/bin/parley` (src/core/workspaceServerApproval.ts
 * says why): a notice in the chat with two buttons, "Use the workspace's server" and "Use the
 * installed one"; meanwhile the installed one runs. A yes is kept in the extension's
 * globalState (not the workspace's, which the workspace's own code could reach), keyed by the
 * file's path, with the identity the file had when it was asked about.
 */

import type * as vscode from 'vscode';

import type { ChatState } from '../core/chatState';
import type { ChatController, LogLevel } from '../core/controller';
import type { NoticeEntry } from '../common/view';
import type { ServerLocation } from '../core/serverLocation';
import { type ApprovedServers, type FileIdentity, fileIdentity, readApprovals, withApproval } from '../core/workspaceServerApproval';

/** The globalState key of the approved workspace servers. */
export const APPROVED_SERVERS_KEY = 'parley.approvedWorkspaceServers';

export const USE_WORKSPACE_LABEL = "Use the workspace's server";
export const USE_INSTALLED_LABEL = 'Use the installed one';

/** The notice's text for the workspace's `file`, the installed server running meanwhile. */
export function askText(location: ServerLocation & { passedOver: { file: string } }): string {
  const { file, state } = location.passedOver;
  const what = state === 'changed' ? 'has changed since you approved it' : 'has not been approved';
  const meanwhile =
    location.source === 'missing' ? 'There is no other Parley server installed.' : `Parley runs ${location.command} (from the ${location.source}) instead.`;
  return (
    `This workspace has its own Parley server, ${file}, which ${what}. It would run outside the sandbox, ` +
    'with your API keys, and a command run in this workspace can write that file. Use it only if you put it there. ' +
    meanwhile
  );
}

export class WorkspaceServerApproval {
  /** The identity each file had when the user was asked (a yes approves that, not what is there later). */
  private readonly asked = new Map<string, FileIdentity>();
  /** Files the user chose not to run, in this window (asked again in the next). */
  private readonly declined = new Set<string>();
  /** The question not answered yet: shown again in a session opened since (a new one clears the chat). */
  private pending: { text: string; choices: NonNullable<NoticeEntry['choices']> } | undefined;

  constructor(
    private readonly globalState: vscode.Memento,
    private readonly ctl: () => ChatController,
    private readonly log: (line: string, level?: LogLevel) => void,
  ) {}

  /** The approved workspace servers. */
  approved(): ApprovedServers {
    return readApprovals(this.globalState.get<unknown>(APPROVED_SERVERS_KEY));
  }

  /** Ask about the workspace server `location` passed over, once per file (as it is now) and window. */
  async offer(location: ServerLocation): Promise<void> {
    const passed = location.passedOver;
    if (!passed || this.declined.has(passed.file)) {
      return;
    }
    const identity = await fileIdentity(passed.file);
    const before = this.asked.get(passed.file);
    if (!identity || (before && before.sha256 === identity.sha256 && before.ino === identity.ino && before.mtimeNs === identity.mtimeNs)) {
      return; // unreadable, or asked about already
    }
    this.asked.set(passed.file, identity);
    this.pending = {
      text: askText({ ...location, passedOver: passed }),
      choices: [
        { label: USE_WORKSPACE_LABEL, message: { type: 'useWorkspaceServer', file: passed.file } },
        { label: USE_INSTALLED_LABEL, message: { type: 'useInstalledServer', file: passed.file } },
      ],
    };
    this.ask();
  }

  /** The chat changed: a session opened (or loaded) since the question was shown gets it again. */
  stateChanged(prev: ChatState, next: ChatState): void {
    const opened = prev.meta.sessionId !== next.meta.sessionId || (prev.meta.loading && !next.meta.loading);
    if (this.pending && opened && !next.meta.loading) {
      queueMicrotask(() => this.ask()); // after this change has reached the view
    }
  }

  private ask(): void {
    const question = this.pending;
    const ctl = this.ctl();
    if (question && !ctl.state.entries.some((e) => e.kind === 'notice' && e.text === question.text)) {
      ctl.dispatch({ type: 'notice', level: 'warning', ...question });
    }
  }

  /** "Use the workspace's server": approve the file as it was when asked, and restart with it. */
  async useWorkspaceServer(file: string): Promise<void> {
    const identity = this.asked.get(file);
    if (!identity) {
      throw new Error(`Parley did not ask about ${file} in this window.`);
    }
    this.declined.delete(file);
    this.pending = undefined;
    await this.globalState.update(APPROVED_SERVERS_KEY, withApproval(this.approved(), file, identity));
    this.log(`You approved the workspace's Parley server ${file} (sha256 ${identity.sha256}).`);
    await this.ctl().restart();
  }

  /** "Use the installed one": not asked again in this window. */
  useInstalledServer(file: string): void {
    this.declined.add(file);
    this.pending = undefined;
    this.log(`You chose not to run the workspace's Parley server ${file}; the installed one runs.`);
  }
}
