#!/usr/bin/env bash
# Turns the "gpulab(+0xOFFSET)" frames of a crash report (core/crash_report.h) in a log into
# function and source line, with the binary that crashed. usage: scripts/symbolize.sh LOG BINARY
# The frames name the binary that crashed (gpulab, or gpulab-torch for the training commands,
# which run in gpulab's libtorch half): they are read from that binary in BINARY's folder.
set -euo pipefail
LOG=$1
BIN=$2
grep -q 'gpulab: fatal signal' "$LOG" || exit 0
name=$(grep -oE "gpulab(-[a-z]+)?\(\+0x[0-9a-f]+\)" "$LOG" | head -1 | sed 's/(.*//' || true)
[ -n "$name" ] && BIN="$(dirname "$BIN")/$name"
echo "---- crash report frames in $(basename "$BIN"):"
grep -oE "$(basename "$BIN")\(\+0x[0-9a-f]+\)" "$LOG" | grep -oE '0x[0-9a-f]+' |
  while read -r off; do
    # A return address: the call is the instruction before it.
    printf '%s ' "$off"
    addr2line -f -C -i -p -e "$BIN" "$(printf '0x%x' $((off - 1)))"
  done
