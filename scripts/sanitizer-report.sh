#!/usr/bin/env bash
# Prints every sanitizer report under LOGS (the head of each), the run's timings, and fails when
# the tests failed or any report was written; shared by sanitize.sh and sanitize-train.sh.
# usage: scripts/sanitizer-report.sh NAME LOGS BUILD_SECONDS TEST_SECONDS TESTS_RC
set -euo pipefail
name=$1 logs=$2 build_s=$3 tests_s=$4 rc=$5
reports=$(find "$logs" -type f | wc -l)
for f in $(find "$logs" -type f); do
  echo "---- $f"
  head -n 60 "$f"
done
echo "$name: build $build_s s, tests $tests_s s, ${reports} sanitizer report(s)"
[ "$rc" -eq 0 ] && [ "$reports" -eq 0 ]
