/**
 * Whether the workspace's own `.venv/bin/parley` is one the user approved. That file runs
 * outside Parley's sandbox with the provider's API keys, and a command run in the workspace
 * (or a model's) can write it (docs/security.md, "The server the editor starts"): so the
 * extension runs it only once the user said yes to that very file. A file is known by its
 * sha256, size, inode and modification time: one made or replaced since the approval — even
 * with the same bytes — is another file, and is asked about again.
 */

import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pipeline } from 'node:stream/promises';

/** What identifies a file now (inode and mtime as decimal strings: exact beyond 2^53). */
export interface FileIdentity {
  sha256: string;
  size: number;
  ino: string;
  mtimeNs: string;
}

/** The approved workspace servers, by absolute path (kept in the extension's globalState). */
export type ApprovedServers = Readonly<Record<string, FileIdentity>>;

/**
 * `approved`: the file is the one approved; `unapproved`: no approval for this path;
 * `changed`: the path was approved, but the file there is not the one approved.
 */
export type ApprovalState = 'approved' | 'unapproved' | 'changed';

type StatIdentity = Omit<FileIdentity, 'sha256'>;

function statIdentity(file: string): StatIdentity | undefined {
  try {
    const s = fs.statSync(file, { bigint: true });
    return { size: Number(s.size), ino: s.ino.toString(), mtimeNs: s.mtimeNs.toString() };
  } catch {
    return undefined;
  }
}

function sameStat(a: StatIdentity, b: StatIdentity): boolean {
  return a.size === b.size && a.ino === b.ino && a.mtimeNs === b.mtimeNs;
}

/**
 * The identity of `file` as it is now, read off the event loop (the file may be large), or
 * undefined when it cannot be read or changed while it was read.
 */
export async function fileIdentity(file: string): Promise<FileIdentity | undefined> {
  const before = statIdentity(file);
  if (!before) {
    return undefined;
  }
  const hash = createHash('sha256');
  try {
    await pipeline(fs.createReadStream(file), hash);
  } catch {
    return undefined;
  }
  const after = statIdentity(file);
  return after && sameStat(before, after) ? { ...before, sha256: hash.digest('hex') } : undefined;
}

/**
 * Whether `file` is the file approved at its path. The stat is compared first; the bytes are
 * hashed only when it matches, so what is hashed here is as large as the file the user approved.
 */
export function approvalState(file: string, approved: ApprovedServers): ApprovalState {
  const approval = Object.hasOwn(approved, file) ? approved[file] : undefined;
  if (!approval) {
    return 'unapproved';
  }
  const now = statIdentity(file);
  if (!now || !sameStat(now, approval)) {
    return 'changed';
  }
  try {
    return createHash('sha256').update(fs.readFileSync(file)).digest('hex') === approval.sha256 ? 'approved' : 'changed';
  } catch {
    return 'changed';
  }
}

/** `approved` with `file` approved as `identity` (a new record: the stored one is not changed). */
export function withApproval(approved: ApprovedServers, file: string, identity: FileIdentity): ApprovedServers {
  return { ...approved, [file]: identity };
}

/**
 * What is stored, read back: only well-formed records under absolute paths (globalState is a
 * file another version of the extension may have written).
 */
export function readApprovals(stored: unknown): ApprovedServers {
  if (!stored || typeof stored !== 'object' || Array.isArray(stored)) {
    return {};
  }
  return Object.fromEntries(
    Object.entries(stored as Record<string, unknown>).flatMap(([file, v]) => {
      const r = v as Partial<FileIdentity> | null;
      const valid =
        path.isAbsolute(file) &&
        r !== null &&
        typeof r === 'object' &&
        typeof r.sha256 === 'string' &&
        typeof r.size === 'number' &&
        typeof r.ino === 'string' &&
        typeof r.mtimeNs === 'string';
      return valid ? [[file, { sha256: r.sha256!, size: r.size!, ino: r.ino!, mtimeNs: r.mtimeNs! }]] : [];
    }),
  );
}
