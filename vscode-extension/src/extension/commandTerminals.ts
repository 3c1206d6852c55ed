/**
 * "Open in Terminal" on a command's card: a read-only terminal (a `vscode.Pseudoterminal`)
 * fed the command's output so far, then live until the call ends. One terminal per call;
 * asked again, the open one is shown.
 */

import * as vscode from 'vscode';

import { withoutCodeMarks } from '../common/codeSpans';
import type { ToolEntry } from '../common/view';
import type { ChatState } from '../core/chatState';
import { FEED_START, type FeedPosition, feed } from '../core/commandTerminalFeed';

/** A tool call's card in the state, by call id. */
function toolEntry(state: ChatState, toolCallId: string): ToolEntry | undefined {
  const id = `tool-${toolCallId}`;
  return state.entries.find((e): e is ToolEntry => e.kind === 'tool' && e.id === id);
}

class CommandTerminal {
  private readonly writes = new vscode.EventEmitter<string>();
  private opened = false;
  /** Text written before the terminal opened (VS Code drops writes until then). */
  private waiting = '';
  private at: FeedPosition = FEED_START;
  readonly terminal: vscode.Terminal;

  constructor(
    readonly toolCallId: string,
    entry: ToolEntry,
    private readonly closed: () => void,
  ) {
    const pty: vscode.Pseudoterminal = {
      onDidWrite: this.writes.event,
      open: () => {
        this.opened = true;
        this.writes.fire(this.waiting);
        this.waiting = '';
      },
      close: () => this.dispose(),
      handleInput: () => undefined, // read-only: the command's input is not the terminal's
    };
    this.terminal = vscode.window.createTerminal({ name: `Parley: ${withoutCodeMarks(entry.title)}`, pty, iconPath: new vscode.ThemeIcon('terminal') });
    this.follow(entry);
  }

  /** Writes what the card has that the terminal does not yet. */
  follow(entry: ToolEntry): void {
    const { text, at } = feed(entry, this.at);
    this.at = at;
    if (text === '') {
      return;
    }
    if (this.opened) {
      this.writes.fire(text);
    } else {
      this.waiting += text;
    }
  }

  get ended(): boolean {
    return this.at.ended;
  }

  dispose(): void {
    this.writes.dispose();
    this.closed();
  }
}

export class CommandTerminals implements vscode.Disposable {
  private readonly terminals = new Map<string, CommandTerminal>();

  constructor(private readonly state: () => ChatState) {}

  /** Shows the call's terminal, opening it when there is none. */
  show(toolCallId: string): void {
    const shown = this.terminals.get(toolCallId);
    if (shown) {
      shown.terminal.show();
      return;
    }
    const entry = toolEntry(this.state(), toolCallId);
    if (entry?.commandOutput === undefined) {
      throw new Error('That command\'s output is not here any more (the chat shows another session).');
    }
    const opened = new CommandTerminal(toolCallId, entry, () => this.terminals.delete(toolCallId));
    this.terminals.set(toolCallId, opened);
    opened.terminal.show();
  }

  /** The chat's state changed: each terminal still following its call writes what is new. */
  stateChanged(prev: ChatState, next: ChatState): void {
    if (prev.entries === next.entries) {
      return;
    }
    for (const t of this.terminals.values()) {
      const entry = toolEntry(next, t.toolCallId);
      if (entry && !t.ended && entry !== toolEntry(prev, t.toolCallId)) {
        t.follow(entry);
      }
    }
  }

  dispose(): void {
    for (const t of [...this.terminals.values()]) {
      t.terminal.dispose();
    }
    this.terminals.clear();
  }
}
