#!/usr/bin/env bash
# Checks that an interrupted test run leaves nothing behind and that the next run starts clean:
# runs scripts/run-tests.sh BUILD_DIR CTEST_ARGS in a process group of its own, sends that group
# SIGINT after SECONDS (what Ctrl-C in a terminal does), then fails if any process of the run is
# left (its GPULAB_TEST_RUN marker), any network namespace, bridge or link named as the tests
# name theirs (gpulab-*, gls-*, gl*) exists that did not before, or the run's temporary folder
# (/tmp/gpulab-run-RUN, its TMPDIR) is left; with --rerun, runs the same tests
# again to the end and fails unless they pass. The interruption must catch the run with something
# started (an engine, a cluster, a test's process), or the check proves nothing and fails.
# Needs root and the lab's engines to itself: flock /tmp/gpulab-lab.lock scripts/check-interrupt.sh
# usage: scripts/check-interrupt.sh [--rerun] BUILD_DIR SECONDS CTEST_ARGS...
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rerun=0
[ "${1:-}" = --rerun ] && { rerun=1; shift; }
build=${1:?usage: check-interrupt.sh [--rerun] BUILD_DIR SECONDS CTEST_ARGS...}
seconds=${2:?seconds before the interrupt}
shift 2
fail() { echo "check-interrupt: FAIL: $*"; exit 1; }

names() {  # the namespaces and links (host's, and inside every namespace) the tests would name
  ip netns list 2>/dev/null | awk '{print "netns " $1}' | grep -E ' (gpulab-|gls-)'
  ip -o link show 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); print "link " $2}' |
    grep -E ' (gpulab-|gl)'
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    ip -n "$ns" -o link show 2>/dev/null | awk -F': ' -v ns="$ns" '{sub(/@.*/, "", $2); print "link " ns "/" $2}' |
      grep -E '/(gpulab-|gl)'
  done
}
marked() {  # pid and name of every process carrying the run's marker
  local e p
  for e in /proc/[0-9]*/environ; do
    p=${e#/proc/}
    p=${p%/environ}
    grep -qzxF "GPULAB_TEST_RUN=$run" "$e" 2>/dev/null || continue
    grep -q '^State:[[:space:]]*Z' "/proc/$p/status" 2>/dev/null && continue  # dead, unreaped
    echo "$p $(cat "/proc/$p/comm" 2>/dev/null)"
  done
}

[ "$(id -u)" = 0 ] || fail "needs root (the lab's engines, namespaces)"
before=$(names | sort)
run="check.$$.$(date +%s)"
log=$(mktemp /tmp/gpulab-check-interrupt.XXXXXX)
# Job control on: the run gets a process group of its own with SIGINT not ignored, as a
# terminal's foreground job has (a plain background job of a script ignores SIGINT).
set -m
GPULAB_TEST_RUN=$run bash "$here/run-tests.sh" "$build" "$@" >"$log" 2>&1 &
leader=$!
set +m
sleep "$seconds"
kill -0 "$leader" 2>/dev/null || { cat "$log"; fail "the run ended before the interrupt; give fewer SECONDS"; }
at_interrupt=$(marked | awk '{print $2}' | sort | uniq -c | awk '{printf " %s x%s", $2, $1}')
made=$(comm -13 <(echo "$before") <(names | sort) | tr '\n' ' ')
echo "check-interrupt: at the interrupt, after ${seconds} s: processes of the run:${at_interrupt:- none}"
echo "check-interrupt: namespaces and links made by then: ${made:-none}"
echo "check-interrupt: in the run's temporary folder (TMPDIR) by then:" \
  "$(find "/tmp/gpulab-run-$run" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l) entries"
[ -n "$at_interrupt$made" ] || fail "the run had started nothing yet; the check would prove nothing"
kill -INT -- -"$leader"
for _ in $(seq 300); do kill -0 "$leader" 2>/dev/null || break; sleep 0.5; done
kill -0 "$leader" 2>/dev/null && fail "the run still runs 150 s after SIGINT"
wait "$leader"
echo "check-interrupt: the run exited $? after SIGINT; its last lines:"
tail -n 15 "$log" | sed 's/^/    /'
left=$(marked)
[ -z "$left" ] || fail "processes of the run left: $(tr '\n' ' ' <<<"$left")"
extra=$(comm -13 <(echo "$before") <(names | sort) | tr '\n' ' ')
[ -z "$extra" ] || fail "namespaces or links left: $extra"
[ -e "/tmp/gpulab-run-$run" ] && fail "the run's temporary folder is left: /tmp/gpulab-run-$run"
echo "check-interrupt: nothing left (no process of the run, no new namespace, bridge or link," \
  "no temporary folder)"
rm -f "$log"
if [ "$rerun" = 1 ]; then
  echo "check-interrupt: the same tests again, to the end"
  bash "$here/run-tests.sh" "$build" "$@" | tail -n 3
  [ "${PIPESTATUS[0]}" = 0 ] || fail "the run after the interrupted one failed"
  echo "check-interrupt: the next run passed"
fi
echo "check-interrupt: PASS"
