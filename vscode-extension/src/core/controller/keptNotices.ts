/**
 * The chat's own notices of a session (a server crash), kept across reloads: the server's
 * replay brings back its messages and its own notices (a stop, a failed turn), not what the
 * chat said.
 */

import type { Entry } from '../../common/view';
import type { ChatCore, KeptNotice } from './core';

/** The most notices kept per session (the latest). */
const MAX_KEPT_NOTICES = 50;

/** Runs `change`, then keeps the notices it added to the session's entries (see `NoticeKeeper`). */
export function keepingNotices(core: ChatCore, change: () => void): void {
  const before = new Set(core.state.entries.map((e) => e.id));
  change();
  const sessionId = core.state.meta.sessionId;
  const keeper = core.host.notices;
  if (!sessionId || !keeper) {
    return;
  }
  const added: KeptNotice[] = [];
  let prompts = 0;
  let promptText: string | undefined;
  for (const e of core.state.entries) {
    if (e.kind === 'user') {
      prompts += 1;
      promptText = e.text;
    } else if (e.kind === 'notice' && !before.has(e.id)) {
      added.push({ level: e.level, text: e.text, afterPrompt: prompts, ...(promptText !== undefined ? { promptText } : {}) });
    }
  }
  if (added.length) {
    keeper.set(sessionId, [...keeper.get(sessionId), ...added].slice(-MAX_KEPT_NOTICES));
  }
}

/**
 * `entries` (a replay) with the kept notices back in place: each at the end of the answer to
 * its prompt — the `afterPrompt`-th, or the last prompt with its text when the replay counts
 * differently — and at the end when neither is found.
 */
export function withKeptNotices(entries: Entry[], kept: KeptNotice[]): Entry[] {
  const out = [...entries];
  let next = 0;
  for (const n of kept) {
    // After the answer: before the next prompt.
    let end = promptIndex(out, n) + 1;
    while (end < out.length && out[end].kind !== 'user') {
      end++;
    }
    out.splice(end, 0, { kind: 'notice', id: `kept-notice-${++next}`, level: n.level, text: n.text });
  }
  return out;
}

/** Where the prompt a kept notice follows is in `entries` (-1: before the first; the last entry when not found). */
function promptIndex(entries: Entry[], n: KeptNotice): number {
  if (n.afterPrompt === 0) {
    return -1;
  }
  const prompts = entries.flatMap((e, i) => (e.kind === 'user' ? [i] : []));
  const at = prompts[n.afterPrompt - 1];
  const prompt = at === undefined ? undefined : entries[at];
  if (prompt?.kind === 'user' && (n.promptText === undefined || prompt.text === n.promptText)) {
    return at;
  }
  const byText = prompts.filter((i) => {
    const e = entries[i];
    return e.kind === 'user' && e.text === n.promptText;
  });
  return byText.length ? byText[byText.length - 1] : entries.length - 1;
}
