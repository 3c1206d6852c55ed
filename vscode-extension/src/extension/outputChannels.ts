/**
 * The extension's output channels, closed with the window. A window that closes (or reloads)
 * calls `deactivate` and disposes the extension's subscriptions without waiting for it, while
 * the session still closes in the server and the server stops, each saying so in the log.
 * VS Code throws "Channel has been closed" at a write to a disposed channel: an error in the
 * extension host's log. A channel made `closable` drops those late lines instead.
 */

import type * as vscode from 'vscode';

/** `channel`, whose methods do nothing once it is disposed (a late log line is dropped). */
export function closable<C extends vscode.OutputChannel>(channel: C): C {
  let open = true;
  return new Proxy(channel, {
    get(target, property) {
      if (property === 'dispose') {
        return () => {
          open = false;
          target.dispose();
        };
      }
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') {
        return value;
      }
      return (...args: unknown[]): unknown => (open ? (value as (...a: unknown[]) => unknown).apply(target, args) : undefined);
    },
  });
}
