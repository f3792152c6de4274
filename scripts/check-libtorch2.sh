#!/usr/bin/env bash
# Checks that src/train (DDP first) compiles against a libtorch 2.x: downloads Debian sid's
# libtorch-dev and libgloo-dev .deb files with apt-get under a private configuration (the
# system's apt sources are not touched), unpacks them with dpkg -x into .deps-torch2/, and runs
# the compiler with -fsyntax-only on each source file. Needs the network: not part of `make test`.
# usage: scripts/check-libtorch2.sh [FILE.cpp ...]   (default: src/train/dist/*.cpp, then src/train)
# Exit 0 when every file compiles, 1 otherwise.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEPS=$ROOT/.deps-torch2
APT=$DEPS/apt
SUITE=${SUITE:-sid}
mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$DEPS/root"
echo "deb [trusted=yes] http://deb.debian.org/debian $SUITE main" >"$APT/sources.list"
APTO=(-o Dir::Etc::sourcelist="$APT/sources.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$APT/lists"
      -o Dir::Cache="$APT/cache" -o Dir::State::status=/dev/null -o APT::Architectures::=amd64
      -o Acquire::Languages=none -o APT::Sandbox::User=root)

if ! ls "$APT"/libtorch-dev_*.deb >/dev/null 2>&1; then
  apt-get "${APTO[@]}" update >/dev/null || { echo "cannot reach deb.debian.org ($SUITE)"; exit 1; }
  apt-cache "${APTO[@]}" show libtorch-dev | grep -m1 '^Version' || { echo "no libtorch-dev in $SUITE"; exit 1; }
  (cd "$APT" && apt-get "${APTO[@]}" download libtorch-dev libgloo-dev >/dev/null) || exit 1
  for d in "$APT"/*.deb; do dpkg -x "$d" "$DEPS/root"; done
fi
INC=$DEPS/root/usr/include
VH=$INC/torch/headeronly/version.h; [ -f "$VH" ] || VH=$INC/torch/csrc/api/include/torch/version.h
VERSION=$(for k in MAJOR MINOR PATCH; do sed -n "s/^#define TORCH_VERSION_$k \([0-9]*\).*/\1/p" "$VH"; done | paste -sd.)
echo "libtorch headers: $VERSION ($(ls "$APT"/libtorch-dev_*.deb | xargs -n1 basename))"

# The project's flags minus its own torch include; the 2.x headers come first, so they win over
# Debian 12's 1.13 ones in /usr/include (torch/, ATen/, c10/ exist in both).
FLAGS=(-fsyntax-only -std=c++20 -Wall -Wextra -Wpedantic -Wno-unused-parameter -Werror
       -D_GLIBCXX_USE_CXX11_ABI=1 -DFMT_HEADER_ONLY -DSPDLOG_FMT_EXTERNAL -DSPDLOG_HEADER_ONLY
       -DGPULAB_HAVE_GLOO=1 -DUSE_C10D_GLOO -DUSE_DISTRIBUTED
       -I"$ROOT/src" -isystem "$INC" -isystem "$INC/torch/csrc/api/include")

# First prove the 2.x headers are the ones found.
printf '#include <torch/version.h>\nstatic_assert(TORCH_VERSION_MAJOR >= 2, "1.x headers found");\n' |
  c++ "${FLAGS[@]}" -x c++ - || { echo "the libtorch 2.x headers are not the ones found"; exit 1; }

# Default: the DDP layer and the trainer around it (each file takes a minute or two: libtorch's
# headers are large). Pass other files (src/train/models/*.cpp, ...) to check them too.
if [ $# -gt 0 ]; then FILES=("$@"); else
  FILES=("$ROOT"/src/train/dist/*.cpp "$ROOT"/src/train/trainer.cpp "$ROOT"/src/train/precision.cpp
         "$ROOT"/src/train/checkpoint.cpp "$ROOT"/src/train/optim/*.cpp); fi
fails=0
for f in "${FILES[@]}"; do
  if out=$(c++ "${FLAGS[@]}" "$f" 2>&1); then echo "ok    ${f#$ROOT/}"
  else echo "FAIL  ${f#$ROOT/}"; echo "$out" | grep -E "error" | head -5; fails=$((fails + 1)); fi
done
echo "$((${#FILES[@]} - fails)) of ${#FILES[@]} files compile against libtorch $VERSION"
[ $fails = 0 ]
