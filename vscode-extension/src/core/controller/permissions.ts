/**
 * Permissions and edits: the server's permission requests (shown inline, and to the host's
 * dialog), the edits they ask about (for the diff view), and the files the server writes
 * through the editor in a turn.
 */

import { describeError } from '../../client/client';
import type { EmptyResult, RequestPermissionParams, RequestPermissionResult, WriteTextFileParams } from '../../client/protocol';
import type { WorkspaceFileAccess } from '../fileAccess';
import type { ChatCore } from './core';

/** An edit a permission prompt asks about: the file, and its diff's texts as the server sent them. */
export interface ProposedEdit {
  toolCallId: string;
  file: string;
  oldText: string | null;
  newText: string;
}

interface PendingPermission {
  resolve: (optionId: string | null, note?: string) => void;
  toolCallId: string;
}

function proposalKey(toolCallId: string, file: string): string {
  return `${toolCallId}\u0000${file}`;
}

export class Permissions {
  private readonly pending = new Map<string, PendingPermission>();
  private counter = 0;
  /** The edits open permission prompts ask about, by `proposalKey`. */
  private readonly proposals = new Map<string, ProposedEdit>();
  /** The files the server wrote through the editor in the running turn. */
  private written = new Set<string>();

  constructor(private readonly core: ChatCore) {}

  /** A turn starts: no file written in it yet. */
  startTurn(): void {
    this.written = new Set();
  }

  /** The files the server wrote through the editor in the running turn. */
  writtenThisTurn(): string[] {
    return [...this.written];
  }

  /** `note`: the user's words for the model with a rejection (sent as `_meta.parley.note`). */
  answerPermission(requestId: string, optionId: string | null, note?: string): void {
    const p = this.pending.get(requestId);
    if (!p) {
      return;
    }
    this.pending.delete(requestId);
    this.forgetProposals(p.toolCallId);
    const said = optionId !== null && note?.trim() ? note.trim() : undefined;
    p.resolve(optionId, said);
    this.core.dispatch({ type: 'permissionAnswered', requestId, optionId: optionId ?? undefined, cancelled: optionId === null, ...(said ? { note: said } : {}) });
  }

  /** The server went away: every open prompt is cancelled. */
  cancelAll(): void {
    for (const [requestId, p] of this.pending) {
      p.resolve(null);
      this.core.dispatch({ type: 'permissionAnswered', requestId, cancelled: true });
    }
    this.pending.clear();
    this.proposals.clear();
  }

  /** `session/request_permission`: shown inline (and to the host's dialog) until answered or withdrawn. */
  requestPermission(params: RequestPermissionParams, signal: AbortSignal): Promise<RequestPermissionResult> {
    const { core } = this;
    this.counter += 1;
    const requestId = String(this.counter);
    return new Promise<RequestPermissionResult>((resolve) => {
      const finish = (optionId: string | null, note?: string) => {
        // ACP's answer has no field for the user's words: Parley's server reads `_meta.parley.note`.
        const meta = note ? { _meta: { parley: { note } } } : {};
        resolve(optionId ? { outcome: { outcome: 'selected', optionId }, ...meta } : { outcome: { outcome: 'cancelled' } });
      };
      const { toolCallId } = params.toolCall;
      this.pending.set(requestId, { resolve: finish, toolCallId });
      for (const c of params.toolCall.content ?? []) {
        if (c.type === 'diff') {
          this.proposals.set(proposalKey(toolCallId, c.path), { toolCallId, file: c.path, oldText: c.oldText ?? null, newText: c.newText });
        }
      }
      core.dispatch({ type: 'permissionAsked', requestId, params });
      signal.addEventListener(
        'abort',
        () => {
          if (this.pending.delete(requestId)) {
            this.forgetProposals(toolCallId);
            core.dispatch({ type: 'permissionAnswered', requestId, cancelled: true });
            finish(null);
          }
        },
        { once: true },
      );
      core.host.onPermissionAsked?.(params, signal).then(
        (optionId) => {
          if (optionId !== null && this.pending.has(requestId)) {
            this.answerPermission(requestId, optionId);
          }
        },
        (err: unknown) => core.log(`[parley] permission dialog failed: ${describeError(err)}`),
      );
    });
  }

  /** The edit an open permission prompt asks about (for the diff view); undefined once answered. */
  proposedEdit(toolCallId: string, file: string): ProposedEdit | undefined {
    return this.proposals.get(proposalKey(toolCallId, file));
  }

  private forgetProposals(toolCallId: string): void {
    for (const [key, edit] of this.proposals) {
      if (edit.toolCallId === toolCallId) {
        this.proposals.delete(key);
      }
    }
  }

  /** `fs/write_text_file`: the edit applied in the editor, and the file kept as one this turn edited. */
  async writeTextFile(files: WorkspaceFileAccess, params: WriteTextFileParams): Promise<EmptyResult> {
    const result = await files.writeTextFile(params);
    this.written.add(params.path);
    this.core.log(`[parley] wrote ${params.path} through the editor`);
    return result;
  }
}
