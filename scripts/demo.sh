#!/usr/bin/env bash
# The main job of `make demo`: detect the GPUs, then a short GEMM stress test on the best device.
set -euo pipefail
BUILD=${1:-build}
G="$BUILD/gpulab"
echo "== gpulab detect"
"$G" detect
echo
echo "== gpulab gpu-test (short)"
"$G" gpu-test --size 512 --iterations 50
