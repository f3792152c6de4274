#!/usr/bin/env bash
# `make gpu-prebuilt TORCH=2.11.0`: gpulab built here, against the PyTorch wheel a GPU host has,
# so that host spends its minutes on `make gpu-check` and none on a build (GPU_CHECK_GPULAB,
# docs/gpu.md). The wheel of that version (PyPI's default CUDA build, with its CUDA libraries to
# link against) goes into a virtual environment outside the clone, keyed by the version; the
# build uses the GPU-host recipe of scripts/gpu-check.sh, and links only libraries every host has
# (no PNG, JPEG, SentencePiece, PCRE2, ICU or curl: their versions differ between distributions).
# Writes .gpu-prebuilt/gpulab and gpulab-torch (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VERSION=${1:-}
[ -n "$VERSION" ] || {
  echo "error: no torch version given" >&2
  echo "hint: make gpu-prebuilt TORCH=X.Y.Z, the version the GPU host's python3 -c 'import torch; print(torch.__version__)' prints (without +cuNNN)" >&2
  exit 2
}
CACHE=${GPULAB_CACHE:-$HOME/.cache/gpulab}
VENV=$CACHE/torch-$VERSION
BUILD=$CACHE/build-gpu-$VERSION
if ! "$VENV/bin/python3" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$VERSION')" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "torch==$VERSION" ||
    { echo "error: pip could not install torch==$VERSION into $VENV" >&2
      echo "hint: check the version (pip index versions torch) and that PyPI is reachable" >&2; exit 3; }
fi
[ -f .deps/usr/include/CLI/CLI.hpp ] || bash scripts/gpu-bundle.sh >/dev/null
PREFIX=$("$VENV/bin/python3" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
. "$ROOT/scripts/gpu-host-flags.sh" && gpu_host_cmake_flags "$PREFIX" "$ROOT/.deps"
cmake -S "$ROOT" -B "$BUILD" -G Ninja "${GPU_HOST_FLAGS[@]}" -DGPULAB_VENV="$VENV" \
  -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON -DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_PNG=ON >"$BUILD.configure.log" 2>&1 ||
  { tail -20 "$BUILD.configure.log" >&2; echo "error: cmake failed (log: $BUILD.configure.log)" >&2; exit 1; }
cmake --build "$BUILD" --target gpulab
mkdir -p .gpu-prebuilt
cp "$BUILD/gpulab" "$BUILD/gpulab-torch" .gpu-prebuilt/
# What it needs beyond the C library, libstdc++ and zlib must all come from the wheels.
others=$(readelf -d .gpu-prebuilt/gpulab-torch | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' |
  grep -v -E '^(libtorch[a-z_]*|libc10[a-z_]*|libcudart|libgomp|libstdc\+\+|libm|libgcc_s|libc|libz|libdl|libpthread|librt)\.so' || true)
[ -z "$others" ] || { echo "error: .gpu-prebuilt/gpulab-torch needs $others, which a GPU host may lack" >&2; exit 1; }
echo "gpulab for torch $VERSION: .gpu-prebuilt/ ($(du -sh .gpu-prebuilt | cut -f1)); on the host:"
echo "  GPU_CHECK_GPULAB=\$PWD/.gpu-prebuilt/gpulab make gpu-check"
