#!/bin/bash
# Stops test engines started by start-dockerd.sh: removes their containers, stops dockerd (TERM,
# then KILL after 30 s), unmounts what it left, and deletes its bridge (and with --purge its
# network namespace). Tagged images stay in the data root (so the next start reuses them) unless
# --purge is given; untagged ones (a lab image rebuilt by a later run, ~1.9 GB each) are pruned,
# so repeated runs do not fill the disk.
# Usage: stop-dockerd.sh [--purge] [NAME...|--all]      default NAME: main
set -uo pipefail

base="${GPULAB_DOCKERD_ROOT:-/tmp}"
purge=0
names=()
for arg in "$@"; do
  case "$arg" in
    --purge) purge=1 ;;
    --all)
      for d in "$base"/gpulab-dockerd-*/; do
        [ -d "$d" ] && names+=("$(basename "$d" | sed 's/^gpulab-dockerd-//')")
      done
      ;;
    *) names+=("$arg") ;;
  esac
done
[ $# -eq 0 ] && names=(main)

log() { echo "[stop-dockerd $1] $2" >&2; }

stop_one() {
  local name="$1" root="$base/gpulab-dockerd-$1"
  local sock="$root/docker.sock" bridge="gpulab-$1"
  [ -d "$root" ] || { log "$name" "nothing at $root"; return 0; }
  exec 9>"$root.lock"
  flock 9
  local pid="" left=1
  [ -f "$root/dockerd.pid" ] && pid=$(cat "$root/dockerd.pid")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    # Leftover containers first, so no shim or port proxy outlives the engine.
    local ids
    ids=$(curl -sf --max-time 10 --unix-socket "$sock" "http://engine/containers/json?all=1" |
      grep -o '"Id":"[0-9a-f]*"' | cut -d'"' -f4 || true)
    for id in $ids; do
      curl -sf --max-time 30 -X DELETE --unix-socket "$sock" \
        "http://engine/containers/$id?force=1&v=1" >/dev/null || true
    done
    [ -n "$ids" ] && log "$name" "removed $(wc -w <<<"$ids") container(s)"
    # None left: the engine's network store can go with it (below).
    local list
    if list=$(curl -sf --max-time 10 --unix-socket "$sock" "http://engine/containers/json?all=1"); then
      [ "$list" = "[]" ] && left=0
    fi
    local pruned
    pruned=$(curl -sf --max-time 120 -X POST --unix-socket "$sock" \
      'http://engine/images/prune?filters=%7B%22dangling%22%3A%5B%22true%22%5D%7D' |
      grep -o '"SpaceReclaimed":[0-9]*' | cut -d: -f2 || true)
    [ -n "$pruned" ] && log "$name" "pruned untagged images ($((pruned / 1048576)) MiB)"
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 300); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name" "dockerd $pid ignored TERM for 30 s; killing it"
      kill -KILL "$pid" 2>/dev/null
    fi
    log "$name" "stopped dockerd $pid"
    # A dockerd SIGKILLed while it started a container (SoakHosts) can keep that container's
    # endpoint in its network store and its host port "already allocated" after every restart.
    # With no container left, the store is rebuilt on the next start (the default networks).
    if [ "$left" = 0 ] && [ -f "$root/data/network/files/local-kv.db" ]; then
      rm -f "$root/data/network/files/local-kv.db" && log "$name" "cleared its network store"
    fi
  fi
  # The engine's own containerd (started with a config under our exec root) normally exits with
  # it; after a KILL it may not. Match its exact config path, then end it by pid.
  local cpid
  for cpid in $(pgrep -f -- "--config $root/exec/containerd/containerd.toml" || true); do
    kill -TERM "$cpid" 2>/dev/null || true
  done
  # A shim whose dockerd was SIGKILLed mid-start (SoakHosts) can outlive the engine, its
  # container's processes with it: end this engine's shims, found by their containerd address.
  local spid
  for spid in $(pgrep -f -- "containerd-shim.* -address $root/exec/containerd/containerd.sock" || true); do
    pkill -KILL -P "$spid" 2>/dev/null
    kill -KILL "$spid" 2>/dev/null && log "$name" "ended a shim its engine left ($spid)"
  done
  # Mounts left under the root (overlay layers, netns, shm) block a purge.
  grep -o " $root/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
  rm -f "$sock" "$root/dockerd.pid" "$root/exec/containerd/containerd.pid"
  ip link show "$bridge" >/dev/null 2>&1 && ip link delete "$bridge" 2>/dev/null
  # An engine of its own network namespace (GPULAB_DOCKERD_NETNS): its bridge is in there; a
  # purge removes the namespace and its veth pair too.
  local ns="gpulab-$1"
  if [ -e "/run/netns/$ns" ]; then
    ip -n "$ns" link delete "$bridge" 2>/dev/null
    if [ "$purge" = 1 ]; then
      ip link delete "gl-$1" 2>/dev/null
      ip netns delete "$ns" 2>/dev/null
    fi
  fi
  if [ "$purge" = 1 ]; then
    # The lock file goes too: one-off engines (a test's tls<pid>) would leave one per run.
    rm -rf "$root" && rm -f "$root.lock" && log "$name" "purged $root"
  fi
  flock -u 9
}

for n in "${names[@]}"; do stop_one "$n"; done
exit 0
