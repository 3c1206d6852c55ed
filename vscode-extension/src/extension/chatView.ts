/** The chat view: a webview view in Parley's activity bar container. */

import * as vscode from 'vscode';

import type { HostToView, ViewToHost } from '../common/view';
import { CHAT_STYLESHEETS, chatPageHtml, makeNonce } from '../core/webviewHtml';

export class ChatViewProvider implements vscode.WebviewViewProvider {
  static readonly viewId = 'parley.chatView';
  private view: vscode.WebviewView | undefined;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly onMessage: (message: ViewToHost) => void,
    /** The user closed the view (not merely hid it). */
    private readonly onDispose: () => void = () => undefined,
  ) {}

  get visible(): boolean {
    return this.view?.visible ?? false;
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const media = vscode.Uri.joinPath(this.extensionUri, 'media');
    const script = vscode.Uri.joinPath(this.extensionUri, 'out', 'webview');
    // The page's modules shared with the host (display rules) are built next to it, in out/common.
    const common = vscode.Uri.joinPath(this.extensionUri, 'out', 'common');
    view.webview.options = { enableScripts: true, localResourceRoots: [media, script, common] };
    view.webview.html = chatPageHtml({
      cspSource: view.webview.cspSource,
      nonce: makeNonce(),
      scriptUri: view.webview.asWebviewUri(vscode.Uri.joinPath(script, 'main.js')).toString(),
      markdownItUri: view.webview.asWebviewUri(vscode.Uri.joinPath(script, 'vendor', 'markdown-it.min.js')).toString(),
      highlightUri: view.webview.asWebviewUri(vscode.Uri.joinPath(script, 'vendor', 'highlight.min.js')).toString(),
      styleUris: CHAT_STYLESHEETS.map((name) => view.webview.asWebviewUri(vscode.Uri.joinPath(media, 'chat', name)).toString()),
    });
    view.webview.onDidReceiveMessage((m: ViewToHost) => this.onMessage(m));
    view.onDidDispose(() => {
      if (this.view === view) {
        this.view = undefined;
        this.onDispose();
      }
    });
  }

  post(message: HostToView): void {
    void this.view?.webview.postMessage(message);
  }

  async reveal(): Promise<void> {
    await vscode.commands.executeCommand(`${ChatViewProvider.viewId}.focus`);
    this.post({ type: 'focus' });
  }
}
