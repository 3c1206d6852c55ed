#!/usr/bin/env node
// Puts the server in the extension: builds the repository's wheel (`python -m build --wheel`,
// the `parley-code` distribution) and copies it into bundled/, which goes into the .vsix; the
// "Install Parley's server" button pip-installs it into the extension's storage.
//
//   PARLEY_WHEEL=<file.whl>  bundle this wheel instead of building one
//   PARLEY_VENV=<venv>       the Python that runs `build` (default: <repo>/.venv)
'use strict';

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ext = path.resolve(__dirname, '..');
const repo = path.resolve(ext, '..');
const bundled = path.join(ext, 'bundled');
const WHEEL = /^parley_code-[^-]+-py3-none-any\.whl$/;

function buildWheel() {
  const venv = process.env.PARLEY_VENV || path.join(repo, '.venv');
  const python = path.join(venv, process.platform === 'win32' ? 'Scripts' : 'bin', process.platform === 'win32' ? 'python.exe' : 'python');
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'parley-wheel-'));
  // Quiet unless it fails (the error carries its output).
  execFileSync(python, ['-m', 'build', '--wheel', '--outdir', out, repo], { stdio: ['ignore', 'pipe', 'pipe'] });
  const wheels = fs.readdirSync(out).filter((f) => WHEEL.test(f));
  if (wheels.length !== 1) {
    throw new Error(`python -m build made ${wheels.join(', ') || 'no wheel'} in ${out}`);
  }
  return path.join(out, wheels[0]);
}

const wheel = process.env.PARLEY_WHEEL || buildWheel();
if (!WHEEL.test(path.basename(wheel))) {
  throw new Error(`Not a parley-code wheel: ${wheel}`);
}
fs.rmSync(bundled, { recursive: true, force: true });
fs.mkdirSync(bundled);
fs.copyFileSync(wheel, path.join(bundled, path.basename(wheel)));
console.log(`bundled/${path.basename(wheel)}`);
