/**
 * Which `parley` the extension runs, in order: the `parley.serverCommand` setting when it is
 * not the default; the workspace's own `.venv/bin/parley` (a trusted workspace only, and only
 * the very file the user approved: it is the workspace's code, which a command run there can
 * write — src/core/workspaceServerApproval.ts); `parley` on the `PATH` (one the user
 * installed, e.g. with `uv tool` or `pipx`); the server the extension installed into its own
 * storage (usable in any workspace: it is the extension's). None of them: the server is
 * missing and the chat offers to install it there.
 */

import * as fs from 'node:fs';
import * as path from 'node:path';

import { type ApprovalState, type ApprovedServers, approvalState } from './workspaceServerApproval';

/** Where the command came from (the log says it, the chat offers an install when `missing`). */
export type ServerSource = 'setting' | 'workspace' | 'storage' | 'path' | 'missing';

export interface ServerLocation {
  command: string;
  source: ServerSource;
  /** The workspace's own `parley`, passed over because the user has not approved that file. */
  passedOver?: { file: string; state: Exclude<ApprovalState, 'approved'> };
}

export interface LocateOptions {
  /** `parley.serverCommand` as set (`${workspaceFolder}` not yet expanded). */
  configured: string;
  workspaceRoot: string;
  /** Workspace Trust: an untrusted workspace's own virtualenv is never run. */
  trusted: boolean;
  /** The workspace servers the user approved (none: the workspace's own is never run). */
  approved?: ApprovedServers;
  /** The storage virtualenv's `parley`, when the extension installed one. */
  storageCommand?: string;
  /** The `PATH` to search (default: the extension host's). */
  pathEnv?: string;
  platform?: NodeJS.Platform;
}

export const DEFAULT_COMMAND = 'parley';

/** A virtualenv's directory of executables. */
export function venvBin(venv: string, platform: NodeJS.Platform = process.platform): string {
  return path.join(venv, platform === 'win32' ? 'Scripts' : 'bin');
}

/** A virtualenv's executable `name` (`parley`, `python`). */
export function venvExecutable(venv: string, name: string, platform: NodeJS.Platform = process.platform): string {
  return path.join(venvBin(venv, platform), platform === 'win32' ? `${name}.exe` : name);
}

function isExecutableFile(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** The first executable `name` in the directories of `pathEnv`, as a `which` would find it. */
export function findOnPath(name: string, pathEnv: string | undefined, platform: NodeJS.Platform = process.platform): string | undefined {
  const names = platform === 'win32' ? [`${name}.exe`, `${name}.cmd`, name] : [name];
  for (const dir of (pathEnv ?? '').split(path.delimiter)) {
    if (!dir) {
      continue; // an empty entry would mean the extension host's working directory
    }
    for (const candidate of names) {
      const file = path.join(dir, candidate);
      if (isExecutableFile(file)) {
        return file;
      }
    }
  }
  return undefined;
}

export function locateServer(options: LocateOptions): ServerLocation {
  const platform = options.platform ?? process.platform;
  const configured = options.configured.trim() || DEFAULT_COMMAND;
  if (configured !== DEFAULT_COMMAND) {
    return { command: configured.replace(/\$\{workspaceFolder\}/g, options.workspaceRoot), source: 'setting' };
  }
  const workspaceCommand = venvExecutable(path.join(path.resolve(options.workspaceRoot), '.venv'), 'parley', platform);
  if (options.trusted && isExecutableFile(workspaceCommand)) {
    const state = approvalState(workspaceCommand, options.approved ?? {});
    if (state === 'approved') {
      return { command: workspaceCommand, source: 'workspace' };
    }
    return { ...installedServer(options, platform), passedOver: { file: workspaceCommand, state } };
  }
  return installedServer(options, platform);
}

/** The next sources after the workspace's: the `PATH`, the extension's storage, else missing. */
function installedServer(options: LocateOptions, platform: NodeJS.Platform): ServerLocation {
  const onPath = findOnPath(DEFAULT_COMMAND, options.pathEnv ?? process.env.PATH, platform);
  if (onPath) {
    return { command: onPath, source: 'path' };
  }
  if (options.storageCommand && isExecutableFile(options.storageCommand)) {
    return { command: options.storageCommand, source: 'storage' };
  }
  return { command: DEFAULT_COMMAND, source: 'missing' };
}

const SOURCE_WORDS: Record<ServerSource, string> = {
  setting: 'the parley.serverCommand setting',
  workspace: "the workspace's own .venv, approved by you",
  path: 'the PATH',
  storage: "the extension's own install",
  missing: 'nowhere: none is installed',
};

/** Which server runs and why, for the log. */
export function locationReason(location: ServerLocation): string {
  const runs =
    location.source === 'missing' ? 'No Parley server to run' : `Running the Parley server ${location.command} from ${SOURCE_WORDS[location.source]}`;
  const passed = location.passedOver;
  if (!passed) {
    return `${runs}.`;
  }
  const why = passed.state === 'changed' ? 'has changed since you approved it' : 'is not one you approved';
  return `${runs}: the workspace's ${passed.file} ${why}, so it is not run.`;
}
