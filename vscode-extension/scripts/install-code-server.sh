#!/usr/bin/env bash
# Installs code-server (VS Code in a browser) for the real-workbench test, outside the
# repository, in a cache keyed by version, and prints the path of its entry point.
#
#   vscode-extension/scripts/install-code-server.sh    # -> .../code-server/out/node/entry.js
#
# code-server's npm postinstall downloads ripgrep from GitHub and needs the network for
# node-gyp headers, so it is installed with --ignore-scripts and finished by hand:
#   - VS Code's own dependencies (lib/vscode) are installed, also with --ignore-scripts;
#   - the native modules the workbench needs to start are built with node-gyp against the
#     local Node headers (argon2 for code-server's CLI; spdlog, native-watchdog and node-pty
#     for VS Code's server and extension host; @parcel/watcher ships a prebuilt binary);
#   - Debian's ripgrep (/usr/bin/rg, apt-get install ripgrep) stands in for @vscode/ripgrep.
# A marker file is written only after everything built, so an interrupted install is redone,
# and a finished one is reused (a fresh clone on the same machine builds nothing).
#
# Environment:
#   PARLEY_CODE_SERVER_VERSION  default 4.100.3 (the newest that accepts Node 20)
#   PARLEY_CODE_SERVER_CACHE    default ${XDG_CACHE_HOME:-$HOME/.cache}/parley
# Needs: node 20 with its headers (include/node/node.h next to the node binary), make, g++,
# python3; ripgrep is installed from Debian with apt-get when missing.
set -euo pipefail

version="${PARLEY_CODE_SERVER_VERSION:-4.100.3}"
cache="${PARLEY_CODE_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/parley}"
prefix="$cache/code-server-$version"
marker="$prefix/.parley-installed"
entry="$prefix/node_modules/code-server/out/node/entry.js"

if [ -f "$marker" ] && [ -f "$entry" ]; then
  echo "$entry"
  exit 0
fi

log() { printf '  install-code-server: %s\n' "$*" >&2; }
started=$(date +%s)

if ! command -v rg >/dev/null 2>&1; then
  log "installing ripgrep from Debian"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends ripgrep >&2
fi
rg_path="$(command -v rg)"

# node-gyp would download the headers; use the ones installed with Node instead.
node_prefix="$(node -p 'require("path").resolve(process.execPath, "../..")')"
if [ ! -f "$node_prefix/include/node/node.h" ]; then
  log "no Node headers at $node_prefix/include/node (install nodejs' headers, e.g. libnode-dev)"
  exit 1
fi
npm_root="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")"
node_gyp="$npm_root/node_modules/node-gyp/bin/node-gyp.js"
[ -f "$node_gyp" ] || node_gyp="$(command -v node-gyp)"

rm -rf "$prefix"
mkdir -p "$prefix"
npm_quiet=(--ignore-scripts --no-audit --no-fund --loglevel=error)

log "npm install code-server@$version (--ignore-scripts)"
npm install --prefix "$prefix" "${npm_quiet[@]}" "code-server@$version" >&2
cs="$prefix/node_modules/code-server"

log "npm install lib/vscode dependencies (--omit=dev --ignore-scripts)"
(cd "$cs/lib/vscode" && npm install --omit=dev "${npm_quiet[@]}" >&2)

gyp() {  # gyp DIR [ARGS...]: build one native module in place
  local dir="$1"
  shift
  log "node-gyp rebuild ${dir#"$prefix/node_modules/"}"
  (cd "$dir" && node "$node_gyp" rebuild -j "$(nproc 2>/dev/null || echo 2)" --nodedir="$node_prefix" "$@" >"$dir/.gyp.log" 2>&1) || {
    tail -n 30 "$dir/.gyp.log" >&2
    exit 1
  }
}

# argon2 is loaded by code-server's CLI even with --auth none; node-pre-gyp normally names
# the output directory.
argon2="$prefix/node_modules/argon2"
gyp "$argon2" --module_name=argon2 --module_path=lib/binding/napi-v3 --napi_build_version=3
mkdir -p "$argon2/lib/binding/napi-v3"
cp "$argon2/build/Release/argon2.node" "$argon2/lib/binding/napi-v3/"

vsmods="$cs/lib/vscode/node_modules"
for module in @vscode/spdlog native-watchdog node-pty; do
  gyp "$vsmods/$module"
done

# What code-server's postinstall does besides npm install.
mkdir -p "$vsmods/@vscode/ripgrep/bin"
ln -sfn "$rg_path" "$vsmods/@vscode/ripgrep/bin/rg"
ln -sfn node_modules "$cs/lib/vscode/node_modules.asar"
(cd "$cs/lib/vscode/bin/remote-cli" && ln -sfn code-linux.sh code-server)
(cd "$cs/lib/vscode/bin/helpers" && ln -sfn browser-linux.sh browser.sh)

node "$entry" --config "$prefix/config.yaml" --version >/dev/null 2>&1 || {
  log "code-server does not start:"
  node "$entry" --config "$prefix/config.yaml" --version >&2 || true
  exit 1
}
date -u +%FT%TZ >"$marker"
log "installed in $(($(date +%s) - started)) s at $prefix"
echo "$entry"
