#!/usr/bin/env bash
# Configures (once) the clang ASan+UBSan tree without libtorch and builds the given targets in
# it; shared by scripts/fuzz.sh and scripts/sanitize.sh. Exits 77 (skip) without clang.
# usage: scripts/sanitizer-tree.sh BUILD_DIR TARGET...
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$1
shift
if ! command -v clang++ >/dev/null || ! command -v clang >/dev/null; then
  echo "SKIPPED: clang is not installed (scripts/install-deps.sh installs it)"
  exit 77
fi
if [ ! -f "$BUILD/build.ninja" ]; then
  # -O1: sanitizer runs stay quick without the compile time of -O2. No -Werror: this tree only
  # looks for run-time faults (the main gcc tree and `make tidy` own the warnings).
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DGPULAB_SANITIZE=ON -DGPULAB_WITH_TRAIN=OFF -DGPULAB_WITH_BUILDER=OFF \
    -DGPULAB_WERROR=OFF -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON -DGPULAB_UNITY=OFF >/dev/null
fi
cmake --build "$BUILD" --target "$@" -j "${JOBS:-$(nproc)}"
