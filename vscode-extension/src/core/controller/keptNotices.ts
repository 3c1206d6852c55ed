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
    const prompts = out.flatMap((e, i) => (e.kind === 'user' ? [i] : []));
    let at = n.afterPrompt === 0 ? -1 : prompts[n.afterPrompt - 1];
    const prompt = at === undefined || at < 0 ? undefined : out[at];
    if (n.afterPrompt > 0 && (prompt?.kind !== 'user' || (n.promptText !== undefined && prompt.text !== n.promptText))) {
      const byText = prompts.filter((i) => {
        const e = out[i];
        return e.kind === 'user' && e.text === n.promptText;
      });
      at = byText.length ? byText[byText.length - 1] : out.length - 1;
    }
    // After the answer: before the next prompt.
    let end = (at ?? out.length - 1) + 1;
    while (end < out.length && out[end].kind !== 'user') {
      end++;
    }
    out.splice(end, 0, { kind: 'notice', id: `kept-notice-${++next}`, level: n.level, text: n.text });
  }
  return out;
}
