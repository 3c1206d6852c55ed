/**
 * The command "Parley: Attach Kernel…": a QuickPick of Parley's own kernel, the kernels running
 * here (`parley kernels --json`) and, when the Jupyter extension (`ms-toolsai.jupyter`) is
 * installed and a notebook is active, that notebook's kernel through the Jupyter extension's
 * public kernel API (which asks the user, the first time, to allow Parley access to it).
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
