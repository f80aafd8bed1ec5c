#!/usr/bin/env bash
# Builds the candidate child image fusion-child:<package version> from Dockerfile.child.
#
# The build context is a staged directory with only Dockerfile.child and opt/fusion/: the built
# child code (dist/sandbox) and the dist/ files it imports at run time (found by following its
# relative imports), plus a package.json declaring ESM. Never the repository or node_modules.
# The image is labelled org.fusion.child-code=<digest of that code>; the daemon warns when the
# label differs from its own checkout's (docs/operations.md#child-image).
#
# Base image, first match wins (no network wait when something usable is local):
#   1. $BASE_IMAGE if set (pulled when absent);
#   2. node:<major>-bookworm-slim if present locally;
#   3. fusion-node-base:<host node version> if present (made by `make base-image`);
#   4. node:<major>-bookworm-slim pulled from a registry (bounded wait) — only with
#      FUSION_PULL_BASE=1: machines without a registry (and CI) never reach out by default;
#   5. otherwise `scripts/make-base-image.sh` builds one from the host's Node runtime.
#
# Usage: scripts/build-child-image.sh        (run `make build` first; `make image` does both)
set -euo pipefail
cd "$(dirname "$0")/.."

command -v docker >/dev/null || { echo "build-child-image: the docker CLI is missing (apt-get install docker.io)" >&2; exit 1; }
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || {
  echo "build-child-image: the Docker engine is not reachable; start dockerd (make system-deps-docker)" >&2; exit 1; }
[[ -f dist/sandbox/child-main.js ]] || { echo "build-child-image: dist/sandbox/child-main.js is missing; run make build" >&2; exit 1; }

VERSION=$(node -p "require('./package.json').version")
IMAGE=${CHILD_IMAGE:-fusion-child:${VERSION}}
NODE_MAJOR=$(node -p 'process.versions.node.split(".")[0]')
OFFICIAL=node:${NODE_MAJOR}-bookworm-slim
LOCAL_BASE=fusion-node-base:$(node -p process.versions.node)
PULL_TIMEOUT=${PULL_TIMEOUT:-60}

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

if [[ -n ${BASE_IMAGE:-} ]]; then
  have_image "$BASE_IMAGE" || docker pull "$BASE_IMAGE"
  base=$BASE_IMAGE
elif have_image "$OFFICIAL"; then
  base=$OFFICIAL
elif have_image "$LOCAL_BASE"; then
  base=$LOCAL_BASE
elif [[ ${FUSION_PULL_BASE:-0} == 1 ]] && timeout "$PULL_TIMEOUT" docker pull "$OFFICIAL" >/dev/null 2>&1; then
  base=$OFFICIAL
else
  echo "build-child-image: no base image present (pulling $OFFICIAL needs FUSION_PULL_BASE=1); making one from the host's Node runtime" >&2
  base=$(bash scripts/make-base-image.sh "$LOCAL_BASE")
fi

CTX=$(mktemp -d /tmp/fusion-child-ctx.XXXXXX)
trap 'rm -rf "$CTX"' EXIT
cp Dockerfile.child "$CTX/Dockerfile"
# The child code (the runtime import closure of dist/sandbox/child-main.js) and its digest, by the
# same module the Docker launcher uses to check an image against its checkout
# (src/launcher/child-code.ts): the digest becomes the image's org.fusion.child-code label.
CHILD_CODE=$(node --input-type=module - "$CTX/opt/fusion" <<'JS'
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
const { childCodeFiles, childCodeDigest, CHILD_PACKAGE_JSON } = await import(resolve('dist/src/launcher/child-code.js'));
const dest = process.argv[2];
const files = childCodeFiles('dist');
for (const rel of files) {
  mkdirSync(join(dest, dirname(rel)), { recursive: true });
  copyFileSync(join('dist', rel), join(dest, rel));
}
writeFileSync(join(dest, 'package.json'), CHILD_PACKAGE_JSON);
process.stderr.write(`build-child-image: ${files.length} files of child code\n`);
process.stdout.write(childCodeDigest('dist'));
JS
)
chmod -R a+rX,go-w "$CTX/opt"

# Up to date: the tag already carries this child code on this base (`make run` asks every time).
if [[ $(docker image inspect --format '{{ index .Config.Labels "org.fusion.child-code" }} {{ index .Config.Labels "org.fusion.base-image" }}' "$IMAGE" 2>/dev/null) == "$CHILD_CODE $base" ]]; then
  echo "build-child-image: $IMAGE is up to date (child code $CHILD_CODE)" >&2
  exit 0
fi

echo "build-child-image: building $IMAGE from $base" >&2
# The classic builder: it needs no buildx plugin and works with Debian's docker.io 20.10 client.
if ! out=$(DOCKER_BUILDKIT=0 docker build --quiet -f "$CTX/Dockerfile" --build-arg "BASE_IMAGE=$base" \
  --label "org.fusion.version=$VERSION" --label "org.fusion.base-image=$base" --label "org.fusion.child-code=$CHILD_CODE" \
  -t "$IMAGE" "$CTX" 2>&1); then
  echo "$out" >&2
  echo "build-child-image: docker build failed" >&2
  exit 1
fi
# The image must start node as the sandbox user with nothing of the base's environment.
docker run --rm --network none "$IMAGE" node -e 'if (process.getuid() !== 65534) process.exit(1)' \
  || { echo "build-child-image: $IMAGE does not run node as uid 65534" >&2; exit 1; }
echo "build-child-image: built $IMAGE (child code $CHILD_CODE)" >&2
