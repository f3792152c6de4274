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
# Every test's output, passed ones too, is kept in the JUnit file (the figures a report quotes).
# Tests that start dockerd, namespaces or several ranks serialize themselves with RESOURCE_LOCK.
ctest --test-dir "$BUILD" --output-on-failure --parallel "${CTEST_PARALLEL:-2}" \
  --timeout 1800 --output-junit "$junit" "${@:2}"
rc=$?
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
