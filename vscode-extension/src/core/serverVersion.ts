/**
 * One version across the server and its clients (README.md, "Releasing"): after
 * `initialize` the client compares the server's `agentInfo.version` with its own and, when they
 * differ, says so once per server version it meets, naming both and what to do.
 */

import type { InitializeResult } from '../client/protocol';

/** The name a Parley server gives in `agentInfo`. */
export const PARLEY_AGENT_NAME = 'parley';

/**
 * The server's version when it is a Parley server whose version differs from `own`; undefined
 * when they agree, or when there is nothing to compare (no version: another ACP agent).
 */
export function differentServerVersion(init: Pick<InitializeResult, 'agentInfo'> | undefined, own: string | undefined): string | undefined {
  const info: unknown = init?.agentInfo;
  if (typeof info !== 'object' || info === null || !own) {
    return undefined;
  }
  const { name, version } = info as { name?: unknown; version?: unknown };
  if (name !== PARLEY_AGENT_NAME || typeof version !== 'string' || !version.trim()) {
    return undefined;
  }
  return version.trim() === own.trim() ? undefined : version.trim();
}

/**
 * What the extension says when the versions differ. `managed`: the server is the one the
 * extension installed into its own storage (its button installs the one it brings).
 */
export function versionMismatchText(server: string, own: string, managed: boolean): string {
  const what = managed
    ? "install the server this extension brings (Install Parley's server)"
    : 'update the server (uv tool upgrade parley-code, or pipx upgrade parley-code) or this extension';
  return `Parley server ${server} differs from this extension's ${own}: ${what}.`;
}
