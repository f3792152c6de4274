#!/usr/bin/env bash
# Stops the test cluster that start-cluster.sh NAME made and removes all of it: every process in
# its node namespaces (slurmd, slurmstepd, job tasks), slurmctld, munged, the namespaces, the
# controller's veth, and /tmp/gpulab-slurm-NAME (--keep-state keeps it).
# usage: stop-cluster.sh NAME [--keep-state]
set -u
NAME=${1:?usage: stop-cluster.sh NAME [--keep-state]}
[[ "$NAME" =~ ^[a-z0-9]{1,6}$ ]] || { echo "error: NAME must be 1-6 chars [a-z0-9]" >&2; exit 2; }
STATE=/tmp/gpulab-slurm-$NAME

# Only processes this cluster started: found by pid file or by living in its namespaces.
kill_pidfile() { [ -f "$1" ] && kill -"$2" "$(cat "$1" 2>/dev/null)" 2>/dev/null; }
for i in 1 2; do
  NS=gls-$NAME-n$i
  if ip netns list 2>/dev/null | grep -qw "$NS"; then
    for p in $(ip netns pids "$NS" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  fi
done
kill_pidfile "$STATE/slurmctld.pid" TERM
kill_pidfile "$STATE/munge/munged.pid" TERM
for _ in $(seq 50); do
  alive=0
  for f in "$STATE/slurmctld.pid" "$STATE/munge/munged.pid"; do
    [ -f "$f" ] && kill -0 "$(cat "$f" 2>/dev/null)" 2>/dev/null && alive=1
  done
  [ $alive = 0 ] && break
  sleep 0.1
done
kill_pidfile "$STATE/slurmctld.pid" KILL
kill_pidfile "$STATE/munge/munged.pid" KILL
# srun/sbatch clients started from the host for this cluster end with their controller.

for ns in gls-$NAME-n1 gls-$NAME-n2 gls-$NAME-sw; do
  # A namespace's processes must be gone before it can be deleted for good.
  for _ in $(seq 50); do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.1; done
  ip netns del "$ns" 2>/dev/null
done
ip link del glc$NAME 2>/dev/null
[ "${2:-}" = --keep-state ] || rm -rf "$STATE"
exit 0
