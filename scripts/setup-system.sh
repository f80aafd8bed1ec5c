#!/usr/bin/env bash
# Installs and starts what the sandboxes and tests need, when missing: bubblewrap (candidate
# sandboxes), iproute2, util-linux (prlimit, setpriv). Runs apt only as root and only for what is
# absent, so it is fast and harmless on a machine that already has everything.
set -euo pipefail

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v prlimit >/dev/null 2>&1 || need+=(util-linux)

if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing ${need[*]}; install them as root: apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
