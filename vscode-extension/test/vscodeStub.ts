/**
 * A small stand-in for the `vscode` module (VS Code cannot run here), enough to activate the
 * extension in plain Node and drive it as VS Code would: commands, configuration, the
 * webview view, the status bar, messages.
 */

import Module from 'node:module';
import * as path from 'node:path';

type Fn = (...args: unknown[]) => unknown;

export class StubUri {
  constructor(readonly fsPath: string, readonly scheme = 'file') {}
  static file(p: string): StubUri {
    return new StubUri(p);
  }
  static joinPath(base: StubUri, ...parts: string[]): StubUri {
    return new StubUri(path.join(base.fsPath, ...parts));
  }
  toString(): string {
    return `file://${this.fsPath}`;
  }
}

const disposable = { dispose: () => undefined };

export interface StubWebviewView {
  webview: {
    options: unknown;
    html: string;
    cspSource: string;
    asWebviewUri(u: StubUri): { toString(): string };
    onDidReceiveMessage(fn: (m: unknown) => void): typeof disposable;
    postMessage(m: unknown): Promise<boolean>;
  };
  visible: boolean;
  onDidDispose(fn: () => void): typeof disposable;
  /** What the extension posted to the page. */
  posted: { type: string; [k: string]: unknown }[];
  /** Send a message from the page to the extension. */
  receive(m: unknown): void;
}

export class VscodeStub {
  readonly commands = new Map<string, Fn>();
  readonly executed: { id: string; args: unknown[] }[] = [];
  readonly providers = new Map<string, { resolveWebviewView(view: StubWebviewView): void }>();
  readonly statusItems: { text: string; tooltip: unknown; command?: string; shown: boolean }[] = [];
  readonly messages: { level: string; text: string }[] = [];
  readonly log: string[] = [];
  /** Documents shown with `window.showTextDocument`, and how. */
  readonly shownDocuments: { uri: StubUri; options: unknown }[] = [];
  settings: Record<string, unknown> = {};
  /** The module `require('vscode')` returns (after `install`); tests may change its fields. */
  exports: Record<string, unknown> = {};
  diagnostics: [StubUri, unknown[]][] = [];
  workspaceRoot = '/tmp';

  module(): Record<string, unknown> {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the stub's closures need it
    const stub = this;
    class MarkdownString {
      value = '';
      appendMarkdown(s: string): this {
        this.value += s;
        return this;
      }
    }
    class Position {
      constructor(
        readonly line: number,
        readonly character: number,
      ) {}
    }
    class Range {
      readonly start: Position;
      readonly end: Position;
      constructor(a: Position | number, b: Position | number, c?: number, d?: number) {
        if (typeof a === 'number') {
          this.start = new Position(a, b as number);
          this.end = new Position(c!, d!);
        } else {
          this.start = a;
          this.end = b as Position;
        }
      }
      get isEmpty(): boolean {
        return this.start.line === this.end.line && this.start.character === this.end.character;
      }
    }
    class TabInputText {
      constructor(readonly uri: StubUri) {}
    }
    class TabInputNotebook {
      constructor(readonly uri: StubUri) {}
    }
    class TabInputTextDiff {
      constructor(
        readonly original: StubUri,
        readonly modified: StubUri,
      ) {}
    }
    const channel = {
      info: (s: string) => stub.log.push(s),
      warn: (s: string) => stub.log.push(s),
      error: (s: string) => stub.log.push(s),
      show: () => undefined,
      dispose: () => undefined,
    };
    const message = (level: string) => (text: string) => {
      stub.messages.push({ level, text });
      return Promise.resolve(undefined);
    };
    return {
      Uri: StubUri,
      MarkdownString,
      Position,
      Range,
      TabInputText,
      TabInputNotebook,
      TabInputTextDiff,
      StatusBarAlignment: { Left: 1, Right: 2 },
      FileType: { File: 1, Directory: 2 },
      window: {
        activeTextEditor: undefined,
        tabGroups: { all: [] },
        onDidChangeActiveTextEditor: () => disposable,
        createOutputChannel: () => channel,
        createStatusBarItem: () => {
          const item = { text: '', tooltip: undefined as unknown, command: undefined, name: '', shown: false, show() { item.shown = true; }, dispose() {} };
          stub.statusItems.push(item);
          return item;
        },
        registerWebviewViewProvider: (id: string, provider: { resolveWebviewView(view: StubWebviewView): void }) => {
          stub.providers.set(id, provider);
          return disposable;
        },
        showErrorMessage: message('error'),
        showWarningMessage: message('warning'),
        showInformationMessage: message('info'),
        showInputBox: () => Promise.resolve(undefined),
        showQuickPick: () => Promise.resolve(undefined),
        showTextDocument: (uri: StubUri, options: unknown) => {
          stub.shownDocuments.push({ uri, options });
          return Promise.resolve(undefined);
        },
      },
      commands: {
        registerCommand: (id: string, fn: Fn) => {
          stub.commands.set(id, fn);
          return disposable;
        },
        executeCommand: (id: string, ...args: unknown[]) => {
          stub.executed.push({ id, args });
          const fn = stub.commands.get(id);
          return Promise.resolve(fn ? fn(...args) : undefined);
        },
      },
      workspace: {
        get workspaceFolders() {
          return [{ uri: StubUri.file(stub.workspaceRoot) }];
        },
        getConfiguration: (section: string) => ({
          get: (key: string, dflt?: unknown) => {
            const k = `${section}.${key}`;
            return k in stub.settings ? stub.settings[k] : dflt;
          },
        }),
        onDidChangeConfiguration: () => disposable,
        textDocuments: [],
      },
      languages: {
        getDiagnostics: (uri?: StubUri) =>
          uri ? (stub.diagnostics.find(([u]) => u.fsPath === uri.fsPath)?.[1] ?? []) : stub.diagnostics,
      },
    };
  }

  /** Make `require('vscode')` return this stub. */
  install(): void {
    const mod = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
    const original = mod._load;
    const exports = this.module();
    this.exports = exports;
    mod._load = function (request: string, ...rest: unknown[]) {
      if (request === 'vscode') {
        return exports;
      }
      return original.call(this, request, ...rest);
    };
  }

  /** Resolve the registered webview view, as VS Code does when the view is first shown. */
  showView(id: string): StubWebviewView {
    const provider = this.providers.get(id);
    if (!provider) {
      throw new Error(`no webview view provider for ${id}`);
    }
    const listeners: ((m: unknown) => void)[] = [];
    const view: StubWebviewView = {
      posted: [],
      visible: true,
      webview: {
        options: undefined,
        html: '',
        cspSource: 'https://stub.vscode-cdn.net',
        asWebviewUri: (u) => ({ toString: () => `https://stub.vscode-cdn.net${u.fsPath}` }),
        onDidReceiveMessage: (fn) => {
          listeners.push(fn);
          return disposable;
        },
        postMessage: (m) => {
          view.posted.push(m as { type: string });
          return Promise.resolve(true);
        },
      },
      onDidDispose: () => disposable,
      receive: (m) => listeners.forEach((fn) => fn(m)),
    };
    provider.resolveWebviewView(view);
    return view;
  }
}
