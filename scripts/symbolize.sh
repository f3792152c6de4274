#!/usr/bin/env bash
# Turns the "gpulab(+0xOFFSET)" frames of a crash report (core/crash_report.h) in a log into
# function and source line, with the binary that crashed. usage: scripts/symbolize.sh LOG BINARY
# A training command crashes in gpulab's libtorch half, whose frames name gpulab-torch: they are
# read from the gpulab-torch beside BINARY.
set -euo pipefail
LOG=$1
BIN=$2
grep -q 'gpulab: fatal signal' "$LOG" || exit 0
if grep -qE "gpulab-torch\(\+0x[0-9a-f]+\)" "$LOG" && [ "$(basename "$BIN")" != gpulab-torch ]; then
  BIN="$(dirname "$BIN")/gpulab-torch"
fi
echo "---- crash report frames in $(basename "$BIN"):"
grep -oE "$(basename "$BIN")\(\+0x[0-9a-f]+\)" "$LOG" | grep -oE '0x[0-9a-f]+' |
  while read -r off; do
    # A return address: the call is the instruction before it.
    printf '%s ' "$off"
    addr2line -f -C -i -p -e "$BIN" "$(printf '0x%x' $((off - 1)))"
  done
