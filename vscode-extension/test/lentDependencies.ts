/**
 * For the tests that install the bundled wheel for real but not its dependencies (from the
 * registry they take about a minute here): a directory, for PYTHONPATH, with the project
 * virtualenv's installed packages — the wheel's dependencies — but not pip (the new
 * virtualenv's own pip installs) and not parley (the wheel's parley is the one that runs).
 */

import * as fs from 'node:fs';
import * as path from 'node:path';

import { VENV } from './harness';

const NOT_LENT = /^(pip|parley|__editable__|_distutils_hack|distutils-precedence)/;

/** Makes `dir` (symbolic links into the project's site-packages) and returns it. */
export function lendDependencies(dir: string): string {
  const lib = path.join(VENV, 'lib');
  const [pythonDir] = fs.readdirSync(lib).filter((d) => d.startsWith('python'));
  const sitePackages = path.join(lib, pythonDir, 'site-packages');
  fs.mkdirSync(dir, { recursive: true });
  for (const name of fs.readdirSync(sitePackages)) {
    if (!NOT_LENT.test(name)) {
      fs.symlinkSync(path.join(sitePackages, name), path.join(dir, name));
    }
  }
  return dir;
}

/** The PATH without any directory that has a `parley` in it (a machine with no Parley). */
export function pathWithoutParley(pathEnv = process.env.PATH ?? ''): string {
  return pathEnv
    .split(path.delimiter)
    .filter((dir) => dir && !fs.existsSync(path.join(dir, 'parley')))
    .join(path.delimiter);
}
