/**
 * "Parley: Attach Kernel…": what the QuickPick offers (Parley's own kernel, the one attached,
 * the kernels running here, the active notebook's through the Jupyter extension), and the
 * notebook's kernel's connection file asked of the Jupyter extension's public kernel API
 * (`@vscode/jupyter-extension`). Pure: tested without VS Code.
 *
 * That API (`kernels.getKernel(uri)`) gives a kernel's status, language and `executeCode`, and
 * no connection file. So Parley asks the kernel for its own: one line run by `executeCode`,
 * which runs "without affecting the execution count & execution history"; an ipykernel
 * answers `ipykernel.get_connection_file()`. A kernel that cannot say it is said in a sentence.
 */

import type { Kernel } from '@vscode/jupyter-extension';

import type { ConfigOptionView } from '../common/view';
import { formatTime } from '../common/display';
import { KERNEL_OPTION } from '../common/kernel';
import type { RunningKernel } from './controller/kernels';

/** A QuickPick item: the kernel option's value it attaches to, or the active notebook's kernel. */
export interface KernelPickItem {
  label: string;
  description?: string;
  detail?: string;
  /** The `kernel` option's value or a connection file; absent for the notebook's kernel. */
  kernel?: string;
  fromNotebook?: true;
}

/** What the notebook item says it does (the Jupyter extension's API gives no connection file). */
export const NOTEBOOK_DETAIL =
  "Through the Jupyter extension: its API gives no connection file, so Parley runs one line in the kernel, outside its history, to ask for it (an ipykernel's).";

/** The line that asks an ipykernel for its connection file (no name is left in its namespace). */
export const CONNECTION_FILE_CODE = "print(__import__('ipykernel').get_connection_file())";

const STDOUT_MIME = 'application/x.notebook.stream.stdout';

/** VS Code's cancellation token, as the Jupyter extension's `executeCode` takes it. */
type CancellationToken = Parameters<Kernel['executeCode']>[1];

/** The QuickPick's items: the kernel option's own choices, the running kernels, the notebook's. */
export function kernelPickItems(
  options: readonly ConfigOptionView[],
  running: readonly RunningKernel[],
  notebook?: { name: string },
  now: Date = new Date(),
): KernelPickItem[] {
  const option = options.find((o) => o.id === KERNEL_OPTION);
  const described = (value: string, ...more: (string | null | undefined)[]) => {
    const description = [value === option?.currentValue ? 'current' : undefined, ...more].filter(Boolean).join(' · ');
    return description ? { description } : {};
  };
  // The option lists the running local kernels too: they are listed below, with more.
  const listedBelow = (value: string) => running.some((k) => k.connectionFile === value) && value !== option?.currentValue;
  const items: KernelPickItem[] = (option?.options ?? [])
    .filter((choice) => !listedBelow(choice.value))
    .map((choice) => ({ label: choice.name, ...described(choice.value, choice.description), kernel: choice.value }));
  for (const k of running.filter((k) => !items.some((item) => item.kernel === k.connectionFile))) {
    items.push({
      label: k.connectionFile.slice(k.connectionFile.lastIndexOf('/') + 1),
      ...described(k.connectionFile, k.notebook),
      detail: `started ${formatTime(k.started * 1000, now)} · ${k.connectionFile}`,
      kernel: k.connectionFile,
    });
  }
  if (notebook) {
    items.push({ label: `Kernel of the active notebook (${notebook.name})`, detail: NOTEBOOK_DETAIL, fromNotebook: true });
  }
  return items;
}

/** The connection file of the notebook's `kernel` (from the Jupyter extension's `getKernel`), asked of the kernel itself. */
export async function notebookConnectionFile(kernel: Kernel | undefined, token: CancellationToken): Promise<string> {
  if (!kernel) {
    throw new Error("The notebook's kernel is not running: run a cell to start it, then attach it.");
  }
  if (kernel.language !== 'python') {
    throw new Error(`The notebook's kernel runs ${kernel.language}: Parley's tools need a Python kernel.`);
  }
  if (kernel.status === 'dead' || kernel.status === 'terminating') {
    throw new Error(`The notebook's kernel is ${kernel.status}.`);
  }
  let printed = '';
  const decoder = new TextDecoder();
  for await (const output of kernel.executeCode(CONNECTION_FILE_CODE, token)) {
    for (const item of output.items) {
      if (item.mime === STDOUT_MIME) {
        printed += decoder.decode(item.data);
      }
    }
  }
  const file = printed.trim();
  if (!file.startsWith('/') || file.includes('\n')) {
    throw new Error("The notebook's kernel did not say its connection file (Parley asks an ipykernel's).");
  }
  return file;
}
