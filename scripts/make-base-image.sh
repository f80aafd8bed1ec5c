#!/usr/bin/env bash
# Creates a minimal Node base image from the HOST's Node runtime, for machines that have no
# container registry (no `docker pull`). The root filesystem holds only:
#   - the node binary (at /usr/local/bin/node, where the official images have it) and the
#     shared libraries `ldd` lists for it;
#   - perl and sleep with their libraries: the containment probes need them (raw syscalls
#     through perl's syscall(), a fork bomb of sleeps); Debian's official node slim images carry
#     both too (perl-base and coreutils are Essential), so both bases offer the same tools;
#   - /etc/passwd and /etc/group with root and nobody/nogroup (65534), the sandbox user;
#   - empty mount points (/repo, /out, /opt/fusion, /run/fusion, /tmp, /proc, /dev, /sys).
# No shell, no package manager, no npm. It is imported with `docker import`.
#
# Usage: scripts/make-base-image.sh [TAG]     (default fusion-node-base:<host node version>)
#        NODE=/path/to/node scripts/make-base-image.sh
set -euo pipefail

NODE=${NODE:-$(command -v node)}
NODE=$(readlink -f "$NODE")
NODE_VERSION=$("$NODE" -p process.versions.node)
TAG=${1:-fusion-node-base:${NODE_VERSION}}
EXTRA_TOOLS=(perl sleep)

command -v docker >/dev/null || { echo "make-base-image: the docker CLI is missing (apt-get install docker.io)" >&2; exit 1; }
command -v ldd >/dev/null || { echo "make-base-image: ldd is missing (apt-get install libc-bin)" >&2; exit 1; }

ROOTFS=$(mktemp -d /tmp/fusion-base-rootfs.XXXXXX)
trap 'rm -rf "$ROOTFS"' EXIT
chmod 755 "$ROOTFS"

# Mirror the host's usrmerge links (/lib -> usr/lib …) so ldd's paths resolve the same way.
for name in bin sbin lib lib32 lib64 libx32; do
  if [[ -L /$name ]]; then
    target=$(readlink "/$name")
    ln -s "$target" "$ROOTFS/$name"
    [[ $target == /* ]] || mkdir -p "$ROOTFS/$target"
  fi
done
mkdir -p "$ROOTFS"/{usr/bin,usr/local/bin,usr/lib,etc,repo,out,opt/fusion,run/fusion,proc,dev,sys}
install -d -m 1777 "$ROOTFS/tmp"

# Copies one file (dereferenced) to the same path inside the root filesystem.
copy_in() {
  local src=$1 dest=${2:-$1}
  mkdir -p "$ROOTFS$(dirname "$dest")"
  cp -L --preserve=mode "$src" "$ROOTFS$dest"
}

# Copies every shared library `ldd` lists for a binary (both "x => /path" and "/path" forms).
copy_libs() {
  local bin=$1 lib
  while read -r lib; do
    [[ -n $lib && -e $lib ]] || continue
    [[ -e $ROOTFS$lib ]] || copy_in "$lib"
  done < <(ldd "$bin" | awk '/=>/ { if ($3 ~ /^\//) print $3; next } $1 ~ /^\// { print $1 }')
}

copy_in "$NODE" /usr/local/bin/node
copy_libs "$NODE"
for tool in "${EXTRA_TOOLS[@]}"; do
  path=$(command -v "$tool") || { echo "make-base-image: $tool is missing on the host" >&2; exit 1; }
  copy_in "$(readlink -f "$path")" "/usr/bin/$tool"
  copy_libs "$path"
done

cat >"$ROOTFS/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
cat >"$ROOTFS/etc/group" <<'EOF'
root:x:0:
nogroup:x:65534:
EOF
chmod 644 "$ROOTFS/etc/passwd" "$ROOTFS/etc/group"

# Sanity check before importing: the copied node runs with only the copied libraries.
if [[ $(id -u) -eq 0 ]] && command -v chroot >/dev/null; then
  env -i "$(command -v chroot)" "$ROOTFS" /usr/local/bin/node -e 'process.exit(0)' || { echo "make-base-image: node does not run inside the new root filesystem" >&2; exit 1; }
fi

tar --numeric-owner --owner=0 --group=0 -C "$ROOTFS" -c . | docker import \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
  --change 'USER 65534:65534' \
  --change 'CMD ["node"]' \
  --change "LABEL org.fusion.base=1 org.fusion.node-version=${NODE_VERSION}" \
  --message "fusion minimal node base from the host runtime ($NODE)" \
  - "$TAG" >/dev/null
echo "make-base-image: built $TAG ($(du -sh "$ROOTFS" | cut -f1) from $NODE)" >&2
echo "$TAG"
