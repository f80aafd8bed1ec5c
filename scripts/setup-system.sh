#!/usr/bin/env bash
# Installs and starts what the sandboxes and tests need, when missing: bubblewrap (candidate
# sandboxes), iproute2, util-linux (prlimit, setpriv), chromium (the dashboard's browser test), redis-server (the research-queue tests
# start their own redis-server processes on random loopback ports; no system service is used),
# postgresql (likewise: the PostgreSQL store tests start their own servers). Runs apt only as root and only for what is
# absent, so it is fast and harmless on a machine that already has everything.
set -euo pipefail

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v prlimit >/dev/null 2>&1 || need+=(util-linux)
[[ -x /usr/bin/redis-server ]] || need+=(redis-server)
# PostgreSQL server binaries: the store conformance suite and the cluster tests start their own
# throwaway servers (initdb into a temp dir, random loopback port); the system service is unused.
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
# systemd-analyze: the docs test verifies the shipped unit (examples/systemd/fusion.service).
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
# Headless Chromium: the dashboard's browser test (test/e2e/dashboard) drives /usr/bin/chromium
# through playwright-core (no browser download: Debian's package is the browser).
[[ -x /usr/bin/chromium ]] || need+=(chromium)

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

# The sandbox uid range (docs/operations.md#sandbox-uids): registered as root's subordinate ids
# so tools that hand out subordinate ranges (useradd, podman) never give it to someone else.
# Only when no line names an id of it yet; FUSION_SANDBOX_UIDS=START-END overrides the default.
range=${FUSION_SANDBOX_UIDS:-2100000000-2100065535}
start=${range%-*}
count=$(( ${range#*-} - start + 1 ))
if [[ $(id -u) -eq 0 ]]; then
  for file in /etc/subuid /etc/subgid; do
    touch "$file"
    if ! awk -F: -v s="$start" -v c="$count" '$2 <= s + c - 1 && $2 + $3 - 1 >= s { found = 1 } END { exit !found }' "$file"; then
      echo "root:$start:$count" >>"$file"
      echo "setup: registered sandbox ids $start-$((start + count - 1)) in $file" >&2
    fi
  done
fi
