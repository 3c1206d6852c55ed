/**
 * The transcript: each entry's element by id, entries added or revised whole, the deltas to
 * a streamed one (text appended, its end), a reset, and what is said (a polite status region)
 * when something new comes.
 */

import type { AgentEntry, Entry, ThoughtEntry } from '../common/view';
import { Announcer } from './announce.js';
import { byId } from './dom.js';
import { askForAttention, createEntry, labelSpeaker, updateCommandOutput, updateEntry } from './entryViews.js';

export const transcript = byId<HTMLElement>('transcript');
const empty = byId<HTMLElement>('empty');
/** Says what is new (a polite status region): the transcript itself is not live. */
export const status = new Announcer(byId<HTMLElement>('status'));

/** Each shown entry's element, by entry id. */
const rendered = new Map<string, HTMLElement>();
/** Each shown entry as last sent or changed by a delta, by entry id. */
const shownEntries = new Map<string, Entry>();

/** "Jump to latest": shown while the user reads above the end of the conversation. */
const jumpButton = byId<HTMLButtonElement>('jump-latest');

export function isNearBottom(): boolean {
  return transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 60;
}

/**
 * After the transcript changed: scrolled to its end when the user was there (`follow`), else
 * left where the user reads, with "Jump to latest" shown.
 */
export function keepFollowing(follow: boolean): void {
  if (follow) {
    transcript.scrollTop = transcript.scrollHeight;
  }
  jumpButton.hidden = isNearBottom();
}

/** The conversation follows the user: "Jump to latest" goes to the end, scrolling back down hides it. */
export function listenToScrolling(): void {
  transcript.addEventListener('scroll', () => {
    jumpButton.hidden = isNearBottom();
  });
  jumpButton.addEventListener('click', () => {
    keepFollowing(true);
    promptBoxFocus();
  });
}

/** The prompt box takes the focus back after a jump (the button hides under the pointer). */
function promptBoxFocus(): void {
  byId<HTMLTextAreaElement>('prompt').focus();
}

/** The text of the answer to the last prompt (its agent messages), as shown. */
export function lastAnswerText(): string {
  const entries = [...transcript.querySelectorAll<HTMLElement>('.entry')];
  let start = entries.length;
  while (start > 0 && !entries[start - 1].classList.contains('entry-user')) {
    start--;
  }
  return entries
    .slice(start)
    .filter((el) => el.classList.contains('entry-agent'))
    .map((el) => el.innerText.trim())
    .join('\n');
}

export function upsert(entries: Entry[], removed: string[]): void {
  // A prompt the user sent brings the view to it, wherever they were reading.
  const stick = isNearBottom() || (!resetting && entries.some((e) => e.kind === 'user' && !rendered.has(e.id)));
  for (const id of removed) {
    rendered.get(id)?.remove();
    rendered.delete(id);
    shownEntries.delete(id);
  }
  for (const entry of entries) {
    shownEntries.set(entry.id, entry);
    const shown = rendered.get(entry.id);
    if (shown) {
      updateEntry(shown, entry);
      labelSpeaker(shown, entry);
    } else {
      const el = createEntry(entry);
      labelSpeaker(el, entry);
      rendered.set(entry.id, el);
      transcript.append(el);
      if (entry.kind === 'permission' && !entry.answer) {
        askForAttention(el, entry);
      } else if (entry.kind === 'notice' && !resetting) {
        status.say(entry.text);
        notices.said += 1;
      }
    }
  }
  empty.hidden = rendered.size > 0;
  keepFollowing(stick);
}

/**
 * A delta to a streamed entry shown: text appended, or its stream finished. The entry is
 * rendered from the text the page keeps (block by block: only what changed is drawn).
 */
export function applyDelta(id: string, change: (entry: AgentEntry | ThoughtEntry) => AgentEntry | ThoughtEntry): void {
  const entry = shownEntries.get(id);
  const el = rendered.get(id);
  if (!entry || !el || (entry.kind !== 'agent' && entry.kind !== 'thought')) {
    return; // not shown (a reset came between): the next whole entry shows it
  }
  const stick = isNearBottom();
  const next = change(entry);
  shownEntries.set(id, next);
  updateEntry(el, next);
  keepFollowing(stick);
}

/** A running command's output grew by `text`: only its output is drawn again (what is new of it). */
export function applyOutput(id: string, text: string): void {
  const entry = shownEntries.get(id);
  const el = rendered.get(id);
  if (!entry || !el || entry.kind !== 'tool') {
    return; // not shown (a reset came between): the next whole entry shows it
  }
  const stick = isNearBottom();
  const next = { ...entry, commandOutput: (entry.commandOutput ?? '') + text };
  shownEntries.set(id, next);
  updateCommandOutput(el, next);
  keepFollowing(stick);
}

/** Notices said since the running turn began (one says why a turn ended). */
export const notices = { said: 0 };

/** A reset shows what was there before: nothing of it is announced as new. */
let resetting = false;

export function reset(entries: Entry[]): void {
  for (const el of rendered.values()) {
    el.remove();
  }
  rendered.clear();
  shownEntries.clear();
  resetting = true;
  try {
    upsert(entries, []);
  } finally {
    resetting = false;
  }
  keepFollowing(true);
}
