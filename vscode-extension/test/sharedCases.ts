/**
 * The case files every client checks (pytest, ERT and these tests), in the repository's
 * `tests/` folder, found from this file's place (`out/test/` when built, or `test/`).
 */

import * as fs from 'node:fs';
import * as path from 'node:path';

import type { RestoreResult } from '../src/client/protocol';

/** The parsed JSON of `tests/<name>`. */
export function repositoryCases<T>(name: string): T {
  for (const up of ['..', '../..', '../../..']) {
    const file = path.resolve(__dirname, up, 'tests', name);
    if (fs.existsSync(file)) {
      return JSON.parse(fs.readFileSync(file, 'utf8')) as T;
    }
  }
  throw new Error(`tests/${name} not found above ${__dirname}`);
}

/** A restore's answer (paths relative to the workspace), the level its words show at, and whether the turn is then undone. */
export interface RestoreCase {
  name: string;
  turn: number;
  result: RestoreResult;
  level: 'info' | 'warning' | 'error';
  undone: boolean;
}

/** tests/server-words-cases.json: words the server writes, which the client shows as they come. */
export function serverWordsCases(): { restore: RestoreCase[] } {
  return repositoryCases('server-words-cases.json');
}
