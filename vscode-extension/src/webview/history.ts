/**
 * The history list: each row opens its session, Export (Markdown, saved by the host), and
 * Delete when the server can, which asks first in the row. A row is one line (its title cut
 * with …) and shows its buttons while hovered or focused; the search keeps the rows whose
 * title has its words.
 */

import type { SessionRow } from '../common/view';
import { formatTime } from '../common/display.js';
import { byId, h, post } from './dom.js';

const sessionsPanel = byId<HTMLElement>('sessions');
const sessionList = byId<HTMLElement>('session-list');
const search = byId<HTMLInputElement>('session-search');
const noneMatch = byId<HTMLElement>('session-none');

/** Shows the rows whose title has the search's words (any case), and says when none has. */
function filterSessions(): void {
  const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
  const rows = [...sessionList.querySelectorAll<HTMLElement>('li[data-session-id]')];
  for (const row of rows) {
    const title = (row.querySelector('.session-title')?.textContent ?? '').toLowerCase();
    row.hidden = !words.every((w) => title.includes(w));
  }
  noneMatch.hidden = rows.length === 0 || rows.some((row) => !row.hidden);
}

/**
 * The history list: each row opens its session, and offers Export (Markdown, saved by the
 * host) and — when the server can delete sessions — Delete, which asks first in the row.
 */
export function renderSessions(sessions: SessionRow[], canDelete: boolean): void {
  sessionList.replaceChildren();
  if (sessions.length === 0) {
    sessionList.append(h('li', { class: 'muted' }, 'No sessions yet in this workspace.'));
  }
  for (const s of sessions) {
    sessionList.append(sessionRow(s, canDelete));
  }
  filterSessions(); // a list sent again (after a delete) keeps the search
  setSessionsOpen(true);
}

function setSessionsOpen(open: boolean): void {
  sessionsPanel.hidden = !open;
}

function sessionRow(s: SessionRow, canDelete: boolean): HTMLElement {
  const when = s.updatedAt ? formatTime(s.updatedAt) : '';
  const li = h('li', { class: s.current ? 'current' : '', 'data-session-id': s.sessionId });
  const openButton = h(
    'button',
    { class: 'session-open', title: `Open “${s.title}”${s.current ? ' (the session shown)' : ''}` },
    h('span', { class: 'session-title' }, s.title),
    h('span', { class: 'session-time' }, when),
  );
  const open = () => {
    setSessionsOpen(false);
    post({ type: 'loadSession', sessionId: s.sessionId });
  };
  openButton.addEventListener('click', (e) => {
    e.stopPropagation();
    open();
  });
  li.addEventListener('click', open);
  const exportButton = h(
    'button',
    { class: 'secondary session-export', title: `Save “${s.title}” as Markdown`, 'aria-label': `Export “${s.title}” as Markdown` },
    'Export',
  );
  exportButton.addEventListener('click', (e) => {
    e.stopPropagation();
    post({ type: 'exportSession', sessionId: s.sessionId });
  });
  const actions = h('span', { class: 'session-actions' }, exportButton);
  if (canDelete) {
    const deleteButton = h(
      'button',
      { class: 'secondary session-delete', title: `Delete “${s.title}” from the store`, 'aria-label': `Delete “${s.title}”` },
      'Delete',
    );
    deleteButton.addEventListener('click', (e) => {
      e.stopPropagation();
      confirmDelete(li, s, actions);
    });
    actions.append(deleteButton);
  }
  li.append(openButton, actions);
  return li;
}

/** Delete asks in the row: "Delete “title”?" with Delete and Keep; Keep (or Escape) takes it back. */
function confirmDelete(li: HTMLElement, s: SessionRow, actions: HTMLElement): void {
  const question = h('span', { class: 'session-confirm-text', id: `confirm-${s.sessionId}` }, `Delete “${s.title}”? It cannot be undone.`);
  const yes = h('button', { class: 'danger session-confirm-delete', 'aria-describedby': question.id }, 'Delete');
  const no = h('button', { class: 'secondary session-confirm-keep' }, 'Keep');
  const box = h('span', { class: 'session-confirm', role: 'group', 'aria-label': 'Confirm delete' }, question, yes, no);
  const back = () => {
    box.replaceWith(actions);
    actions.querySelector<HTMLButtonElement>('.session-delete')?.focus();
  };
  yes.addEventListener('click', (e) => {
    e.stopPropagation();
    yes.disabled = true;
    no.disabled = true;
    li.classList.add('deleting');
    post({ type: 'deleteSession', sessionId: s.sessionId });
  });
  no.addEventListener('click', (e) => {
    e.stopPropagation();
    back();
  });
  box.addEventListener('click', (e) => e.stopPropagation());
  box.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      e.preventDefault();
      back();
    }
  });
  actions.replaceWith(box);
  no.focus(); // the safe answer first: Enter keeps the session
}

/** The list opens when the host sends it (the view's title bar: Show Sessions); × closes it. */
export function listenToHistoryButtons(): void {
  search.addEventListener('input', filterSessions);
  byId('sessions-close').addEventListener('click', () => {
    setSessionsOpen(false);
  });
}
