#!/usr/bin/env bash
# `make gpu-bundle`: what a GPU host without a package registry needs to build and check gpulab
# (make gpu-check), made here on Debian: the header-only packages (nlohmann-json, CLI11, spdlog,
# fmt) unpacked with dpkg -x into .deps/ (git-ignored; carry it to the host beside the tree), and
# out/gpulab-gpu-bundle.tar.gz with the source (git's files, as they are in the working tree) and
# .deps/ in one file to copy. Prints the bundle's size (goal: under 20 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEPS=$ROOT/.deps
PKGS=(nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev)
if [ ! -f "$DEPS/usr/include/nlohmann/json.hpp" ] || [ ! -f "$DEPS/usr/include/CLI/CLI.hpp" ] ||
   [ ! -f "$DEPS/usr/include/spdlog/spdlog.h" ] || [ ! -f "$DEPS/usr/include/fmt/format.h" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && apt-get download "${PKGS[@]}" >/dev/null) ||
    { echo "error: apt-get download ${PKGS[*]} failed" >&2
      echo "hint: run this on a Debian machine that reaches its package mirror" >&2; exit 3; }
  mkdir -p "$DEPS"
  for d in "$work"/*.deb; do dpkg -x "$d" "$DEPS"; done
  rm -rf "$DEPS/usr/share/doc" "$DEPS/usr/share/lintian"
fi
echo "header-only packages in .deps: $(du -sh "$DEPS" | cut -f1) ($(ls "$DEPS/usr/include" | tr '\n' ' '))"
mkdir -p out
bundle=out/gpulab-gpu-bundle.tar.gz
# The screenshots of docs/ are left out: a GPU host builds and measures, it reads no web page.
{ git ls-files --cached --others --exclude-standard | grep -v '^docs/dashboard/.*\.png$' |
    while read -r f; do [ -f "$f" ] && echo "$f"; done
  find .deps -type f; } |
  tar -czf "$bundle" --transform 's,^,gpulab/,' -T -
size=$(stat -c %s "$bundle")
echo "bundle: $bundle, $((size / 1024)) KiB"
echo "on the GPU host: tar xf gpulab-gpu-bundle.tar.gz && cd gpulab && make gpu-check"
[ "$size" -lt $((20 * 1024 * 1024)) ] || { echo "error: the bundle is over 20 MB" >&2; exit 1; }
