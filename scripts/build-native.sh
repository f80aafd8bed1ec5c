#!/usr/bin/env bash
# Builds the daemon's native addon (native/peercred: SO_PEERCRED for socket callers, see
# docs/security.md#socket-callers) with the node-gyp bundled in npm, offline: the Node headers
# come from npm's `nodedir` (Debian's nodejs installs them under /usr/include/node) or
# node-gyp's cache. No npm package is added for it.
set -euo pipefail
cd "$(dirname "$0")/../native/peercred"

npm_dir=$(dirname "$(readlink -f "$(command -v npm)")")/..
gyp="$npm_dir/node_modules/node-gyp/bin/node-gyp.js"
if [[ ! -f $gyp ]]; then
  echo "build-native: npm's bundled node-gyp not found at $gyp" >&2
  exit 1
fi

args=(rebuild --loglevel=warn)
nodedir=$(npm config get nodedir 2>/dev/null || true)
if [[ -n $nodedir && $nodedir != undefined && -f $nodedir/include/node/node_api.h ]]; then
  args+=("--nodedir=$nodedir")
fi
node "$gyp" "${args[@]}"
test -f build/Release/peercred.node
