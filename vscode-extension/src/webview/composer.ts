/**
 * The composer: the prompt box (Enter sends, Shift+Enter a new line, Escape stops the turn),
 * its draft kept across reloads, the slash-command menu, Send, Stop and New.
 */

import type { CommandView } from '../common/view';
import { byId, h, post, vscode } from './dom.js';
import { shown } from './metaView.js';

export const promptBox = byId<HTMLTextAreaElement>('prompt');
const sendButton = byId<HTMLButtonElement>('send-button');
const stopButton = byId<HTMLButtonElement>('stop-button');

function send(): void {
  const text = promptBox.value;
  if (!text.trim() && !(shown.meta?.context.length)) {
    return;
  }
  if (shown.meta?.busy || shown.meta?.loading) {
    return;
  }
  post({ type: 'send', text });
  promptBox.value = '';
  vscode.setState({ draft: '' });
  updateCommandMenu();
}

const commandMenu = byId<HTMLUListElement>('command-menu');
/** The commands the menu shows now, and the one selected. */
let menuCommands: CommandView[] = [];
let menuIndex = 0;

/** The commands matching what is typed, while the prompt is a `/` and a name being typed. */
function matchingCommands(): CommandView[] {
  const typed = /^\/(\S*)$/.exec(promptBox.value);
  if (!typed || !shown.meta) {
    return [];
  }
  const prefix = typed[1].toLowerCase();
  return shown.meta.commands.filter((c) => c.name.toLowerCase().startsWith(prefix));
}

export function updateCommandMenu(): void {
  const matches = matchingCommands();
  const same = matches.length === menuCommands.length && matches.every((c, i) => c === menuCommands[i]);
  if (!same) {
    menuIndex = 0;
  }
  menuCommands = matches;
  commandMenu.replaceChildren(
    ...matches.map((c, i) => {
      const li = h(
        'li',
        { id: `command-${i}`, role: 'option', 'aria-selected': String(i === menuIndex), 'data-command': c.name },
        h('span', { class: 'command-name' }, `/${c.name}`),
        ...(c.hint ? [h('span', { class: 'command-hint' }, c.hint)] : []),
        h('span', { class: 'command-description' }, c.description),
      );
      // mousedown, not click: the prompt box keeps the focus.
      li.addEventListener('mousedown', (e) => {
        e.preventDefault();
        completeCommand(c);
      });
      return li;
    }),
  );
  commandMenu.hidden = matches.length === 0;
  if (matches.length) {
    promptBox.setAttribute('aria-activedescendant', `command-${menuIndex}`);
    commandMenu.children[menuIndex]?.scrollIntoView({ block: 'nearest' });
  } else {
    promptBox.removeAttribute('aria-activedescendant');
  }
}

function completeCommand(c: CommandView): void {
  promptBox.value = `/${c.name} `;
  promptBox.setSelectionRange(promptBox.value.length, promptBox.value.length);
  vscode.setState({ draft: promptBox.value });
  updateCommandMenu();
}

/** Keys while the menu is open: arrows choose, Tab or Enter completes, Escape closes. True if handled. */
function commandMenuKey(e: KeyboardEvent): boolean {
  if (commandMenu.hidden || menuCommands.length === 0) {
    return false;
  }
  const chosen = menuCommands[menuIndex];
  switch (e.key) {
    case 'ArrowDown':
    case 'ArrowUp':
      menuIndex = (menuIndex + (e.key === 'ArrowDown' ? 1 : menuCommands.length - 1)) % menuCommands.length;
      updateCommandMenu();
      return true;
    case 'Tab':
      completeCommand(chosen);
      return true;
    case 'Enter':
      if (e.shiftKey || e.isComposing || promptBox.value === `/${chosen.name}`) {
        return false; // a whole command name: Enter sends it
      }
      completeCommand(chosen);
      return true;
    case 'Escape':
      commandMenu.hidden = true;
      promptBox.removeAttribute('aria-activedescendant');
      return true;
    default:
      return false;
  }
}

function onPromptKey(e: KeyboardEvent): void {
  if (commandMenuKey(e)) {
    e.preventDefault();
    return;
  }
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  } else if (e.key === 'Escape' && shown.meta?.busy) {
    e.preventDefault();
    post({ type: 'cancel' });
  }
}

/** The prompt box's keys and its draft, and the composer's buttons. */
export function listenToComposer(): void {
  promptBox.addEventListener('keydown', onPromptKey);
  promptBox.addEventListener('input', () => {
    vscode.setState({ draft: promptBox.value });
    updateCommandMenu();
  });
  promptBox.addEventListener('blur', () => {
    commandMenu.hidden = true;
  });
  sendButton.addEventListener('click', send);
  stopButton.addEventListener('click', () => post({ type: 'cancel' }));
  const saved = vscode.getState() as { draft?: string } | undefined;
  if (saved?.draft) {
    promptBox.value = saved.draft;
  }
}
