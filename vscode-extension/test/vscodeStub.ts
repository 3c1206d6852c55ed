/**
 * A small stand-in for the `vscode` module (VS Code cannot run here), enough to activate the
 * extension in plain Node and drive it as VS Code would: commands, configuration, the
 * webview view, the status bar, messages.
 */

import Module from 'node:module';
import * as path from 'node:path';

type Fn = (...args: unknown[]) => unknown;

export class StubUri {
  constructor(
    readonly fsPath: string,
    readonly scheme = 'file',
    readonly query = '',
  ) {}
  static file(p: string): StubUri {
    return new StubUri(p);
  }
  static from(parts: { scheme: string; path: string; query?: string }): StubUri {
    return new StubUri(parts.path, parts.scheme, parts.query ?? '');
  }
  with(change: { scheme?: string; path?: string; query?: string }): StubUri {
    return new StubUri(change.path ?? this.fsPath, change.scheme ?? this.scheme, change.query ?? this.query);
  }
  get path(): string {
    return this.fsPath;
  }
  static joinPath(base: StubUri, ...parts: string[]): StubUri {
    return new StubUri(path.join(base.fsPath, ...parts));
  }
  toString(): string {
    return `${this.scheme}://${this.fsPath}${this.query ? `?${this.query}` : ''}`;
  }
}

const disposable = { dispose: () => undefined };

/** `ExtensionContext.workspaceState`: kept across activations when the same one is passed again. */
export class StubMemento {
  readonly values = new Map<string, unknown>();
  get<T>(key: string, dflt?: T): T | undefined {
    return this.values.has(key) ? (this.values.get(key) as T) : dflt;
  }
  update(key: string, value: unknown): Promise<void> {
    if (value === undefined) {
      this.values.delete(key);
    } else {
      this.values.set(key, value);
    }
    return Promise.resolve();
  }
  keys(): readonly string[] {
    return [...this.values.keys()];
  }
}

/** A position in a text, as `vscode.Position`. */
interface Pos {
  line: number;
  character: number;
}

function offsetAt(text: string, pos: Pos): number {
  const lines = text.split('\n');
  let offset = 0;
  for (let l = 0; l < pos.line && l < lines.length; l++) {
    offset += lines[l].length + 1;
  }
  return Math.min(text.length, offset + pos.character);
}

function positionAt(text: string, offset: number): Pos {
  const before = text.slice(0, offset).split('\n');
  return { line: before.length - 1, character: before[before.length - 1].length };
}

/** An open text document of the stand-in: its text, unsaved or not, and the edits applied to it. */
export class StubDocument {
  isDirty = false;
  isClosed = false;
  /** The workspace edits applied to it (each one step of the editor's undo). */
  edits = 0;
  saves = 0;
  constructor(
    readonly uri: StubUri,
    public text: string,
    private readonly disk: Map<string, string>,
  ) {}
  getText(): string {
    return this.text;
  }
  positionAt(offset: number): Pos {
    return positionAt(this.text, offset);
  }
  save(): Promise<boolean> {
    this.disk.set(this.uri.fsPath, this.text);
    this.isDirty = false;
    this.saves += 1;
    return Promise.resolve(true);
  }
}

type StubEditOp =
  | { op: 'replace'; uri: StubUri; range: { start: Pos; end: Pos }; text: string }
  | { op: 'insert'; uri: StubUri; position: Pos; text: string }
  | { op: 'createFile'; uri: StubUri; options: { ignoreIfExists?: boolean; overwrite?: boolean } };

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
  /**
   * Lines written to an output channel after it was disposed. VS Code throws "Channel has been
   * closed" there (an error in the extension host's log); the stand-in throws too, and keeps them.
   */
  readonly closedChannelWrites: string[] = [];
  /** The save dialogs asked (their options), and the file the next one answers (none: cancelled). */
  readonly saveDialogs: unknown[] = [];
  saveAnswer: StubUri | undefined;
  /** Documents shown with `window.showTextDocument`, and how. */
  readonly shownDocuments: { uri: StubUri; options: unknown }[] = [];
  settings: Record<string, unknown> = {};
  /** The module `require('vscode')` returns (after `install`); tests may change its fields. */
  exports: Record<string, unknown> = {};
  diagnostics: [StubUri, unknown[]][] = [];
  workspaceRoot = '/tmp';
  /** `workspace.isTrusted` (false: Restricted Mode). */
  trusted = true;
  /** The output channel's `logLevel` (vscode.LogLevel: 3 is Info), as the extension finds it at activation. */
  logLevel: number | undefined = undefined;
  /** The workspace trust listeners (`workspace.onDidGrantWorkspaceTrust`). */
  readonly trustListeners: (() => void)[] = [];
  /** Files on the stand-in's disk (by path), which `workspace.fs` reads and a save writes. */
  readonly disk = new Map<string, string>();
  /** The open text documents (`workspace.textDocuments`). */
  readonly documents: StubDocument[] = [];
  /** The workspace edits applied, each a list of operations. */
  readonly appliedEdits: StubEditOp[][] = [];
  /** Virtual documents' providers, by scheme. */
  readonly contentProviders = new Map<string, { provideTextDocumentContent(uri: unknown): string | undefined }>();

  /** The open document of `file`, opened from the disk if needed (as `openTextDocument`). */
  openDocument(file: string): StubDocument {
    let doc = this.documents.find((d) => d.uri.fsPath === file);
    if (!doc) {
      const text = this.disk.get(file);
      if (text === undefined) {
        throw Object.assign(new Error(`cannot open ${file}: no such file`), { code: 'FileNotFound' });
      }
      doc = new StubDocument(StubUri.file(file), text, this.disk);
      this.documents.push(doc);
    }
    return doc;
  }

  private applyEdit(ops: StubEditOp[]): boolean {
    this.appliedEdits.push(ops);
    const touched = new Set<StubDocument>();
    for (const o of ops) {
      if (o.op === 'createFile') {
        const there = this.disk.has(o.uri.fsPath);
        if (there && !o.options.overwrite && !o.options.ignoreIfExists) {
          return false;
        }
        if (!there || o.options.overwrite) {
          this.disk.set(o.uri.fsPath, '');
        }
        continue;
      }
      const doc = this.openDocument(o.uri.fsPath);
      const [from, to] =
        o.op === 'replace'
          ? [offsetAt(doc.text, o.range.start), offsetAt(doc.text, o.range.end)]
          : [offsetAt(doc.text, o.position), offsetAt(doc.text, o.position)];
      doc.text = doc.text.slice(0, from) + o.text + doc.text.slice(to);
      doc.isDirty = true;
      touched.add(doc);
    }
    for (const doc of touched) {
      doc.edits += 1;
    }
    return true;
  }

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
    class WorkspaceEdit {
      readonly ops: StubEditOp[] = [];
      replace(uri: StubUri, range: { start: Pos; end: Pos }, text: string): void {
        this.ops.push({ op: 'replace', uri, range, text });
      }
      insert(uri: StubUri, position: Pos, text: string): void {
        this.ops.push({ op: 'insert', uri, position, text });
      }
      createFile(uri: StubUri, options: { ignoreIfExists?: boolean; overwrite?: boolean } = {}): void {
        this.ops.push({ op: 'createFile', uri, options });
      }
    }
    const notFound = (file: string) => Object.assign(new Error(`${file} not found`), { code: 'FileNotFound' });
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
    // Each channel is its own: disposed, it refuses to be written to, as VS Code's does.
    const createChannel = (name: string) => {
      let disposed = false;
      const write = (s: string) => {
        if (disposed) {
          stub.closedChannelWrites.push(`${name}: ${s}`);
          throw new Error('Channel has been closed');
        }
        stub.log.push(s);
      };
      return {
        name,
        get logLevel() {
          return stub.logLevel;
        },
        debug: write,
        info: write,
        warn: write,
        error: write,
        appendLine: write,
        show: () => undefined,
        dispose: () => {
          disposed = true;
        },
      };
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
      WorkspaceEdit,
      TabInputText,
      TabInputNotebook,
      TabInputTextDiff,
      StatusBarAlignment: { Left: 1, Right: 2 },
      LogLevel: { Off: 0, Trace: 1, Debug: 2, Info: 3, Warning: 4, Error: 5 },
      FileType: { File: 1, Directory: 2 },
      ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
      extensions: { getExtension: () => undefined },
      window: {
        activeTextEditor: undefined,
        visibleTextEditors: [],
        tabGroups: { all: [] },
        onDidChangeActiveTextEditor: () => disposable,
        createOutputChannel: (name: string) => createChannel(name),
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
        withProgress: (_options: unknown, task: (progress: unknown, token: unknown) => Promise<unknown>) =>
          task({ report: () => undefined }, { isCancellationRequested: false, onCancellationRequested: () => disposable }),
        showSaveDialog: (options: unknown) => {
          stub.saveDialogs.push(options);
          return Promise.resolve(stub.saveAnswer);
        },
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
        get isTrusted() {
          return stub.trusted;
        },
        onDidGrantWorkspaceTrust: (fn: () => void) => {
          stub.trustListeners.push(fn);
          return { dispose: () => stub.trustListeners.splice(stub.trustListeners.indexOf(fn), 1) };
        },
        get textDocuments() {
          return stub.documents.filter((d) => !d.isClosed);
        },
        openTextDocument: (uri: StubUri) => new Promise((resolve) => resolve(stub.openDocument(uri.fsPath))),
        applyEdit: (edit: { ops: StubEditOp[] }) => Promise.resolve(stub.applyEdit(edit.ops)),
        registerTextDocumentContentProvider: (
          scheme: string,
          provider: { provideTextDocumentContent(uri: unknown): string | undefined },
        ) => {
          stub.contentProviders.set(scheme, provider);
          return disposable;
        },
        fs: {
          readFile: (uri: StubUri) => {
            const text = stub.disk.get(uri.fsPath);
            return text === undefined ? Promise.reject(notFound(uri.fsPath)) : Promise.resolve(new TextEncoder().encode(text));
          },
          writeFile: (uri: StubUri, bytes: Uint8Array) => {
            stub.disk.set(uri.fsPath, new TextDecoder().decode(bytes));
            return Promise.resolve();
          },
          stat: (uri: StubUri) =>
            stub.disk.has(uri.fsPath)
              ? Promise.resolve({ type: 1, size: stub.disk.get(uri.fsPath)!.length })
              : Promise.reject(notFound(uri.fsPath)),
        },
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
