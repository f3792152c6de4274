#!/usr/bin/env bash
# Before CMake runs: the project's Python environment is there and holds the pinned torch (the
# libtorch gpulab builds on). One line saying what to run otherwise, never a CMake trace.
# Skipped when CMAKE_FLAGS names another libtorch (Torch_DIR or CMAKE_PREFIX_PATH: a GPU host's).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case "${CMAKE_FLAGS:-}" in *Torch_DIR*|*CMAKE_PREFIX_PATH*|*GPULAB_WITH_TRAIN=OFF*) exit 0 ;; esac
want=$(sed -n 's/^torch==//p' "$ROOT/scripts/python-env.txt")
PY=$ROOT/.venv/bin/python3
if [ ! -x "$PY" ]; then
  echo "error: no Python environment with the PyTorch wheel (.venv): run \`make deps\` first" >&2
  exit 2
fi
have=$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null)
if [ "$have" != "$want" ]; then
  echo "error: .venv has torch ${have:-that does not import}, the project pins torch $want: run \`make deps\`" >&2
  exit 2
fi
