#!/usr/bin/env bash
# The core, formats, launch, docker and service tests (and the gpulab serve and gpulab launch
# they start) under ASan + UBSan, and a few seconds of each libFuzzer target, in the clang tree of
# scripts/sanitizer-tree.sh. Any sanitizer report, and any skip tests/allowed-skips.txt does not
# name, fails the run.
# usage: scripts/sanitize.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-asan}
t0=$(date +%s)
fuzzers=(fuzz_service_request fuzz_safetensors fuzz_pickle fuzz_idx fuzz_tokens fuzz_tar fuzz_hf_config)
bash scripts/sanitizer-tree.sh "$BUILD" gpulab test_core test_formats test_launch test_docker \
  test_service "${fuzzers[@]}" || exit $?
t1=$(date +%s)
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
