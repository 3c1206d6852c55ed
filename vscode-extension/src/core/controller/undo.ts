/**
 * Undo turn: `_parley/session/restore` puts the files edited from a turn on back as they were
 * before it (the conversation stays); the view shows the server's words for what it did
 * (`text`), at a level from what happened, and marks the turn undone.
 */

import { describeError } from '../../client/client';
import type { RestoreResult } from '../../client/protocol';
import type { NoticeEntry } from '../../common/view';
import type { ChatCore } from './core';
import type { Sessions } from './sessions';

/**
 * How the chat shows a restore's answer: its notice's level, and whether the turn is undone
 * (a declined or cancelled restore changed nothing; a file that could not be written keeps
 * its checkpoint, so Undo turn stays offered to try again).
 */
export function restoreOutcome(result: RestoreResult): { level: NoticeEntry['level']; undone: boolean; changedFiles: boolean } {
  const unchanged = Boolean(result.rejected || result.cancelled);
  const failed = (result.failed ?? []).length > 0;
  return { level: result.rejected || failed ? 'warning' : 'info', undone: !unchanged && !failed, changedFiles: !unchanged };
}

export class Undo {
  /** A restore is running (one at a time). */
  private undoing = false;

  constructor(
    private readonly core: ChatCore,
    private readonly sessions: Sessions,
  ) {}

  /**
   * Undo a turn's edits. Without a number, the latest turn shown that edited files, else the
   * session's last turn. The view shows the server's words for what was done.
   */
  async undoTurn(turn?: number): Promise<RestoreResult> {
    const { core } = this;
    const sessionId = core.state.meta.sessionId;
    const target = turn ?? this.lastUndoableTurn();
    const refuse = (text: string) => {
      core.dispatch({ type: 'notice', level: 'warning', text });
      return new Error(text);
    };
    if (!sessionId || target === undefined) {
      throw refuse('There is no turn to undo in this session. (/undo restores the latest turn whose edits can still be undone.)');
    }
    if (core.state.meta.busy) {
      throw refuse('A turn is running; stop it before undoing one.');
    }
    if (this.undoing) {
      throw refuse('A turn is being undone already.');
    }
    this.undoing = true;
    core.dispatch({ type: 'turnUndo', turn: target, state: 'undoing' });
    let result: RestoreResult;
    try {
      await this.sessions.ensureSession();
      result = await core.requireClient().restore(sessionId, target);
    } catch (err) {
      core.dispatch({ type: 'turnUndo', turn: target, state: 'ready' });
      core.dispatch({ type: 'notice', level: 'error', text: `Could not undo turn ${target}: ${describeError(err)}.` });
      throw err;
    } finally {
      this.undoing = false;
    }
    this.show(target, result);
    return result;
  }

  /** What the restore of `target` did, in the view: the turn's mark and the server's words. */
  private show(target: number, result: RestoreResult): void {
    const { level, undone, changedFiles } = restoreOutcome(result);
    this.core.dispatch({ type: 'turnUndo', turn: target, state: undone ? 'undone' : 'ready', ...(changedFiles ? { restored: result.files } : {}) });
    this.core.dispatch({ type: 'notice', level, text: result.text });
  }

  /**
   * The latest turn shown that edited files and is not undone, else the session's last turn
   * (its edits may not be shown: a reload shows only the last turn's) unless it is shown undone.
   */
  private lastUndoableTurn(): number | undefined {
    const turns = this.core.state.entries.filter((e) => e.kind === 'turn');
    const ready = turns.filter((e) => e.undo === 'ready').pop();
    if (ready) {
      return ready.turn;
    }
    const last = this.core.state.meta.usage.turns || undefined;
    return turns.some((e) => e.turn === last) ? undefined : last;
  }
}
