#!/bin/bash
# Builds (once) the root filesystem tar of the gpulab-test/debian-ssh image: Debian 12 minbase
# with openssh-server, root password "root", made with debootstrap from the host's Debian mirror.
# Usage: build-debian-rootfs.sh [OUT_TAR]   (default $GPULAB_TEST_CACHE/debian-ssh-rootfs.tar,
#        GPULAB_TEST_CACHE defaults to /var/cache/gpulab-test). Prints the tar path on stdout.
# A tar younger than GPULAB_TEST_ROOTFS_MAX_AGE_DAYS (default 30) is reused as is.
set -euo pipefail

cache="${GPULAB_TEST_CACHE:-/var/cache/gpulab-test}"
out="${1:-$cache/debian-ssh-rootfs.tar}"
max_age_days="${GPULAB_TEST_ROOTFS_MAX_AGE_DAYS:-30}"
suite=bookworm

log() { echo "[build-debian-rootfs] $*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap needs it)"
command -v debootstrap >/dev/null || die "debootstrap not installed (apt-get install debootstrap)"

mkdir -p "$(dirname "$out")"
# Several test binaries may ask at once: one builds, the others wait and reuse.
exec 9>"$out.lock"
flock 9

if [ -s "$out" ] && [ -n "$(find "$out" -mtime "-$max_age_days" 2>/dev/null)" ]; then
  log "reusing $out ($(date -r "$out" +%F))"
  echo "$out"
  exit 0
fi

# The first Debian mirror the host uses (deb822 .sources "URIs:" or one-line "deb URL suite").
mirror="${GPULAB_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ {print $2}' |
    grep -v -- '-security' | head -n1 || true)
fi
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' || true)
fi
mirror="${mirror:-http://deb.debian.org/debian}"

work=$(mktemp -d /tmp/gpulab-debian-rootfs.XXXXXX)
trap 'rm -rf "$work"' EXIT
root="$work/root"
log "debootstrap $suite from $mirror (takes a few minutes)"
start=$(date +%s)
debootstrap --variant=minbase --include=openssh-server "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }

# Root login with password "root", as the seed service's containers have; host keys are made
# when a container starts (the image CMD), so no two containers share them.
echo 'root:root' | chroot "$root" chpasswd
mkdir -p "$root/etc/ssh/sshd_config.d" "$root/run/sshd"
cat >"$root/etc/ssh/sshd_config.d/gpulab.conf" <<'EOF'
PermitRootLogin yes
PasswordAuthentication yes
UseDNS no
EOF
rm -f "$root"/etc/ssh/ssh_host_*
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/*.log
: >"$root/etc/hostname"

# /dev, /proc, /sys are provided by the engine: keep the folders, not their contents.
tar --numeric-owner --xattrs -C "$root" --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
  -cf "$out.partial" .
mv -f "$out.partial" "$out"
log "built $out ($(du -h "$out" | cut -f1)) in $(($(date +%s) - start)) s"
echo "$out"
