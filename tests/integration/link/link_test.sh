#!/usr/bin/env bash
# gpulab's C++ standard library calls bind to libstdc++ whatever libtorch exports: a probe linked
# beside a stand-in library that exports a trapping std::filesystem::remove_all (as the PyTorch
# wheel's libtorch.so exports its own copy) must not hit the trap when linked as gpulab is, and
# must hit it when linked plainly (so the check can fail); gpulab itself names libstdc++ first.
# usage: link_test.sh GPULAB PROBE_FIXED PROBE_PLAIN
set -uo pipefail
G=$1 FIXED=$2 PLAIN=$3
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
