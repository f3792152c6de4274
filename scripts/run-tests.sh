#!/usr/bin/env bash
# Runs every test through ctest and ends with one summary line: "N passed, N failed, N skipped".
set -uo pipefail
BUILD=${1:-build}
junit="$BUILD/ctest-junit.xml"
rm -f "$junit"
# Every test's output, passed ones too, is kept in the JUnit file (the figures a report quotes).
# Tests that start dockerd, namespaces or several ranks serialize themselves with RESOURCE_LOCK.
ctest --test-dir "$BUILD" --output-on-failure --parallel "${CTEST_PARALLEL:-2}" \
  --timeout 1800 --output-junit "$(realpath -m "$junit")" "${@:2}"
rc=$?
if [ -f "$junit" ]; then
  total=$(grep -o 'tests="[0-9]*"' "$junit" | head -1 | grep -o '[0-9]*')
  failed=$(grep -o 'failures="[0-9]*"' "$junit" | head -1 | grep -o '[0-9]*')
  skipped=$(grep -o 'skipped="[0-9]*"' "$junit" | head -1 | grep -o '[0-9]*')
  errors=$(grep -o 'errors="[0-9]*"' "$junit" | head -1 | grep -o '[0-9]*')
  failed=$(( ${failed:-0} + ${errors:-0} ))
  passed=$(( ${total:-0} - failed - ${skipped:-0} ))
  echo
  echo "tests: ${passed} passed, ${failed} failed, ${skipped:-0} skipped"
fi
exit $rc
