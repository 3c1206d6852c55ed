/**
 * The real VS Code workbench of the workbench tests (workbench.test.ts, diffEditor.test.ts):
 * code-server (VS Code 1.100.3 in a browser, installed by scripts/install-code-server.sh) with a
 * fresh profile, started and stopped; the chat's frame; the command palette.
 */

import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';

import type { FrameLocator, Page } from 'playwright-core';

import { type FakeLLM, serverEnv } from './harness';
import { lendDependencies, pathWithoutParley } from './lentDependencies';

export const EXT_ROOT = path.resolve(__dirname, '..', '..');
export const OUTPUT = path.join(EXT_ROOT, 'test-output');
export const VSIX = path.join(EXT_ROOT, 'parley-vscode.vsix');
export const INSTALL = path.join(EXT_ROOT, 'scripts', 'install-code-server.sh');
export const CHROMIUM = process.env.PARLEY_CHROMIUM ?? '/usr/bin/chromium';
export const DARK = 'Default Dark Modern';
export const LIGHT = 'Default Light Modern';

/** code-server's entry point: $PARLEY_CODE_SERVER, else installed (or found cached) by the script. */
export function codeServerEntry(): string {
  const given = process.env.PARLEY_CODE_SERVER;
  if (given) {
    return given;
  }
  const out = execFileSync(INSTALL, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 900_000 });
  return out.trim().split('\n').pop() ?? '';
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

export interface Profile {
  base: string;
  userData: string;
  extensions: string;
  workspace: string;
  home: string;
  settingsFile: string;
}

export function makeProfile(): Profile {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'parley-workbench-'));
  const p = {
    base,
    userData: path.join(base, 'user-data'),
    extensions: path.join(base, 'extensions'),
    workspace: path.join(base, 'workspace'),
    home: path.join(base, 'parley-home'),
    settingsFile: path.join(base, 'user-data', 'User', 'settings.json'),
  };
  for (const dir of [path.dirname(p.settingsFile), p.extensions, p.workspace, p.home]) {
    fs.mkdirSync(dir, { recursive: true });
  }
  fs.writeFileSync(path.join(p.workspace, 'geometry.py'), 'def area(width, height):\n    return width * height\n');
  return p;
}

/** The profile's settings: `theme`, trust on or off, the fake LLM for the server, and `extra`. */
export function writeSettings(p: Profile, fake: FakeLLM, theme: string, trust = false, extra: Record<string, unknown> = {}): void {
  const settings = {
    'workbench.colorTheme': theme,
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    // Workspace trust off, but for the Restricted Mode test (untrusted, and no prompt asking).
    'security.workspace.trust.enabled': trust,
    'security.workspace.trust.startupPrompt': 'never',
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': false,
    'telemetry.telemetryLevel': 'off',
    'remote.autoForwardPorts': false,
    // The DOM renderer: a terminal's text can be read from the page.
    'terminal.integrated.gpuAcceleration': 'off',
    // No parley.serverCommand, and no `parley` on the PATH: the chat's button installs it.
    'parley.serverEnv': serverEnv(fake, p.home),
    ...extra,
  };
  fs.writeFileSync(p.settingsFile, JSON.stringify(settings, null, 2));
}

/**
 * A machine with no Parley: no `parley` on the PATH. The install button's pip installs the
 * bundled wheel without its dependencies (PIP_NO_DEPS; from the registry they take about a
 * minute), which are lent from the project's virtualenv on PYTHONPATH (see lentDependencies).
 */
export function noParleyEnv(p: Profile): Record<string, string> {
  const lent = path.join(p.base, 'lent-dependencies');
  return { PATH: pathWithoutParley(), PIP_NO_DEPS: '1', PYTHONPATH: fs.existsSync(lent) ? lent : lendDependencies(lent) };
}

/** Starts code-server; resolves once it listens. */
export async function startCodeServer(entry: string, p: Profile, port: number, log: string[], trust = false): Promise<ChildProcess> {
  const proc = spawn(
    process.execPath,
    [
      entry,
      '--config',
      path.join(p.base, 'code-server.yaml'),
      '--auth',
      'none',
      '--bind-addr',
      `127.0.0.1:${port}`,
      '--user-data-dir',
      p.userData,
      '--extensions-dir',
      p.extensions,
      '--disable-telemetry',
      '--disable-update-check',
      ...(trust ? [] : ['--disable-workspace-trust']),
      '--disable-getting-started-override',
      p.workspace,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, XDG_CONFIG_HOME: p.base, ...noParleyEnv(p) } },
  );
  const lines = readline.createInterface({ input: proc.stdout });
  proc.stderr.on('data', (d: Buffer) => log.push(d.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`code-server did not start:\n${log.join('')}`)), 60_000);
    lines.on('line', (line) => {
      log.push(line);
      if (line.includes('HTTP server listening')) {
        clearTimeout(timer);
        resolve();
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`code-server exited (${code}):\n${log.join('\n')}`));
    });
  });
  return proc;
}

export async function stopProcess(proc: ChildProcess | undefined): Promise<void> {
  if (!proc || proc.exitCode !== null || proc.signalCode !== null) {
    return;
  }
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

/** The chat page inside the workbench: VS Code's webview host frame, then the page's own frame. */
export function chatFrame(page: Page): FrameLocator {
  return page.frameLocator('iframe.webview.ready').frameLocator('iframe#active-frame');
}

export const haveChromium = fs.existsSync(CHROMIUM);

/**
 * Runs a command from the command palette (F1), by its title. The palette lists the commands
 * known when it opens: while the window starts, it is opened again until the command is there.
 */
export async function paletteCommand(page: Page, title: string): Promise<void> {
  const input = page.locator('.quick-input-widget input');
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
  for (let attempt = 1; ; attempt++) {
    await page.keyboard.press('F1');
    await input.waitFor();
    await input.fill(`>${title}`);
    try {
      await row.waitFor({ timeout: 5000 });
      break;
    } catch (err) {
      await page.keyboard.press('Escape');
      if (attempt === 6) {
        throw err;
      }
    }
  }
  await input.press('Enter');
  await page.locator('.quick-input-widget').waitFor({ state: 'hidden' });
}
