#!/usr/bin/env bash
# Checks that every translation unit that includes libtorch compiles against a libtorch 2.x:
# downloads Debian sid's libtorch-dev and libgloo-dev .deb files with apt-get under a private
# configuration (the system's apt sources are not touched), unpacks them with dpkg -x into
# .deps-torch2/, and runs the compiler with -fsyntax-only -Werror on each source file. Needs the
# network once: not part of `make test`.
# usage: scripts/check-libtorch2.sh [FILE.cpp ...]
#   default: every .cpp under src/train, src/bench, apps/gpulab/train, tests/train, tests/bench,
#   plus any other .cpp of src/, apps/, tests/ that includes <torch/...>, <ATen/...> or <c10/...>.
#   LIST=1 prints the default set and exits. UNITY=N files per compiler run (default 10; 1: one by one).
# Then the CUDA-only paths (NCCL process group, CUDA device queries, CUDA allocator statistics),
# which the CPU build never compiles, are checked with USE_C10D_NCCL/GPULAB_WITH_CUDA defined
# when the CUDA toolkit's and NCCL's headers can be found; otherwise they are reported skipped.
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

# The project's flags and definitions (those of the train, bench, CLI and test targets) minus its
# own torch include; the 2.x headers come first, so they win over Debian 12's 1.13 ones in
# /usr/include (torch/, ATen/, c10/ exist in both).
FLAGS=(-fsyntax-only -std=c++20 -Wall -Wextra -Wpedantic -Wno-unused-parameter -Werror
       -D_GLIBCXX_USE_CXX11_ABI=1 -DFMT_HEADER_ONLY -DSPDLOG_FMT_EXTERNAL -DSPDLOG_HEADER_ONLY
       -DGPULAB_HAVE_GLOO=1 -DUSE_C10D_GLOO -DUSE_DISTRIBUTED -DGTEST_HAS_PTHREAD=1
       -DGPULAB_HAVE_CURL=1 -DGPULAB_HAVE_PNG=1 -DGPULAB_HAVE_TURBOJPEG=1 -DGPULAB_HAVE_ZLIB=1
       -DGPULAB_WITH_TRAIN=1 -DGPULAB_WITH_SERVICE=1 -DGPULAB_WITH_BUILDER=1
       '-DGPULAB_VERSION="check"' "-DGPULAB_SOURCE_DIR=\"$ROOT\"" "-DGPULAB_BINARY=\"$ROOT/gpulab\""
       "-DGPULAB_HOOKS_BINARY=\"$ROOT/gpulab-hooks\""
       -I"$ROOT/src" -I"$ROOT/apps/gpulab" -I"$ROOT/tests"
       -isystem "$INC" -isystem "$INC/torch/csrc/api/include")

# First prove the 2.x headers are the ones found.
printf '#include <torch/version.h>\nstatic_assert(TORCH_VERSION_MAJOR >= 2, "1.x headers found");\n' |
  c++ "${FLAGS[@]}" -x c++ - || { echo "the libtorch 2.x headers are not the ones found"; exit 1; }

# Default: every translation unit that includes libtorch (directly or through our headers).
default_files() {
  {
    find "$ROOT/src/train" "$ROOT/src/bench" "$ROOT/apps/gpulab/train" "$ROOT/tests/train" \
      "$ROOT/tests/bench" -name '*.cpp' 2>/dev/null
    grep -rlE --include='*.cpp' '#[[:space:]]*include[[:space:]]*<(torch|ATen|c10)/' \
      "$ROOT/src" "$ROOT/apps" "$ROOT/tests" 2>/dev/null
  } | sort -u
}
if [ $# -gt 0 ]; then FILES=("$@"); else mapfile -t FILES < <(default_files); fi
if [ "${LIST:-0}" = 1 ]; then printf '%s\n' "${FILES[@]#$ROOT/}"; exit 0; fi

# libtorch's headers take most of each file's time: precompile <torch/torch.h> once with the same
# flags (.deps-torch2/pch, rebuilt when this script or the headers change) and include it first.
PCH=$DEPS/pch/torch_all.h
if [ ! -f "$PCH.gch" ] || [ "$PCH.gch" -ot "$0" ] || [ "$PCH.gch" -ot "$INC/torch/csrc/api/include/torch/torch.h" ]; then
  mkdir -p "$DEPS/pch"
  echo '#include <torch/torch.h>' >"$PCH"
  c++ "${FLAGS[@]:1}" -x c++-header "$PCH" -o "$PCH.gch" || { echo "cannot precompile torch.h"; exit 1; }
fi
PCHFLAGS=(-include "$PCH" -Winvalid-pch)

# check LABEL FILE...: compiles the files with "${FLAGS[@]}" "${EXTRA[@]}", printing the results
# in file order and counting failures. Files go UNITY at a time (default 10) into one translation
# unit that includes them: loading the 700 MB header image and instantiating libtorch's templates
# once per group instead of once per file cut the time about five-fold (8 files: 146 CPU-s one by
# one, 26 CPU-s as one unit). A group that fails (an API error, or two files' private helpers of
# the same name) is split in halves until each part compiles or is one file, so every verdict
# and error names one file.
# JOBS groups at a time (default: every core).
JOBS=${JOBS:-$(nproc)}
UNITY=${UNITY:-10}
fails=0
check_one() {
  local label=$1 f=$2 out
  if out=$(c++ "${FLAGS[@]}" "${EXTRA[@]}" "$f" 2>&1); then echo "ok    ${f#$ROOT/}$label"
  else echo "FAIL  ${f#$ROOT/}$label"; echo "$out" | grep -E "error" | head -5; fi
}
check_group() {
  local label=$1 unit=$2 f; shift 2
  if [ $# = 1 ]; then check_one "$label" "$1"; return; fi
  for f in "$@"; do printf '#include "%s"\n' "$f"; done >"$unit.cpp"
  if c++ "${FLAGS[@]}" "${EXTRA[@]}" "$unit.cpp" >/dev/null 2>&1; then
    for f in "$@"; do echo "ok    ${f#$ROOT/}$label"; done
  else  # halves until the failing file (or the colliding pair) stands alone
    local half=$(($# / 2))
    check_group "$label" "${unit}a" "${@:1:half}"
    check_group "$label" "${unit}b" "${@:half+1}"
  fi
}
check() {
  local label=$1 i=0 n; shift
  local tmp; tmp=$(mktemp -d)
  while [ "$i" -lt $# ]; do
    n=$(printf '%05d' "$i")
    check_group "$label" "$tmp/unit$n" "${@:i+1:UNITY}" >"$tmp/$n.log" &
    i=$((i + UNITY))
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
  done
  wait
  cat "$tmp"/*.log
  fails=$((fails + $(cat "$tmp"/*.log | grep -c '^FAIL')))
  rm -rf "$tmp"
}
EXTRA=("${PCHFLAGS[@]}")
if [ "${CUDA:-}" != only ]; then
  check "" "${FILES[@]}"
  echo "$((${#FILES[@]} - fails)) of ${#FILES[@]} files compile against libtorch $VERSION"
fi

# The CUDA-only paths (CUDA=0 skips them; with FILE arguments they run only with CUDA=1 or
# CUDA=only): the NCCL process group, CUDA device queries and allocator statistics, compiled as
# a CUDA libtorch build compiles them (its torch_cuda target exports USE_C10D_NCCL). Needs the
# CUDA toolkit's and NCCL's headers: Debian sid's nvidia-cuda-dev, libnccl-dev and libcu++-dev
# (non-free/contrib, about 1 GB of .deb files, of which only usr/include, 17 MB, is kept).
# c10/cuda's generated cmake macros header is not in a CPU package: the HIP switch skips it.
# Every file with a CUDA-only branch: found by its macros, so a new one is never missed.
mapfile -t CUDA_FILES < <(grep -rlE --include='*.cpp' 'GPULAB_WITH_CUDA|GPULAB_DIST_NCCL|USE_C10D_NCCL' \
  "$ROOT/src" "$ROOT/apps" | sort)
cuda_fails=0
if [ "${CUDA:-}" = only ] || [ "${CUDA:-}" = 1 ] || { [ $# = 0 ] && [ "${CUDA:-}" != 0 ]; }; then
  CINC=$DEPS/cuda/usr/include
  if [ ! -f "$CINC/cuda_runtime_api.h" ] || [ ! -f "$CINC/nccl.h" ]; then
    CAPT=$DEPS/apt-cuda
    mkdir -p "$CAPT/lists/partial" "$CAPT/cache/archives/partial" "$CAPT/debs"
    echo "deb [trusted=yes] http://deb.debian.org/debian $SUITE main contrib non-free" >"$CAPT/sources.list"
    CAPTO=(-o Dir::Etc::sourcelist="$CAPT/sources.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$CAPT/lists"
           -o Dir::Cache="$CAPT/cache" -o Dir::State::status=/dev/null -o APT::Architectures::=amd64
           -o Acquire::Languages=none -o APT::Sandbox::User=root)
    apt-get "${CAPTO[@]}" update >/dev/null || { echo "cannot reach deb.debian.org ($SUITE non-free)"; exit 1; }
    (cd "$CAPT/debs" && apt-get "${CAPTO[@]}" download nvidia-cuda-dev libnccl-dev libcu++-dev >/dev/null) || exit 1
    mkdir -p "$DEPS/cuda"
    for d in "$CAPT"/debs/*.deb; do dpkg-deb --fsys-tarfile "$d" | tar -x -C "$DEPS/cuda" --wildcards './usr/include/*'; done
    rm -rf "$CAPT"
  fi
  # As a PyTorch wheel's build is: CUDA and NCCL on, USE_C10D_GLOO defined but no Gloo headers
  # found by CMake (GPULAB_HAVE_GLOO unset), no oneDNN.
  EXTRA=(-DUSE_CUDA -DUSE_C10D_NCCL -DGPULAB_WITH_CUDA=1 -UGPULAB_HAVE_GLOO -DC10_CUDA_NO_CMAKE_CONFIGURE_FILE -isystem "$CINC")
  # Prove the CUDA paths are the ones compiled: NCCL on and Gloo off in the compat layer, the
  # CUDA headers found.
  printf '#include "train/dist/compat.h"\n#include <cuda_runtime_api.h>\n#include <nccl.h>\nstatic_assert(GPULAB_DIST_NCCL == 1, "NCCL path off");\nstatic_assert(GPULAB_DIST_GLOO == 0, "Gloo on without GPULAB_HAVE_GLOO");\n' |
    c++ "${FLAGS[@]}" "${EXTRA[@]}" -x c++ - || { echo "the NCCL/CUDA path is not the one compiled"; exit 1; }
  before=$fails
  check "  (CUDA + NCCL, CUDA $(sed -n 's/^#define CUDART_VERSION *\([0-9]*\).*/\1/p' "$CINC/cuda_runtime_api.h"))" "${CUDA_FILES[@]}"
  cuda_fails=$((fails - before))
  echo "$((${#CUDA_FILES[@]} - cuda_fails)) of ${#CUDA_FILES[@]} CUDA-only paths compile against libtorch $VERSION with CUDA and NCCL headers"
fi
[ $fails = 0 ]
