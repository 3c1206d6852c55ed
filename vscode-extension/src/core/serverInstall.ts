/**
 * Installs Parley's server into the extension's own storage, no terminal needed: find a
 * Python ≥ 3.11 (by running each candidate), make a virtualenv with it, pip-install the
 * `parley-code` wheel the .vsix carries, check `parley --version`, and only then record the
 * virtualenv as the one to use (`server.json`), so a failed or half-done install is never run.
 * Each install gets a fresh directory (a virtualenv cannot be moved); older ones are removed.
 */

import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as readline from 'node:readline';

import { venvExecutable } from './serverLocation';

export const MIN_PYTHON = { major: 3, minor: 11 } as const;
const RECORD = 'server.json';
const VENV_PREFIX = 'venv-';
/** The wheel `python -m build` makes of the repository (the distribution is `parley-code`). */
const WHEEL = /^parley_code-([^-]+)-py3-none-any\.whl$/;
/** What `parley --version` prints: `parley 0.3.0 (parley-code)`. */
const VERSION_LINE = /^parley (\S+) \(parley-code\)$/m;

/** The installed server, as `server.json` records it. */
export interface InstalledServer {
  venv: string;
  command: string;
  version: string;
  /** The Python the virtualenv was made with. */
  python: string;
}

export interface PythonFound {
  executable: string;
  version: string;
}

export interface InstallOptions {
  /** The extension's storage directory (`context.globalStorageUri`). */
  storageDir: string;
  /** The `parley-code` wheel to install. */
  wheel: string;
  /** Pythons to try, in order: paths or names looked up on the PATH (`python3`). */
  pythonCandidates: string[];
  /** Each line of output (the commands run, pip's output). */
  log: (line: string) => void;
  /** Extra `pip install` arguments (e.g. `--no-deps`, `--no-index`). */
  pipArgs?: string[];
  /** Extra environment for the commands run (e.g. `PIP_INDEX_URL`); default: the extension host's. */
  env?: Record<string, string>;
  signal?: AbortSignal;
}

/** No Python ≥ 3.11 that can make a virtualenv: the message says what was tried and what to do. */
export class NoPythonError extends Error {
  constructor(tried: string[]) {
    super(
      `Parley's server needs Python ${MIN_PYTHON.major}.${MIN_PYTHON.minor} or newer (with its venv module), and none was found.\n` +
        `Tried: ${tried.join('; ') || 'nothing'}.\n` +
        'Install Python 3.11+ (python.org, your package manager — on Debian/Ubuntu also python3-venv) ' +
        'or choose one with the Python extension, then install again.',
    );
    this.name = 'NoPythonError';
  }
}

/** The version `parley --version` printed, or undefined when it is not Parley's answer. */
export function parseServerVersion(output: string): string | undefined {
  return VERSION_LINE.exec(output)?.[1];
}

/** The version in a `parley-code` wheel's file name, or undefined when it is not one. */
export function wheelVersion(fileName: string): string | undefined {
  return WHEEL.exec(fileName)?.[1];
}

/** True when `version` ("3.12.1") is at least Python 3.11. */
export function isSupportedPython(version: string): boolean {
  const m = /^(\d+)\.(\d+)(?:\.\d+)?$/.exec(version.trim());
  if (!m) {
    return false;
  }
  const [major, minor] = [Number(m[1]), Number(m[2])];
  return major > MIN_PYTHON.major || (major === MIN_PYTHON.major && minor >= MIN_PYTHON.minor);
}

/** The one `parley-code` wheel in `dir` (the .vsix's `bundled/`). */
export function bundledWheel(dir: string): string {
  const wheels = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => wheelVersion(f)) : [];
  if (wheels.length !== 1) {
    throw new Error(`Expected one parley-code wheel in ${dir}, found ${wheels.length ? wheels.join(', ') : 'none'}: the extension was packaged without its server.`);
  }
  return path.join(dir, wheels[0]);
}

/** The server recorded in `storageDir`, if its `parley` is still there. */
export function installedServer(storageDir: string): InstalledServer | undefined {
  try {
    const record = JSON.parse(fs.readFileSync(path.join(storageDir, RECORD), 'utf8')) as Partial<InstalledServer>;
    if (typeof record.command === 'string' && typeof record.venv === 'string' && fs.existsSync(record.command)) {
      return { venv: record.venv, command: record.command, version: String(record.version), python: String(record.python) };
    }
  } catch {
    // No record (never installed) or a broken one: as good as none.
  }
  return undefined;
}

interface RunResult {
  code: number | null;
  output: string;
}

/** Runs a command, each output line to `log` (when given), and resolves with its exit code and output. */
function run(command: string, args: string[], log?: (line: string) => void, options: { signal?: AbortSignal; env?: Record<string, string> } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, ...options.env };
    const proc = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], windowsHide: true, signal: options.signal, env });
    const lines: string[] = [];
    for (const stream of [proc.stdout, proc.stderr]) {
      readline.createInterface({ input: stream }).on('line', (line) => {
        lines.push(line);
        log?.(line);
      });
    }
    proc.once('error', reject);
    proc.once('close', (code) => resolve({ code, output: lines.join('\n') }));
  });
}

/** Runs a step of the install; a failure throws with the step's name and its last lines. */
async function step(what: string, command: string, args: string[], options: InstallOptions): Promise<string> {
  options.log(`$ ${[command, ...args].join(' ')}`);
  const result = await run(command, args, options.log, options);
  if (result.code !== 0) {
    const tail = result.output.split('\n').slice(-5).join('\n');
    throw new Error(`Installing Parley's server failed: ${what} (exit code ${result.code}).\n${tail}`);
  }
  return result.output;
}

const PROBE = 'import sys, venv, ensurepip; print("%d.%d.%d" % sys.version_info[:3]); print(sys.executable)';

/** The first candidate that runs, is Python ≥ 3.11 and has `venv` and `ensurepip`. */
export async function findPython(candidates: string[], log: (line: string) => void, env?: Record<string, string>): Promise<PythonFound> {
  const tried: string[] = [];
  for (const candidate of candidates) {
    let result: RunResult;
    try {
      result = await run(candidate, ['-c', PROBE], undefined, { env });
    } catch (err) {
      tried.push(`${candidate}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'not found' : (err as Error).message}`);
      continue;
    }
    const [version = '', executable = ''] = result.output.trim().split('\n');
    if (result.code !== 0) {
      tried.push(`${candidate}: no venv module (${result.output.split('\n').pop() ?? ''})`);
    } else if (!isSupportedPython(version)) {
      tried.push(`${candidate}: Python ${version}`);
    } else {
      log(`Using Python ${version}: ${executable}`);
      return { executable, version };
    }
  }
  throw new NoPythonError(tried);
}

/** Installs the wheel into a new virtualenv in `storageDir` and records it; resolves with it. */
export async function installServer(options: InstallOptions): Promise<InstalledServer> {
  const expected = wheelVersion(path.basename(options.wheel));
  if (!expected || !fs.existsSync(options.wheel)) {
    throw new Error(`Not a parley-code wheel: ${options.wheel}`);
  }
  const python = await findPython(options.pythonCandidates, options.log, options.env);
  fs.mkdirSync(options.storageDir, { recursive: true });
  const venv = fs.mkdtempSync(path.join(options.storageDir, VENV_PREFIX));
  try {
    await step('making the virtualenv', python.executable, ['-m', 'venv', venv], options);
    const venvPython = venvExecutable(venv, 'python');
    const pip = ['-m', 'pip', 'install', '--disable-pip-version-check', ...(options.pipArgs ?? []), options.wheel];
    await step('pip install', venvPython, pip, options);
    const command = venvExecutable(venv, 'parley');
    const version = parseServerVersion(await step('checking `parley --version`', command, ['--version'], options));
    if (version !== expected) {
      throw new Error(`Installing Parley's server failed: \`parley --version\` says ${version ?? 'nothing Parley prints'}, the wheel is ${expected}.`);
    }
    const installed: InstalledServer = { venv, command, version, python: python.executable };
    fs.writeFileSync(path.join(options.storageDir, RECORD), JSON.stringify(installed, null, 2));
    removeOtherVenvs(options.storageDir, venv);
    options.log(`Parley's server ${version} is installed: ${command}`);
    return installed;
  } catch (err) {
    fs.rmSync(venv, { recursive: true, force: true });
    throw err;
  }
}

function removeOtherVenvs(storageDir: string, keep: string): void {
  for (const name of fs.readdirSync(storageDir)) {
    const dir = path.join(storageDir, name);
    if (name.startsWith(VENV_PREFIX) && dir !== keep) {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
}
