/**
 * The chat view's page script. It renders what the extension host sends (entries, their
 * deltas and meta, see `common/view.d.ts`) and posts the user's actions back. It holds no
 * conversation logic: the host's reducer does that. One module per part of the page:
 *
 * - `transcript.ts` — the entries shown, their deltas, what is announced;
 * - `entryViews.ts` — each kind of entry as elements (messages via `messageRenderer.ts`);
 * - `metaView.ts` — the toolbar (model, mode, options), banner, usage line and attachments;
 *   `planView.ts` — the model's plan above the transcript;
 * - `commandOutput.ts` — a running command's output in its card, colours drawn;
 * - `history.ts` — the history list; `composer.ts` — the prompt box and slash commands;
 * - `dom.ts` — the webview API and element helpers.
 */

import type { HostToView } from '../common/view';
import { handleCodeBlockButtons } from './codeBlocks.js';
import { listenToComposer, promptBox, updateCommandMenu } from './composer.js';
import { post } from './dom.js';
import { listenToHistoryButtons, renderSessions } from './history.js';
import { onRenderFrame } from './messageRenderer.js';
import { listenToToolbar, renderMeta } from './metaView.js';
import { applyDelta, applyOutput, isNearBottom, keepFollowing, listenToScrolling, reset, transcript, upsert } from './transcript.js';

function showMeta(meta: Parameters<typeof renderMeta>[0]): void {
  renderMeta(meta);
  // The commands may have changed under an open menu.
  if (document.activeElement === promptBox) {
    updateCommandMenu();
  }
}

listenToComposer();
listenToToolbar();
listenToHistoryButtons();
listenToScrolling();

window.addEventListener('message', (event: MessageEvent<HostToView>) => {
  const msg = event.data;
  switch (msg.type) {
    case 'reset':
      showMeta(msg.state.meta);
      reset(msg.state.entries);
      break;
    case 'entries':
      upsert(msg.upserts, msg.removed);
      break;
    case 'append':
      applyDelta(msg.id, (e) => ({ ...e, text: e.text + msg.text }));
      break;
    case 'finish':
      applyDelta(msg.id, (e) => ({ ...e, streaming: false }));
      break;
    case 'output':
      applyOutput(msg.id, msg.text);
      break;
    case 'meta':
      showMeta(msg.meta);
      break;
    case 'sessions':
      renderSessions(msg.sessions, msg.canDelete ?? false);
      break;
    case 'focus':
      promptBox.focus();
      break;
  }
});

handleCodeBlockButtons(transcript, (text) => post({ type: 'insertCode', text }));
// A message renders at the next frame: keep the transcript at the bottom if it was there.
onRenderFrame((render) => {
  const stick = isNearBottom();
  render();
  keepFollowing(stick);
});

post({ type: 'ready' });
