#!/usr/bin/env bash
# Runs the libFuzzer target over the service's request path (tests/fuzz/request_fuzz.cpp) for
# SECONDS, or for RUNS executions with "runs=N"; prints libFuzzer's execution count. A crash,
# sanitizer report or broken envelope fails the run and leaves the input in BUILD/fuzz-crashes.
# usage: scripts/fuzz.sh BUILD_DIR [SECONDS | runs=N]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-asan}
LIMIT=${2:-600}
bash scripts/sanitizer-tree.sh "$BUILD" fuzz_service_request || exit $?
work=$(mktemp -d "${TMPDIR:-/tmp}/gpulab-fuzz-XXXXXX")
trap 'rm -rf "$work"' EXIT
cp tests/fuzz/corpus/* "$work/"  # the committed seeds stay untouched
mkdir -p "$BUILD/fuzz-crashes"
case "$LIMIT" in
  runs=*) bound=(-runs="${LIMIT#runs=}") ;;
  *) bound=(-max_total_time="$LIMIT") ;;
esac
export ASAN_OPTIONS=detect_leaks=0  # one Service lives for the whole run, on purpose
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
log="$work/fuzz.log"
set +e
"$BUILD/tests/fuzz_service_request" "${bound[@]}" -max_len=4096 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$BUILD/fuzz-crashes/" "$work" >"$log" 2>&1
rc=$?
set -e
grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)|ERROR|SUMMARY|request fuzz:" \
  "$log" || true
if [ $rc -ne 0 ]; then
  tail -n 60 "$log"
  echo "fuzz: FAILED (exit $rc); the input is in $BUILD/fuzz-crashes/"
  exit 1
fi
echo "fuzz: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log"), no crash"
