/**
 * "Parley: Attach Kernel…": the QuickPick's items, the notebook's kernel asked of the Jupyter
 * extension's kernel API, and the controller attaching the session against the real
 * `parley serve`, the fake LLM and a real ipykernel the test starts through jupyter_client.
 *
 * The Jupyter extension is not installed here: its API is a stand-in object in these tests
 * (`standInKernel`), with the shape `@vscode/jupyter-extension` publishes; the line it is asked
 * to run is run in the real ipykernel by the test's own Python.
 */

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { after, before, describe, it, type TestContext } from 'node:test';

import type { Kernel } from '@vscode/jupyter-extension';
import fc from 'fast-check';

import { initialState } from '../src/core/chatState';
import { ChatController, type RunningKernel } from '../src/core/controller';
import { CONNECTION_FILE_CODE, NOTEBOOK_DETAIL, kernelPickItems, notebookConnectionFile } from '../src/core/kernelPick';
import { statusTooltipMarkdown } from '../src/core/statusTooltip';
import { FakeLLM, PARLEY, PYTHON, serverEnv, serverUnavailable, tempDirs, until } from './harness';

const KERNEL_OPTION = {
  id: 'kernel',
  name: 'Kernel',
  currentValue: 'parley',
  options: [
    { value: 'parley', name: "Parley's own", description: 'Sandboxed, per session' },
    { value: '/run/kernel-1.json', name: 'kernel-1.json' },
  ],
};
const RUNNING: RunningKernel[] = [
  { connectionFile: '/run/kernel-1.json', kernelId: '1', started: Date.UTC(2025, 10, 3, 9, 30) / 1000, notebook: 'work/analysis.ipynb' },
];
const NEVER = { isCancellationRequested: false, onCancellationRequested: () => ({ dispose: () => undefined }) };

/** A stand-in for the Jupyter extension's `Kernel` (not the extension): prints `stdout` for any code. */
function standInKernel(language: string, stdout: string | undefined, ran: string[] = []): Kernel {
  return {
    status: 'idle',
    language,
    onDidChangeStatus: () => ({ dispose: () => undefined }),
    async *executeCode(code: string) {
      ran.push(code);
      await Promise.resolve(); // an answer comes later, as the kernel's would
      if (stdout !== undefined) {
        yield { items: [{ mime: 'application/x.notebook.stream.stdout', data: new TextEncoder().encode(stdout) }] };
      }
    },
  };
}

describe('attach kernel: the QuickPick', () => {
  it("offers Parley's own, each running kernel with its notebook and start, and the notebook's kernel", () => {
    const items = kernelPickItems([KERNEL_OPTION], RUNNING, { name: 'analysis.ipynb' }, new Date(2024, 0, 1));
    assert.deepEqual(
      items.map((i) => [i.label, i.description, i.kernel]),
      [
        ["Parley's own", 'current · Sandboxed, per session', 'parley'],
        ['kernel-1.json', 'work/analysis.ipynb', '/run/kernel-1.json'],
        ['Kernel of the active notebook (analysis.ipynb)', undefined, undefined],
      ],
    );
    assert.match(items[1].detail!, /^started 2025-11-03 \d\d:\d\d · \/run\/kernel-1\.json$/);
    assert.equal(items[2].detail, NOTEBOOK_DETAIL);
    assert.match(NOTEBOOK_DETAIL, /gives no connection file/);
    // Without the Jupyter extension (or a notebook), no notebook item.
    assert.equal(kernelPickItems([KERNEL_OPTION], RUNNING).length, 2);
  });

  it("asks the notebook's Python kernel for its connection file, and says why when it cannot", async () => {
    const ran: string[] = [];
    assert.equal(await notebookConnectionFile(standInKernel('python', '/run/kernel-9.json\n', ran), NEVER), '/run/kernel-9.json');
    assert.deepEqual(ran, [CONNECTION_FILE_CODE]);
    await assert.rejects(notebookConnectionFile(undefined, NEVER), /not running: run a cell/);
    await assert.rejects(notebookConnectionFile(standInKernel('julia', '/x'), NEVER), /runs julia: Parley's tools need a Python kernel/);
    await assert.rejects(notebookConnectionFile(standInKernel('python', undefined), NEVER), /did not say its connection file/);
    await assert.rejects(notebookConnectionFile(standInKernel('python', 'NameError'), NEVER), /did not say its connection file/);
  });

  it("takes from whatever the kernel prints only one absolute path, else says it did not say one", async () => {
    // The kernel's output is not Parley's: any text, split into any chunks.
    const printed = fc.oneof(fc.string(), fc.string().map((s) => `/${s}`), fc.constantFrom('/a/b.json\n', '\n/a/b.json\n\n', '/a\n/b'));
    await fc.assert(
      fc.asyncProperty(printed, async (text) => {
        try {
          const file = await notebookConnectionFile(standInKernel('python', text), NEVER);
          assert.ok(file.startsWith('/') && !file.includes('\n') && file === file.trim() && text.includes(file));
        } catch (err) {
          assert.match(String(err), /did not say its connection file/);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('shows the attached kernel in the status tooltip, by the server’s names; nothing on Parley’s own', () => {
    const meta = initialState().meta;
    const attached = {
      ...KERNEL_OPTION,
      currentValue: '/run/kernel-1.json',
      options: [KERNEL_OPTION.options[0], { value: '/run/kernel-1.json', name: 'the kernel of /run/kernel-1.json' }],
    };
    assert.match(statusTooltipMarkdown({ ...meta, configOptions: [attached] }), /^Kernel: the kernel of \/run\/kernel-1\.json$/m);
    assert.doesNotMatch(statusTooltipMarkdown({ ...meta, configOptions: [KERNEL_OPTION] }), /Kernel:/);
  });
});

const START_KERNEL = `
import sys
from jupyter_client.manager import KernelManager
manager = KernelManager(kernel_name='python3', connection_file=sys.argv[1])
manager.start_kernel()
client = manager.client()
client.start_channels()
client.wait_for_ready(timeout=60)
client.execute_interactive(sys.argv[2], timeout=60)
said = []
client.execute_interactive(sys.argv[3], timeout=60, store_history=False,
    output_hook=lambda m: said.append(m['content'].get('text', '')))
print('said', ''.join(said).strip(), flush=True)
try:
    sys.stdin.read()
finally:
    client.stop_channels()
    manager.shutdown_kernel(now=True)
`;

/** The user's kernel: started, a cell run, and CONNECTION_FILE_CODE's answer (what a notebook's kernel says). */
async function startUsersKernel(runtime: string, cell: string): Promise<{ proc: ChildProcess; file: string; said: string }> {
  const file = path.join(runtime, 'kernel-vscode-test.json');
  const proc = spawn(PYTHON, ['-c', START_KERNEL, file, cell, CONNECTION_FILE_CODE], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, JUPYTER_RUNTIME_DIR: runtime, IPYTHONDIR: path.join(runtime, 'ipython') },
  });
  let stderr = '';
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const said = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the kernel did not start:\n${stderr}`)), 90000);
    readline.createInterface({ input: proc.stdout }).once('line', (line) => {
      clearTimeout(timer);
      resolve(line.replace(/^said /, ''));
    });
    proc.once('exit', (code) => reject(new Error(`the kernel's process exited (${code}):\n${stderr}`)));
  });
  return { proc, file, said };
}

describe('attach kernel: against parley serve and a real ipykernel', () => {
  let skipReason: string | undefined;
  let fake: FakeLLM | undefined;
  let dirs: ReturnType<typeof tempDirs>;
  let runtime: string;
  let kernel: Awaited<ReturnType<typeof startUsersKernel>> | undefined;

  before(async () => {
    skipReason = await serverUnavailable();
    if (skipReason) {
      return;
    }
    fake = await FakeLLM.start();
    dirs = tempDirs();
    runtime = fs.mkdtempSync(path.join(dirs.home, '..', 'runtime-'));
    kernel = await startUsersKernel(runtime, 'answer = 6 * 7');
  });
  after(async () => {
    if (kernel) {
      const exited = new Promise((resolve) => kernel!.proc.once('exit', resolve));
      kernel.proc.stdin!.end();
      await exited;
    }
    await fake?.stop();
    dirs?.cleanup();
  });

  function controller(): ChatController {
    return new ChatController({
      workspaceRoot: () => dirs.workspace,
      settings: () => ({ server: { command: PARLEY, args: ['serve'], env: { ...serverEnv(fake!, dirs.home), JUPYTER_RUNTIME_DIR: runtime } } }),
    });
  }

  async function describeAnswer(ctl: ChatController): Promise<string> {
    await fake!.script([{ tool_calls: [{ name: 'python_describe', arguments: { target: 'answer' } }] }, { text: 'Described.' }]);
    assert.equal(await ctl.send('What is answer?'), 'end_turn');
    const requests = await fake!.requests();
    const messages = requests[requests.length - 1].body.messages as { role: string; content: unknown }[];
    return JSON.stringify(messages.filter((m) => m.role === 'tool').pop()?.content);
  }

  it('lists the running kernel, attaches to it (the tools answer from it), and back to Parley’s own', async (t: TestContext) => {
    if (skipReason) {
      t.skip(skipReason);
      return;
    }
    const ctl = controller();
    try {
      await ctl.ensureSession();
      const running = await ctl.runningKernels();
      assert.deepEqual(
        running.map((k) => k.connectionFile),
        [kernel!.file],
      );
      const items = kernelPickItems(ctl.state.meta.configOptions, running);
      assert.deepEqual(
        items.map((i) => i.label),
        ["Parley's own", 'kernel-vscode-test.json'],
      );
      await ctl.attachKernel(items[1].kernel!);
      assert.match(statusTooltipMarkdown(ctl.state.meta), new RegExp(`^Kernel: the kernel of ${kernel!.file}$`, 'm'));
      assert.match(await describeAnswer(ctl), /42/);
      await ctl.attachKernel('parley');
      assert.doesNotMatch(statusTooltipMarkdown(ctl.state.meta), /Kernel:/);
    } finally {
      await ctl.dispose();
    }
  });

  it("attaches a notebook's kernel by the connection file it says, outside the runtime directory", async (t: TestContext) => {
    if (skipReason) {
      t.skip(skipReason);
      return;
    }
    // What a real ipykernel answers to the line the notebook's kernel is asked to run.
    assert.equal(kernel!.said, kernel!.file);
    const elsewhere = path.join(dirs.workspace, '..', 'notebook-kernel.json');
    fs.copyFileSync(kernel!.file, elsewhere);
    const file = await notebookConnectionFile(standInKernel('python', `${elsewhere}\n`), NEVER);
    const ctl = controller();
    try {
      await ctl.ensureSession();
      await ctl.attachKernel(file); // not an option's value: session/resume with _meta.parley.kernel
      await until(() => ctl.state.meta.configOptions.find((o) => o.id === 'kernel')?.currentValue === elsewhere || undefined, 'the attached kernel');
      assert.match(statusTooltipMarkdown(ctl.state.meta), /^Kernel: the kernel of .*notebook-kernel\.json$/m);
      assert.match(await describeAnswer(ctl), /42/);
    } finally {
      await ctl.dispose();
    }
  });
});
