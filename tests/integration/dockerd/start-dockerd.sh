#!/bin/bash
# Starts a private Docker engine for tests under /tmp/gpulab-dockerd-<NAME>/ (data root, exec
# root, pid file, docker.sock, dockerd.log) on its own bridge gpulab-<NAME>, waits for /_ping,
# and prints its DOCKER_HOST ("unix:///tmp/gpulab-dockerd-<NAME>/docker.sock") on stdout.
# Reuses the engine when it already runs. Several engines can run side by side ("main", "peer").
#
# Usage: start-dockerd.sh [NAME]          NAME: 1-8 of [a-z0-9], default "main"
# Env:   GPULAB_DOCKERD_STORAGE=overlay2|vfs   default: overlay2, falling back to vfs
#        GPULAB_DOCKERD_IPTABLES=0|1           0: --iptables=false --ip-masq=false; default 1 for
#                                              "main" only (see below), 0 for the others
#        GPULAB_DOCKERD_ROOT=/tmp              where gpulab-dockerd-<NAME>/ lives
#        GPULAB_DOCKERD_TCP=127.0.0.1:23760    also listen on TCP there (besides the socket)
#        GPULAB_DOCKERD_TLS_DIR=DIR            with TCP: require TLS client certs; DIR holds
#                                              ca.pem, server-cert.pem, server-key.pem
#        GPULAB_DOCKERD_NETNS=A.B.C            run in its own network namespace gpulab-<NAME>,
#                                              joined to this one by a veth pair: A.B.C.1 here,
#                                              A.B.C.2 there (its TCP address and ports live there)
# Exit:  0 running; 77 cannot run here (not root, no dockerd) -- tests treat that as a skip;
#        1 dockerd failed to start (the end of its log is printed).
set -euo pipefail

name="${1:-main}"
base="${GPULAB_DOCKERD_ROOT:-/tmp}"
root="$base/gpulab-dockerd-$name"
sock="$root/docker.sock"
bridge="gpulab-$name"

log() { echo "[start-dockerd $name] $*" >&2; }
skip() { log "cannot start: $*"; exit 77; }

[[ "$name" =~ ^[a-z0-9]{1,8}$ ]] || { log "bad engine name '$name' (1-8 of a-z 0-9)"; exit 2; }
[ "$(id -u)" = 0 ] || skip "needs root (dockerd manages cgroups, mounts and the bridge)"
command -v dockerd >/dev/null || skip "no dockerd binary (apt-get install docker.io)"
command -v ip >/dev/null || skip "no 'ip' command (apt-get install iproute2)"
command -v curl >/dev/null || skip "no curl"

ping_ok() { curl -sf --max-time 2 --unix-socket "$sock" http://engine/_ping >/dev/null 2>&1; }

mkdir -p "$root"
exec 9>"$root.lock"
flock 9

if [ -f "$root/dockerd.pid" ] && kill -0 "$(cat "$root/dockerd.pid")" 2>/dev/null && ping_ok; then
  log "already running (pid $(cat "$root/dockerd.pid"))"
  echo "unix://$sock"
  exit 0
fi

# A namespace of its own, as a separate server has: its published ports, bridge and addresses
# are apart from this machine's. Only the network is entered (nsenter --net): `ip netns exec`
# would also remount /sys and hide the cgroup mounts dockerd needs.
netns="${GPULAB_DOCKERD_NETNS:-}"
ns="" in_ns=()
if [ -n "$netns" ]; then
  [[ "$netns" =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || { log "bad GPULAB_DOCKERD_NETNS '$netns' (A.B.C)"; exit 2; }
  ns="gpulab-$name" veth="gl-$name"
  [ -e "/run/netns/$ns" ] || ip netns add "$ns" ||
    skip "cannot make the network namespace $ns here (ip netns add failed)"
  if ! ip link show "$veth" >/dev/null 2>&1; then
    ip -n "$ns" link del eth0 2>/dev/null || true
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip addr add "$netns.1/30" dev "$veth"
    ip -n "$ns" addr add "$netns.2/30" dev eth0
  fi
  ip link set "$veth" up
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  in_ns=(nsenter "--net=/run/netns/$ns")
fi
ipn() { if [ -n "$ns" ]; then ip -n "$ns" "$@"; else ip "$@"; fi; }

# Our own bridge, on the first free 172.31.X.0/24, so engines never share an address range.
# One engine at a time picks (engines started side by side would all see the same one free).
exec 7>"$base/gpulab-dockerd-bridges.lock"
flock 7
if ! ipn link show "$bridge" >/dev/null 2>&1; then
  used=$(ip -4 -o addr show | awk '{print $4}')
  subnet=""
  for x in $(seq 200 254); do
    if ! grep -q "^172\.31\.$x\." <<<"$used"; then subnet="172.31.$x"; break; fi
  done
  [ -n "$subnet" ] || { log "no free 172.31.200-254.0/24 subnet for $bridge"; exit 1; }
  ipn link add name "$bridge" type bridge
  ipn addr add "$subnet.1/24" dev "$bridge"
fi
ipn link set "$bridge" up
flock -u 7
exec 7>&-

# One engine of the machine manages iptables: a dockerd with iptables on deletes and makes again
# the machine's DOCKER chains as it starts, under every other such engine (a container start on
# "main" failed with "iptables: No chain/target/match by that name" while a TLS test's engine
# started). The others publish ports through the userland proxy alone, as the lab hosts do.
iptables_default=0
[ "$name" = main ] && iptables_default=1
iptables_flags=()
if [ "${GPULAB_DOCKERD_IPTABLES:-$iptables_default}" = 0 ] || ! command -v iptables >/dev/null; then
  iptables_flags=(--iptables=false --ip-masq=false)
fi

# Docker 20.10 takes its engine ID from /etc/docker/key.json, shared by every dockerd of this
# machine; a key of its own gives each test engine its own ID, as separate machines have (gpulab
# ddp finds its lab host by that ID). Docker 23+ keeps the ID in the data root already.
# The key's path is a daemon.json key only: the machine's daemon.json (runtimes, ...) plus it.
id_flags=()
if [ "$(dockerd --version | sed -n 's/^Docker version \([0-9]*\)\..*/\1/p')" -lt 23 ] 2>/dev/null &&
  command -v jq >/dev/null; then
  { cat /etc/docker/daemon.json 2>/dev/null || echo '{}'; } |
    jq --arg k "$root/key.json" '. + {"deprecated-key-path": $k}' >"$root/daemon.json"
  id_flags=(--config-file "$root/daemon.json")
fi

tcp_flags=()
if [ -n "${GPULAB_DOCKERD_TCP:-}" ]; then
  tcp_flags=(-H "tcp://$GPULAB_DOCKERD_TCP")
  if [ -n "${GPULAB_DOCKERD_TLS_DIR:-}" ]; then
    d="$GPULAB_DOCKERD_TLS_DIR"
    tcp_flags+=(--tlsverify --tlscacert "$d/ca.pem" --tlscert "$d/server-cert.pem" --tlskey "$d/server-key.pem")
  fi
fi

forget_stale_containerd() {
  # dockerd reuses the containerd named in this pid file when a process with that pid is alive.
  # After a SIGKILLed engine (or a reboot) the file stays and the pid can belong to anything:
  # dockerd then waits on a socket nobody serves and gives up ("timeout waiting for containerd
  # to start", seen in CI). Keep the file only when the pid is this engine's own containerd.
  local f="$root/exec/containerd/containerd.pid" cpid
  [ -f "$f" ] || return 0
  cpid=$(cat "$f" 2>/dev/null || true)
  if [ -n "$cpid" ] && tr '\0' ' ' <"/proc/$cpid/cmdline" 2>/dev/null |
    grep -qF -- "--config $root/exec/containerd/containerd.toml"; then
    return 0
  fi
  log "forgetting the stale containerd pid file (pid '$cpid' is not this engine's containerd)"
  rm -f "$f"
}

start_with() {  # storage driver
  local driver="$1"
  rm -f "$sock" "$root/dockerd.pid"
  forget_stale_containerd
  log "starting dockerd (storage $driver, bridge $bridge)"
  # The engine outlives its caller: it keeps no descriptor but its log. An inherited lock held
  # it for as long as the engine ran (`flock /tmp/gpulab-lab.lock ctest ...` left the lab's lock
  # taken by the lab hosts' dockerd after the run, and every later flock waited on it).
  (
    for fd in "/proc/$BASHPID/fd"/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] && eval "exec $fd>&-"
    done
    exec setsid "${in_ns[@]}" dockerd \
      --data-root "$root/data" --exec-root "$root/exec" --pidfile "$root/dockerd.pid" \
      -H "unix://$sock" --bridge "$bridge" --storage-driver "$driver" \
      --containerd-namespace "gpulab-$name" --containerd-plugins-namespace "gpulab-$name-plugins" \
      "${iptables_flags[@]}" "${tcp_flags[@]}" "${id_flags[@]}"
  ) >>"$root/dockerd.log" 2>&1 </dev/null &
  local pid=$!
  for _ in $(seq 1 600); do
    if ping_ok; then
      echo "$driver" >"$root/storage-driver"
      log "up in $SECONDS s (pid $pid)"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  return 1
}

# An engine started again (after a crash or a SIGKILL: start-lab-hosts.sh restarts what is not
# running) keeps the driver its data root was made with: another one would not see its images.
recorded="$(cat "$root/storage-driver" 2>/dev/null || true)"
drivers=("${GPULAB_DOCKERD_STORAGE:-${recorded:-overlay2}}")
[ -z "${GPULAB_DOCKERD_STORAGE:-}" ] && [ -z "$recorded" ] && drivers+=(vfs)
for driver in "${drivers[@]}"; do
  if start_with "$driver"; then
    echo "unix://$sock"
    exit 0
  fi
  log "dockerd did not come up with $driver; last log lines:"
  tail -n 15 "$root/dockerd.log" >&2
done
exit 1
