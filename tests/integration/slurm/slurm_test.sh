#!/usr/bin/env bash
# gpulab on a real Slurm cluster (start-cluster.sh: slurmctld + two slurmd in their own network
# and UTS namespaces). Cases, each a ctest of its own, run in this order on one cluster:
#   start       start the cluster (the ctest fixture's setup)
#   equivalence sbatch of a 2-node x 2-task `gpulab train` (Gloo, CPU ranks, Fashion-MNIST,
#               fp64, deterministic) ends with one process's weights (1e-9), once with one task
#               per rank and once with one task per node starting its ranks (from its 2 GPUs)
#   cancel      scancel mid-run: every rank on both nodes gone within 10 s
#   requeue     scontrol requeue after the first checkpoint: the job runs again, resumes from
#               it (--resume auto) and ends with an uninterrupted run's weights
#   script      `gpulab slurm submit --dry-run` prints a script that `sbatch --test-only` accepts,
#               in which every rank sees all of its node's GPUs (a probe job under the script's
#               own #SBATCH lines prints what each rank is shown), and the same request
#               submitted for real trains to the end; a run past its job's time limit warns
#   nodefail    node2's slurmd and ranks SIGKILLed mid-run: the step fails within the
#               heartbeat limit, with a message naming node2 and its ranks
#   stop        stop the cluster and check that nothing is left (the fixture's cleanup)
# usage: slurm_test.sh CASE /path/to/gpulab      Exit 0 pass, 1 fail, 77 skipped (reason printed).
set -uo pipefail

CASE=${1:?case}
GPULAB=${2:?path to gpulab}
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=${GPULAB_TEST_SLURM_NAME:-glab}
STATE=/tmp/gpulab-slurm-$NAME
PY=/usr/bin/python3
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }

case "$CASE" in
start) exec "$HERE/start-cluster.sh" "$NAME" ;;
stop)
  "$HERE/stop-cluster.sh" "$NAME"
  left=$(ip netns list 2>/dev/null | grep -c "gls-$NAME-")
  [ "$left" = 0 ] || fail "$left namespaces left"
  ip link show "glc$NAME" >/dev/null 2>&1 && fail "veth glc$NAME left"
  [ -e "$STATE" ] && fail "$STATE left"
  echo "cluster $NAME stopped, nothing left"; exit 0 ;;
esac

[ -f "$STATE/env" ] || skip "no test cluster (the start case skipped or failed; see its output)"
. "$STATE/env"
[ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] \
  || skip "dataset-fashion-mnist is not installed"
WORK=$(mktemp -d -t gpulab-slurm-test-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1

# ResNet-18 on the first 32 Fashion-MNIST images at 32x32, in float64 with deterministic kernels
# (DDP and one process then agree to ~1e-15, so 1e-9 catches any real difference), global
# batch 8: 4 steps per epoch. SyncBatchNorm so BatchNorm sees the global batch on any layout.
BASE=(train --model resnet18 --dataset fashion-mnist --input_size 32 --optimizer sgd
      --learning_rate 0.01 --momentum 0.9 --seed 5 --deterministic --sync_bn --precision fp64
      --batch_size 8 --batch_size_scaled --subset 32 --limit_eval_batches 1 --no_report
      --num_workers 1 --threads 1)
compare() { $PY "$HERE/../ddp/compare_weights.py" "$1/model.safetensors" "$2/model.safetensors" 1e-9; }
# sbatch_job NAME SBATCH_OPTS... -- SRUN_OPTS... -- TRAIN_ARGS...: writes and submits a batch script,
# prints the job id. Output in $WORK/NAME.out, run folder $WORK/NAME.
sbatch_job() {
  local name=$1; shift
  local sb=() sr=()
  while [ "$1" != -- ]; do sb+=("$1"); shift; done; shift
  while [ "$1" != -- ]; do sr+=("$1"); shift; done; shift
  {
    echo "#!/bin/bash"
    echo "#SBATCH --job-name=$name --output=$WORK/$name.out ${sb[*]}"
    echo "srun --kill-on-bad-exit=1 ${sr[*]} $GPULAB ${*} --output_dir $WORK/$name"
  } >"$WORK/$name.sbatch"
  sbatch --parsable "$WORK/$name.sbatch"
}
state_of() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
wait_job() {  # wait_job JOB SECONDS: until the job has left the queue's active states
  for _ in $(seq $(($2 * 5))); do
    case "$(state_of "$1")" in PENDING|RUNNING|CONFIGURING|COMPLETING|REQUEUED|RESIZING|SUSPENDED) sleep 0.2 ;; *) return 0 ;; esac
  done
  return 1
}
# The gpulab processes in the node namespaces (the ranks, and launchers in per-node mode): gpulab
# or its libtorch half beside it, gpulab-torch, which runs the training commands.
ranks_alive() {
  local torch_half
  torch_half="$(dirname "$(readlink -f "$GPULAB")")/gpulab-torch"
  for i in 1 2; do
    for p in $(ip netns pids "gls-$NAME-n$i" 2>/dev/null); do
      case "$(readlink /proc/$p/exe 2>/dev/null)" in
        "$(readlink -f "$GPULAB")"|"$torch_half") ;;
        *) continue ;;
      esac
      grep -q '^State:.*Z' /proc/$p/status 2>/dev/null || echo "node$i:$p"
    done
  done
}
wait_for() {  # wait_for SECONDS FILE PATTERN
  for _ in $(seq $(($1 * 5))); do grep -q -- "$3" "$2" 2>/dev/null && return 0; sleep 0.2; done
  return 1
}
elapsed() { $PY -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$@"; }

case "$CASE" in
equivalence)
  "$GPULAB" "${BASE[@]}" --num_epochs 2 --output_dir "$WORK/single" >"$WORK/single.log" 2>&1 \
    || { cat "$WORK/single.log"; fail "the single process failed"; }
  grep -q "4 steps per epoch" "$WORK/single.log" || { cat "$WORK/single.log"; fail "expected 4 steps per epoch"; }
  # One rank per task: srun starts 2 tasks on each node.
  J1=$(sbatch_job tasks --nodes=2 --ntasks-per-node=2 --time=5 -- -- "${BASE[@]}" --num_epochs 2) || fail "sbatch"
  # One task per node that starts a rank per GPU it was given (2 GRES gpus per node).
  J2=$(sbatch_job nodes --nodes=2 --ntasks-per-node=1 --gres=gpu:2 --cpus-per-task=2 --time=5 -- -- \
       "${BASE[@]}" --num_epochs 2) || fail "sbatch"
  for j in "$J1 tasks" "$J2 nodes"; do
    set -- $j
    wait_job "$1" 170 || { cat "$WORK/$2.out"; scancel "$1"; fail "job $1 ($2) did not finish"; }
    echo "== job $1 ($2): $(state_of "$1"), exit $(scontrol show job "$1" | sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p')"
    grep -E "^Slurm job|Hello from|World size|gpulab launch|Test accuracy" "$WORK/$2.out"
    [ "$(state_of "$1")" = COMPLETED ] || { cat "$WORK/$2.out"; fail "job $1 ($2) did not complete"; }
    grep -q "World size: 4" "$WORK/$2.out" || fail "rank 0 did not see 4 ranks"
    for h in "Hello from local_rank 1, global_rank 3" "Hello from local_rank 0, global_rank 2"; do
      grep -q "$h" "$WORK/$2.out" || fail "no '$h'"
    done
    echo "== 2 nodes x 2 ranks ($2) vs one process (float64, 8 steps over 2 epochs)"
    compare "$WORK/$2" "$WORK/single" || fail "weights differ"
  done
  grep -q "one task per rank), rendezvous on node1:" "$WORK/tasks.out" || fail "task layout not reported"
  grep -q "one task per node starts them), rendezvous on node1:" "$WORK/nodes.out" || fail "node layout not reported"
  ;;

cancel)
  J=$(sbatch_job long --nodes=2 --ntasks-per-node=2 --time=5 -- -- "${BASE[@]}" --num_epochs 200) || fail "sbatch"
  wait_for 120 "$WORK/long.out" "^Normalization" || { cat "$WORK/long.out"; fail "the job did not start training"; }
  sleep 2
  BEFORE=$(ranks_alive | tr '\n' ' ')
  echo "ranks before scancel: $BEFORE"
  [ "$(echo $BEFORE | wc -w)" = 4 ] || fail "expected 4 ranks on the two nodes"
  T0=$(date +%s.%N)
  scancel "$J"
  for _ in $(seq 100); do [ -z "$(ranks_alive)" ] && break; sleep 0.1; done
  T1=$(date +%s.%N)
  LEFT=$(ranks_alive | tr '\n' ' ')
  echo "all ranks gone $(elapsed "$T0" "$T1") s after scancel${LEFT:+ -- still alive: $LEFT}"
  [ -z "$LEFT" ] || fail "ranks survived scancel by 10 s: $LEFT"
  wait_job "$J" 30
  echo "job state: $(state_of "$J")"
  ;;

requeue)
  # 3 epochs, a checkpoint after each; requeued once the first is complete. --resume auto starts
  # from scratch when there is none, so the first run and the requeued one use one command.
  J=$(sbatch_job rq --nodes=2 --ntasks-per-node=2 --time=5 --requeue --open-mode=append -- -- \
      "${BASE[@]}" --num_epochs 3 --resume auto) || fail "sbatch"
  for _ in $(seq 600); do ls "$WORK/rq/checkpoints"/*.json >/dev/null 2>&1 && break; sleep 0.2; done
  ls "$WORK/rq/checkpoints"/*.json >/dev/null 2>&1 || { cat "$WORK/rq.out"; fail "no checkpoint"; }
  [ "$(state_of "$J")" = RUNNING ] || { cat "$WORK/rq.out"; fail "job $J is $(state_of "$J") before the requeue"; }
  scontrol requeue "$J" || fail "scontrol requeue"
  echo "requeued job $J after $(ls "$WORK/rq/checkpoints" | tr '\n' ' ')"
  # A requeued job may start again only after a delay (BeginTime = now + 120 s): release it.
  for _ in $(seq 100); do
    case "$(state_of "$J")" in PENDING) scontrol update JobId="$J" StartTime=now; break ;; COMPLETING|REQUEUED) sleep 0.1 ;; *) break ;; esac
  done
  wait_job "$J" 170 || { cat "$WORK/rq.out"; scancel "$J"; fail "the requeued job did not finish"; }
  grep -E "^Slurm job|No complete checkpoint|Resumed from|Test accuracy" "$WORK/rq.out"
  echo "job $J: $(state_of "$J"), restarts $(scontrol show job "$J" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')"
  [ "$(state_of "$J")" = COMPLETED ] || { cat "$WORK/rq.out"; fail "the requeued job did not complete"; }
  grep -q "Resumed from .*epoch [12]" "$WORK/rq.out" || { cat "$WORK/rq.out"; fail "the requeued run did not resume from a checkpoint"; }
  "$GPULAB" "${BASE[@]}" --num_epochs 3 --output_dir "$WORK/straight" >"$WORK/straight.log" 2>&1 \
    || { cat "$WORK/straight.log"; fail "the uninterrupted run failed"; }
  echo "== requeued and resumed (4 ranks) vs uninterrupted (one process)"
  compare "$WORK/rq" "$WORK/straight" || fail "weights differ"
  ;;

script)
  # The seed-style request: 2 GPUs per node, 2 nodes, the train flags as one string.
  FLAGS="${BASE[*]:1} --num_epochs 1"
  OPTS=(--nodes 2 --time 00:05:00 --job-name gen --gpulab "$GPULAB" --run-dir "$WORK/gen"
        --output "$WORK/gen.out")
  "$GPULAB" slurm submit "${OPTS[@]}" --dry-run 2 script_multi_node "$FLAGS" >"$WORK/gen.sbatch" || { cat "$WORK/gen.sbatch"; fail "dry run failed"; }
  cat "$WORK/gen.sbatch"
  for want in "#SBATCH --nodes=2" "#SBATCH --ntasks-per-node=2" "#SBATCH --gres=gpu:2" \
              "#SBATCH --time=00:05:00" "#SBATCH --requeue" "srun --kill-on-bad-exit=1" "--resume auto"; do
    grep -q -- "$want" "$WORK/gen.sbatch" || fail "the script lacks '$want'"
  done
  if "$GPULAB" ddp --help 2>/dev/null | grep -q -- --scheduler; then  # a build with the builder
    "$GPULAB" ddp --scheduler slurm --dry-run --nnodes 2 --time 00:05:00 --job-name gen --gpulab "$GPULAB" \
      --run-dir "$WORK/gen" --output "$WORK/gen.out" 2 script_multi_node "$FLAGS" >"$WORK/ddp.sbatch" \
      || { cat "$WORK/ddp.sbatch"; fail "gpulab ddp --scheduler slurm --dry-run failed"; }
    diff "$WORK/gen.sbatch" "$WORK/ddp.sbatch" || fail "gpulab ddp --scheduler slurm wrote another script"
    echo "gpulab ddp --scheduler slurm --dry-run: the same script"
  fi
  # No per-task GPU binding (every rank sees its node's GPUs); each rank its share of the cores.
  grep -q -- "--gpus-per-task" "$WORK/gen.sbatch" && fail "the script binds one GPU per task"
  cores=$(sinfo -h -o %c | tr -d '+' | sort -n | head -1)
  grep -q -- "#SBATCH --cpus-per-task=$(( cores / 2 > 0 ? cores / 2 : 1 ))$" "$WORK/gen.sbatch" ||
    fail "the script lacks --cpus-per-task from the nodes' $cores cores over 2 GPUs"
  # What each rank is shown, under the script's own #SBATCH lines and srun options: the GRES
  # placeholders stand for GPUs. Then the same with one GPU per task, which hides the others.
  probe() {  # probe NAME [EXTRA_SBATCH_LINE]: prints each rank's visible GPUs, sorted by rank
    $PY - "$WORK/gen.sbatch" "$WORK/$1.sbatch" "$WORK/$1.out" "${2:-}" <<'PY'
import re, sys
src, dst, out, extra = sys.argv[1:5]
lines, keep = open(src).read().splitlines(), []
for line in lines:
    if line.startswith("srun "):
        keep.append(line.rstrip(" \\") + " bash -c 'echo \"rank $SLURM_PROCID on $(hostname): "
                    "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset} SLURM_STEP_GPUS=${SLURM_STEP_GPUS:-unset}\"'")
        break
    line = re.sub(r"^#SBATCH --output=.*", "#SBATCH --output=" + out, line)
    keep.append(line)
    if extra and line.startswith("#SBATCH --gres"):
        keep.append(extra)
open(dst, "w").write("\n".join(keep) + "\n")
PY
    local j; j=$(sbatch --parsable "$WORK/$1.sbatch") || fail "sbatch of the $1 probe"
    wait_job "$j" 60 || { scancel "$j"; fail "the $1 probe did not finish"; }
    grep '^rank ' "$WORK/$1.out" | sort -n -k2
  }
  probe visible | tee "$WORK/visible.log"
  [ "$(grep -c 'CUDA_VISIBLE_DEVICES=0,1 ' "$WORK/visible.log")" = 4 ] ||
    fail "not every one of the 4 ranks sees both of its node's GPUs"
  probe bound "#SBATCH --gpus-per-task=1" | tee "$WORK/bound.log"
  grep -q 'CUDA_VISIBLE_DEVICES=0,1 ' "$WORK/bound.log" &&
    fail "with --gpus-per-task=1 a rank still saw both GPUs: the probe cannot tell the bindings apart"
  echo "gpulab's script: every rank sees GPUs 0,1 of its node; with --gpus-per-task=1 each sees one"
  sbatch --test-only "$WORK/gen.sbatch" >"$WORK/test-only.log" 2>&1 || { cat "$WORK/test-only.log"; fail "sbatch --test-only refused it"; }
  echo "sbatch --test-only: $(cat "$WORK/test-only.log")"
  grep -q "to start at" "$WORK/test-only.log" || fail "sbatch --test-only did not say when it would start"
  # Bad input: exit 2, a message that says what to do, nothing submitted.
  bad() {
    local want=$1; shift
    "$GPULAB" slurm "$@" >"$WORK/bad.log" 2>&1; local code=$?
    echo "== gpulab slurm $* -> exit $code: $(grep error: "$WORK/bad.log" | head -1)"
    [ $code = 2 ] && grep -q -- "$want" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "gpulab slurm $*"; }
  }
  # No cluster behind sbatch (no SLURM_CONF and no /etc/slurm/slurm.conf here): said so.
  if [ ! -e /etc/slurm/slurm.conf ]; then
    env -u SLURM_CONF "$GPULAB" slurm submit "${OPTS[@]}" 2 "--model resnet18" >"$WORK/bad.log" 2>&1
    echo "== no cluster -> exit $?: $(grep error: "$WORK/bad.log" | head -1)"
    grep -q "error: no Slurm cluster answers from this machine" "$WORK/bad.log" &&
      grep -q "hint: run it on a login node" "$WORK/bad.log" &&
      [ "$(grep -c '^error:' "$WORK/bad.log")" = 1 ] && ! grep -q '^note:' "$WORK/bad.log" ||
      { cat "$WORK/bad.log"; fail "no-cluster message"; }
  fi
  bad "is not a Slurm job id" status '1;rm'
  bad "is not a Slurm time limit" submit --time soon --dry-run 2 "--model resnet18"
  bad "which the Slurm script decides" submit --dry-run 2 "--model resnet18 --nproc_per_node 4"
  bad "unclosed quote" submit --dry-run 2 "--model 'resnet18"
  bad "needs --image" submit --container pyxis --dry-run 2
  bad "needs N, the GPUs per node" submit --dry-run "--model resnet18"
  # Submitted for real: it trains to the end; status and logs follow it.
  J=$("$GPULAB" slurm submit "${OPTS[@]}" 2 script_multi_node "$FLAGS" | sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p')
  [ -n "$J" ] || fail "no job id from gpulab slurm submit"
  wait_job "$J" 170 || { cat "$WORK/gen.out"; scancel "$J"; fail "job $J did not finish"; }
  "$GPULAB" slurm status "$J" | tee "$WORK/status.log"
  grep -q "job $J: COMPLETED" "$WORK/status.log" || { cat "$WORK/gen.out"; fail "job $J did not complete"; }
  "$GPULAB" slurm logs "$J" >"$WORK/logs.log" || fail "gpulab slurm logs"
  grep -E "^gpulab: job|^Slurm job|Test accuracy" "$WORK/logs.log"
  grep -q "one task per rank), rendezvous on node1" "$WORK/logs.log" || fail "the logs lack the job's layout"
  grep -q "World size: 4" "$WORK/logs.log" || fail "the job did not run 4 ranks"
  # gpulab slurm cancel on a running job.
  # It asks for 3 minutes and plans 2000 epochs: after its first steps it warns that it cannot
  # end inside the job's time limit.
  J2=$("$GPULAB" slurm submit --nodes 2 --job-name gen2 --time 3 --gpulab "$GPULAB" --run-dir "$WORK/gen2" \
       --output "$WORK/gen2.out" 2 "${BASE[*]:1} --num_epochs 2000" | sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p')
  wait_for 120 "$WORK/gen2.out" "^Normalization" || { cat "$WORK/gen2.out"; fail "job $J2 did not start"; }
  wait_for 90 "$WORK/gen2.out" "^Warning: at .* but this Slurm job ends in" ||
    { cat "$WORK/gen2.out"; scancel "$J2"; fail "job $J2 did not warn about its time limit"; }
  grep "^Warning: at" "$WORK/gen2.out"
  "$GPULAB" slurm cancel "$J2" || fail "gpulab slurm cancel"
  wait_job "$J2" 30
  echo "job $J2 after gpulab slurm cancel: $(state_of "$J2")"
  [ "$(state_of "$J2")" = CANCELLED ] || fail "job $J2 is $(state_of "$J2")"
  ;;

nodefail)
  # node2 dies with its ranks (SIGKILL to slurmd, slurmstepd and the ranks). The ranks on node1
  # see their collective fail at once and name the lost peer; srun ends the step there
  # (--kill-on-bad-exit) and the job ends (NODE_FAIL) once slurmctld misses node2's heartbeat
  # (SlurmdTimeout=10 s). Both within the job's heartbeat limit.
  LIMIT=30
  J=$(sbatch_job nf --nodes=2 --ntasks-per-node=2 --time=5 --no-requeue -- -- "${BASE[@]}" \
      --num_epochs 200 --heartbeat_timeout $LIMIT) || fail "sbatch"
  wait_for 120 "$WORK/nf.out" "^Normalization" || { cat "$WORK/nf.out"; fail "the job did not start training"; }
  sleep 2
  VICTIMS=$(ip netns pids "gls-$NAME-n2")
  echo "killing node2: pids $(echo $VICTIMS)"
  T0=$(date +%s.%N)
  kill -KILL $VICTIMS
  for _ in $(seq $((LIMIT * 10))); do [ -z "$(ranks_alive)" ] && break; sleep 0.1; done
  T1=$(date +%s.%N)
  for _ in $(seq $((LIMIT * 10))); do
    case "$(state_of "$J")" in RUNNING|CONFIGURING) sleep 0.1 ;; *) break ;; esac
  done
  T2=$(date +%s.%N)
  RANKS_S=$(elapsed "$T0" "$T1"); JOB_S=$(elapsed "$T0" "$T2")
  echo "ranks on node1 gone $RANKS_S s, job $J $(state_of "$J") $JOB_S s after node2 was killed (limit $LIMIT s)"
  grep -E "error|srun" "$WORK/nf.out" | head -20
  "$HERE/start-cluster.sh" "$NAME" --restart-node 2 || fail "node2 did not come back"
  LEFT=$(ranks_alive | tr '\n' ' ')
  [ -z "$LEFT" ] || fail "ranks left: $LEFT"
  $PY -c "import sys; sys.exit(0 if $RANKS_S < 10 else 1)" || fail "the ranks on node1 took $RANKS_S s to stop"
  $PY -c "import sys; sys.exit(0 if $JOB_S < $LIMIT else 1)" || fail "the job took $JOB_S s to end"
  grep -q "is node2 (ranks 2-3)" "$WORK/nf.out" || { cat "$WORK/nf.out"; fail "no message names node2 and its ranks"; }
  ;;
*) fail "unknown case $CASE" ;;
esac
echo PASS
