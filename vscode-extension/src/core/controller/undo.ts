/**
 * Undo turn: `_parley/session/restore` puts the files edited from a turn on back as they were
 * before it (the conversation stays); the view says what was restored and removed, or why not.
 */

import { describeError, isMethodNotFound } from '../../client/client';
import type { RestoreResult, RestoredFile } from '../../client/protocol';
import { relativeTo } from '../toolView';
import type { ChatCore } from './core';
import type { Sessions } from './sessions';

/** What a restore did, as a notice: the files put back and those removed. */
export function restoreSummary(turn: number, files: RestoredFile[], cwd?: string, laterTurns = false): string {
  if (files.length === 0) {
    return `Nothing to undo in turn ${turn}${laterTurns ? ' and after it' : ''}: no file it edited needed restoring. The conversation is kept.`;
  }
  const names = (action: RestoredFile['action']) => files.filter((f) => f.action === action).map((f) => relativeTo(f.path, cwd));
  const parts = [
    ...(names('restored').length ? [`restored ${names('restored').join(', ')}`] : []),
    ...(names('removed').length ? [`removed ${names('removed').join(', ')} (created by the turn)`] : []),
  ];
  return `Undid turn ${turn}${laterTurns ? ' and the turns after it' : ''}: ${parts.join('; ')}. The conversation is kept.`;
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
   * session's last turn. The view shows what was restored and removed, or why nothing was (a
   * notice, besides the rejection).
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
      const why = isMethodNotFound(err)
        ? 'this Parley server cannot undo turns (it has no _parley/session/restore); update it'
        : describeError(err);
      core.dispatch({ type: 'notice', level: 'error', text: `Could not undo turn ${target}: ${why}.` });
      throw err;
    } finally {
      this.undoing = false;
    }
    this.show(target, result);
    return result;
  }

  /** What the restore of `target` did, in the view. */
  private show(target: number, result: RestoreResult): void {
    const { core } = this;
    const cwd = core.state.meta.cwd;
    if (result.rejected) {
      core.dispatch({ type: 'turnUndo', turn: target, state: 'ready' });
      core.dispatch({
        type: 'notice',
        level: 'warning',
        text: `Turn ${target} was not undone: you chose to keep files changed since it; nothing was restored.`,
      });
      return;
    }
    const failed = result.failed ?? [];
    // A file that could not be written keeps its checkpoint: the button stays to try again.
    core.dispatch({ type: 'turnUndo', turn: target, state: failed.length ? 'ready' : 'undone', restored: result.files });
    const later = (core.state.meta.usage.turns ?? target) > target;
    const summary = restoreSummary(target, result.files, cwd, later);
    if (failed.length) {
      const which = failed.map((f) => `${relativeTo(f.path, cwd)} (${f.reason})`).join(', ');
      core.dispatch({ type: 'notice', level: 'warning', text: `${summary} Could not restore ${which}; Undo turn tries again.` });
    } else {
      core.dispatch({ type: 'notice', level: 'info', text: summary });
    }
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
