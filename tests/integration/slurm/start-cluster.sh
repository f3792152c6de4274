#!/usr/bin/env bash
# Starts a real Slurm cluster on this one machine from Debian's packages, for gpulab's tests:
# munged, one slurmctld and two slurmd compute nodes (node1, node2), each slurmd in its own
# network namespace (veth to a bridge), UTS namespace (own hostname) and mount namespace (own
# /etc/hosts naming all hosts). Each node declares 2
# GRES "gpu" backed by no device, so the scheduler hands out GPUs on a machine that has none.
#
# usage: start-cluster.sh NAME    (NAME: 1-6 chars [a-z0-9], keeps concurrent clusters apart)
#        start-cluster.sh NAME --restart-node I   (node I's slurmd again, after a test killed it)
# Writes STATE=/tmp/gpulab-slurm-NAME with slurm.conf, logs and env (source it: SLURM_CONF,
# GPULAB_SLURM_* facts). Exit 0 when both nodes are idle, 77 (with the reason) when this machine
# cannot run it, 1 on failure. stop-cluster.sh NAME removes everything it made.
#
# Layout: the bridge lives in its own "switch" namespace so no firewall of the host (dockerd's
# FORWARD DROP) sees the traffic; the controller runs in the host's namespace (so sbatch, srun and
# scontrol work from the host) with a veth into the switch.
set -uo pipefail

NAME=${1:?usage: start-cluster.sh NAME}
[[ "$NAME" =~ ^[a-z0-9]{1,6}$ ]] || { echo "error: NAME must be 1-6 chars [a-z0-9]" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
STATE=/tmp/gpulab-slurm-$NAME
skip() { echo "SKIPPED: $*"; exit 77; }
die() { echo "error: $*" >&2; "$HERE/stop-cluster.sh" "$NAME" --keep-state >/dev/null 2>&1; exit 1; }

[ "$(id -u)" = 0 ] || skip "a Slurm test cluster needs root (namespaces, daemons)"
for b in munged slurmctld slurmd sbatch srun scontrol ip unshare; do
  command -v $b >/dev/null || skip "$b not found (scripts/install-deps.sh installs slurmd, slurmctld, slurm-client, munge)"
done
# start_slurmd I: node I's slurmd in its namespaces. nsenter, not ip netns exec: that remounts
# /sys, which hides the cgroup mounts slurmd checks at start. The node's /etc/hosts is bound in
# its own mount namespace instead.
start_slurmd() {
  nsenter --net=/run/netns/gls-$NAME-n$1 unshare --uts --mount --propagation private sh -c \
    "mount --bind '$STATE/hosts' /etc/hosts && hostname node$1 && exec slurmd -f '$STATE/slurm.conf' -N node$1"
}
# --restart-node I: start node I's slurmd again (after a test killed it), wait until it is idle.
if [ "${2:-}" = --restart-node ]; then
  I=${3:?node number}
  start_slurmd "$I" || { echo "error: slurmd node$I did not start" >&2; exit 1; }
  export SLURM_CONF=$STATE/slurm.conf
  for _ in $(seq 100); do
    sinfo -h -n node$I -o %T 2>/dev/null | grep -qx idle && { echo "node$I idle again"; exit 0; }
    sleep 0.3
  done
  echo "error: node$I did not come back: $(sinfo -h -n node$I -o '%T %E')" >&2; exit 1
fi
"$HERE/stop-cluster.sh" "$NAME" >/dev/null 2>&1  # leftovers of an earlier run
mkdir -p "$STATE" || die "cannot create $STATE"

# A /24 per cluster name, and ports of its own, so two clusters (two helpers) do not meet.
SUM=$(echo -n "$NAME" | cksum | cut -d' ' -f1)
NET=10.$((202 + SUM % 40)).$((SUM / 40 % 250 + 1))
CTLD_PORT=$((16000 + SUM % 4000))
SW=gls-$NAME-sw
ip netns add "$SW" 2>/dev/null || skip "cannot create network namespaces here (ip netns add failed)"
ip -n "$SW" link add br0 type bridge || die "bridge"
ip -n "$SW" link set br0 up && ip -n "$SW" link set lo up
# The controller's side: a veth from the host namespace into the switch.
ip link add glc$NAME type veth peer name ctl netns "$SW" || skip "cannot create a veth pair"
ip -n "$SW" link set ctl master br0 up
ip addr add $NET.1/24 dev glc$NAME && ip link set glc$NAME up || die "controller address"

HOSTS="127.0.0.1 localhost
$NET.1 ctl$NAME
$NET.2 node1
$NET.3 node2"
for i in 1 2; do
  NS=gls-$NAME-n$i
  ip netns add "$NS" || die "namespace $NS"
  ip link add eth0 netns "$NS" type veth peer name n$i netns "$SW" || die "veth for node$i"
  ip -n "$SW" link set n$i master br0 up
  ip -n "$NS" addr add $NET.$((i + 1))/24 dev eth0 || die "address of node$i"
  ip -n "$NS" link set eth0 up && ip -n "$NS" link set lo up
  mkdir -p "$STATE/node$i"
done
echo "$HOSTS" >"$STATE/hosts"

# munge: its own key and socket (the host's munged, if any, is left alone).
dd if=/dev/urandom of="$STATE/munge.key" bs=1024 count=1 status=none && chmod 400 "$STATE/munge.key"
mkdir -p "$STATE/munge" && chmod 700 "$STATE/munge"
munged --force --key-file "$STATE/munge.key" --socket "$STATE/munge/munge.sock" \
  --pid-file "$STATE/munge/munged.pid" --log-file "$STATE/munge/munged.log" \
  --seed-file "$STATE/munge/munged.seed" || die "munged did not start (see $STATE/munge/munged.log)"

# Task binding: task/affinity pins each task to its cores; cgroups are not needed for it.
cat >"$STATE/slurm.conf" <<EOF
ClusterName=gpulab$NAME
SlurmctldHost=ctl$NAME($NET.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=6818
AuthType=auth/munge
AuthInfo=socket=$STATE/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/%n/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/%n/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/%n/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
ReturnToService=2
JobRequeue=1
SlurmdTimeout=10
SlurmctldTimeout=10
MessageTimeout=5
KillWait=3
InactiveLimit=0
MinJobAge=300
NodeName=node1 NodeHostname=node1 NodeAddr=$NET.2 CPUs=$(nproc) RealMemory=1000 Gres=gpu:2 State=UNKNOWN
NodeName=node2 NodeHostname=node2 NodeAddr=$NET.3 CPUs=$(nproc) RealMemory=1000 Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=node[1-2] Default=YES MaxTime=60 State=UP
EOF
# GRES gpu on placeholder device nodes (major 195, no driver behind them): Slurm 22.05 drops a
# gpu GRES without File= ("Ignoring file-less GPU"), and takes each GPU's index for
# CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES / SLURM_STEP_GPUS from the node's minor number.
# Nothing opens them: without task/cgroup's ConstrainDevices Slurm only stat()s them.
mkdir -p "$STATE/dev" && mknod "$STATE/dev/gpu0" c 195 0 && mknod "$STATE/dev/gpu1" c 195 1 || die "mknod"
echo "NodeName=node[1-2] Name=gpu File=$STATE/dev/gpu[0-1]" >"$STATE/gres.conf"
mkdir -p "$STATE/ctld"
export SLURM_CONF=$STATE/slurm.conf

# The controller gets its own hostname (slurmctld checks it against SlurmctldHost).
unshare --uts sh -c "hostname ctl$NAME && exec slurmctld -f '$SLURM_CONF'" \
  || die "slurmctld did not start (see $STATE/slurmctld.log)"
for i in 1 2; do
  mkdir -p "$STATE/node$i/spool"
  start_slurmd $i \
    || die "slurmd node$i did not start (see $STATE/node$i/slurmd.log)"
done

cat >"$STATE/env" <<EOF
export SLURM_CONF=$SLURM_CONF
export GPULAB_SLURM_STATE=$STATE
export GPULAB_SLURM_NAME=$NAME
export GPULAB_SLURM_NET=$NET
EOF

for _ in $(seq 60); do
  idle=$(sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle$')
  [ "$idle" = 2 ] && { echo "slurm cluster $NAME up: controller $NET.1:$CTLD_PORT, node1 $NET.2, node2 $NET.3 (source $STATE/env)"; exit 0; }
  sleep 0.5
done
sinfo -N -l 2>&1
tail -20 "$STATE/slurmctld.log" "$STATE"/node*/slurmd.log
die "the two nodes did not become idle in 30 s"
