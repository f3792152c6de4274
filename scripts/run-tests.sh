#!/usr/bin/env bash
# Runs the tests through ctest (extra arguments go to ctest: make test passes -LE long, make
# test-long -L long), then prints the ten slowest with their seconds, every skip against
# tests/allowed-skips.txt (an unexpected one fails the run), and one summary line last:
# "tests: N passed, N failed, N skipped".
# usage: scripts/run-tests.sh BUILD_DIR [CTEST_ARGS...]   (JUNIT=FILE: where ctest's report goes)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
BUILD=${1:-build}
junit=$(realpath -m "${JUNIT:-$BUILD/ctest-junit.xml}")
rm -f "$junit"
# Ctrl-C (or TERM) ends ctest without its fixtures' cleanups, and what tests start in sessions of
# their own (engines, a Slurm cluster, a test's child processes) outlives it: every process of the
# run carries GPULAB_TEST_RUN, and scripts/test-cleanup.sh ends what carries it and deletes the
# namespaces and links made since this point, so the next run starts clean.
export GPULAB_TEST_RUN=${GPULAB_TEST_RUN:-$$.$(date +%s%N)}
# The run's temporary files (TMPDIR: C++ temp_directory_path, Python tempfile, mktemp) go in a
# folder of its own, removed when the run ends, interrupted or not: a test killed midway (a
# service test's book, a launcher's folder) or one that never removes its own left them in /tmp.
run_tmp=/tmp/gpulab-run-$GPULAB_TEST_RUN
rm -rf --one-file-system "$run_tmp" && mkdir -p "$run_tmp" && export TMPDIR=$run_tmp
before=$(mktemp /tmp/gpulab-test-run.XXXXXX)
if command -v ip >/dev/null; then
  { ip netns list 2>/dev/null | awk '{print "netns " $1}'
    ip -o link show 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); print "link " $2}'; } >"$before"
fi
interrupted() {
  trap '' INT TERM
  echo
  echo "interrupted: stopping what this run started (engines, clusters, processes, namespaces)"
  bash "$here/test-cleanup.sh" "$GPULAB_TEST_RUN" "$before"
  rm -f "$before"
  rm -rf --one-file-system "$run_tmp"
  exit 130
}
trap interrupted INT TERM
# Every test's output, passed ones too, is kept in the JUnit file (the figures a report quotes).
# Tests that start dockerd, namespaces or several ranks serialize themselves with RESOURCE_LOCK.
# CTEST_PARALLEL CPU-heavy tests at once (2): each takes two of ctest's slots, a short unit test
# that mostly waits takes one (PROCESSORS, tests/CMakeLists.txt).
ctest --test-dir "$BUILD" --output-on-failure --parallel "$((2 * ${CTEST_PARALLEL:-2}))" \
  --timeout 1800 --output-junit "$junit" "${@:2}"
rc=$?
rm -f "$before"
rm -rf --one-file-system "$run_tmp"
if [ -f "$junit" ]; then
  # A slow test is seen the day it lands (one <testcase name=... time=...> per line).
  echo
  echo "slowest tests (seconds):"
  sed -n 's/^[[:space:]]*<testcase name="\([^"]*\)".* time="\([0-9.e+-]*\)".*/\2 \1/p' "$junit" |
    sort -g -r | head -n 10 | awk '{ printf "  %8.1f  %s\n", $1, $2 }'
  echo
  /usr/bin/python3 "$here/check-skips.py" "$junit" || rc=1
  total=$(grep -o 'tests="[0-9]*"' "$junit" | head -1 | grep -o '[0-9]*')
  failed=$(grep -o 'failures="[0-9]*"' "$junit" | head -1 | grep -o '[0-9]*')
  skipped=$(grep -o 'skipped="[0-9]*"' "$junit" | head -1 | grep -o '[0-9]*')
  errors=$(grep -o 'errors="[0-9]*"' "$junit" | head -1 | grep -o '[0-9]*')
  # A test ctest did not run because its fixture failed is a failure, not a skip.
  not_run=$(grep -c 'message="Fixture dependency failed"' "$junit")
  failed=$((${failed:-0} + ${errors:-0} + not_run))
  skipped=$((${skipped:-0} - not_run))
  passed=$((${total:-0} - failed - skipped))
  echo
  echo "tests: ${passed} passed, ${failed} failed, ${skipped:-0} skipped"
fi
exit $rc
