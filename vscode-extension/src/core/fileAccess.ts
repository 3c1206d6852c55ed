/**
 * The client's file methods (`fs/read_text_file`, `fs/write_text_file`): the server reads and
 * writes workspace files through the editor, so the model sees unsaved buffers and its edits
 * land in them (and the editor's undo works). This module checks what the server asks —
 * confined to the workspace folder, symlinks resolved — and slices the lines asked for; the
 * editor itself is behind a port (`EditorFiles`), which the VS Code layer implements.
 *
 * Does not import `vscode`: tested in plain Node.
 */

import * as fs from 'node:fs/promises';
import * as path from 'node:path';

import {
  type EmptyResult,
  INVALID_PARAMS,
  RESOURCE_NOT_FOUND,
  type ReadTextFileParams,
  type ReadTextFileResult,
  type WriteTextFileParams,
} from '../client/protocol';

/** The editor's side of the workspace files. Paths are absolute and inside the workspace. */
export interface EditorFiles {
  /**
   * The text of `file`: an open document's (saved or not), else the file's on disk. Rejects
   * with a `FileAccessError` of code `RESOURCE_NOT_FOUND` when there is neither.
   */
  read(file: string): Promise<string>;
  /** Replace the whole text of `file` (creating it, and its folders, when missing) as one edit the editor can undo, then save it. */
  write(file: string, content: string): Promise<void>;
}

/** A refusal the client answers with a JSON-RPC error of this code. */
export class FileAccessError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
    this.name = 'FileAccessError';
  }
}

export class WorkspaceFileAccess {
  constructor(
    /** The workspace folder (absolute): the files the server may reach are inside it. */
    private readonly workspaceRoot: () => string,
    private readonly files: EditorFiles,
  ) {}

  async readTextFile(params: ReadTextFileParams): Promise<ReadTextFileResult> {
    const file = await confine(this.workspaceRoot(), params.path);
    const text = await this.files.read(file);
    return { content: sliceLines(text, params.line ?? undefined, params.limit ?? undefined) };
  }

  async writeTextFile(params: WriteTextFileParams): Promise<EmptyResult> {
    if (typeof params.content !== 'string') {
      throw new FileAccessError(INVALID_PARAMS, 'fs/write_text_file needs the content as a string.');
    }
    const file = await confine(this.workspaceRoot(), params.path);
    // The server sends the place it resolved: a symbolic link on the way now (one a process
    // swapped in since, `conf -> .git`) would lead the write elsewhere. Refused, nothing written.
    const real = await realPathOfExisting(file);
    if (real !== file) {
      throw new FileAccessError(INVALID_PARAMS, `${params.path} now leads to ${real} through a symbolic link: not written.`);
    }
    await this.files.write(file, params.content);
    return {};
  }
}

/**
 * `requested` as an absolute path inside `root`, or a `FileAccessError`: a relative path is
 * taken from the root; `..`, another absolute path, or a symlink (in any of its folders)
 * that leads out of the root is refused. A file that does not exist yet is fine (a write
 * creates it) as long as its existing folders are inside.
 */
export async function confine(root: string, requested: unknown): Promise<string> {
  if (typeof requested !== 'string' || requested === '' || requested.includes('\0')) {
    throw new FileAccessError(INVALID_PARAMS, 'A file path is needed.');
  }
  const base = path.resolve(root);
  const file = path.resolve(base, requested);
  if (!isInside(base, file)) {
    throw new FileAccessError(INVALID_PARAMS, `${requested} is outside the workspace folder (${base}); Parley reaches only files inside it.`);
  }
  const realBase = await fs.realpath(base).catch(() => base);
  const realFile = await realPathOfExisting(file);
  if (!isInside(realBase, realFile)) {
    throw new FileAccessError(INVALID_PARAMS, `${requested} leads outside the workspace folder (through a symbolic link); Parley reaches only files inside it.`);
  }
  return file;
}

/** Whether `file` is strictly inside `dir` (both absolute and normalized). */
function isInside(dir: string, file: string): boolean {
  const relative = path.relative(dir, file);
  return relative !== '' && !relative.startsWith(`..${path.sep}`) && relative !== '..' && !path.isAbsolute(relative);
}

/** The real path of `file`'s deepest existing ancestor (or itself), with the rest of the path after it. */
async function realPathOfExisting(file: string): Promise<string> {
  const rest: string[] = [];
  let current = file;
  for (;;) {
    try {
      return path.join(await fs.realpath(current), ...rest);
    } catch {
      const parent = path.dirname(current);
      if (parent === current) {
        return file;
      }
      rest.unshift(path.basename(current));
      current = parent;
    }
  }
}

/**
 * The lines `line` (1-based) to `line + limit - 1` of `text`, each with its line ending; all
 * of it when neither is given. A line past the end gives an empty text.
 */
export function sliceLines(text: string, line?: number, limit?: number): string {
  if (line === undefined && limit === undefined) {
    return text;
  }
  if (line !== undefined && !(Number.isInteger(line) && line >= 1)) {
    throw new FileAccessError(INVALID_PARAMS, `line must be a whole number from 1 (got ${String(line)}).`);
  }
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= 0)) {
    throw new FileAccessError(INVALID_PARAMS, `limit must be a whole number from 0 (got ${String(limit)}).`);
  }
  const lines = text.split(/(?<=\n)/);
  const start = (line ?? 1) - 1;
  return lines.slice(start, limit === undefined ? undefined : start + limit).join('');
}

/** The error a missing file is answered with. */
export function fileNotFound(file: string): FileAccessError {
  return new FileAccessError(RESOURCE_NOT_FOUND, `No such file: ${file}`);
}
