/**
 * The user's own kernel (docs/protocol.md, "The user's own kernel"): the Jupyter kernels
 * running here (`parley kernels --json`, the server's own command), and the session attached
 * to one, or back to Parley's own. A kernel the session's `kernel` config option offers is
 * chosen with `session/set_config_option`; another (a notebook's, whose connection file is not
 * among the runtime directory's) with `session/resume` and `_meta.parley.kernel`.
 */

import { execFile } from 'node:child_process';

import type { ServerOptions } from '../../client/client';
import { KERNEL_OPTION } from '../../common/kernel';
import type { ChatCore } from './core';
import type { Sessions } from './sessions';

/** How long `parley kernels` may take (it asks local Jupyter Servers for their notebooks, 1 s each). */
const LIST_TIMEOUT_MS = 15000;

/** A kernel running here, as `parley kernels --json` lists it. */
export interface RunningKernel {
  connectionFile: string;
  kernelId: string;
  /** When it started (its connection file's time), in seconds since the epoch. */
  started: number;
  /** The notebook it runs for, where a local Jupyter Server says. */
  notebook: string | null;
}

/** `parley kernels --json` with the server's command: its arguments before `serve`, then these. */
export function kernelsCommand(server: ServerOptions): { command: string; args: string[] } {
  const args = server.args ?? ['serve'];
  const serve = args.indexOf('serve');
  return { command: server.command, args: [...(serve >= 0 ? args.slice(0, serve) : []), 'kernels', '--json'] };
}

/** The kernels running here, newest first; an Error saying why when the command fails. */
export function listRunningKernels(server: ServerOptions): Promise<RunningKernel[]> {
  const { command, args } = kernelsCommand(server);
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      { env: { ...process.env, ...server.env }, timeout: LIST_TIMEOUT_MS, encoding: 'utf8' },
      (err, stdout, stderr) => {
        if (err) {
          reject(new Error(`\`parley kernels\` failed: ${stderr.trim() || err.message}`));
          return;
        }
        try {
          resolve(JSON.parse(stdout) as RunningKernel[]);
        } catch {
          reject(new Error('`parley kernels --json` did not answer JSON.'));
        }
      },
    );
  });
}

export class Kernels {
  constructor(
    private readonly core: ChatCore,
    private readonly sessions: Sessions,
  ) {}

  /** The kernels running here (the server's command, with its environment). */
  running(): Promise<RunningKernel[]> {
    return listRunningKernels(this.core.host.settings().server);
  }

  /**
   * Attach the session to `kernel`: the kernel option's value (`parley`, a connection file it
   * offers), or another kernel's connection file. The server says, in a notice, when the kernel
   * cannot be used (the session then uses Parley's own).
   */
  async attach(kernel: string): Promise<void> {
    const { core } = this;
    if (core.state.meta.busy) {
      throw new Error('Parley is answering: attach the kernel once the turn ends.');
    }
    const sessionId = await this.sessions.ensureSession();
    const client = core.requireClient();
    const option = core.state.meta.configOptions.find((o) => o.id === KERNEL_OPTION);
    if (!option) {
      throw new Error('The server offers no kernel to choose for this session.');
    }
    const result = option.options.some((o) => o.value === kernel)
      ? await client.setConfigOption(sessionId, KERNEL_OPTION, kernel)
      : await client.resumeSession(sessionId, core.host.workspaceRoot(), this.sessions.otherRoots(), { connectionFile: kernel });
    if (core.state.meta.sessionId === sessionId) {
      core.dispatch({ type: 'configOptions', options: result.configOptions ?? [] });
    }
  }
}
