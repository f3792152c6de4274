#!/usr/bin/env bash
# gpulab's C++ standard library calls bind to libstdc++ whatever libtorch exports (GPULAB here is
# the binary that links libtorch, gpulab-torch): a probe linked beside a stand-in library that
# exports a trapping std::filesystem::remove_all (as the PyTorch wheel's libtorch.so exports its
# own copy) must not hit the trap when linked as gpulab is, and must hit it when linked plainly
# (so the check can fail); gpulab itself names libstdc++ first.
# With a CUDA libtorch (CUDA=1): gpulab keeps libtorch_cuda.so (not dropped by --as-needed) and
# starts without the driver's libcuda.so.1 (libtorch loads it when a GPU is first asked for).
# usage: link_test.sh GPULAB PROBE_FIXED PROBE_PLAIN [CUDA]
set -uo pipefail
G=$1 FIXED=$2 PLAIN=$3 CUDA=${4:-0}
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$FIXED" "$WORK/a" >"$WORK/fixed.log" 2>&1 || { cat "$WORK/fixed.log"; fail "the probe linked as gpulab is did not run clean"; }
grep -q TRAP "$WORK/fixed.log" && fail "the probe linked as gpulab is bound remove_all to the stand-in"
echo "linked as gpulab: $(cat "$WORK/fixed.log")"

"$PLAIN" "$WORK/b" >"$WORK/plain.log" 2>&1
grep -q TRAP "$WORK/plain.log" || { cat "$WORK/plain.log"; fail "the plain probe did not hit the trap: the stand-in does not stand in"; }
echo "linked plainly: $(head -1 "$WORK/plain.log")"

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
needed "$G" >"$WORK/needed"
cat -n "$WORK/needed"
first_std=$(grep -n '^libstdc++' "$WORK/needed" | head -1 | cut -d: -f1)
first_torch=$(grep -nE '^lib(torch|c10)' "$WORK/needed" | head -1 | cut -d: -f1)
[ -n "$first_std" ] || fail "gpulab does not name libstdc++"
[ -n "$first_torch" ] || fail "gpulab does not name libtorch"
[ "$first_std" -lt "$first_torch" ] || fail "gpulab names libtorch (entry $first_torch) before libstdc++ (entry $first_std)"
echo "PASS: gpulab names libstdc++ (entry $first_std) before libtorch (entry $first_torch)"

if [ "$CUDA" = 1 ]; then
  grep -qx 'libtorch_cuda.so' "$WORK/needed" || fail "gpulab does not name libtorch_cuda.so: the CUDA libtorch was dropped at link time"
  ldd "$G" >"$WORK/ldd" 2>&1 || { cat "$WORK/ldd"; fail "ldd $G failed"; }
  grep -q 'not found' "$WORK/ldd" && { grep 'not found' "$WORK/ldd"; fail "gpulab misses libraries"; }
  grep -q 'libcuda\.so' "$WORK/ldd" && fail "gpulab needs the driver's libcuda.so to start: $(grep libcuda "$WORK/ldd")"
  echo "PASS: gpulab names libtorch_cuda.so and needs no libcuda.so.1 ($(wc -l <"$WORK/ldd") libraries loaded, none the driver's)"
  "$G" --version | grep -E 'libtorch [0-9.]+, CUDA [0-9]+\.[0-9]+; (no GPU visible|[0-9]+ GPUs? visible)' ||
    fail "gpulab --version does not say its libtorch, CUDA and GPUs: $("$G" --version)"
fi
