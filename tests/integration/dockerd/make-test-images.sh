#!/bin/bash
# Builds the local test images on an engine with the docker CLI (for shell tests; C++ tests use
# support/docker_fixture.h, which makes the same images through gpulab's own client).
# Usage: make-test-images.sh DOCKER_HOST [busybox|debian-ssh|all]     (default: busybox)
set -euo pipefail
export DOCKER_HOST="${1:?usage: make-test-images.sh DOCKER_HOST [busybox|debian-ssh|all]}"
what="${2:-busybox}"
here="$(cd "$(dirname "$0")" && pwd)"
log() { echo "[make-test-images] $*" >&2; }
command -v docker >/dev/null || { log "no docker CLI"; exit 77; }

busybox_image() {
  local image=gpulab-test/busybox:latest
  docker image inspect "$image" >/dev/null 2>&1 && return 0
  local bb
  bb=$(command -v busybox) || { log "no busybox (apt-get install busybox-static)"; exit 77; }
  local root
  root=$(mktemp -d /tmp/gpulab-busybox-root.XXXXXX)
  mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,root,proc,sys,dev,var/www,run,tmp}
  chmod 1777 "$root/tmp"
  cp "$bb" "$root/bin/busybox"
  # One symlink per applet, where busybox says it lives (relative, so it works inside).
  "$bb" --list-full | while read -r applet; do
    [ "$applet" = bin/busybox ] && continue
    local up
    up=$(sed 's|[^/]*/|../|g; s|[^/]*$||' <<<"$applet")
    ln -sf "${up}bin/busybox" "$root/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  echo "gpulab busybox test image" >"$root/var/www/index.html"
  tar --numeric-owner -C "$root" -cf - . |
    docker import -c 'CMD ["/bin/sh"]' -c 'ENV PATH=/bin:/sbin:/usr/bin:/usr/sbin' \
      -m "gpulab test image: static busybox" - "$image" >/dev/null
  rm -rf "$root"
  log "imported $image"
}

debian_ssh_image() {
  local image=gpulab-test/debian-ssh:latest
  docker image inspect "$image" >/dev/null 2>&1 && return 0
  local tar
  tar=$("$here/build-debian-rootfs.sh")
  docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' -c 'ENV LANG=C.UTF-8' \
    -c 'EXPOSE 22' \
    -c 'CMD ["/bin/sh", "-c", "ssh-keygen -A >/dev/null && mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e"]' \
    -m "gpulab test image: Debian 12 minbase + openssh-server (root password root)" \
    "$tar" "$image" >/dev/null
  log "imported $image"
}

case "$what" in
  busybox) busybox_image ;;
  debian-ssh) debian_ssh_image ;;
  all) busybox_image; debian_ssh_image ;;
  *) log "unknown image set '$what'"; exit 2 ;;
esac
