#!/usr/bin/env bash
# Removes what an interrupted test run started (scripts/run-tests.sh calls it on Ctrl-C or TERM).
# ctest stops at SIGINT without running its fixtures' cleanups, and what tests start in a session
# or process group of their own (dockerd, a Slurm cluster, run_process's children) never sees the
# terminal's signal. Everything the run started carries GPULAB_TEST_RUN=RUN_ID in its environment:
# engines and clusters whose daemon carries it are stopped by their own stop scripts, every other
# process carrying it is ended, then the network namespaces and links that did not exist when the
# run began (BEFORE_FILE) and that belong to a stopped engine or a test script no longer running
# (gpulab-ddp-a<PID>) are deleted. What ran before the run (another run's) is left alone.
# usage: scripts/test-cleanup.sh RUN_ID BEFORE_FILE   (BEFORE_FILE: lines "netns NAME", "link NAME")
set -uo pipefail
id=${1:?run id}
before=${2:?file of the namespaces and links when the run began}
here="$(cd "$(dirname "$0")" && pwd)"
base="${GPULAB_DOCKERD_ROOT:-/tmp}"
log() { echo "[test-cleanup] $*" >&2; }

# This script and its callers carry the marker too: never end them.
declare -A keep=()
p=$$
while [ -n "$p" ] && [ "$p" != 0 ]; do
  keep[$p]=1
  p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)
done

# A zombie is gone already (this machine's init may never reap it): not counted.
is_marked() {
  grep -qzxF "GPULAB_TEST_RUN=$id" "/proc/$1/environ" 2>/dev/null &&
    ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}
# Daemons their stop scripts end in order (containers first, then the engine): the first sweep
# leaves them to those scripts.
is_daemon() { grep -qxE 'dockerd|containerd|containerd-shim.*|docker-proxy|slurm(ctld|d|stepd)|munged' "/proc/$1/comm" 2>/dev/null; }
marked_pids() {  # [--all]: with the daemons too
  local e p
  for e in /proc/[0-9]*/environ; do
    p=${e#/proc/}
    p=${p%/environ}
    [ -n "${keep[$p]:-}" ] && continue
    is_marked "$p" || continue
    # Nor this script's own subshells and commands (this scan's, say).
    [ "$p" = "$BASHPID" ] && continue
    case " $(awk '{print $4}' "/proc/$p/stat" 2>/dev/null) " in " $$ " | " $BASHPID ") continue ;; esac
    [ "${1:-}" = --all ] || ! is_daemon "$p" || continue
    echo "$p $(cat "/proc/$p/comm" 2>/dev/null)"
  done
}
end_all() {  # TERM, up to 5 s, then KILL
  local found
  found=$(marked_pids "$@")
  [ -n "$found" ] || return 0
  log "ending $(wc -l <<<"$found") process(es) of the run: $(awk '{print $2}' <<<"$found" | sort |
    uniq -c | awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}')"
  awk '{print $1}' <<<"$found" | xargs -r kill -TERM 2>/dev/null
  for _ in $(seq 50); do
    [ -z "$(marked_pids "$@")" ] && return 0
    sleep 0.1
  done
  found=$(marked_pids "$@")
  [ -n "$found" ] && awk '{print $1}' <<<"$found" | xargs -r kill -KILL 2>/dev/null
  return 0
}

is_new() { ! grep -qxF "$1" "$before"; }
# What a name says made it: gpulab-ddp-a<PID> (the test script's pid) is left while PID lives.
maker_gone() { [[ ! "$1" =~ ([0-9]+)$ ]] || [ ! -e "/proc/${BASH_REMATCH[1]}" ]; }
known=0
command -v ip >/dev/null && grep -q '^link ' "$before" 2>/dev/null && known=1

end_all
stopped=()  # engines this run started, by name
for pidfile in "$base"/gpulab-dockerd-*/dockerd.pid; do
  [ -f "$pidfile" ] && is_marked "$(cat "$pidfile" 2>/dev/null)" || continue
  root=$(dirname "$pidfile")
  stopped+=("${root##*/gpulab-dockerd-}")
  rm -f "$root/ctest-owned"
  log "stopping engine ${stopped[-1]} (this run started it)"
  "$here/../tests/integration/dockerd/stop-dockerd.sh" "${stopped[-1]}"
done
# A cluster whose controller carries the marker, or whose namespaces are new (a start cut short).
clusters=$(for f in /tmp/gpulab-slurm-*/slurmctld.pid; do
  [ -f "$f" ] && is_marked "$(cat "$f" 2>/dev/null)" && basename "$(dirname "$f")" | sed 's/^gpulab-slurm-//'
done
[ "$known" = 1 ] && ip netns list 2>/dev/null | awk '{print $1}' | while read -r ns; do
  [[ "$ns" =~ ^gls-([a-z0-9]+)-(n1|n2|sw)$ ]] && is_new "netns $ns" && echo "${BASH_REMATCH[1]}"
done)
for c in $(sort -u <<<"$clusters"); do
  log "stopping Slurm cluster $c (this run started it)"
  "$here/../tests/integration/slurm/stop-cluster.sh" "$c"
done
end_all --all

# Namespaces and links this run made, now empty: an engine's above, or one named for its maker.
[ "$known" = 1 ] || exit 0
ours() {
  local n
  for n in "${stopped[@]}"; do [ "$1" = "gpulab-$n" ] || [ "$1" = "gl-$n" ] && return 0; done
  [[ "$1" =~ ^gpulab-ddp- ]] && maker_gone "$1"
}
for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
  is_new "netns $ns" && ours "$ns" || continue
  [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] || { log "namespace $ns still has processes; left"; continue; }
  ip netns delete "$ns" && log "deleted network namespace $ns"
done
for link in $(ip -o link show 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); print $2}'); do
  is_new "link $link" && ours "$link" || continue
  ip link delete "$link" 2>/dev/null && log "deleted link $link"
done
exit 0
