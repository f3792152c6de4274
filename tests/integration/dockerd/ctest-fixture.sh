#!/bin/bash
# ctest fixture for the real-dockerd tests: "start" brings up the "main" and "peer" engines
# before the tests that need them, "stop" stops afterwards only the engines this start began
# (an engine that was already running, e.g. another run's, is left alone).
# Exit 77 (ctest: skipped) when this machine cannot run dockerd; the tests then skip themselves.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
base="${GPULAB_DOCKERD_ROOT:-/tmp}"
engines=()
[ -z "${GPULAB_TEST_DOCKER_HOST:-}" ] && engines+=("${GPULAB_TEST_DOCKER_NAME:-main}")
engines+=("${GPULAB_TEST_DOCKER_PEER_NAME:-peer}")

case "${1:-}" in
  start)
    for e in "${engines[@]}"; do
      sock="$base/gpulab-dockerd-$e/docker.sock"
      was_up=0
      curl -sf --max-time 2 --unix-socket "$sock" http://engine/_ping >/dev/null 2>&1 && was_up=1
      "$here/start-dockerd.sh" "$e" || exit $?
      if [ "$was_up" = 0 ]; then touch "$base/gpulab-dockerd-$e/ctest-owned"; fi
    done
    ;;
  stop)
    # The lab hosts of the multi-host tests (start-lab-hosts.sh) too, when a test started them.
    for d in "$base"/gpulab-dockerd-lab*/; do
      [ -d "$d" ] && engines+=("$(basename "$d" | sed 's/^gpulab-dockerd-//')")
    done
    for e in "${engines[@]}"; do
      marker="$base/gpulab-dockerd-$e/ctest-owned"
      if [ -f "$marker" ]; then
        rm -f "$marker"
        "$here/stop-dockerd.sh" "$e"
      fi
    done
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
exit 0
