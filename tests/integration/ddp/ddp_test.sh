#!/usr/bin/env bash
# End-to-end DDP checks through the gpulab CLI on CPU (Gloo): equivalence of 1, 2 and 3 ranks;
# a 4-rank job over two network namespaces; SIGKILL of a rank; SIGSTOP of a rank (a hang);
# --max_restarts resume; a rank that hangs while still running (stall), found by the default
# hang detection.
# Bad options are rejected once, before any rank starts.
# usage: ddp_test.sh equivalence|shard|shard_mixed|multinode|kill|hang|restart|stall|options|disk_full
#        /path/to/gpulab [/path/to/gpulab-hooks (equivalence: the nudged-gradient control)]
# Exit 0 pass, 1 fail, 77 skipped (with the reason on stdout).
set -uo pipefail

CASE=${1:?case}
GPULAB=${2:?path to gpulab}
HOOKS=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d -t gpulab-ddp-XXXXXX)
NETNS=()
cleanup() {
  for ns in "${NETNS[@]}"; do ip netns del "$ns" 2>/dev/null; done
  umount "$WORK/disk" 2>/dev/null  # disk_full's tmpfs, if the case ended early
  rm -rf "$WORK"
}
trap cleanup EXIT

PY=/usr/bin/python3  # Debian's interpreter (the standard library is all these scripts need)
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }

# A tiny deterministic job: ResNet-18 on 32x32 synthetic images, SyncBatchNorm so that BatchNorm
# sees the global batch whatever the number of ranks; global batch 12 unless a case says otherwise.
BASE=(train --model resnet18 --dataset synthetic --input_size 32 --optimizer sgd
      --learning_rate 0.002 --seed 3 --deterministic --sync_bn --no_report --num_workers 1)
COMMON=("${BASE[@]}" --threads 1 --batch_size 12)

# run NAME ARGS...: one job, output in $WORK/NAME, log in $WORK/NAME.log; fails on non-zero exit.
run() {
  local name=$1; shift
  "$@" --output_dir "$WORK/$name" >"$WORK/$name.log" 2>&1
  local code=$?
  [ $code = 0 ] || { cat "$WORK/$name.log"; fail "$name exited with $code"; }
}
# compare A B TOLERANCE: every call names its tolerance and says where it comes from.
compare() { $PY "$HERE/compare_weights.py" "$WORK/$1/model.safetensors" "$WORK/$2/model.safetensors" "${3:?tolerance}" \
  || fail "weights of $1 and $2 differ"; }
accuracy() { grep "Test accuracy" "$WORK/$1.log" | tail -1 | awk '{print $3}'; }
count() { grep -c -- "$2" "$WORK/$1.log"; }
# The launcher's ranks (RANKS), the pid of rank 1 (VICTIM) and the master port (PORT).
find_rank1() {
  RANKS=$(pgrep -P $LAUNCHER)
  VICTIM=""
  for p in $RANKS; do tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx "RANK=1" && VICTIM=$p; done
  [ -n "$VICTIM" ] || { cat "$WORK/job.log"; fail "rank 1 not found among $RANKS"; }
  PORT=$(sed -n 's/.*master 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/job.log" | head -1)
}
# After a failure: no rank left (a zombie awaiting its reaper counts as gone) and the port free again.
assert_all_gone() {
  for p in $RANKS; do
    if [ -e /proc/$p ] && ! grep -q '^State:.*Z' /proc/$p/status 2>/dev/null; then fail "rank pid $p survived"; fi
  done
  $PY -c "import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $PORT))" \
    || fail "port $PORT still bound"
  echo "all ranks gone, port $PORT free"
}

case "$CASE" in
equivalence)
  # 2 epochs of 4 optimizer steps (global batch 6 = 3x2 = 2x3), so the per-epoch reshuffle, the
  # momentum buffers and the running statistics all take part. In float64 (--precision fp64):
  # in fp32 this ResNet on 6-12 images amplifies rounding so fast (a ReLU or max-pool decision
  # that flips changes a whole BatchNorm channel of the 1x1 layer4 maps) that one process with 1
  # thread and with 2 threads already differ by 1e-2 after 6 steps; in fp64 they agree to 1e-13,
  # so a DDP difference above 1e-9 is a real one.
  # fp64 convolutions are slow on the CPU: the test set is evaluated once (--log_every 2) on
  # its first 12 images (the same 12 whatever the number of ranks), and the one-process run
  # uses 2 threads (fp64 does not mind the order).
  LONG=("${BASE[@]}" --precision fp64 --batch_size 6 --subset 24 --num_epochs 2 --log_every 2 --limit_eval_batches 2)
  run single "$GPULAB" "${LONG[@]}" --threads 2
  grep -q "4 steps per epoch" "$WORK/single.log" || { cat "$WORK/single.log"; fail "expected 4 steps per epoch"; }
  for n in 2 3; do
    run ddp$n "$GPULAB" "${LONG[@]}" --threads 1 --batch_size_scaled --nproc_per_node $n
    echo "== $n ranks vs one process (float64, 8 steps over 2 epochs)"
    compare ddp$n single 1e-9
    [ "$(accuracy ddp$n)" = "$(accuracy single)" ] || fail "test accuracy $(accuracy ddp$n) vs $(accuracy single)"
    echo "test accuracy $(accuracy ddp$n) (one process: $(accuracy single))"
    [ "$(count ddp$n 'Hello from local_rank')" = "$n" ] || fail "expected $n hello lines"
    grep -q "Hello from local_rank $((n-1)), global_rank $((n-1))" "$WORK/ddp$n.log" || fail "no hello from the last rank"
    [ "$(count ddp$n 'Auto-detected backend: gloo')" = 1 ] || fail "expected one 'Auto-detected backend: gloo'"
    [ "$(count ddp$n 'Epoch 2/2')" = 1 ] || fail "epoch lines must come from rank 0 only"
  done
  # Channels-last parameters (the CPU default for ResNet in fp32) reach DDP's gradient buckets
  # through strided views: 2 ranks channels-last must match the contiguous single process too.
  run ddp2cl "$GPULAB" "${LONG[@]}" --threads 1 --batch_size_scaled --nproc_per_node 2 \
    --memory_format channels_last
  grep -q "Memory format: channels_last" "$WORK/ddp2cl.log" || fail "expected a channels_last run"
  echo "== 2 ranks channels-last vs one process contiguous (float64, 8 steps over 2 epochs)"
  compare ddp2cl single 1e-9
  # The 1e-9 comparison sees a small bug: the one-process run again with its largest gradient
  # element moved by 1e-6 of itself before step 3 (a test hook of gpulab-hooks) must differ.
  [ -n "$HOOKS" ] || fail "the equivalence case needs gpulab-hooks as its third argument"
  GPULAB_TEST_NUDGE_GRAD=0:3:1e-6 run nudged "$HOOKS" "${LONG[@]}" --threads 2
  grep -q "gradient nudged by 1e-06" "$WORK/nudged.log" || fail "the gradient nudge did not run"
  echo "== one process with one gradient element nudged by 1e-6 vs one process (must fail)"
  if $PY "$HERE/compare_weights.py" "$WORK/nudged/model.safetensors" \
      "$WORK/single/model.safetensors" 1e-9; then
    fail "a 1e-6 nudge of one gradient element passed the 1e-9 weight comparison"
  fi
  # float32 at the issue's 1e-5 with a language model (llama-tiny on synthetic tokens): no ReLU
  # or max-pool decision to flip, so float32 rounding stays rounding. The ResNet above is not
  # checked in float32: one step of 48 images in float32 is already 3.7e-2 / 7.8e-2 (seeds 6 / 5)
  # off float64 in ONE process (a near-tie that rounds the other way moves a BatchNorm bias),
  # so DDP vs one process there measures luck (docs/ddp.md).
  LM=(train --model llama-tiny --dataset synthetic-text --seq_len 64 --batch_size 12 --seed 3
      --deterministic --no_report --limit_eval_batches 1 --no_checkpoints --device cpu --threads 1)
  LM32=("${LM[@]}" --optimizer sgd --learning_rate 0.5 --num_epochs 1 --limit_train_batches 4)
  run lm32_1 "$GPULAB" "${LM32[@]}"
  for n in 2 3; do
    run lm32_$n "$GPULAB" "${LM32[@]}" --batch_size_scaled --nproc_per_node $n
    echo "== $n ranks vs one process (llama-tiny, float32, 4 steps)"
    compare lm32_$n lm32_1 1e-5
  done
  # A backend named on one process: a DDP world of one (every collective runs), the same weights.
  run lm32_gloo "$GPULAB" "${LM32[@]}" --backend gloo
  grep -q "World size: 1, Backend: gloo" "$WORK/lm32_gloo.log" ||
    { cat "$WORK/lm32_gloo.log"; fail "--backend gloo on one process ran without Gloo"; }
  echo "== --backend gloo on one process vs one process (llama-tiny, float32, 4 steps)"
  compare lm32_gloo lm32_1 0
  # AdamW with clipping and gradient accumulation over 2 epochs, float64: 1e-9.
  LM64=("${LM[@]}" --precision fp64 --optimizer adamw --learning_rate 3e-3 --clip_grad 0.5
        --grad_accum 2 --num_epochs 2 --limit_train_batches 4)
  run lm64_1 "$GPULAB" "${LM64[@]}"
  run lm64_3 "$GPULAB" "${LM64[@]}" --batch_size_scaled --nproc_per_node 3
  echo "== 3 ranks vs one process (llama-tiny, float64, AdamW, clip, grad_accum 2, 4 steps)"
  compare lm64_3 lm64_1 1e-9
  ;;

shard)
  # Sharded data parallel through the CLI on a language model: ZeRO-1/2/3 on 2 and 3 ranks vs one
  # process (fp64, AdamW, clipping, --grad_accum 2, 2 epochs: 1e-9); the memory line of ZeRO-3;
  # resume of a sharded checkpoint at the same world size (bitwise) and on another (1e-9);
  # a truncated shard and a foreign index refused with one line, exit 2, nothing written.
  LM=(train --model llama-tiny --dataset synthetic-text --seq_len 32 --batch_size 12 --seed 3
      --deterministic --no_report --limit_eval_batches 1 --device cpu --threads 1 --precision fp64
      --optimizer adamw --learning_rate 3e-3 --clip_grad 0.5 --grad_accum 2 --lr_schedule none
      --limit_train_batches 4)
  run one "$GPULAB" "${LM[@]}" --num_epochs 2 --no_checkpoints
  for stage in optimizer gradients full; do
    for n in 2 3; do
      run $stage$n "$GPULAB" "${LM[@]}" --num_epochs 2 --no_checkpoints --batch_size_scaled \
        --nproc_per_node $n --shard $stage
      echo "== --shard $stage, $n ranks vs one process (llama-tiny, float64, AdamW, clip, accumulation)"
      compare $stage$n one 1e-9
    done
  done
  grep "Memory per rank" "$WORK/full2.log" "$WORK/full3.log"
  # `gpulab plan` for the same job (the synthetic text's 256 tokens) holds what the ranks measured
  # between steps, within 10 %.
  for n in 2 3; do
    planned=$("$GPULAB" plan --model llama-tiny --gpus $n --shard full --vocab_size 256 \
      --seq_len 32 --batch_size 6 --precision fp64 --optimizer adamw |
      sed -n '/^Held per device after an optimizer step/,$p' | grep -m1 '^full ' |
      awk '{ print $(NF-1), $NF }')
    measured=$(grep "Memory per rank" "$WORK/full$n.log" | grep -o 'total [^(]*' |
      awk '{ print $5, $6 }')
    echo "gpulab plan, $n ranks, held after a step: $planned; measured: $measured"
    $PY - "$planned" "$measured" <<'PYEOF' \
      || fail "gpulab plan ($planned) is not within 10 % of the measured $measured on $n ranks"
import sys
unit = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
p, m = (float(a.split()[0]) * unit[a.split()[1]] for a in sys.argv[1:3])
sys.exit(0 if m > 0 and abs(p - m) <= 0.1 * m else 1)
PYEOF
  done
  # Resume: 1 epoch on 2 ranks, then the second epoch on 2 ranks (bitwise vs straight) and on 3.
  run half "$GPULAB" "${LM[@]}" --num_epochs 1 --batch_size_scaled --nproc_per_node 2 --shard full
  cp -r "$WORK/half" "$WORK/half3"
  run half "$GPULAB" "${LM[@]}" --num_epochs 2 --batch_size_scaled --nproc_per_node 2 --shard full \
    --resume auto
  grep -q "Resumed from .*ckpt-e0001-s00000002.json" "$WORK/half.log" || { cat "$WORK/half.log"; fail "no resume line"; }
  echo "== 2 ranks resumed from their sharded checkpoint vs 2 ranks straight (bitwise)"
  compare half full2 0
  INDEX="$WORK/half3/checkpoints/ckpt-e0001-s00000002.json"
  run half3 "$GPULAB" "${LM[@]}" --num_epochs 2 --batch_size_scaled --nproc_per_node 3 --shard full \
    --resume "$INDEX"
  echo "== 3 ranks resumed from 2 ranks' shards vs 3 ranks straight (float64)"
  compare half3 full3 1e-9
  # Damage: a truncated shard, then an index of another model; nothing may be written.
  SHARD="$WORK/half3/checkpoints/ckpt-e0001-s00000002.rank-1-of-2.pt"
  head -c 1000 "$SHARD" >"$WORK/trunc.pt" && cp "$WORK/trunc.pt" "$SHARD"
  "$GPULAB" "${LM[@]}" --num_epochs 2 --batch_size_scaled --nproc_per_node 2 --shard full \
    --resume "$INDEX" --output_dir "$WORK/bad" >"$WORK/bad.log" 2>&1
  code=$?
  [ $code = 2 ] || { cat "$WORK/bad.log"; fail "truncated shard: exit $code, expected 2"; }
  grep -q "does not match the index" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "no clear message"; }
  [ ! -e "$WORK/bad/model.safetensors" ] || fail "a refused resume wrote weights"
  echo "truncated shard: $(grep -m1 -i error "$WORK/bad.log")"
  ;;

shard_mixed)
  # Sharded mixed precision (--precision bf16): bf16 compute copies of fp32 master shards against
  # fp32 copies (--shard_param_dtype fp32) on 2 ranks, SGD so that a difference stays the size of
  # the gradients' (Adam's normalisation would blow bf16 noise up to the learning rate): within
  # 1e-2 (bf16 keeps 8 bits); the planner's memory equals the tensors', bf16 copies are smaller;
  # the final weights are the fp32 masters.
  BF=(train --model llama-tiny --dataset synthetic-text --seq_len 64 --batch_size 12 --seed 3
      --deterministic --no_report --limit_eval_batches 1 --no_checkpoints --device cpu --threads 1
      --num_epochs 1 --limit_train_batches 6 --precision bf16 --optimizer sgd --learning_rate 0.5
      --batch_size_scaled --nproc_per_node 2)
  run ref "$GPULAB" "${BF[@]}" --shard full --shard_param_dtype fp32
  run z1ref "$GPULAB" "${BF[@]}" --shard optimizer --shard_param_dtype fp32
  run z3 "$GPULAB" "${BF[@]}" --shard full
  run z3r "$GPULAB" "${BF[@]}" --shard full --shard_reduce_dtype bf16
  run z1 "$GPULAB" "${BF[@]}" --shard optimizer
  for n in z3 z3r z1; do
    echo "== $n (bf16 compute copies) vs fp32 compute copies"
    compare $n ref 1e-2
  done
  # A ResNet: its BatchNorm keeps fp32 parameters (grouped apart); the planner still agrees.
  run rn "$GPULAB" train --model resnet18 --dataset synthetic --input_size 32 --subset 24 \
    --batch_size 12 --num_epochs 1 --threads 1 --precision bf16 --shard optimizer --no_report \
    --no_checkpoints --batch_size_scaled --nproc_per_node 2 --limit_eval_batches 1
  for n in ref z1ref z3 z1 rn; do
    line=$(grep "Memory per rank" "$WORK/$n.log") || { cat "$WORK/$n.log"; fail "$n: no memory line"; }
    echo "$n: ${line#*planned / measured: }"
    grep -q "(+0.0 %)" <<<"$line" || fail "$n: planned and measured memory differ"
  done
  params() { sed -n '/Memory per rank/s/.*params \([0-9.]*\) MiB \/ \([0-9.]*\) MiB.*/\2/p' "$WORK/$1.log"; }
  $PY -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if a < 0.7 * b else 1)" \
    "$(params z1)" "$(params z1ref)" || fail "ZeRO-1 parameters: bf16 copies $(params z1) MiB, fp32 $(params z1ref) MiB"
  echo "ZeRO-1 parameters per rank: $(params z1) MiB with bf16 copies, $(params z1ref) MiB with fp32"
  $PY - "$WORK/z3/model.safetensors" <<'PYEOF' || fail "the final weights are not fp32"
import json, struct, sys
raw = open(sys.argv[1], "rb").read(8 << 20)
header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
dtypes = {v["dtype"] for k, v in header.items() if k != "__metadata__"}
print("final weights:", ", ".join(sorted(dtypes)))
sys.exit(0 if dtypes == {"F32"} else 1)
PYEOF
  # Its sharded checkpoint (fp32 master shards) resumes bitwise equal to a straight run.
  CK=(train --model llama-tiny --dataset synthetic-text --seq_len 64 --batch_size 12 --seed 3
      --deterministic --no_report --limit_eval_batches 1 --device cpu --threads 1 --precision bf16
      --batch_size_scaled --nproc_per_node 2 --shard full --lr_schedule none --limit_train_batches 3)
  run mhalf "$GPULAB" "${CK[@]}" --num_epochs 1
  run mhalf "$GPULAB" "${CK[@]}" --num_epochs 2 --resume auto
  run mstraight "$GPULAB" "${CK[@]}" --num_epochs 2
  grep -q "Resumed from" "$WORK/mhalf.log" || { cat "$WORK/mhalf.log"; fail "no resume line"; }
  echo "== bf16 compute copies: resumed from a sharded checkpoint vs straight (bitwise)"
  compare mhalf mstraight 0
  ;;

multinode)
  [ "$(id -u)" = 0 ] || skip "network namespaces need root"
  command -v ip >/dev/null || skip "no ip(8)"
  N0=gpulab-ddp-a$$; N1=gpulab-ddp-b$$
  ip netns add "$N0" 2>/dev/null || skip "cannot create network namespaces here"
  NETNS+=("$N0"); ip netns add "$N1" && NETNS+=("$N1") || fail "second namespace"
  # The veth pair is created with its ends inside the namespaces: no traffic leaves them.
  ip link add gla$$ netns "$N0" type veth peer name glb$$ netns "$N1" || skip "cannot create a veth pair"
  ip -n "$N0" addr add 10.200.0.1/24 dev gla$$ && ip -n "$N1" addr add 10.200.0.2/24 dev glb$$ || fail "addresses"
  for ns in "$N0" "$N1"; do ip -n "$ns" link set lo up; done
  ip -n "$N0" link set gla$$ up && ip -n "$N1" link set glb$$ up || fail "links up"
  # float64 (--precision fp64), as in the equivalence case: in fp32 two steps already differ by
  # about 5e-6 (summation order), too close to a 1e-5 limit to be a robust check; in fp64 the
  # two runs agree to ~1e-15, so any difference above 1e-9 is a real one. 2 steps of batch 12.
  SHORT=(--precision fp64 --subset 24 --num_epochs 1 --limit_eval_batches 1)
  run single "$GPULAB" "${COMMON[@]}" "${SHORT[@]}"
  MN=(--batch_size_scaled --nnodes 2 --nproc_per_node 2 --master_addr 10.200.0.1 --master_port 29431)
  ip netns exec "$N1" "$GPULAB" "${COMMON[@]}" "${SHORT[@]}" "${MN[@]}" --node_rank 1 \
     --output_dir "$WORK/node1" >"$WORK/node1.log" 2>&1 &
  NODE1=$!
  run node0 ip netns exec "$N0" "$GPULAB" "${COMMON[@]}" "${SHORT[@]}" "${MN[@]}" --node_rank 0
  wait $NODE1 || { cat "$WORK/node1.log"; fail "node 1 exited with $?"; }
  cat "$WORK/node0.log" | grep -E "Hello|Backend|World size|Test accuracy"
  grep -E "Hello" "$WORK/node1.log"
  grep -q "World size: 4" "$WORK/node0.log" || fail "rank 0 did not see 4 ranks"
  echo "== 4 ranks on two hosts vs one process (float64, 2 steps)"
  compare node0 single 1e-9
  [ "$(accuracy node0)" = "$(accuracy single)" ] || fail "test accuracy $(accuracy node0) vs $(accuracy single)"
  # The same two hosts with ZeRO-3 (--shard full): every unit gathered and reduce-scattered
  # across the veth link.
  MN[-1]=29432
  ip netns exec "$N1" "$GPULAB" "${COMMON[@]}" "${SHORT[@]}" "${MN[@]}" --node_rank 1 --shard full \
     --output_dir "$WORK/full1" >"$WORK/full1.log" 2>&1 &
  NODE1=$!
  run full0 ip netns exec "$N0" "$GPULAB" "${COMMON[@]}" "${SHORT[@]}" "${MN[@]}" --node_rank 0 --shard full
  wait $NODE1 || { cat "$WORK/full1.log"; fail "node 1 (--shard full) exited with $?"; }
  grep -q "shard full" "$WORK/full0.log" || { cat "$WORK/full0.log"; fail "expected a --shard full run"; }
  echo "== 4 ranks on two hosts, --shard full, vs one process (float64, 2 steps)"
  compare full0 single 1e-9
  ;;

kill|hang|restart)
  # Long enough epochs that the kill lands mid-epoch; the restart case resumes from the
  # checkpoint of epoch 1 and must end with the uninterrupted run's weights. hang: SIGSTOP
  # instead of SIGKILL (the rank neither ends nor answers; the launcher must see it stopped),
  # with a heartbeat timeout that normal progress must never trip.
  if [ "$CASE" = kill ]; then JOB=(--subset 1200 --num_epochs 20 --nproc_per_node 3 --batch_size_scaled)
  elif [ "$CASE" = hang ]; then
    JOB=(--subset 1200 --num_epochs 20 --nproc_per_node 3 --batch_size_scaled --heartbeat_timeout 8)
  else JOB=(--subset 192 --num_epochs 3 --nproc_per_node 2 --batch_size_scaled --max_restarts 1); fi
  "$GPULAB" "${COMMON[@]}" "${JOB[@]}" --output_dir "$WORK/job" >"$WORK/job.log" 2>&1 &
  LAUNCHER=$!
  # kill: a few seconds into the first epoch. restart: once epoch 1's checkpoint is complete.
  for _ in $(seq 900); do
    if [ "$CASE" != restart ]; then grep -q "^Normalization" "$WORK/job.log" && break
    else ls "$WORK/job/checkpoints"/*.json >/dev/null 2>&1 && break; fi
    kill -0 $LAUNCHER 2>/dev/null || { cat "$WORK/job.log"; fail "job ended early"; }
    sleep 0.2
  done
  if [ "$CASE" != restart ]; then sleep 3; else sleep 0.5; fi
  find_rank1
  T0=$(date +%s.%N)
  if [ "$CASE" = hang ]; then SIG=STOP; WHAT="was stopped by signal 19 (SIGSTOP)"
  else SIG=KILL; WHAT="was killed by signal 9 (SIGKILL)"; fi
  kill -$SIG "$VICTIM"
  if [ "$CASE" != restart ]; then
    wait $LAUNCHER; CODE=$?
    T1=$(date +%s.%N)
    SECS=$($PY -c "print(f'{$T1-$T0:.2f}')")
    grep -E "gpulab launch|error:" "$WORK/job.log"
    echo "launcher exited with code $CODE, $SECS s after the SIG$SIG"
    [ "$CODE" != 0 ] || fail "exit code 0 after a rank was killed"
    $PY -c "import sys; sys.exit(0 if $T1-$T0 < 10 else 1)" || fail "took $SECS s (limit 10)"
    grep -q "error: rank 1 (pid $VICTIM) $WHAT" "$WORK/job.log" || fail "message does not name rank 1 and SIG$SIG"
    grep -q "hangs: no progress" "$WORK/job.log" && fail "the heartbeat tripped on a healthy rank"
    assert_all_gone
  else
    wait $LAUNCHER || { cat "$WORK/job.log"; fail "restarted job failed"; }
    grep -E "gpulab launch|Resumed from" "$WORK/job.log"
    grep -q "restarting the group (restart 1 of 1)" "$WORK/job.log" || fail "no restart"
    grep -q "Resumed from" "$WORK/job.log" || fail "the restarted group did not resume from a checkpoint"
    run straight "$GPULAB" "${COMMON[@]}" --subset 192 --num_epochs 3 --nproc_per_node 2 --batch_size_scaled
    # The same layout, --deterministic and one thread per rank, resumed from a checkpoint that
    # holds the weights, optimizer state, running statistics and sampler position: nothing may
    # differ, so the tolerance is 0 (bitwise; docs/ddp.md says "the same weights").
    echo "== resumed run vs uninterrupted run"
    compare job straight 0
  fi
  ;;
stall)
  # A rank that hangs while it still runs (a deadlock, an endless loop): nothing ends or stops,
  # only its heartbeat goes quiet. The hook GPULAB_TEST_STALL=1:6 (tests/support/env_test_hooks.cpp,
  # in the test binary gpulab-hooks that ddp.cmake passes here) makes rank 1 sleep for good
  # before its 6th step. The job runs with the
  # default hang detection (--heartbeat_timeout auto: once a rank has done a few steps, silence
  # longer than 10 x the slowest step seen, and at least --heartbeat_floor, is a hang), with the
  # floor lowered from 60 s to 2 s so that the test is short.
  JOB=(--subset 1200 --num_epochs 20 --nproc_per_node 3 --batch_size_scaled --heartbeat_floor 2)
  GPULAB_TEST_STALL=1:6 "$GPULAB" "${COMMON[@]}" "${JOB[@]}" --output_dir "$WORK/job" >"$WORK/job.log" 2>&1 &
  LAUNCHER=$!
  for _ in $(seq 1500); do
    grep -q "stalls before micro-step" "$WORK/job.log" && break
    kill -0 $LAUNCHER 2>/dev/null || { cat "$WORK/job.log"; fail "job ended before the stall"; }
    sleep 0.2
  done
  T0=$(date +%s.%N)
  find_rank1
  wait $LAUNCHER; CODE=$?
  T1=$(date +%s.%N)
  grep -E "stalls before|gpulab launch|error:" "$WORK/job.log"
  SECS=$($PY -c "print(f'{$T1-$T0:.2f}')")
  echo "launcher exited with code $CODE, $SECS s after rank 1 stalled"
  [ "$CODE" = 124 ] || { cat "$WORK/job.log"; fail "exit code $CODE, expected 124 (hung)"; }
  grep -q "error: rank 1 (pid $VICTIM) hangs: no progress for .* s (limit .*) (last progress: epoch 1 batch 6 of [0-9]*)" \
    "$WORK/job.log" || fail "the message does not name rank 1, the limit and its last progress"
  grep -q "the other ranks were at: rank 0: waiting in" "$WORK/job.log" || fail "no word on where the others wait"
  grep -q "collective timeout" "$WORK/job.log" && fail "found by the collective timeout, not the heartbeat"
  # Found well before the collective timeout (300 s), and stopped within 10 s once found.
  $PY -c "import sys; sys.exit(0 if $T1-$T0 < 60 else 1)" || fail "took $SECS s"
  STOP=$(sed -n 's/.*all ranks stopped in \([0-9.]*\) s.*/\1/p' "$WORK/job.log" | head -1)
  $PY -c "import sys; sys.exit(0 if 0 <= ${STOP:-99} < 10 else 1)" || fail "ranks stopped in ${STOP:-?} s (limit 10)"
  assert_all_gone
  ;;
options)
  # Each bad option: exit 2, one error, no rank started (no launcher line, no hello).
  check_bad() {
    local want=$1; shift
    "$GPULAB" train --dataset synthetic --input_size 32 --subset 24 --nproc_per_node 2 "$@" \
      --output_dir "$WORK/bad" >"$WORK/bad.log" 2>&1
    local code=$?
    echo "== $* -> exit $code: $(head -1 "$WORK/bad.log" | cut -c1-150)"
    [ $code = 2 ] || { cat "$WORK/bad.log"; fail "$*: exit $code, expected 2"; }
    grep -q -- "$want" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "$*: no '$want' in the message"; }
    grep -qE "Hello from|gpulab launch" "$WORK/bad.log" && { cat "$WORK/bad.log"; fail "$*: ranks were started"; }
    [ "$(grep -ciE 'error|not in|not expected' "$WORK/bad.log")" = 1 ] || { cat "$WORK/bad.log"; fail "$*: expected one error"; }
    [ ! -e "$WORK/bad" ] || fail "$*: the run folder was created"
  }
  check_bad "valid models: resnet18" --model nosuch
  check_bad "valid values: sgd, adam, adamw, rmsprop" --optimizer nosuch
  check_bad "not expected" --no_such_flag 3
  check_bad "smaller than the 2 processes" --batch_size_scaled --batch_size 1
  check_bad "is neither auto nor 0..86400 seconds" --heartbeat_timeout soon
  check_bad "needs --precision bf16" --shard full --shard_param_dtype bf16
  check_bad "must be auto" --precision fp64 --shard full --shard_reduce_dtype bf16
  ;;
disk_full)
  # Issue 30 item 4: a 2-rank ZeRO-3 run on a tmpfs that holds one sharded checkpoint and a half,
  # so epoch 1's checkpoint is written and epoch 2's does not fit. The run ends with an error
  # naming the shard and the space it needed; every rank drops its epoch-2 shard (no orphan, no
  # temporary), epoch 1's checkpoint stays complete and resumes elsewhere.
  [ "$(id -u)" = 0 ] || skip "mounting a tmpfs needs root"
  LM=(train --model llama-tiny --dataset synthetic-text --seq_len 32 --batch_size 12 --seed 3
      --deterministic --no_report --limit_eval_batches 1 --device cpu --threads 1
      --optimizer adamw --limit_train_batches 2 --batch_size_scaled --nproc_per_node 2 --shard full)
  run sized "$GPULAB" "${LM[@]}" --num_epochs 1
  ckpt=$(du -sb "$WORK/sized/checkpoints" | cut -f1)
  mkdir -p "$WORK/disk"
  mount -t tmpfs -o size=$((ckpt * 3 / 2 + 65536)) tmpfs "$WORK/disk" || skip "cannot mount a tmpfs"
  "$GPULAB" "${LM[@]}" --num_epochs 2 --output_dir "$WORK/disk/out" >"$WORK/full.log" 2>&1
  code=$?
  left=$(cd "$WORK/disk/out/checkpoints" && ls)
  cp -r "$WORK/disk/out" "$WORK/resumed"
  umount "$WORK/disk"
  [ $code = 3 ] || { cat "$WORK/full.log"; fail "a full disk: exit $code, expected 3"; }
  grep -q "error: not enough disk space for $WORK/disk/out/checkpoints/ckpt-e0002-s00000004" \
    "$WORK/full.log" || { cat "$WORK/full.log"; fail "no error naming the shard and its size"; }
  echo "full disk: $(grep -m1 'error: not enough' "$WORK/full.log")"
  [ "$(echo "$left" | grep -c 'ckpt-e0001')" = 3 ] || fail "epoch 1's index and 2 shards: $left"
  ! echo "$left" | grep -q 'ckpt-e0002\|tmp' || fail "epoch 2 left files behind: $left"
  run resumed "$GPULAB" "${LM[@]}" --num_epochs 2 --resume auto
  grep -q "Resumed from .*ckpt-e0001-s00000002.json" "$WORK/resumed.log" ||
    { cat "$WORK/resumed.log"; fail "epoch 1's checkpoint did not resume"; }
  ;;
*) fail "unknown case $CASE" ;;
esac
echo PASS
