/**
 * The command "Parley: Attach Kernel…": a QuickPick of Parley's own kernel, the kernels running
 * here (`parley kernels --json`) and, when the Jupyter extension (`ms-toolsai.jupyter`) is
 * installed and a notebook is active, that notebook's kernel through the Jupyter extension's
 * public kernel API, once the user allowed it (a modal question, each time).
 */

import * as path from 'node:path';

import type { Jupyter } from '@vscode/jupyter-extension';
import * as vscode from 'vscode';

import type { ChatController } from '../core/controller';
import { kernelPickItems, notebookConnectionFile } from '../core/kernelPick';

/** The Jupyter extension's id in the marketplace. */
export const JUPYTER_EXTENSION = 'ms-toolsai.jupyter';

export async function attachKernel(ctl: ChatController): Promise<void> {
  await ctl.ensureSession();
  const running = await ctl.runningKernels();
  const jupyter = vscode.extensions.getExtension<Jupyter>(JUPYTER_EXTENSION);
  const notebook = jupyter ? vscode.window.activeNotebookEditor?.notebook : undefined;
  const items = kernelPickItems(ctl.state.meta.configOptions, running, notebook && { name: path.basename(notebook.uri.fsPath) });
  const pick = await vscode.window.showQuickPick(items, {
    title: 'Parley: Attach Kernel',
    placeHolder: "Where this session's Python tools run",
    matchOnDescription: true,
    matchOnDetail: true,
  });
  if (!pick) {
    return;
  }
  let kernel = pick.kernel;
  if (pick.fromNotebook && jupyter && notebook) {
    const allow = 'Allow';
    const asked = await vscode.window.showWarningMessage(
      `Parley will ask the kernel of ${path.basename(notebook.uri.fsPath)} for its connection file, running one line in it outside its history, then run its Python tools there, outside Parley's sandbox (evaluation asks every time).`,
      { modal: true },
      allow,
    );
    if (asked !== allow) {
      return;
    }
    const api = jupyter.isActive ? jupyter.exports : await jupyter.activate();
    const found = await api.kernels.getKernel(notebook.uri);
    kernel = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: "Parley: asking the notebook's kernel for its connection file", cancellable: true },
      (_progress, token) => notebookConnectionFile(found, token),
    );
  }
  if (kernel !== undefined) {
    await ctl.attachKernel(kernel);
  }
}
