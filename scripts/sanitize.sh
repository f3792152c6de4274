#!/usr/bin/env bash
# The core, formats, launch, docker and service tests (and the gpulab serve and gpulab launch
# they start) under ASan + UBSan, and a few seconds of each libFuzzer target, in the clang tree of
# scripts/sanitizer-tree.sh. Any sanitizer report, and any skip tests/allowed-skips.txt does not
# name, fails the run. CI_DEADLINE (scripts/ci-deadline.sh): the build gets what is left less the
# tests' time; a build that misses it, or tests that no longer fit, are skipped with the reason.
# usage: scripts/sanitize.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-asan}
# The tests' time on the 2-core VM with room (an earlier run's 555 s; more tests since).
TEST_SECONDS=${TEST_SECONDS:-700}
source scripts/ci-deadline.sh sanitize
t0=$(date +%s)
budget=$(deadline_build_budget "$TEST_SECONDS") || exit 0
fuzzers=(fuzz_service_request fuzz_safetensors fuzz_pickle fuzz_idx fuzz_tokens fuzz_tar fuzz_hf_config)
rc=0
${budget:+timeout "$budget"} bash scripts/sanitizer-tree.sh "$BUILD" gpulab test_core test_formats \
  test_launch test_docker test_service "${fuzzers[@]}" || rc=$?
if [ "$rc" -eq 124 ] && [ -n "$budget" ]; then
  deadline_skip "all: the clang tree's build did not end in ${budget} s (a change to shared headers recompiles much of it)"
  exit 0
fi
[ "$rc" -eq 0 ] || exit "$rc"
t1=$(date +%s)
if ! deadline_fits "$TEST_SECONDS"; then
  deadline_skip "the tests: $(deadline_left) s left, they take about $TEST_SECONDS"
  exit 0
fi
logs="$(realpath -m "$BUILD/sanitizer-logs")"
rm -rf "$logs"
mkdir -p "$logs"
# Reports go to files (child processes too: gpulab serve writes them, not the test's output).
# One prefix for both: in a combined ASan+UBSan binary the last log_path read wins for either.
export ASAN_OPTIONS="log_path=$logs/report:detect_leaks=1:abort_on_error=0"
export UBSAN_OPTIONS="log_path=$logs/report:print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
set +e
# Not HostsLoad: it measures throughput at three hosts (make test runs it), and an instrumented
# service would only slow CI's budget down; the soak and move tests at three hosts do run here.
# The fuzz label: a few seconds of each libFuzzer target (tests/CMakeLists.txt).
junit="$(realpath -m "$BUILD/ctest-junit.xml")"
rm -f "$junit"
ctest --test-dir "$BUILD" -L '^(core|formats|launch|docker|service|fuzz)$' -E '^HostsLoad\.' \
  --output-on-failure --parallel "${CTEST_PARALLEL:-2}" --timeout 1800 --output-junit "$junit"
rc=$?
/usr/bin/python3 scripts/check-skips.py "$junit" || rc=1
set -e
t2=$(date +%s)
exec bash scripts/sanitizer-report.sh sanitize "$logs" $((t1 - t0)) $((t2 - t1)) "$rc"
