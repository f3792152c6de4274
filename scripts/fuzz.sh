#!/usr/bin/env bash
# Runs libFuzzer targets for SECONDS each (or RUNS executions each with "runs=N"): the service's
# request path (tests/fuzz/request_fuzz.cpp) and one target per file format (tests/fuzz/*_fuzz.cpp),
# each from its seeds in tests/fuzz/corpus/<target>/. Prints each target's execution count. A
# crash, sanitizer report or broken check fails the run and leaves the input in BUILD/fuzz-crashes.
# usage: scripts/fuzz.sh BUILD_DIR [SECONDS | runs=N] [TARGET...]   (default: every target)
#        GPULAB_FUZZ_PREBUILT=1: the targets are built already (the fuzz.* tests of make sanitize)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-asan}
LIMIT=${2:-600}
shift $(($# > 2 ? 2 : $#))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(service_request safetensors pickle idx tokens tar hf_config)
fi
if [ "${GPULAB_FUZZ_PREBUILT:-0}" = 1 ]; then
  # Run by ctest in the tree (make sanitize built the targets first): no second ninja there.
  for t in "${targets[@]}"; do
    [ -x "$BUILD/tests/fuzz_$t" ] || { echo "fuzz $t: $BUILD/tests/fuzz_$t is not built"; exit 1; }
  done
else
  bash scripts/sanitizer-tree.sh "$BUILD" "${targets[@]/#/fuzz_}" || exit $?
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/gpulab-fuzz-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$BUILD/fuzz-crashes"
case "$LIMIT" in
  runs=*) bound=(-runs="${LIMIT#runs=}") ;;
  *) bound=(-max_total_time="$LIMIT") ;;
esac
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=0
for t in "${targets[@]}"; do
  corpus="$work/$t"
  mkdir -p "$corpus"
  cp tests/fuzz/corpus/"$t"/* "$corpus/"  # the committed seeds stay untouched
  extra=(-rss_limit_mb=2048 -malloc_limit_mb=1024)  # a huge allocation is a finding
  leaks=1
  case "$t" in
    service_request) extra=(-max_len=4096); leaks=0 ;;  # one Service lives for the whole run
    pickle | idx) extra+=(-max_len=16384) ;;          # seeds are real files of a few KB
  esac
  log="$work/$t.log"
  set +e
  ASAN_OPTIONS=detect_leaks=$leaks "$BUILD/tests/fuzz_$t" "${bound[@]}" "${extra[@]}" -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$BUILD/fuzz-crashes/$t-" "$corpus" >"$log" 2>&1
  rc=$?
  set -e
  grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb)|ERROR|SUMMARY|fuzz: " "$log" || true
  if [ $rc -ne 0 ]; then
    tail -n 60 "$log"
    echo "fuzz $t: FAILED (exit $rc); the input is in $BUILD/fuzz-crashes/"
    failed=1
    continue
  fi
  echo "fuzz $t: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log"), no crash"
done
exit $failed
