#!/usr/bin/env bash
# CI's time bound for the sanitizer runs, sourced by sanitize.sh and sanitize-train.sh.
# CI_DEADLINE (epoch seconds; .ci/run sets it, a run by hand has none): a run that cannot finish
# by then says "NAME: SKIPPED what (why)" and leaves CI green; what its build compiled stays in
# ccache, so the next run goes further. Without CI_DEADLINE everything fits.
# usage: source scripts/ci-deadline.sh NAME
deadline_name=$1
# Seconds left before CI_DEADLINE.
deadline_left() { echo $((CI_DEADLINE - $(date +%s))); }
# True when SECONDS still fit before the deadline (always without one).
deadline_fits() { [ -z "${CI_DEADLINE:-}" ] || [ "$(deadline_left)" -ge "$1" ]; }
deadline_skip() {
  echo "$deadline_name: SKIPPED $1 (CI_DEADLINE: CI's time; make $deadline_name runs it all)"
}
# Prints the seconds a build may take so that TEST_SECONDS still fit after it, or nothing without
# a deadline; returns 1 (after saying SKIPPED) when not even a minute is left for the build.
deadline_build_budget() {
  [ -n "${CI_DEADLINE:-}" ] || return 0
  local budget=$(($(deadline_left) - $1))
  if [ "$budget" -le 60 ]; then
    deadline_skip "all: $(deadline_left) s left, the tests alone take about $1" >&2
    return 1
  fi
  echo "$deadline_name: ${budget} s for the build, then the tests that fit by CI_DEADLINE" >&2
  echo "$budget"
}
