#!/usr/bin/env bash
# The gVisor tier (`--sandbox gvisor`): installs Debian's runsc when missing and registers it as
# the Docker runtime `runsc` in /etc/docker/daemon.json, then makes the running engine re-read
# its configuration (SIGHUP: dockerd reloads `runtimes` live, running containers are untouched).
# Idempotent: nothing is written or signalled when the runtime is already registered as wanted.
#
# Platform: ptrace works everywhere (no KVM, no new kernel features); systrap is faster where the
# kernel allows it, but Debian's runsc 20221219 predates it (`runsc --help` lists the platforms).
# Override with FUSION_RUNSC_PLATFORM=kvm|systrap|ptrace. `--network=none`: the Sentry gets no
# network stack beyond loopback (runsc refuses Docker's `none` network otherwise on this host).
# `--host-uds=open`: the child may connect to the one host socket bound into it (the broker);
# it can create none. `--oci-seccomp` makes runsc apply the container's seccomp profile inside
# the sandbox, so the one policy holds on this tier too.
set -euo pipefail

CONFIG=${FUSION_DOCKER_CONFIG:-/etc/docker/daemon.json}
PLATFORM=${FUSION_RUNSC_PLATFORM:-ptrace}

if [[ $(id -u) -ne 0 ]]; then
  if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; then exit 0; fi
  echo "setup: the gVisor runtime (runsc) is not registered with Docker; as root: make system-deps" >&2
  [[ "${CI:-}" != true ]] || exit 1
  exit 0
fi

if ! command -v runsc >/dev/null 2>&1; then
  echo "setup: installing runsc (gVisor)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq runsc >/dev/null
fi
RUNSC=$(command -v runsc)

mkdir -p "$(dirname "$CONFIG")"
# Merge, never overwrite: other keys of an existing daemon.json stay as they are.
changed=$(node - "$CONFIG" "$RUNSC" "$PLATFORM" <<'JS'
const fs = require('node:fs');
const [file, path, platform] = process.argv.slice(2);
let config = {};
try { config = JSON.parse(fs.readFileSync(file, 'utf8')); } catch (err) { if (err.code !== 'ENOENT') throw err; }
const want = { path, runtimeArgs: [`--platform=${platform}`, '--network=none', '--host-uds=open', '--oci-seccomp'] };
config.runtimes ??= {};
if (JSON.stringify(config.runtimes.runsc) === JSON.stringify(want)) { console.log('no'); process.exit(0); }
config.runtimes.runsc = want;
fs.writeFileSync(`${file}.tmp`, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o644 });
fs.renameSync(`${file}.tmp`, file);
console.log('yes');
JS
)

registered() { docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; }
if [[ $changed == no ]] && registered; then exit 0; fi
if pid=$(pidof dockerd 2>/dev/null); then
  echo "setup: asking dockerd to reload $CONFIG (runtime runsc, --platform=$PLATFORM)" >&2
  kill -HUP $pid
  for _ in $(seq 1 40); do registered && exit 0; sleep 0.25; done
  echo "setup: dockerd did not register the runsc runtime; see its log" >&2
  exit 1
fi
# No engine running yet: system-deps-docker starts it with this configuration.
exit 0
